#!/usr/bin/env bash
# run.sh - braid on a GPU machine, in one go (issue 7): build for this GPU, run the `gpu` Check
# suite, measure all_reduce_perf against the device's own cudaMemcpy bandwidth, print a
# summary. See tests/gpu/README.md. Every step runs under `timeout`, within a global budget
# (BUDGET_S, default 330 s); exits non-zero if any part failed, 2 at once when there is no GPU.
#
#   tests/gpu/run.sh            # from the repository root or anywhere
#   OUT=/some/dir tests/gpu/run.sh   # also copy the log, outputs and summary there
#
# Environment: BUILD (default build/gpu), BUDGET_S, BRAID_GPU_MPS=0 (do not start an MPS
# daemon for the multi-process parts), OUT.
set -u
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build/gpu}
BUDGET_S=${BUDGET_S:-330}
OUT=${OUT:-}
LOG_DIR=$BUILD/gpu-run
mkdir -p "$LOG_DIR"
LOG=$LOG_DIR/run.log
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
START=$SECONDS
declare -a SUMMARY
status=0

say() { echo "[$((SECONDS - START))s] $*"; }
result() { # result PART PASS|FAIL|SKIP DETAIL
  SUMMARY+=("$(printf '%-5s %-22s %s' "$2" "$1" "$3")")
  [ "$2" = FAIL ] && status=1
  say "$2: $1 $3"
}
# run_step SECONDS LOGFILE CMD...: the command under timeout, capped by what is left of the budget.
run_step() {
  local want=$1 out=$2
  shift 2
  local left=$((BUDGET_S - (SECONDS - START)))
  [ "$left" -lt "$want" ] && want=$left
  if [ "$want" -le 5 ]; then
    echo "(skipped: the ${BUDGET_S} s budget is spent)" | tee "$out"
    return 124
  fi
  say "\$ $* (timeout ${want}s)"
  timeout -k 5 "$want" "$@" >"$out" 2>&1
  local rc=$?
  [ "$rc" -eq 124 ] && echo "(timed out after ${want}s)" >>"$out"
  return "$rc"
}
save_out() {
  [ -n "$OUT" ] || return 0
  mkdir -p "$OUT" && cp -f "$LOG_DIR"/* "$OUT"/ 2>/dev/null
}
finish() {
  echo
  echo "==================== braid GPU run: summary ===================="
  printf '%s\n' "${SUMMARY[@]}"
  echo "total $((SECONDS - START)) s; logs in $LOG_DIR${OUT:+ and $OUT}"
  [ "$status" -eq 0 ] && echo "GPU RUN: PASS" || echo "GPU RUN: FAIL"
  printf '%s\n' "${SUMMARY[@]}" >"$LOG_DIR/summary.txt"
  stop_mps
  save_out
  exit "$status"
}
MPS_DIR=""
stop_mps() {
  [ -n "$MPS_DIR" ] || return 0
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  MPS_DIR=""
}

# ---- 1. the GPU ------------------------------------------------------------------------------
say "braid GPU run on $(hostname), $(nproc) cores, budget ${BUDGET_S}s"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! timeout 30 nvidia-smi -L >"$LOG_DIR/nvidia-smi.txt" 2>&1 ||
  ! grep -q '^GPU ' "$LOG_DIR/nvidia-smi.txt"; then
  cat "$LOG_DIR/nvidia-smi.txt" 2>/dev/null
  result gpu FAIL "no GPU: nvidia-smi is missing or lists no device; nothing to run"
  status=2
  finish
fi
timeout 30 nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version,pci.bus_id,compute_mode \
  --format=csv | tee -a "$LOG_DIR/nvidia-smi.txt"
cc=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
case $cc in
  [0-9][0-9] | [0-9][0-9][0-9]) ;;
  *) result gpu FAIL "cannot read the compute capability (got '$cc')"; finish ;;
esac
GENCODE="-gencode=arch=compute_$cc,code=sm_$cc"
result gpu PASS "$(sed -n 1p "$LOG_DIR/nvidia-smi.txt" | sed 's/ (UUID.*//'), sm_$cc"

# ---- 2. build for this GPU only ----------------------------------------------------------------
export PATH=$PATH:/usr/local/cuda/bin
if ! command -v nvcc >/dev/null 2>&1; then
  result build FAIL "nvcc not found (PATH, /usr/local/cuda/bin): cannot build the kernels"
  finish
fi
if run_step 200 "$LOG_DIR/build.txt" make -j"$(nproc)" BUILD="$BUILD" NVCC_GENCODE="$GENCODE" all "$BUILD/bin/braid-tests" &&
  gcc -std=gnu11 -O2 -Wall -D_GNU_SOURCE -DBRAID_NO_CUDA_HEADERS -Iinclude -Ibench/common tests/gpu/memcpy_bw.c \
    bench/common/cuda_rt.c -ldl -lpthread -o "$BUILD/bin/memcpy_bw" >>"$LOG_DIR/build.txt" 2>&1; then
  result build PASS "NVCC_GENCODE=$GENCODE ($((SECONDS - START)) s so far)"
else
  tail -n 30 "$LOG_DIR/build.txt"
  result build FAIL "make failed or timed out (build.txt)"
  finish
fi
if NVCC_GENCODE="$GENCODE" run_step 30 "$LOG_DIR/cubins.txt" tests/cuda/cubins.sh "$BUILD"; then
  result cubins PASS "$(tail -n 1 "$LOG_DIR/cubins.txt")"
else
  cat "$LOG_DIR/cubins.txt"
  result cubins FAIL "$(tail -n 1 "$LOG_DIR/cubins.txt")"
fi

# ---- 3. a CUDA context, and MPS for the processes that share the GPU ----------------------------
# Without MPS, kernels of different processes time-slice instead of running together, and a
# collective's kernels wait for each other across slices. A private MPS daemon (pipe and log
# directories under $BUILD) lets the 4 processes run at once; it is stopped at the end. If it
# does not answer, the run goes on without it and says so.
MPS=off
if [ "${BRAID_GPU_MPS:-1}" != 0 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  MPS_DIR=$(cd "$BUILD" && pwd)/mps
  mkdir -p "$MPS_DIR/pipe" "$MPS_DIR/log"
  export CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log
  if timeout 10 nvidia-cuda-mps-control -d && run_step 20 "$LOG_DIR/probe.txt" "$BUILD/bin/memcpy_bw" --probe; then
    MPS=on
  else
    say "MPS did not come up: going on without it"
    stop_mps
  fi
fi
if ! run_step 30 "$LOG_DIR/probe.txt" "$BUILD/bin/memcpy_bw" --probe; then
  cat "$LOG_DIR/probe.txt"
  result cuda FAIL "no CUDA context: $(tail -n 1 "$LOG_DIR/probe.txt")"
  finish
fi
result cuda PASS "$(tail -n 1 "$LOG_DIR/probe.txt" | sed 's/^memcpy_bw: //'); MPS $MPS"

# ---- 4. the reference: device-to-device cudaMemcpy ------------------------------------------------
copy_traffic=""
if run_step 30 "$LOG_DIR/memcpy.txt" "$BUILD/bin/memcpy_bw" -b $((1 << 30)) -n 20; then
  copy_traffic=$(sed -nE 's/.* traffic_GBps ([0-9.]+).*/\1/p' "$LOG_DIR/memcpy.txt")
  result memcpy PASS "1 GiB D2D: $(sed -nE 's/.*copy_GBps ([0-9.]+).*/\1/p' "$LOG_DIR/memcpy.txt") GB/s copied = $copy_traffic GB/s read+written"
else
  result memcpy FAIL "$(tail -n 2 "$LOG_DIR/memcpy.txt" | tr '\n' ' ')"
fi

# ---- 5. the gpu Check suite ---------------------------------------------------------------------
export BRAID_GPU_SHARING=1
run_step 170 "$LOG_DIR/suite.txt" "$BUILD/bin/braid-tests" gpu
rc=$?
grep -E '^gpu|Checks:|:[EF]:' "$LOG_DIR/suite.txt" | head -n 40
line=$(grep -Eo 'Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$LOG_DIR/suite.txt" | tail -n 1)
if [ "$rc" -eq 0 ] && [ -n "$line" ] && ! grep -q 'skipped' "$LOG_DIR/suite.txt"; then
  result suite PASS "$line"
else
  result suite FAIL "${line:-no Check summary} (exit $rc; suite.txt)"
fi

# ---- 6. all_reduce_perf ------------------------------------------------------------------------
# perf NAME SECONDS ARGS...: one all_reduce_perf run; its output in NAME.txt.
perf() {
  local name=$1 secs=$2
  shift 2
  run_step "$secs" "$LOG_DIR/$name.txt" "$BUILD/bin/all_reduce_perf" "$@"
  local rc=$?
  grep -E '^#  Rank|^ +[0-9]+ ' "$LOG_DIR/$name.txt" | head -n 40
  grep -E 'Out of bounds|Avg bus' "$LOG_DIR/$name.txt"
  return $rc
}
# row FILE BYTES: "time_us busbw #wrong" of the out-of-place result of the row for BYTES.
row() { awk -v b="$2" '$1 == b && NF >= 13 { print $6, $8, $9; exit }' "$1"; }
perf_check() { # perf_check NAME RC
  if [ "$2" -eq 0 ] && grep -q 'Out of bounds values : 0 OK' "$LOG_DIR/$1.txt"; then return 0; fi
  return 1
}

perf ar_p4 90 -b 8 -e 1G -f 2 -n 20 -w 5 -c 1 -P 4
rc=$?
big4=$(row "$LOG_DIR/ar_p4.txt" 1073741824)
if perf_check ar_p4 $rc; then result "all_reduce 4 procs" PASS "8 B..1 GiB, all rows #wrong 0"; else
  result "all_reduce 4 procs" FAIL "exit $rc (ar_p4.txt)"; fi
perf ar_g2 60 -b 8 -e 1G -f 2 -n 20 -w 5 -c 1 -g 2
rc=$?
big2=$(row "$LOG_DIR/ar_g2.txt" 1073741824)
if perf_check ar_g2 $rc; then result "all_reduce 1 proc x 2" PASS "8 B..1 GiB, all rows #wrong 0"; else
  result "all_reduce 1 proc x 2" FAIL "exit $rc (ar_g2.txt)"; fi

# The 8-byte all-reduce with LL: many iterations, target <= 10 us.
NCCL_PROTO=LL perf ll_p4 30 -b 8 -e 8 -n 2000 -w 200 -c 1 -P 4
ll4=$(row "$LOG_DIR/ll_p4.txt" 8 | cut -d' ' -f1)
NCCL_PROTO=LL perf ll_g2 30 -b 8 -e 8 -n 2000 -w 200 -c 1 -g 2
ll2=$(row "$LOG_DIR/ll_g2.txt" 8 | cut -d' ' -f1)
for v in "4 procs:$ll4" "1 proc x 2:$ll2"; do
  t=${v#*:}
  if [ -z "$t" ]; then result "8 B LL ${v%%:*}" FAIL "no result"; continue; fi
  if awk -v t="$t" 'BEGIN { exit !(t <= 10.0) }'; then result "8 B LL ${v%%:*}" PASS "$t us (target <= 10 us)"; else
    result "8 B LL ${v%%:*}" FAIL "$t us (target <= 10 us)"; fi
done

# ---- 7. data movement against cudaMemcpy ----------------------------------------------------------
# How bytes are counted: an all-reduce of S bytes per rank over n ranks must, on each rank, read
# its input (S) and write its output (S), and send and receive 2(n-1)/n x S (ring: reduce-
# scatter then all-gather); each byte sent is written once by one rank's kernels (into the
# peer's buffer) and read once by another's. Per rank: (2 + 4(n-1)/n) x S = (6 - 4/n) x S; all n
# ranks share this one GPU, so the device moves n x (6 - 4/n) x S = (6n - 4) x S bytes in the
# measured time t (out-of-place, 1 GiB row). cudaMemcpy of B bytes moves 2B (read + write).
# Ratio = ((6n - 4) S / t) / (2B / t_copy); target >= 0.85. A real implementation moves at
# least this much (extra staging copies only add traffic), so the ratio is conservative.
ratio_line() { # ratio_line LABEL N "time_us busbw wrong"
  local label=$1 n=$2 t
  t=$(echo "$3" | cut -d' ' -f1)
  if [ -z "$t" ] || [ -z "$copy_traffic" ]; then result "bandwidth $label" FAIL "missing the 1 GiB row or the memcpy figure"; return; fi
  local r
  r=$(awk -v n="$n" -v t="$t" -v c="$copy_traffic" 'BEGIN { s = 1073741824; printf "%.3f %.1f", ((6*n-4)*s/(t*1e-6)/1e9)/c, (6*n-4)*s/(t*1e-6)/1e9 }')
  local ratio=${r% *} moved=${r#* }
  local msg="1 GiB in $t us: $moved GB/s read+written by the kernels vs $copy_traffic GB/s memcpy = ratio $ratio (target >= 0.85)"
  if awk -v x="$ratio" 'BEGIN { exit !(x >= 0.85) }'; then result "bandwidth $label" PASS "$msg"; else result "bandwidth $label" FAIL "$msg"; fi
}
ratio_line "4 procs" 4 "$big4"
ratio_line "1 proc x 2" 2 "$big2"

echo
echo "---- all_reduce_perf, 4 processes sharing the GPU (MPS $MPS) ----"
sed -n '/^#  Rank/,$p' "$LOG_DIR/ar_p4.txt" | grep -v '^$'
finish
