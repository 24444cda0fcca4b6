#!/usr/bin/env bash
# selftest.sh - tests the benchmark tooling itself, without braid's library: builds the
# benchmarks against tests/bench/fake_nccl.c (a slow but correct single-host NCCL stand-in)
# in a temporary directory and runs tests/bench/run.sh on them; then the MPI build of the
# benchmarks under mpirun, the Open MPI peer, tools/plot-bench and bench/compare.sh.
# Use it when changing bench/, tools/plot-bench or tests/bench/. Last line: "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -f "${2:-}" ] && sed 's/^/    | /' "$2" | tail -n 20; }

CFLAGS="-std=gnu11 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter -fPIC -pthread -D_GNU_SOURCE -DBRAID_NO_CUDA_HEADERS -Iinclude"
COLLS=$(cd bench && for f in *_perf.c; do echo "${f%_perf.c}"; done)

# build_benches CC DIR EXTRA_FLAGS: the Makefile's bench rules, against $B/lib.
build_benches() {
  local cc=$1 dir=$2 extra=$3 objs=()
  mkdir -p "$dir/obj" "$dir/bin"
  for f in bench/common/*.c; do
    # shellcheck disable=SC2086
    $cc $CFLAGS $extra -fvisibility=hidden -Ibench/common -c "$f" -o "$dir/obj/$(basename "$f" .c).o" || return 1
    objs+=("$dir/obj/$(basename "$f" .c).o")
  done
  for c in $COLLS; do
    # shellcheck disable=SC2086
    $cc $CFLAGS $extra -fvisibility=hidden -Ibench/common -c "bench/${c}_perf.c" -o "$dir/obj/${c}_perf.o" &&
      $cc -o "$dir/bin/${c}_perf" "$dir/obj/${c}_perf.o" "${objs[@]}" -L"$B/lib" -lnccl -Wl,-rpath,"$B/lib" \
        -pthread -lrt -ldl -lm || return 1
  done
}

mkdir -p "$B/lib"
# shellcheck disable=SC2086
if gcc $CFLAGS -shared -fvisibility=hidden -Ibench/common tests/bench/fake_nccl.c bench/common/dtype.c \
    -o "$B/lib/libnccl.so.2" -Wl,-soname,libnccl.so.2 -lrt -lm >"$B/cc.txt" 2>&1 &&
    ln -sf libnccl.so.2 "$B/lib/libnccl.so" && build_benches gcc "$B" "" >>"$B/cc.txt" 2>&1; then
  pass "build against the fake libnccl (-Werror)"
else
  fail "build against the fake libnccl (-Werror)" "$B/cc.txt"
  echo "$passed passed, $failed failed"
  exit 1
fi

tests/bench/run.sh "$B" | tee "$B/run.txt" | grep -E '^(FAIL|    \|)' || true
read -r p f <<<"$(tail -n 1 "$B/run.txt" | sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/')"
echo "tests/bench/run.sh against the fake: $p passed, $f failed"
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-1}))

if command -v mpicc >/dev/null 2>&1; then
  shm=sm
  ompi_info 2>/dev/null | grep -q 'MCA btl: vader' && shm=vader
  MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl "self,$shm")
  if build_benches mpicc "$B/mpi" "-DBRAID_BENCH_MPI=1" >"$B/mcc.txt" 2>&1; then
    pass "MPI=1 build (-Werror)"
    rc=0
    timeout 120 "${MPIRUN[@]}" -np 3 "$B/mpi/bin/all_reduce_perf" -c 1 -b 8 -e 64K -f 4 -t 2 >"$B/m.txt" 2>&1 || rc=$?
    if [ $rc -eq 0 ] && grep -qx '# Out of bounds values : 0 OK' "$B/m.txt" && [ "$(grep -c '^#  Rank' "$B/m.txt")" -eq 6 ]; then
      pass "mpirun -np 3 all_reduce_perf -t 2"
    else
      fail "mpirun -np 3 all_reduce_perf -t 2 (exit $rc)" "$B/m.txt"
    fi
    rc=0
    BRAID_BENCH_CORRUPT=1 timeout 120 "${MPIRUN[@]}" -x BRAID_BENCH_CORRUPT -np 2 "$B/mpi/bin/reduce_scatter_perf" -c 1 -b 8 -e 64K -f 4 >"$B/m.txt" 2>&1 || rc=$?
    if [ $rc -ne 0 ] && grep -qx '# Out of bounds values : 1 FAILED' "$B/m.txt"; then pass "mpirun corrupt -> FAILED"; else fail "mpirun corrupt (exit $rc)" "$B/m.txt"; fi
  else
    fail "MPI=1 build (-Werror)" "$B/mcc.txt"
  fi
  # The Open MPI peer and the comparison, with the fake standing in for braid.
  rc=0
  bench/compare.sh --build "$B" --coll all_reduce --rounds 2 --max 64K --iters 3 --warmup 1 --ceil 4M \
    --peers ompi >"$B/cmp.txt" 2>&1 || rc=$?
  if [ $rc -eq 0 ] && [ "$(grep -cE '^ +[0-9]+ +[0-9.e+-]+ +[0-9.e+-]+ +[0-9.]+ +[0-9.-]+ +[0-9]+ +[0-9.-]+ +[0-9]+$' "$B/bench/compare-all_reduce.txt")" -eq 14 ] &&
      [ -s "$B/bench/compare.png" ]; then
    pass "compare.sh (14 sizes, compare.png)"
  else
    fail "compare.sh (exit $rc)" "$B/cmp.txt"
  fi
  for c in $COLLS; do
    rc=0
    timeout 120 "${MPIRUN[@]}" -np 3 "$B/bench/mpi_coll_perf" "$c" -c 1 -b 8 -e 64K -f 4 -r -1 -d all >"$B/p.txt" 2>&1 || rc=$?
    # Open MPI 4.1's AVX component saturates 8-bit integer sums (ompi#8045): allowed here.
    bad=$(grep -v '^#' "$B/p.txt" | awk 'NF == 13 && $1 ~ /^[0-9]+$/ && ($9 != 0 || ($13 != 0 && $13 != "N/A")) && !($3 ~ /int8/ && $4 == "sum")' | wc -l)
    if [ "$bad" -eq 0 ] && grep -qx "# Collective test concluded: mpi_${c}_perf" "$B/p.txt"; then
      pass "mpi_coll_perf $c"
    else
      fail "mpi_coll_perf $c (exit $rc, $bad bad rows)" "$B/p.txt"
    fi
  done
else
  echo "SKIP MPI parts: no mpicc (tests/ensure-deps.sh mpi)"
fi

if tools/plot-bench -o "$B/p.png" "x=$B/bench/braid-all_reduce-r1.txt" >"$B/plot.txt" 2>&1 && [ -s "$B/p.png" ]; then
  pass "plot-bench"
else
  fail "plot-bench" "$B/plot.txt"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
