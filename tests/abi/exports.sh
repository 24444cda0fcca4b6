#!/usr/bin/env bash
# exports.sh BUILD_DIR - does BUILD_DIR/lib/libnccl.so.2 export exactly the NCCL API?
#
#   1. every dynamic symbol it defines is a function named nccl* or pnccl* (no data, no
#      internal braid_* names, nothing from static helpers leaking through the version script);
#   2. every function include/nccl.h declares is exported (the missing ones are listed).
# Functions exported beyond the header (e.g. the optional device API) are listed as notes.
# Exits 1 on failure, 2 when the library is absent.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/abi/lib.sh
. "$here/lib.sh"

if [ $# -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: tests/abi/exports.sh BUILD_DIR   (checks BUILD_DIR/lib/libnccl.so.2)" >&2
  exit 2
fi
lib=$1/lib/libnccl.so.2
header=${BRAID_INCLUDE:-$root/include}/nccl.h
if [ ! -f "$lib" ]; then
  echo "FAIL: $lib not found (build it first: make BUILD=$1 lib)"
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/braid-exports.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0

if ! nm -D --defined-only "$lib" >"$tmp/nm" 2>"$tmp/nm.err"; then
  echo "FAIL: nm -D --defined-only $lib failed:"
  indent <"$tmp/nm.err"
  exit 1
fi

# Lines are "address type name[@version]"; T/W/i are functions (text, weak, ifunc).
awk '{ name = $NF; sub(/@.*/, "", name); print $(NF-1), name }' "$tmp/nm" >"$tmp/syms"
awk '($1 == "T" || $1 == "W" || $1 == "i") && $2 ~ /^p?nccl/ { print $2 }' "$tmp/syms" | sort -u >"$tmp/exported"
awk '!(($1 == "T" || $1 == "W" || $1 == "i") && $2 ~ /^p?nccl/)' "$tmp/syms" >"$tmp/bad"

nexp=$(wc -l <"$tmp/exported")
if [ -s "$tmp/bad" ]; then
  echo "FAIL: $lib exports $(wc -l <"$tmp/bad") symbol(s) that are not nccl*/pnccl* functions (type name):"
  indent <"$tmp/bad"
  failed=1
else
  echo "PASS: all $nexp exported symbols are nccl*/pnccl* functions"
fi

# nccl_device.h's host entry points (its NCCL_EXTERN_C declarations; the rest is inline) and
# their pnccl profiling names count as declared too.
dev_header=$(dirname "$header")/nccl_device.h
{
  header_functions "$header"
  if [ -f "$dev_header" ]; then
    grep -A1 '^NCCL_EXTERN_C' "$dev_header" | grep -oE '\bnccl[A-Za-z0-9_]*\(' | tr -d '(' | sed 'p; s/^/p/'
  fi
} | sort -u >"$tmp/declared"
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
  echo "FAIL: $(echo "$missing" | wc -l) of the $(wc -l <"$tmp/declared") functions declared in include/nccl.h and nccl_device.h are not exported:"
  printf "%s\n" "$missing" | indent
  failed=1
else
  echo "PASS: all $(wc -l <"$tmp/declared") functions declared in include/nccl.h and nccl_device.h are exported"
fi
if [ -n "$extra" ]; then
  echo "note: exported but not declared in include/nccl.h or nccl_device.h:"
  printf "%s\n" "$extra" | indent
fi

if [ "$failed" = 0 ]; then echo "PASS: $lib exports the NCCL API and nothing else"; else echo "FAIL: $lib exports (see above)"; fi
exit "$failed"
