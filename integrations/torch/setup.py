# setup.py - builds braid_torch._C against the torch of the running Python (torch's
# cpp_extension tools), e.g. `python setup.py build_ext --inplace` (make torch-backend).
# BRAID_LIB: the braid library the extension opens by default (else build/lib/libnccl.so.2 of
# this repository); BRAID_LIBRARY at run time overrides it.
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
lib = os.path.abspath(os.environ.get("BRAID_LIB", os.path.join(root, "build", "lib", "libnccl.so.2")))
csrc = os.path.join("braid_torch", "csrc")

setup(
    name="braid_torch",
    version="0.1.0",
    packages=["braid_torch"],
    ext_modules=[
        CppExtension(
            "braid_torch._C",
            [os.path.join(csrc, f) for f in ("nccl_lib.cpp", "backend.cpp", "module.cpp")],
            include_dirs=[os.path.join(root, "include")],
            define_macros=[("BRAID_NO_CUDA_HEADERS", None), ("BRAID_DEFAULT_LIBRARY", '"%s"' % lib)],
            extra_compile_args=["-O2"],
            libraries=["dl"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
