"""braid_torch: the `braid` torch.distributed backend for CPU tensors.

    import braid_torch                        # registers the backend
    torch.distributed.init_process_group("braid")

Every collective runs on braid's host mode (shared memory between the processes of a
machine, sockets between machines). The extension opens braid's libnccl.so.2 privately
(BRAID_LIBRARY, or the library it was built against), so it works whether or not torch
itself loaded NVIDIA's NCCL; with braid preloaded (LD_PRELOAD) both are the same library.
"""
import torch  # noqa: F401  (the extension links against torch's libraries)
import torch.distributed as dist

from . import _C

__all__ = ["library_path", "nccl_version"]


def library_path():
    """The braid library this process uses."""
    return _C.library_path()


def nccl_version():
    """ncclGetVersion of that library (e.g. 23007)."""
    return _C.nccl_version()


if "braid" not in dist.Backend.backend_list:
    dist.Backend.register_backend("braid", _C.create_backend, devices=["cpu"])
