#!/usr/bin/env bash
# run.sh BUILD_DIR - `make test-pytorch`: PyTorch imports and runs with braid preloaded.
#
# For each torch version whose import list is kept in tests/abi/torch-*.imports (2.11.0, built
# for NCCL 2.28.9; 2.15.0, the newest, built for NCCL 2.30.7), in a cached virtualenv
# (tests/pytorch/venv.sh; about a gigabyte of downloads the first time):
#   - `import torch` with LD_PRELOAD=BUILD_DIR/lib/libnccl.so.2 succeeds;
#   - every nccl* symbol libtorch_cuda.so imports resolves (global lookup) into braid's library
#     (torch 2.15 also dlopens NVIDIA's libnccl by path from the nvidia-nccl wheel's folder when
#     it is there: mapped, but the preloaded library's symbols come first);
#   - torch.cuda.nccl.version() answers (torch reports the NCCL its headers were, 2.28.9 or
#     2.30.7) and ncclGetVersion of the loaded library is braid's 23007;
#   - the README's old recipe, LD_LIBRARY_PATH=BUILD_DIR/lib, loads NVIDIA's NCCL instead when it
#     sits where the nvidia-nccl-cu13 wheel puts it (torch's RPATH is searched first). The venv
#     has no such wheel (--no-deps); the CUDA toolkit's libnccl.so.2 (NVIDIA's 2.28.9) is linked
#     into that place to stand for it, when the toolkit has one.
# Not part of `make test` (downloads). Ends with "N passed, N failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
lib=$build/lib/libnccl.so.2
[ -f "$lib" ] || { echo "FAIL: $lib not found (make BUILD=$build lib)"; exit 2; }
cuda_lib=${CUDA_LIB:-/usr/local/cuda/lib64}
p=0 f=0
for list in "$root"/tests/abi/torch-*.imports; do
  v=$(basename "$list" .imports)
  v=${v#torch-}
  echo "== torch $v"
  if ! venv=$("$here/venv.sh" "$v"); then
    echo "FAIL: torch $v: could not make its virtualenv"
    f=$((f + 1))
    continue
  fi
  out=$(LD_PRELOAD=$lib LD_LIBRARY_PATH=$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$venv/bin/python" - "$lib" "$list" 2>&1 <<'PY'
import os, sys
import torch
import ctypes
lib = os.path.realpath(sys.argv[1])
maps = [l.split() for l in open("/proc/self/maps") if "libnccl" in l]
print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())
print("libnccl mapped:", " ".join(sorted({m[-1] for m in maps})))
def owner(name):  # the file whose code a global lookup of `name` (what libtorch_cuda binds) lands in
    addr = ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value
    for m in maps:
        lo, hi = (int(x, 16) for x in m[0].split("-"))
        if lo <= addr < hi:
            return os.path.realpath(m[-1])
names = [l.strip() for l in open(sys.argv[2])]
wrong = [(n, owner(n)) for n in names if owner(n) != lib]
print("nccl symbols torch imports:", len(names), "resolved to braid:", len(names) - len(wrong))
assert not wrong, wrong[:5]
rt = ctypes.c_int(0)
assert ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(rt)) == 0
print("ncclGetVersion", rt.value)
assert isinstance(torch.cuda.nccl.version(), tuple) and rt.value == 23007
print("OK")
PY
)
  rc=$?
  echo "$out" | sed 's/^/    /'
  if [ $rc -eq 0 ] && echo "$out" | grep -q '^OK$'; then
    echo "PASS: torch $v imports with braid preloaded"
    p=$((p + 1))
  else
    echo "FAIL: torch $v with braid preloaded"
    f=$((f + 1))
  fi
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if [ ! -e "$site/nvidia/nccl/lib/libnccl.so.2" ] && [ -f "$cuda_lib/libnccl.so.2" ]; then
    mkdir -p "$site/nvidia/nccl/lib" && ln -sf "$(readlink -f "$cuda_lib/libnccl.so.2")" "$site/nvidia/nccl/lib/libnccl.so.2"
  fi
  if [ -e "$site/nvidia/nccl/lib/libnccl.so.2" ]; then
    old=$(LD_LIBRARY_PATH=$build/lib:$cuda_lib "$venv/bin/python" -c "
import torch
print('loaded:', sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libnccl' in l}))" 2>&1 | tail -n 1)
    echo "    LD_LIBRARY_PATH=$build/lib instead: $old"
    if echo "$old" | grep -q "$build/lib/libnccl"; then
      echo "FAIL: torch $v: LD_LIBRARY_PATH loaded braid although NVIDIA's NCCL is on the RPATH (README says otherwise)"
      f=$((f + 1))
    else
      echo "PASS: torch $v: LD_LIBRARY_PATH does not get braid loaded (the RPATH to nvidia/nccl wins): use LD_PRELOAD"
      p=$((p + 1))
    fi
  fi
done
echo "$p passed, $f failed"
[ "$f" = 0 ]
