#!/usr/bin/env bash
# devapi.sh - the device half of include/nccl_device.h compiles, for every architecture braid
# builds (sm_80, sm_90, sm_100; NVCC_GENCODE's when set), with the kernels of
# tests/cuda/devapi.cu (the shapes nccl-tests and NCCL's device-API examples use). A case per
# architecture; last line "N passed, N failed". Skips without nvcc or with CUDA=0.
set -u
cd "$(dirname "$0")/../.." || exit 1
passed=0
failed=0
[ "${CUDA:-}" = "0" ] && { echo "SKIP: CUDA=0"; echo "0 passed, 0 failed"; exit 0; }
nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
[ -n "$nvcc" ] || { echo "SKIP: no nvcc"; echo "0 passed, 0 failed"; exit 0; }
archs=$(echo "${NVCC_GENCODE:-code=sm_80 code=sm_90 code=sm_100}" | grep -o 'code=sm_[0-9]*' | sed 's/code=sm_//' | sort -u)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for a in $archs; do
  if "$nvcc" -std=c++17 -Iinclude -gencode="arch=compute_$a,code=sm_$a" -Werror all-warnings -c tests/cuda/devapi.cu \
    -o "$out/devapi_$a.o" >"$out/log_$a" 2>&1; then
    passed=$((passed + 1))
    echo "PASS: nccl_device.h device code for sm_$a"
  else
    failed=$((failed + 1))
    echo "FAIL: nccl_device.h device code for sm_$a:"
    head -n 20 "$out/log_$a"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
