#!/usr/bin/env bash
# check.sh - is braid's include/nccl.h ABI-identical to NVIDIA's NCCL 2.28 header?
#
#   1. probe.c (sizes, alignments, field offsets, initializer values, enum values, #defines)
#      built against the installed header and against ours - in C without the CUDA headers,
#      in C with them, and in C++ - must print identical lines;
#   2. both headers declare the same set of functions (nccl*/pnccl* names followed by '(');
#   3. each header's declarations compile after including the other header (C reports
#      conflicting return or parameter types).
#
# Environment: NCCL_INCLUDE (default /usr/local/cuda/include) holds the installed nccl.h;
# BRAID_INCLUDE (default include/ of this repository) holds ours; CC, CXX.
# Prints PASS or FAIL per check and overall; exits 1 on failure, 0 with SKIP when the
# installed header is absent.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/abi/lib.sh
. "$here/lib.sh"

NCCL_INCLUDE=${NCCL_INCLUDE:-/usr/local/cuda/include}
BRAID_INCLUDE=${BRAID_INCLUDE:-$root/include}
CC=${CC:-gcc}
CXX=${CXX:-g++}

if [ ! -f "$NCCL_INCLUDE/nccl.h" ]; then
  echo "SKIP: no installed NCCL header at $NCCL_INCLUDE/nccl.h (set NCCL_INCLUDE to its folder); ABI not checked"
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/braid-abi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }

# NVIDIA's header includes cuda_runtime.h; without a CUDA toolkit next to it, stand-ins that
# declare the one CUDA type the API uses let it compile.
cuda_inc=()
if [ -f "$NCCL_INCLUDE/cuda_runtime.h" ]; then
  cuda_inc=(-I"$NCCL_INCLUDE")
else
  mkdir -p "$tmp/cudastub"
  printf '#include <stddef.h>\n#define CUDART_VERSION 0\ntypedef struct CUstream_st* cudaStream_t;\n' >"$tmp/cudastub/cuda_runtime.h"
  : >"$tmp/cudastub/cuda_fp16.h"
  cuda_inc=(-I"$tmp/cudastub")
  echo "note: no cuda_runtime.h in $NCCL_INCLUDE; using a stand-in that declares cudaStream_t"
fi

# ---- 1. the probe ----
build_probe() { # name compiler flags...
  local name=$1
  shift
  if ! "$@" -o "$tmp/$name" "$here/probe.c" >"$tmp/$name.log" 2>&1; then
    fail "probe does not compile ($name): $*"
    indent <"$tmp/$name.log" | head -20
    return 1
  fi
  "$tmp/$name" >"$tmp/$name.out"
}

if build_probe nvidia "$CC" -std=gnu11 -Wall -I"$NCCL_INCLUDE" "${cuda_inc[@]}"; then
  echo "probe of $NCCL_INCLUDE/nccl.h: $(wc -l <"$tmp/nvidia.out") lines"
  variants=("c:$CC -std=gnu11 -Wall -Werror -I$BRAID_INCLUDE -DBRAID_NO_CUDA_HEADERS")
  variants+=("c-cuda:$CC -std=gnu11 -Wall -Werror -I$BRAID_INCLUDE ${cuda_inc[*]}")
  if command -v "$CXX" >/dev/null 2>&1; then
    variants+=("c++:$CXX -x c++ -std=c++17 -Wall -Werror -I$BRAID_INCLUDE -DBRAID_NO_CUDA_HEADERS")
    [ -f "$NCCL_INCLUDE/cuda_runtime.h" ] &&
      variants+=("c++-cuda:$CXX -x c++ -std=c++17 -Wall -I$BRAID_INCLUDE ${cuda_inc[*]}")
  fi
  for v in "${variants[@]}"; do
    name=${v%%:*}
    # shellcheck disable=SC2086 # the compiler command is split on purpose
    build_probe "braid-$name" ${v#*:} || continue
    if diff -u "$tmp/nvidia.out" "$tmp/braid-$name.out" >"$tmp/$name.diff"; then
      pass "layout, initializers, enums and #defines match ($name)"
    else
      fail "ABI probe differs ($name): - NVIDIA, + braid"
      indent <"$tmp/$name.diff"
    fi
  done
fi

# ---- 2. the same functions ----
header_functions "$NCCL_INCLUDE/nccl.h" >"$tmp/nvidia.funcs"
header_functions "$BRAID_INCLUDE/nccl.h" >"$tmp/braid.funcs"
only_nvidia=$(comm -23 "$tmp/nvidia.funcs" "$tmp/braid.funcs")
# NCCL 2.30's parameter API (ncclParam*, declared by v2.30.7's nccl.h.in) is braid's beyond 2.28.
only_braid=$(comm -13 "$tmp/nvidia.funcs" "$tmp/braid.funcs" | grep -v -E '^p?ncclParam[A-Za-z0-9]*$')
if [ -z "$only_nvidia" ] && [ -z "$only_braid" ]; then
  pass "both headers declare the same $(wc -l <"$tmp/braid.funcs") functions"
else
  [ -n "$only_nvidia" ] && fail "declared by NVIDIA's header, missing from ours:" && printf "%s\n" "$only_nvidia" | indent
  [ -n "$only_braid" ] && fail "declared by our header, not by NVIDIA's:" && printf "%s\n" "$only_braid" | indent
fi

# ---- 3. the same prototypes ----
cross_n=0
cross_compile() { # label include-flags decls-file
  local label=$1 decls=$3 src
  cross_n=$((cross_n + 1))
  src=$tmp/cross$cross_n.c
  {
    echo '#include <nccl.h>'
    cat "$decls"
  } >"$src"
  # shellcheck disable=SC2086 # the include flags are split on purpose
  if "$CC" -std=gnu11 -fsyntax-only -Wno-deprecated-declarations $2 "$src" >"$src.log" 2>&1; then
    pass "$label"
  else
    fail "$label:"
    grep -E 'error|note: previous' "$src.log" | indent | head -40
  fi
}
header_declarations "$BRAID_INCLUDE/nccl.h" | grep -v 'ncclParam' >"$tmp/braid.decls"
header_declarations "$NCCL_INCLUDE/nccl.h" >"$tmp/nvidia.decls"
cross_compile "our $(wc -l <"$tmp/braid.decls") declarations compile after NVIDIA's header" \
  "-I$NCCL_INCLUDE ${cuda_inc[*]}" "$tmp/braid.decls"
cross_compile "NVIDIA's $(wc -l <"$tmp/nvidia.decls") declarations compile after our header" \
  "-I$BRAID_INCLUDE -DBRAID_NO_CUDA_HEADERS" "$tmp/nvidia.decls"

if [ "$failed" = 0 ]; then
  echo "PASS: include/nccl.h is ABI-compatible with $NCCL_INCLUDE/nccl.h"
else
  echo "FAIL: include/nccl.h differs from $NCCL_INCLUDE/nccl.h (see above)"
fi
exit "$failed"
