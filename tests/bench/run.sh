#!/usr/bin/env bash
# run.sh BUILD_DIR - tests of the benchmarks in BUILD_DIR/bin (tests/run.sh calls it with the
# build directory; tests/bench/selftest.sh with a build linked to a fake libnccl).
#
# Every *_perf runs with `-c 1 -b 8 -e 64K -f 4` as 2 and 3 processes (-P), once as 2
# threads (-t 2) and once as 2 ranks of one thread (-g 2); its output must have nccl-tests'
# table header, one well-formed row per size with #wrong 0, the summary lines, and exit 0.
# Then: every datatype x op (-o all -d all) and every root (-r -1); the forced failure
# (BRAID_BENCH_CORRUPT=1: one corrupted element -> "#wrong 1", "Out of bounds values : 1
# FAILED", exit 7); a process killed mid-run (BRAID_BENCH_DIE) ending the run with an error
# instead of a hang; the launcher-variable mode (RANK/WORLD_SIZE + NCCL_COMM_ID); and the
# Check unit tests of bench/common (tests/bench/unit.c); then tests/bench/compare.sh (`make
# bench-compare`, one short round). Each case runs under `timeout 120`.
# Last line: "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:-build}
BIN=$BUILD/bin
# These cases check the host-mode output (device column "host"); on a machine with a GPU the
# benchmarks would switch to device buffers, which tests/gpu/run.sh covers.
export BRAID_HOST_MODE=1
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"
SIZES=(-b 8 -e 64K -f 4)
ROWS=7 # 8, 32, ..., 32768
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
skipped=0
failed=0

pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1: $2"; [ -f "${3:-}" ] && sed 's/^/    | /' "$3" | tail -n 25; }

# check OUT NAME NRANKS ROWS WRONG_ROWS: the output format; WRONG_ROWS rows may have #wrong.
check() {
  local out=$1 name=$2 nranks=$3 rows=$4 wrong_rows=$5 na=0
  # nccl-tests does not check alltoall and sendrecv in place: that #wrong says N/A.
  case $name in alltoall | sendrecv) na=1 ;; esac
  local h1='#                                                              out-of-place                       in-place          '
  local h2='#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong '
  local h3='#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         '
  grep -q '^# nccl-tests version [0-9.]* (.*) nccl-headers=[0-9]* nccl-library=[0-9]*$' "$out" || { echo "no version line"; return 1; }
  grep -qx "# Collective test starting: ${name}_perf" "$out" || { echo "no starting line"; return 1; }
  grep -q '^# nThread [0-9]* nGpus [0-9]* minBytes [0-9]* maxBytes [0-9]* step: ' "$out" || { echo "no nThread line"; return 1; }
  for h in "$h1" "$h2" "$h3"; do grep -qxF -- "$h" "$out" || { echo "table header differs: '$h'"; return 1; }; done
  local ranks
  ranks=$(grep -cE '^#  Rank +[0-9]+ Group +[0-9]+ Pid +[0-9]+ on +[^ ]+ device +-?[0-9]+ \[0000:00:00\] host$' "$out")
  [ "$ranks" -eq "$nranks" ] || { echo "$ranks '#  Rank' lines, want $nranks"; return 1; }
  awk -v rows="$rows" -v wrong_rows="$wrong_rows" -v na="$na" '
    /^#/ || /^$/ { next }
    /^ \.\. / { next }   # nccl-tests failure trace after the footer
    { n++
      if (NF != 13) { print "row with " NF " fields: " $0; bad = 1; exit }
      if (na) { if ($13 != "N/A") { print "in-place #wrong is not N/A: " $0; bad = 1; exit } else $13 = 0 }
      if ($1 !~ /^[0-9]+$/ || $2 !~ /^[0-9]+$/ || $9 !~ /^[0-9]+$/ || $13 !~ /^[0-9]+$/) { print "bad row: " $0; bad = 1; exit }
      for (i = 6; i <= 12; i++) if (i != 9 && $i !~ /^[0-9.e+-]+$/) { print "bad number: " $0; bad = 1; exit }
      if ($9 != 0 || $13 != 0) w++ }
    END { if (bad) exit 1
          if (n != rows) { print n " rows, want " rows; exit 1 }
          if (w != wrong_rows) { print w " rows with #wrong > 0, want " wrong_rows; exit 1 } }' "$out" || return 1
  local errs=$((wrong_rows > 0 ? 1 : 0)) verdict=OK
  [ "$errs" -eq 0 ] || verdict=FAILED
  grep -qx "# Out of bounds values : $errs $verdict" "$out" || { echo "no '# Out of bounds values : $errs $verdict'"; return 1; }
  grep -qE '^# Avg bus bandwidth    : [0-9.e+-]+ $' "$out" || { echo "no avg bus bandwidth line"; return 1; }
  grep -qx "# Collective test concluded: ${name}_perf" "$out" || { echo "no concluded line"; return 1; }
}

# case NAME COLL NRANKS ROWS WRONG_ROWS WANT_RC [ENV=...] -- ARGS...
run_case() {
  local label=$1 coll=$2 nranks=$3 rows=$4 wrong_rows=$5 want_rc=$6
  shift 6
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local out=$TMP/out.txt rc=0
  env "${envs[@]}" timeout 120 "$BIN/${coll}_perf" "$@" >"$out" 2>&1 || rc=$?
  if [ "$rc" -ne "$want_rc" ]; then fail "$label" "exit status $rc, want $want_rc" "$out"; return; fi
  local why
  if why=$(check "$out" "$coll" "$nranks" "$rows" "$wrong_rows"); then pass "$label"; else fail "$label" "$why" "$out"; fi
}

if [ ! -x "$BIN/all_reduce_perf" ]; then
  echo "no benchmarks in $BIN (build them first)"
  echo "0 passed, 1 failed"
  exit 1
fi

for c in $COLLS; do
  run_case "$c -P 2" "$c" 2 $ROWS 0 0 -- -c 1 "${SIZES[@]}" -P 2
  run_case "$c -P 3" "$c" 3 $ROWS 0 0 -- -c 1 "${SIZES[@]}" -P 3
  run_case "$c -t 2" "$c" 2 $ROWS 0 0 -- -c 1 "${SIZES[@]}" -t 2
  run_case "$c -g 2" "$c" 2 $ROWS 0 0 -- -c 1 "${SIZES[@]}" -g 2
  run_case "$c corrupt" "$c" 2 $ROWS 1 7 BRAID_BENCH_CORRUPT=1 -- -c 1 "${SIZES[@]}" -P 2
done
# Every datatype x op of the reductions (12 types x 6 ops x 3 sizes), every root.
for c in all_reduce reduce_scatter reduce; do
  run_case "$c -o all -d all" "$c" 2 $((12 * 6 * 3)) 0 0 -- -c 1 -b 64 -e 4K -f 8 -n 2 -w 1 -o all -d all -P 2
done
for c in broadcast reduce gather scatter; do
  run_case "$c -r -1" "$c" 3 $((3 * ROWS)) 0 0 -- -c 1 "${SIZES[@]}" -r -1 -P 3
done
run_case "all_reduce -t 2 -g 2 -P 2 -m 2" all_reduce 8 $ROWS 0 0 -- -c 1 "${SIZES[@]}" -t 2 -g 2 -P 2 -m 2

# A process that dies: the run must end, with an error, well before the timeout.
out=$TMP/die.txt
start=$SECONDS
rc=0
BRAID_BENCH_DIE=1 timeout 120 "$BIN/all_reduce_perf" -c 1 "${SIZES[@]}" -P 3 >"$out" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
  fail "process death" "exit status $rc (0: not noticed, 124: hung)" "$out"
elif ! grep -q "process 1 (pid [0-9]*) was killed by signal 9" "$out"; then
  fail "process death" "no report of the dead process" "$out"
else
  pass "process death (exit $rc after $((SECONDS - start)) s)"
fi

# Launcher variables: two processes meet through NCCL_COMM_ID; rank 0 prints for both.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)))
out=$TMP/launch0.txt
RANK=1 WORLD_SIZE=2 NCCL_COMM_ID=127.0.0.1:$port timeout 120 "$BIN/all_reduce_perf" -c 1 "${SIZES[@]}" -t 2 >"$TMP/launch1.txt" 2>&1 &
peer=$!
rc=0
RANK=0 WORLD_SIZE=2 NCCL_COMM_ID=127.0.0.1:$port timeout 120 "$BIN/all_reduce_perf" -c 1 "${SIZES[@]}" -t 2 >"$out" 2>&1 || rc=$?
prc=0
wait $peer || prc=$?
if [ "$rc" -ne 0 ] || [ "$prc" -ne 0 ]; then
  fail "launcher variables" "exit status $rc and $prc" "$out"
elif why=$(check "$out" all_reduce 4 $ROWS 0); then
  if grep -q '^#' "$TMP/launch1.txt"; then fail "launcher variables" "rank 1 printed the table" "$TMP/launch1.txt"; else pass "launcher variables"; fi
else
  fail "launcher variables" "$why" "$out"
fi
rc=0
RANK=0 WORLD_SIZE=2 env -u NCCL_COMM_ID timeout 20 "$BIN/all_reduce_perf" >"$TMP/noid.txt" 2>&1 || rc=$?
if [ "$rc" -eq 255 ] && grep -q "NCCL_COMM_ID is not set" "$TMP/noid.txt"; then pass "launcher without NCCL_COMM_ID"; else fail "launcher without NCCL_COMM_ID" "exit status $rc" "$TMP/noid.txt"; fi

# nccl-tests' argument errors: exit 255 (its main returns -1).
rc=0
timeout 20 "$BIN/all_reduce_perf" -b 1M -e 1K >"$TMP/args.txt" 2>&1 || rc=$?
if [ "$rc" -eq 255 ] && grep -q "invalid sizes for 'minbytes' and 'maxbytes'" "$TMP/args.txt"; then pass "bad sizes"; else fail "bad sizes" "exit status $rc" "$TMP/args.txt"; fi

# Honest timing: no timed loop of braid's benchmarks or of the MPI peer reads an unwritten
# page (BRAID_BENCH_CHECK_PAGES, bench/common/pages.h), sizes spanning many pages.
tests/bench/pages.sh "$BUILD" >"$TMP/pages.txt" 2>&1
prc=$?
grep -E '^(PASS|FAIL|SKIP) ' "$TMP/pages.txt"
passed=$((passed + $(grep -c '^PASS ' "$TMP/pages.txt")))
skipped=$((skipped + $(grep -c '^SKIP ' "$TMP/pages.txt")))
failed=$((failed + $(grep -c '^FAIL ' "$TMP/pages.txt")))
[ "$prc" -eq 0 ] || grep -q '^FAIL ' "$TMP/pages.txt" || fail "pages.sh" "exit status $prc" "$TMP/pages.txt"

# `make bench-compare` itself: every collective, one short round, and its probes.
tests/bench/compare.sh "$BUILD" >"$TMP/compare.txt" 2>&1
prc=$?
grep -E '^(PASS|FAIL|SKIP) ' "$TMP/compare.txt"
passed=$((passed + $(grep -c '^PASS ' "$TMP/compare.txt")))
skipped=$((skipped + $(grep -c '^SKIP ' "$TMP/compare.txt")))
failed=$((failed + $(grep -c '^FAIL ' "$TMP/compare.txt")))
[ "$prc" -eq 0 ] || grep -q '^FAIL ' "$TMP/compare.txt" || fail "compare.sh" "exit status $prc" "$TMP/compare.txt"

# The Check tests of bench/common (no communicator needed).
if pkg-config --exists check 2>/dev/null; then
  read -r -a check_libs <<<"$(pkg-config --libs check)"
  if gcc -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -O2 -D_GNU_SOURCE -DBRAID_NO_CUDA_HEADERS \
      -Iinclude -Ibench/common tests/bench/unit.c bench/common/opts.c bench/common/report.c bench/common/dtype.c \
      bench/common/verify.c bench/common/pages.c -o "$TMP/unit" "${check_libs[@]}" -lm >"$TMP/cc.txt" 2>&1; then
    if timeout 120 "$TMP/unit" >"$TMP/unit.txt" 2>&1; then pass "unit (bench/common)"; else fail "unit (bench/common)" "Check failures" "$TMP/unit.txt"; fi
  else
    fail "unit (bench/common)" "does not compile" "$TMP/cc.txt"
  fi
else
  skipped=$((skipped + 1))
  echo "SKIP unit (bench/common): libcheck not installed (tests/ensure-deps.sh check)"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
