"""ddp_step.py - PyTorch's own `nccl` backend on braid: a few DDP steps of a small model on the GPU.

    BRAID_GPU_SHARING=1 LD_PRELOAD=build/lib/libnccl.so.2 \
        python -m torch.distributed.run --nproc-per-node 2 tests/gpu/ddp_step.py
    python -m torch.distributed.run --nproc-per-node 2 tests/gpu/ddp_step.py --backend gloo

Every rank uses cuda:0 (the GPU machine has one GPU; braid lets ranks share it with
BRAID_GPU_SHARING=1, NVIDIA's NCCL refuses). Data and initial weights are seeded, so any
backend whose all-reduce is right prints the same "final loss" up to summation order; the
`gloo` run is the reference (tests/gpu/run.sh compares the two). Rank 0 also prints which
NCCL torch runs on (torch.cuda.nccl.version(), the libnccl files mapped) and, with
--expect-lib PATH, fails unless that library (braid's) is the one mapped.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def mapped_libnccl():
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if "libnccl" in line})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="nccl")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--expect-lib", default="")
    a = p.parse_args()
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group(a.backend, device_id=dev if a.backend == "nccl" else None)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0 and a.backend == "nccl":
        libs = mapped_libnccl()
        print(f"torch {torch.__version__}, torch.cuda.nccl.version() = {torch.cuda.nccl.version()}, mapped: {libs}")
        want = os.path.realpath(a.expect_lib) if a.expect_lib else ""
        if want and want not in {os.path.realpath(l) for l in libs}:
            print(f"FAIL: {want} is not mapped: torch runs on another NCCL", flush=True)
            sys.exit(1)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 16)).to(dev), device_ids=[0])
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator(device="cpu").manual_seed(1234)
    w_true = torch.randn(256, 16, generator=g)
    for step in range(a.steps):
        gs = torch.Generator(device="cpu").manual_seed(10_000 + step * world + rank)
        x = torch.randn(128, 256, generator=gs)
        y = x @ w_true
        x, y = x.to(dev), y.to(dev)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t)
    torch.cuda.synchronize()
    if rank == 0:
        print(f"final loss {t.item() / world:.6f} ({a.backend}, {world} ranks, {a.steps} steps)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    main()
