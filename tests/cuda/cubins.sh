#!/usr/bin/env bash
# cubins.sh BUILD_DIR - were braid's CUDA kernels built for the architectures asked for?
#
# Lists the cubins of BUILD_DIR/lib/libbraid_kernels.a (or, without it, of
# BUILD_DIR/lib/libnccl.so.2 once the kernels are linked in) with `cuobjdump --list-elf` and
# checks, per architecture expected, that cubins for it exist, and that no other architecture
# was built. Expected: the sm_XY of every code=sm_XY in $NVCC_GENCODE when it is set (as the
# Makefile takes it), else the Makefile's default sm_80, sm_90 and sm_100. Also checks that
# every kernel object of the archive has a cubin for each expected architecture.
#
# Last line "N passed, N failed" (tests/run.sh adds it up). Skips (0 passed, 0 failed, exit 0)
# with the reason when CUDA=0 is set or nvcc is not installed; without cuobjdump, the cubins are
# listed by tests/cuda/list-cubins.py (python3 + objcopy) in the same format. Exit 1 on failure.
set -u
if [ $# -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: tests/cuda/cubins.sh BUILD_DIR   (NVCC_GENCODE=... to expect other architectures)" >&2
  exit 2
fi
build=$1
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
skip() { echo "SKIP: $1"; finish; }

[ "${CUDA:-}" = "0" ] && skip "CUDA=0: no kernels are built"
nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
[ -n "$nvcc" ] || skip "no nvcc (the Makefile builds without CUDA)"
cuobjdump=$(command -v cuobjdump || { [ -x "$(dirname "$nvcc")/cuobjdump" ] && echo "$(dirname "$nvcc")/cuobjdump"; })
lister=("$cuobjdump" --list-elf)
if [ -z "$cuobjdump" ]; then
  # No cuobjdump (CUDA's cuda-cuobjdump package is not part of every toolkit install): read
  # the cubins' ELF headers out of the .nv_fatbin sections ourselves, in cuobjdump's format.
  command -v python3 >/dev/null && command -v objcopy >/dev/null ||
    skip "neither cuobjdump nor python3 + objcopy to list the cubins"
  echo "cuobjdump is not installed next to $nvcc: listing cubins with tests/cuda/list-cubins.py"
  lister=(python3 "$(dirname "$0")/list-cubins.py")
fi

if [ -n "${NVCC_GENCODE:-}" ]; then
  # code=sm_90, code=[sm_90,compute_90], code="sm_90a": every sm_ name is a cubin to expect.
  expected=$(echo "$NVCC_GENCODE" | grep -Eo 'code=[^ ]*' | grep -Eo 'sm_[0-9]+[a-z]?' | sort -u)
  from="NVCC_GENCODE"
else
  expected=$(printf 'sm_80\nsm_90\nsm_100\n')
  from="the Makefile's default"
fi
[ -n "$expected" ] || { fail "NVCC_GENCODE='$NVCC_GENCODE' names no sm_ architecture"; finish; }

target=$build/lib/libbraid_kernels.a
[ -f "$target" ] || target=$build/lib/libnccl.so.2
if [ ! -f "$target" ]; then
  fail "neither $build/lib/libbraid_kernels.a nor $build/lib/libnccl.so.2 exists (build first: make BUILD=$build)"
  finish
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if ! "${lister[@]}" "$target" >"$tmp" 2>&1; then
  # cuobjdump fails on a file without device code.
  fail "${lister[*]} $target failed: $(head -n 3 "$tmp" | tr '\n' ' ')"
  finish
fi
found=$(grep -E 'ELF file' "$tmp" | grep -Eo 'sm_[0-9]+[a-z]?' | sort -u)
echo "$target: $(grep -c 'ELF file' "$tmp") cubins, architectures: $(echo "$found" | tr '\n' ' ')"
echo "expected ($from): $(echo "$expected" | tr '\n' ' ')"
for arch in $expected; do
  n=$(grep -E 'ELF file' "$tmp" | grep -c "\.${arch}\.cubin\|[^0-9a-z]${arch}[^0-9]" || true)
  if [ "$n" -gt 0 ]; then pass "$n cubins for $arch"; else fail "no cubin for $arch"; fi
done
extra=$(comm -13 <(echo "$expected" | sort -u) <(echo "$found" | sort -u) | tr '\n' ' ')
if [ -z "${extra// /}" ]; then pass "no architecture beyond the expected ones"; else fail "unexpected architectures: $extra"; fi

# Per kernel object of an archive ("member ARCHIVE:OBJECT:" lines precede its cubins).
if grep -q '^member ' "$tmp"; then
  missing=$(awk -v want="$(echo "$expected" | tr '\n' ' ')" '
    /^member / { obj = $2; sub(/:$/, "", obj); objs[obj] = 1; next }
    /ELF file/ { if (match($0, /sm_[0-9]+[a-z]?/)) have[obj, substr($0, RSTART, RLENGTH)] = 1 }
    END { n = split(want, w, " "); for (o in objs) for (i = 1; i <= n; i++) if (!((o, w[i]) in have)) print o " lacks " w[i] }' "$tmp")
  if [ -z "$missing" ]; then pass "every kernel object has a cubin per architecture"; else fail "$(echo "$missing" | head -n 5 | tr '\n' ';')"; fi
fi
finish
