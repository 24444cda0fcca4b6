#!/usr/bin/env bash
# torch-imports.sh BUILD_DIR - does BUILD_DIR/lib/libnccl.so.2 export every nccl* symbol that
# PyTorch's libtorch_cuda.so imports? CPython's dlopen binds every symbol at import, so one
# missing name stops `import torch` ("undefined symbol: ncclDevCommDestroy").
#
# The lists are facts, extracted once from the PyPI wheels (torch 2.11.0, built for NCCL 2.28.9;
# torch 2.15.0, the newest, built for NCCL 2.30.7):
#   unzip -q torch-V-*.whl 'torch/lib/libtorch_cuda.so' &&
#   nm -D --undefined-only torch/lib/libtorch_cuda.so | awk '{print $2}' | grep -E '^p?nccl' | sort -u
# `make test-pytorch` imports those wheels with braid preloaded (tests/pytorch/run.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/abi/lib.sh
. "$here/lib.sh"
if [ $# -ne 1 ]; then
  echo "usage: tests/abi/torch-imports.sh BUILD_DIR" >&2
  exit 2
fi
lib=$1/lib/libnccl.so.2
[ -f "$lib" ] || { echo "FAIL: $lib not found"; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/braid-torch-imports.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '($2 == "T" || $2 == "W" || $2 == "i") { n = $3; sub(/@.*/, "", n); print n }' |
  sort -u >"$tmp/exported"
p=0 f=0
for list in "$here"/torch-*.imports; do
  v=$(basename "$list" .imports)
  missing=$(sort -u "$list" | comm -23 - "$tmp/exported")
  if [ -z "$missing" ]; then
    echo "PASS: $v: all $(wc -l <"$list") nccl* symbols libtorch_cuda.so imports are exported"
    p=$((p + 1))
  else
    echo "FAIL: $v: libtorch_cuda.so imports $(echo "$missing" | wc -l) symbol(s) braid does not export:"
    printf "%s\n" "$missing" | indent
    f=$((f + 1))
  fi
done
echo "$p passed, $f failed"
[ "$f" = 0 ]
