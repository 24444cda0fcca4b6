#!/usr/bin/env bash
# check.sh - is braid's include/nccl.h ABI-compatible with NVIDIA's NCCL 2.28.9 and 2.30.7?
#
# Against NCCL 2.28.9 (the header installed here), what a program built against it relies on:
#   1. probe.c -DPROBE_BASELINE_2_28 (sizes, offsets, initializer values, enum values, #defines
#      that 2.30 kept) built against the installed header and against ours - in C without the
#      CUDA headers, in C with them, in C++ - prints identical lines;
#   2. every function the 2.28 header declares is declared by ours;
#   3. each header's 2.28 declarations compile after including the other header.
# Against NCCL 2.30.7, everything:
#   4. probe.c (all facts) built against ours prints tests/abi/nccl-2.30.7.probe, the probe's
#      output on NVIDIA's 2.30.7 header, kept as data;
#   5. our header declares exactly the functions of tests/abi/nccl-2.30.7.functions, except
#      those listed in tests/abi/pending-2.30.7.txt if that file exists (functions another change
#      is adding; reported as PENDING; none now);
#   6. when NVIDIA's 2.30.7 header can be had (NCCL230_INCLUDE, or generated from the NVIDIA/nccl
#      mirror at NCCL_MIRROR), the two fact files are re-derived from it and must be unchanged,
#      and the declarations cross-compile as in 3.
#
# Environment: NCCL_INCLUDE (default /usr/local/cuda/include) holds the installed 2.28 nccl.h;
# NCCL230_INCLUDE a folder with a 2.30.7 nccl.h; NCCL_MIRROR (default
# /work/.mirror/NVIDIA+nccl/repo) a bare NVIDIA/nccl repository with tag v2.30.7-1; BRAID_INCLUDE
# (default include/); CC, CXX. Prints PASS/FAIL/SKIP per check; exits 1 on failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/abi/lib.sh
. "$here/lib.sh"

NCCL_INCLUDE=${NCCL_INCLUDE:-/usr/local/cuda/include}
NCCL_MIRROR=${NCCL_MIRROR:-/work/.mirror/NVIDIA+nccl/repo}
BRAID_INCLUDE=${BRAID_INCLUDE:-$root/include}
CC=${CC:-gcc}
CXX=${CXX:-g++}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/braid-abi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }

# NVIDIA's headers include cuda_runtime.h; without a CUDA toolkit, stand-ins that declare the
# one CUDA type the API uses let them compile.
cuda_inc=()
if [ -f /usr/local/cuda/include/cuda_runtime.h ]; then
  cuda_inc=(-I/usr/local/cuda/include)
elif [ -f "$NCCL_INCLUDE/cuda_runtime.h" ]; then
  cuda_inc=(-I"$NCCL_INCLUDE")
else
  mkdir -p "$tmp/cudastub"
  printf '#include <stddef.h>\n#define CUDART_VERSION 0\ntypedef struct CUstream_st* cudaStream_t;\n' >"$tmp/cudastub/cuda_runtime.h"
  : >"$tmp/cudastub/cuda_fp16.h"
  cuda_inc=(-I"$tmp/cudastub")
  echo "note: no cuda_runtime.h found; using a stand-in that declares cudaStream_t"
fi

# build_probe NAME COMPILER FLAGS...: $tmp/NAME.out is the probe's output.
build_probe() {
  local name=$1
  shift
  if ! "$@" -o "$tmp/$name" "$here/probe.c" >"$tmp/$name.log" 2>&1; then
    fail "probe does not compile ($name): $*"
    indent <"$tmp/$name.log" | head -20
    return 1
  fi
  "$tmp/$name" >"$tmp/$name.out"
}

# probe_ours LABEL EXPECTED EXTRA_FLAGS: our header, in each language variant, against EXPECTED.
probe_ours() {
  local label=$1 expected=$2 extra=$3 v name
  local variants=("c:$CC -std=gnu11 -Wall -Werror $extra -I$BRAID_INCLUDE -DBRAID_NO_CUDA_HEADERS")
  variants+=("c-cuda:$CC -std=gnu11 -Wall -Werror $extra -I$BRAID_INCLUDE ${cuda_inc[*]}")
  if command -v "$CXX" >/dev/null 2>&1; then
    variants+=("c++:$CXX -x c++ -std=c++17 -Wall -Werror $extra -I$BRAID_INCLUDE -DBRAID_NO_CUDA_HEADERS")
    [ -f /usr/local/cuda/include/cuda_runtime.h ] &&
      variants+=("c++-cuda:$CXX -x c++ -std=c++17 -Wall $extra -I$BRAID_INCLUDE ${cuda_inc[*]}")
  fi
  for v in "${variants[@]}"; do
    name=${v%%:*}
    # shellcheck disable=SC2086 # the compiler command is split on purpose
    build_probe "braid-$label-$name" ${v#*:} || continue
    if diff -u "$expected" "$tmp/braid-$label-$name.out" >"$tmp/$label-$name.diff"; then
      pass "$label: layout, initializers, enums and #defines match ($name, $(wc -l <"$expected") facts)"
    else
      fail "$label: ABI probe differs ($name): - NVIDIA, + braid"
      indent <"$tmp/$label-$name.diff"
    fi
  done
}

# cross_compile LABEL INCLUDE_FLAGS DECLS: DECLS compile after including the header on the path.
cross_n=0
cross_compile() {
  local label=$1 decls=$3 src
  cross_n=$((cross_n + 1))
  src=$tmp/cross$cross_n.c
  {
    echo '#include <nccl.h>'
    cat "$decls"
  } >"$src"
  # shellcheck disable=SC2086 # the include flags are split on purpose
  if "$CC" -std=gnu11 -fsyntax-only -DNCCL_OS_LINUX -Wno-deprecated-declarations $2 "$src" >"$src.log" 2>&1; then
    pass "$label"
  else
    fail "$label:"
    grep -E 'error|note: previous' "$src.log" | indent | head -40
  fi
}

# only_names NAMES_FILE < DECLS: the declarations of the functions named in NAMES_FILE.
only_names() {
  perl -ne 'BEGIN { open(F, "<", shift @ARGV) or die; %k = map { chomp; ($_, 1) } <F>; }
            print if /\b(p?nccl\w*)\s*\(/ && $k{$1};' "$1"
}

header_functions "$BRAID_INCLUDE/nccl.h" >"$tmp/braid.funcs"
header_declarations "$BRAID_INCLUDE/nccl.h" >"$tmp/braid.decls"

# ---- NCCL 2.28.9: 1-3 ----
if [ ! -f "$NCCL_INCLUDE/nccl.h" ]; then
  echo "SKIP: no installed NCCL header at $NCCL_INCLUDE/nccl.h (set NCCL_INCLUDE); 2.28 compatibility not checked"
else
  v28=$(sed -nE 's/^#define NCCL_VERSION_CODE ([0-9]+).*/\1/p' "$NCCL_INCLUDE/nccl.h")
  [ "$v28" = 22809 ] || echo "note: $NCCL_INCLUDE/nccl.h is version ${v28:-unknown}, not 22809"
  if build_probe nvidia28 "$CC" -std=gnu11 -Wall -DPROBE_BASELINE_2_28 -I"$NCCL_INCLUDE" "${cuda_inc[@]}"; then
    probe_ours 2.28 "$tmp/nvidia28.out" -DPROBE_BASELINE_2_28
  fi
  header_functions "$NCCL_INCLUDE/nccl.h" >"$tmp/nvidia28.funcs"
  missing=$(comm -23 "$tmp/nvidia28.funcs" "$tmp/braid.funcs")
  if [ -z "$missing" ]; then
    pass "2.28: all $(wc -l <"$tmp/nvidia28.funcs") functions of the 2.28 header are declared ($(comm -13 "$tmp/nvidia28.funcs" "$tmp/braid.funcs" | wc -l) more from 2.30)"
  else
    fail "2.28: declared by NVIDIA's 2.28 header, missing from ours:"
    printf "%s\n" "$missing" | indent
  fi
  header_declarations "$NCCL_INCLUDE/nccl.h" >"$tmp/nvidia28.decls"
  only_names "$tmp/nvidia28.funcs" <"$tmp/braid.decls" >"$tmp/braid28.decls"
  cross_compile "2.28: our $(wc -l <"$tmp/braid28.decls") declarations of 2.28 functions compile after NVIDIA's header" \
    "-I$NCCL_INCLUDE ${cuda_inc[*]}" "$tmp/braid28.decls"
  cross_compile "2.28: NVIDIA's $(wc -l <"$tmp/nvidia28.decls") declarations compile after our header" \
    "-I$BRAID_INCLUDE -DBRAID_NO_CUDA_HEADERS" "$tmp/nvidia28.decls"
fi

# ---- NCCL 2.30.7: 6 first (it may refresh what 4 and 5 compare with) ----
facts=$here/nccl-2.30.7.probe
funcs=$here/nccl-2.30.7.functions
n230=${NCCL230_INCLUDE:-}
if [ -z "$n230" ] && git -C "$NCCL_MIRROR" rev-parse -q --verify v2.30.7-1 >/dev/null 2>&1; then
  # The header as NVIDIA's build generates it (src/Makefile: the version placeholders).
  mkdir -p "$tmp/n230"
  git -C "$NCCL_MIRROR" show v2.30.7-1:src/nccl.h.in |
    sed -e 's/\${nccl:Major}/2/g' -e 's/\${nccl:Minor}/30/g' -e 's/\${nccl:Patch}/7/g' \
      -e 's/\${nccl:Suffix}//g' -e 's/\${nccl:Version}/23007/g' >"$tmp/n230/nccl.h"
  n230=$tmp/n230
fi
if [ -n "$n230" ] && [ -f "$n230/nccl.h" ]; then
  if build_probe nvidia230 "$CC" -std=gnu11 -Wall -I"$n230" "${cuda_inc[@]}"; then
    if diff -u "$facts" "$tmp/nvidia230.out" >"$tmp/facts.diff"; then
      pass "2.30.7: tests/abi/nccl-2.30.7.probe is the probe's output on NVIDIA's header ($n230)"
    else
      fail "2.30.7: tests/abi/nccl-2.30.7.probe differs from the probe on NVIDIA's header (- stored, + header)"
      indent <"$tmp/facts.diff"
    fi
  fi
  header_functions "$n230/nccl.h" >"$tmp/nvidia230.funcs"
  if diff -u "$funcs" "$tmp/nvidia230.funcs" >"$tmp/funcs.diff"; then
    pass "2.30.7: tests/abi/nccl-2.30.7.functions lists the header's $(wc -l <"$funcs") functions"
  else
    fail "2.30.7: tests/abi/nccl-2.30.7.functions differs from the header (- stored, + header)"
    indent <"$tmp/funcs.diff"
  fi
  header_declarations "$n230/nccl.h" >"$tmp/nvidia230.decls"
  only_names "$tmp/braid.funcs" <"$tmp/nvidia230.decls" >"$tmp/nvidia230-ours.decls"
  cross_compile "2.30.7: our $(wc -l <"$tmp/braid.decls") declarations compile after NVIDIA's header" \
    "-I$n230 ${cuda_inc[*]}" "$tmp/braid.decls"
  cross_compile "2.30.7: NVIDIA's $(wc -l <"$tmp/nvidia230-ours.decls") declarations compile after our header" \
    "-I$BRAID_INCLUDE -DBRAID_NO_CUDA_HEADERS" "$tmp/nvidia230-ours.decls"
else
  echo "SKIP: NVIDIA's 2.30.7 header not available (NCCL230_INCLUDE, NCCL_MIRROR); checking against the stored facts only"
fi

# ---- NCCL 2.30.7: 4, 5 ----
probe_ours 2.30.7 "$facts" ""
pending=$here/pending-2.30.7.txt
if [ ! -f "$pending" ]; then
  : >"$tmp/none"
  pending=$tmp/none
fi
missing=$(comm -23 "$funcs" "$tmp/braid.funcs" | comm -23 - <(sort -u "$pending"))
extra=$(comm -13 "$funcs" "$tmp/braid.funcs")
still_pending=$(comm -23 "$funcs" "$tmp/braid.funcs" | comm -12 - <(sort -u "$pending"))
landed=$(comm -12 "$tmp/braid.funcs" <(sort -u "$pending"))
if [ -z "$missing" ] && [ -z "$extra" ]; then
  pass "2.30.7: our header declares the $(($(wc -l <"$funcs") - $(printf '%s' "$still_pending" | grep -c .))) functions of 2.30.7 it should"
else
  [ -n "$missing" ] && fail "2.30.7: declared by NVIDIA's header, missing from ours:" && printf "%s\n" "$missing" | indent
  [ -n "$extra" ] && fail "2.30.7: declared by our header, not by NVIDIA's:" && printf "%s\n" "$extra" | indent
fi
if [ -n "$still_pending" ]; then
  echo "PENDING: $(printf '%s\n' "$still_pending" | wc -l) functions of 2.30.7 come with another change (tests/abi/pending-2.30.7.txt): $(printf '%s ' $still_pending | cut -c1-200)..."
fi
[ -n "$landed" ] && echo "note: now declared, remove from tests/abi/pending-2.30.7.txt: $(printf '%s ' $landed)"

if [ "$failed" = 0 ]; then
  echo "PASS: include/nccl.h is ABI-compatible with NCCL 2.28.9 and 2.30.7"
else
  echo "FAIL: include/nccl.h differs from NCCL's headers (see above)"
fi
exit "$failed"
