#!/usr/bin/env bash
# compare.sh BUILD_DIR - tests of `make bench-compare` (bench/compare.sh) and its probes, no
# timing assertions: pingpong and memceil print one line with sane numbers and refuse bad
# arguments (exit 2); compare.sh --coll all, 1 round, 8 B..64 KiB on 2 ranks against Open MPI
# finishes, every collective's table has one row per size of braid's output with a ratio,
# each round is classified near/far/mixed, the all-reduce ceiling table has its round and the
# summary one row per collective; the optional peers (Gloo, oneCCL: each collective they have,
# checked, and their tables), skipped when not installed. Skipped without mpicc/mpirun.
# Lines: PASS/FAIL/SKIP NAME.
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

rc=0; bench/compare.sh --build "$BUILD" --peers ompi,nope >"$TMP/bad.txt" 2>&1 || rc=$?
if [ $rc -eq 2 ] && grep -q "unknown peer 'nope'" "$TMP/bad.txt"; then pass "compare.sh --peers nope refused"
else fail "compare.sh --peers nope" "exit $rc" "$TMP/bad.txt"; fi

# The optional peers (bench/peers/: Gloo, Intel oneCCL), each skipped (said) when not installed:
# --colls names what it has (oneCCL: no gather, said); each of those on 3 ranks
# (bench/peers/launch.sh), every root, results checked, exit 0.
OPTIONAL=
for p in gloo oneccl; do
  rc=0
  BIN=$(bench/peers/build.sh "$BUILD/bench" "$p" 2>"$TMP/build-$p.txt") || rc=$?
  if [ $rc -eq 3 ]; then echo "SKIP peer $p: $(tail -n 1 "$TMP/build-$p.txt")"; continue; fi
  if [ $rc -ne 0 ]; then fail "peer $p builds" "exit $rc" "$TMP/build-$p.txt"; continue; fi
  OPTIONAL+=",$p"
  has=$("$BIN" --colls 2>"$TMP/lacks-$p.txt" | tr '\n' ' ')
  want="$COLLS "
  [ "$p" = gloo ] || want="all_reduce all_gather reduce_scatter broadcast reduce alltoall scatter sendrecv "
  if [ "$has" = "$want" ] && { [ "$p" = gloo ] || grep -qx '# oneCCL has no gather' "$TMP/lacks-$p.txt"; }; then
    pass "peer $p --colls: $has"
  else fail "peer $p --colls" "'$has', want '$want'" "$TMP/lacks-$p.txt"; fi
  for c in $has; do
    for np in 3; do # (2 ranks: in the compare.sh runs below)
      rc=0
      LAUNCH_TIMEOUT=300 bench/peers/launch.sh $np "$BIN" "$c" -c 1 -b 8 -e 64K -f 8 -r -1 -n 2 -w 1 >"$TMP/p.txt" 2>&1 || rc=$?
      rows=$(awk 'NF == 13 && $1 ~ /^[0-9]+$/' "$TMP/p.txt" | wc -l)
      bad=$(awk 'NF == 13 && $1 ~ /^[0-9]+$/ && ($9 != 0 || ($13 != 0 && $13 != "N/A"))' "$TMP/p.txt" | wc -l)
      if [ $rc -eq 0 ] && [ "$rows" -ge 4 ] && [ "$bad" -eq 0 ] && grep -qx '# Out of bounds values : 0 OK' "$TMP/p.txt" &&
          grep -qx "# Collective test concluded: ${p}_${c}_perf" "$TMP/p.txt"; then
        pass "peer $p $c -np $np ($rows rows)"
      else fail "peer $p $c -np $np" "exit $rc, $rows rows, $bad wrong" "$TMP/p.txt"; fi
    done
  done
done

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  echo "SKIP compare.sh --coll all (no mpicc/mpirun; tests/ensure-deps.sh mpi)"
  [ "$failed" -eq 0 ]
  exit
fi

# compare.sh with the optional peers: a table per installed peer, with ratios, and for a
# collective a peer lacks (oneCCL's gather) the "not run" line instead of rows.
if [ -z "$OPTIONAL" ]; then
  echo "SKIP compare.sh --peers ompi,gloo,oneccl: neither Gloo nor oneCCL installed (make bench-deps)"
else
  for c in all_reduce gather; do
    R=$TMP/opt-$c
    rc=0
    timeout 600 bench/compare.sh --build "$BUILD" --out "$R" --coll $c --rounds 1 --max 64K --iters 2 --warmup 1 \
      --ceil none --peers "ompi$OPTIONAL" >"$TMP/opt.txt" 2>&1 || rc=$?
    [ $rc -eq 0 ] || fail "compare.sh --coll $c --peers ompi$OPTIONAL" "exit status $rc" "$TMP/opt.txt"
    for p in ${OPTIONAL//,/ }; do
      name=Gloo; [ "$p" = gloo ] || name="Intel oneCCL"
      n=$(awk -v h="# braid vs $name: median busbw" 'index($0, h) == 1 { on = 1; next } /^# braid vs / { on = 0 }
        on && !/^#/ && NF == 8 && $1 > 0 && $4 ~ /^[0-9.]+$/' "$R/compare-$c.txt" 2>/dev/null | wc -l)
      if [ "$p" = oneccl ] && [ $c = gather ]; then
        if grep -qx '# braid vs Intel oneCCL: not run (Intel oneCCL has no gather)' "$R/compare-$c.txt" &&
            grep -qE '^ +gather +- +- +- +-  # Intel oneCCL has no gather$' "$R/compare-summary.txt"; then
          pass "compare.sh $c: oneCCL lacks it, said in the tables"
        else fail "compare.sh $c oneccl" "no 'not run' line" "$R/compare-$c.txt"; fi
      elif [ "$n" -ge 6 ]; then pass "compare.sh $c vs $name ($n sizes with a ratio)"
      else fail "compare.sh $c vs $name" "$n rows with a ratio" "$R/compare-$c.txt"; fi
    done
  done
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
