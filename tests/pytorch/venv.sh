#!/usr/bin/env bash
# venv.sh VERSION - print the path of a cached virtualenv holding torch==VERSION, making it
# first if needed. PyPI's Linux torch wheels are CUDA builds; they run on CPUs, but importing
# them loads the CUDA libraries libtorch_cuda.so links. torch goes in with --no-deps (no
# nvidia-nccl wheel: braid is the NCCL); the CUDA libraries come from the CUDA toolkit
# (/usr/local/cuda/lib64, put on LD_LIBRARY_PATH by the callers) plus the three wheels the
# toolkit lacks (cuFile, cuSPARSELt, NVSHMEM), also --no-deps. BRAID_TORCH_FULL_DEPS=1 installs
# torch with all its dependencies instead (several GB; for machines without the toolkit).
#
# Cache: $BRAID_TORCH_CACHE (default /work/cache if writable, else ~/.cache/braid-torch):
# wheels/ (pip download) and venv-VERSION/. Nothing goes into the repository.
set -eu
v=${1:?usage: tests/pytorch/venv.sh TORCH_VERSION}
cache=${BRAID_TORCH_CACHE:-}
if [ -z "$cache" ]; then
  if mkdir -p /work/cache 2>/dev/null && [ -w /work/cache ]; then cache=/work/cache; else cache=$HOME/.cache/braid-torch; fi
fi
venv=$cache/venv-$v
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('torch') == '$v'" 2>/dev/null; then
  echo "$venv"
  exit 0
fi
mkdir -p "$cache/wheels"
python3 -m venv "$venv" >&2
pip_() { "$venv/bin/pip" --disable-pip-version-check -q "$@" >&2; }
if [ "${BRAID_TORCH_FULL_DEPS:-0}" = 1 ]; then
  pip_ install "torch==$v"
else
  # torch's pure-Python dependencies, then the wheels themselves without dependencies.
  pip_ install filelock typing-extensions sympy networkx jinja2 fsspec "setuptools<82" numpy
  companions="nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2"
  # shellcheck disable=SC2086 # one argument per package
  "$venv/bin/pip" --disable-pip-version-check -q download --no-deps -d "$cache/wheels" "torch==$v" $companions >&2
  # shellcheck disable=SC2086
  pip_ install --no-deps --find-links "$cache/wheels" --no-index "torch==$v" $companions
fi
echo "$venv"
