#!/usr/bin/env bash
# build.sh OUT_DIR - builds the probes OUT_DIR/pingpong, OUT_DIR/memceil and OUT_DIR/cma_ceiling (bench/probe/*.c,
# the C compiler alone) when a source is newer; prints OUT_DIR. Used by bench/compare.sh and
# tests/bench/probe.sh.
set -eu
cd "$(dirname "$0")/../.."
OUT=$1
CC=${CC:-cc}
mkdir -p "$OUT"
for t in pingpong memceil cma_ceiling; do
  if [ ! -x "$OUT/$t" ] || [ "bench/probe/$t.c" -nt "$OUT/$t" ]; then
    "$CC" -std=gnu11 -O2 -Wall -Wextra -pthread "bench/probe/$t.c" -o "$OUT/$t"
  fi
done
echo "$OUT"
