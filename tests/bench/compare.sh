#!/usr/bin/env bash
# compare.sh BUILD_DIR - tests of `make bench-compare` (bench/compare.sh) and its probes, no
# timing assertions: pingpong and memceil print one line with sane numbers and refuse bad
# arguments (exit 2); compare.sh --coll all, 1 round, 8 B..64 KiB on 2 ranks against Open MPI
# finishes, every collective's table has one row per size of braid's output with a ratio,
# each round is classified near/far/mixed, the all-reduce ceiling table has its round and the
# summary one row per collective. Skipped without mpicc/mpirun. Lines: PASS/FAIL/SKIP NAME.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:-build}
export BRAID_HOST_MODE=1
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0
pass() { echo "PASS $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1: $2"; [ -f "${3:-}" ] && sed 's/^/    | /' "$3" | tail -n 20; }

# sane FILE KEY LO HI: the number after KEY in FILE's one line lies in (LO, HI).
sane() { awk -v k="$2" -v lo="$3" -v hi="$4" '{ for (i = 1; i < NF; i++) if ($i == k) { v = $(i + 1); f = 1 } }
  END { exit !(f && v + 0 > lo && v + 0 < hi) }' "$1"; }

if ! PROBE=$(bench/probe/build.sh "$BUILD/bench" 2>"$TMP/cc.txt"); then
  fail "probes build" "cc failed" "$TMP/cc.txt"
  echo "0 passed, 1 failed"
  exit 1
fi
if timeout 60 "$PROBE/pingpong" -n 500 -r 3 >"$TMP/pp.txt" 2>&1; then
  if sane "$TMP/pp.txt" rtt_ns 1 1e7 && sane "$TMP/pp.txt" median 1 1e9; then pass "pingpong: $(cat "$TMP/pp.txt")"
  else fail "pingpong" "numbers out of range" "$TMP/pp.txt"; fi
elif [ $? -eq 3 ]; then echo "SKIP pingpong: fewer than two CPUs"
else fail "pingpong" "exit status non-zero" "$TMP/pp.txt"; fi
rc=0; "$PROBE/pingpong" -c 0,0 >"$TMP/bad.txt" 2>&1 || rc=$?
if [ $rc -eq 2 ] && grep -q "two different CPUs" "$TMP/bad.txt"; then pass "pingpong -c 0,0 refused"; else fail "pingpong -c 0,0" "exit $rc" "$TMP/bad.txt"; fi
if timeout 60 "$PROBE/memceil" -s 4M -r 3 >"$TMP/mc.txt" 2>&1 && sane "$TMP/mc.txt" GB/s 0.01 1e4 &&
    sane "$TMP/mc.txt" size 4194303 4194305 && sane "$TMP/mc.txt" traffic_GB/s 0.03 3e4; then
  pass "memceil: $(cat "$TMP/mc.txt")"
else fail "memceil" "exit status or numbers" "$TMP/mc.txt"; fi
for bad in "-s 0" "-s 12Q" "-t 0" "-r 99"; do
  rc=0
  # shellcheck disable=SC2086
  "$PROBE/memceil" $bad >"$TMP/bad.txt" 2>&1 || rc=$?
  if [ $rc -eq 2 ] && grep -q usage "$TMP/bad.txt"; then pass "memceil $bad refused"; else fail "memceil $bad" "exit $rc" "$TMP/bad.txt"; fi
done

# Near/far from given round trips (no benchmark run): 4 rounds, near/far alternating, and a
# mixed one; the fixed threshold and the gap rule must agree here, and --near-ns 50 make
# every round far.
S=$TMP/synthetic
mkdir -p "$S"
i=0
for pair in "70 72" "320 330" "68 71" "69 310"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  set -- $pair
  echo "pingpong cpus 0,1 rtt_ns $1 median $1 reps 7 trips 2000" >"$S/pp-all_reduce-r$i-before.txt"
  echo "pingpong cpus 0,1 rtt_ns $2 median $2 reps 7 trips 2000" >"$S/pp-all_reduce-r$i-after.txt"
done
want='^# rounds \(ping-pong before/after, ns\): r1 near \(70/72\), r2 far \(320/330\), r3 near \(68/71\), r4 mixed \(69/310\)$'
for nn in 150 gap; do
  if python3 bench/compare_tables.py --out "$S" --colls all_reduce --rounds 4 --near-ns $nn --peers ompi >"$TMP/syn.txt" 2>&1 &&
      grep -qE "$want" "$S/compare-all_reduce.txt"; then pass "near/far classes (--near-ns $nn)"
  else fail "near/far classes (--near-ns $nn)" "rounds line" "$TMP/syn.txt"; fi
done
if python3 bench/compare_tables.py --out "$S" --colls all_reduce --rounds 4 --near-ns 50 --peers ompi >"$TMP/syn.txt" 2>&1 &&
    grep -qE '^# rounds .*: r1 far .*, r2 far .*, r3 far .*, r4 far ' "$S/compare-all_reduce.txt"; then pass "near/far classes (--near-ns 50: all far)"
else fail "near/far classes (--near-ns 50)" "rounds line" "$TMP/syn.txt"; fi
python3 bench/compare_tables.py --out "$S" --colls all_reduce --rounds 4 --near-ns gap --peers ompi >"$TMP/syn.txt" 2>&1
if grep -q "widest gap between this run's round trips: 1[45][0-9] ns" "$TMP/syn.txt"; then
  pass "near/far gap threshold (between 72 and 310)"
else fail "near/far gap threshold" "not 140-159 ns" "$TMP/syn.txt"; fi

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  echo "SKIP compare.sh --coll all (no mpicc/mpirun; tests/ensure-deps.sh mpi)"
  [ "$failed" -eq 0 ]
  exit
fi
R=$TMP/cmp
rc=0
timeout 900 bench/compare.sh --build "$BUILD" --out "$R" --coll all --rounds 1 --max 64K --iters 2 --warmup 1 \
  --ceil 4M --peers ompi >"$TMP/cmp.txt" 2>&1 || rc=$?
if [ $rc -ne 0 ]; then fail "compare.sh --coll all" "exit status $rc" "$TMP/cmp.txt"; fi
for c in $COLLS; do
  t=$R/compare-$c.txt
  # braid's sizes (8 B..64 KiB; the gathers' small sizes round to the same counts)
  want=$(awk '!/^#/ && NF == 13 { print $1 }' "$R/braid-$c-r1.txt" 2>/dev/null | sort -u | wc -l)
  got=$(awk '!/^#/ && NF == 8 && $1 ~ /^[0-9]+$/' "$t" 2>/dev/null | wc -l)
  nratio=$(awk '!/^#/ && NF == 8 && $1 > 0 && $4 ~ /^[0-9.]+$/' "$t" 2>/dev/null | wc -l)
  nzero=$(awk '!/^#/ && NF == 8 && $1 == 0' "$t" 2>/dev/null | wc -l)
  if [ "$want" -lt 10 ] || [ "$got" -ne "$want" ] || [ $((nratio + nzero)) -ne "$want" ]; then
    fail "compare.sh table $c" "$got rows ($nratio with a ratio), braid printed $want sizes" "$t"
  elif ! grep -qE '^# rounds \(ping-pong before/after, ns\): r1 (near|far|mixed) \([0-9]+/[0-9]+\)$' "$t"; then
    fail "compare.sh table $c" "no near/far line for round 1" "$t"
  else pass "compare.sh table $c ($got sizes)"; fi
done
if grep -qE '^ +1 +(near|far|mixed) +[0-9.]+ +- +-$' "$R/compare-all_reduce.txt" 2>/dev/null; then
  pass "compare.sh ceiling table"
else fail "compare.sh ceiling table" "no round-1 row with a ceiling" "$R/compare-all_reduce.txt"; fi
n=$(awk '/^# vs / { on = ($0 == "# vs Open MPI, all rounds") } on' "$R/compare-summary.txt" 2>/dev/null |
  grep -cE '^ +[a-z_]+ +[0-9.]+ +[0-9.]+ +- +-$')
if [ "$n" -eq 9 ]; then pass "compare.sh summary (9 collectives)"; else fail "compare.sh summary" "$n rows with data, want 9" "$R/compare-summary.txt"; fi
if python3 -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  if [ -s "$R/compare.png" ] && [ -s "$R/compare-sendrecv.png" ]; then pass "compare.sh plots"; else fail "compare.sh plots" "no png" "$TMP/cmp.txt"; fi
fi
[ "$failed" -eq 0 ]
