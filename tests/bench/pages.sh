#!/usr/bin/env bash
# pages.sh BUILD_DIR - every benchmark writes its buffers before timing: braid's *_perf (-P 2)
# and the peers (bench/peers/, built into BUILD_DIR/bench: Open MPI, skipped without mpicc/mpirun;
# Gloo and oneCCL, each skipped when not installed)
# run every collective with BRAID_BENCH_CHECK_PAGES=1, which exits 7 when a send or receive
# buffer has an unwritten page (never written: unmapped or the shared zero page) as a timed
# loop starts. A case passes on exit 0 with the hook's count of checked loops on stderr.
# Without the fix of issue 20 the peer (calloc'd buffers, data written only after timing) fails.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:-build}
export BRAID_HOST_MODE=1 BRAID_BENCH_CHECK_PAGES=1
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"
ARGS=(-b 64K -e 1M -f 4 -n 2 -w 1 -c 1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0

one() { # one LABEL CMD...: exit 0 and at least one checked loop
  local label=$1 rc=0
  shift
  timeout 120 "$@" >"$TMP/out.txt" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ] && grep -qE '^# pages checked before [1-9][0-9]* timed loops$' "$TMP/out.txt"; then
    echo "PASS $label"
  else
    failed=$((failed + 1))
    echo "FAIL $label: exit status $rc"
    grep -E 'BRAID_BENCH_CHECK_PAGES|pages checked' "$TMP/out.txt" | head -n 4 | sed 's/^/    | /'
  fi
}

for c in $COLLS; do one "written pages: ${c}_perf" "$BUILD/bin/${c}_perf" "${ARGS[@]}" -P 2; done
one "written pages: all_reduce_perf -c 0 -t 2" "$BUILD/bin/all_reduce_perf" -b 64K -e 1M -f 4 -n 2 -w 1 -c 0 -t 2

if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  if PEER=$(bench/peers/build.sh "$BUILD/bench" 2>"$TMP/cc.txt"); then
    btl=sm # Open MPI's shared-memory BTL is "vader" up to 4.x
    ompi_info 2>/dev/null | grep -q 'MCA btl: vader' && btl=vader
    MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl "self,$btl" -x BRAID_BENCH_CHECK_PAGES)
    for c in $COLLS; do one "written pages: MPI peer $c" "${MPIRUN[@]}" "$PEER" "$c" "${ARGS[@]}"; done
  else
    failed=$((failed + 1))
    echo "FAIL MPI peer: does not build"
    sed 's/^/    | /' "$TMP/cc.txt" | tail -n 10
  fi
else
  echo "SKIP written pages: MPI peer (no mpicc/mpirun; tests/ensure-deps.sh mpi)"
fi

# The optional peers (bench/peers/launch.sh ranks), each collective they have.
for p in gloo oneccl; do
  rc=0
  PEER=$(bench/peers/build.sh "$BUILD/bench" "$p" 2>"$TMP/cc.txt") || rc=$?
  if [ $rc -eq 3 ]; then echo "SKIP written pages: $p peer ($(tail -n 1 "$TMP/cc.txt"))"; continue; fi
  if [ $rc -ne 0 ]; then
    failed=$((failed + 1))
    echo "FAIL $p peer: does not build"
    sed 's/^/    | /' "$TMP/cc.txt" | tail -n 10
    continue
  fi
  for c in $("$PEER" --colls 2>/dev/null); do one "written pages: $p peer $c" bench/peers/launch.sh 2 "$PEER" "$c" "${ARGS[@]}"; done
done
[ "$failed" -eq 0 ]
