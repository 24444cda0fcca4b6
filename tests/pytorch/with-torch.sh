#!/usr/bin/env bash
# with-torch.sh VERSION BUILD_DIR COMMAND... - run COMMAND with torch==VERSION and the braid
# backend: the cached virtualenv (venv.sh) first on PATH, braid_torch built against that torch
# into BUILD_DIR/torch-VERSION (torch's cpp_extension; incremental) and on PYTHONPATH, braid's
# library preloaded (the README's recipe: torch's own NCCL calls reach braid too), the CUDA
# toolkit's libraries on LD_LIBRARY_PATH for torch's CUDA build to import.
set -eu
v=${1:?usage: with-torch.sh VERSION BUILD_DIR COMMAND...}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${2:?BUILD_DIR}" && pwd)
shift 2
lib=$build/lib/libnccl.so.2
[ -f "$lib" ] || { echo "with-torch.sh: $lib not found (make BUILD=$build lib)" >&2; exit 2; }
venv=$("$here/venv.sh" "$v")
cuda_lib=${CUDA_LIB:-/usr/local/cuda/lib64}
out=$build/torch-$v
(cd "$root/integrations/torch" &&
  LD_PRELOAD=$lib LD_LIBRARY_PATH=$cuda_lib BRAID_LIB=$lib "$venv/bin/python" setup.py -q build --build-lib "$out" --build-temp "$out/tmp" >"$out.log" 2>&1) ||
  { echo "with-torch.sh: building braid_torch against torch $v failed:" >&2; tail -n 30 "$out.log" >&2; exit 1; }
export PATH=$venv/bin:$PATH
export PYTHONPATH=$out${PYTHONPATH:+:$PYTHONPATH}
export LD_PRELOAD=$lib${LD_PRELOAD:+:$LD_PRELOAD}
export LD_LIBRARY_PATH=$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec "$@"
