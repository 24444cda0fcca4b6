#!/usr/bin/env bash
# run.sh - braid on a GPU machine, in one go: build for this GPU, run the GPU suite, measure
# all_reduce_perf (1, 2 and 4 ranks) against the device's own cudaMemcpy bandwidth, and end
# with one summary table. See tests/gpu/README.md. Every step runs under `timeout`, within a
# global budget (BUDGET_S, default 420 s) of which the measurements keep a reserved share
# (PERF_S, default 165 s) that the build and the suite cannot eat. Exit 0 when nothing failed,
# skipped parts included (each says why: no GPU, no MPS, ...); 1 when a part failed.
#
#   tests/gpu/run.sh                 # from the repository root or anywhere
#   OUT=/some/dir tests/gpu/run.sh   # also copy the log, outputs and summary there
#
# Environment: BUILD (default build/gpu), BUDGET_S, PERF_S, BRAID_GPU_MPS=0 (never start an
# MPS daemon: the multi-process parts are then skipped), OUT, NCCL_TESTS_DIR (an nccl-tests
# checkout: NVIDIA's all_reduce_perf on braid, section 7; allow BUDGET_S ~600 for its build).
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build/gpu}
BUDGET_S=${BUDGET_S:-420}
PERF_S=${PERF_S:-165}
OUT=${OUT:-}
LOG_DIR=$BUILD/gpu-run
mkdir -p "$LOG_DIR"
LOG=$LOG_DIR/run.log
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
START=$SECONDS
PERF_PHASE=0
SUMMARY=()
PERF_ROWS=()
status=0

say() { echo "[$((SECONDS - START))s] $*"; }
result() { # result PART PASS|FAIL|SKIP DETAIL
  SUMMARY+=("$(printf '%-5s %-24s %s' "$2" "$1" "$3")")
  [ "$2" = FAIL ] && status=1
  say "$2: $1 $3"
}
# run_step SECONDS LOGFILE CMD...: the command under timeout, capped by what is left of the
# budget (before the measurements: of the budget less their reserved share).
run_step() {
  local want=$1 out=$2
  shift 2
  local left=$((BUDGET_S - (SECONDS - START)))
  [ "$PERF_PHASE" -eq 0 ] && left=$((left - PERF_S))
  [ "$left" -lt "$want" ] && want=$left
  if [ "$want" -le 5 ]; then
    echo "(skipped: the budget is spent)" | tee "$out"
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
  stop_mps
  echo
  echo "==================== braid GPU run: summary ===================="
  printf '%s\n' "${SUMMARY[@]}"
  if [ ${#PERF_ROWS[@]} -gt 0 ]; then
    echo
    echo "all_reduce_perf (out of place, float sum; bandwidth = bytes the kernels read and write / memcpy's)"
    printf '%-22s %12s %12s %10s %10s %8s\n' "ranks" "8 B (us)" "1 GiB (us)" "busbw" "GB/s moved" "vs copy"
    printf '%s\n' "${PERF_ROWS[@]}"
  fi
  echo "total $((SECONDS - START)) s; logs in $LOG_DIR${OUT:+ and $OUT}"
  local np nf ns
  np=$(printf '%s\n' "${SUMMARY[@]}" | grep -c '^PASS')
  nf=$(printf '%s\n' "${SUMMARY[@]}" | grep -c '^FAIL')
  ns=$(printf '%s\n' "${SUMMARY[@]}" | grep -c '^SKIP')
  echo "$np passed, $nf failed, $ns skipped"
  [ "$status" -eq 0 ] && echo "GPU RUN: PASS (skipped parts say why)" || echo "GPU RUN: FAIL"
  { printf '%s\n' "${SUMMARY[@]}"; printf '%s\n' "${PERF_ROWS[@]}"; } >"$LOG_DIR/summary.txt"
  save_out
  exit "$status"
}

# ---- MPS ----------------------------------------------------------------------------------------
# Without MPS the kernels of different processes time-slice: every ring hop of a multi-process
# run waits for a slice, and a correctness run of hundreds of calls takes minutes. So the
# multi-process parts run only under MPS: a server already running for this user, or a private
# daemon (pipe and log directories under $BUILD) started here and stopped at the end. The kill
# case runs before MPS starts: killing an MPS client with work in flight leaves the server in
# an undefined state.
MPS=off
MPS_DIR=""
MPS_WHY=""
start_mps() {
  if [ "${BRAID_GPU_MPS:-1}" = 0 ]; then MPS_WHY="BRAID_GPU_MPS=0"; return 1; fi
  if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then MPS_WHY="nvidia-cuda-mps-control not installed"; return 1; fi
  if echo get_server_list | timeout 5 nvidia-cuda-mps-control >/dev/null 2>&1; then
    MPS=on
    say "an MPS control daemon is already running: using it"
    return 0
  fi
  MPS_DIR=$(cd "$BUILD" && pwd)/mps
  mkdir -p "$MPS_DIR/pipe" "$MPS_DIR/log"
  export CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log
  if timeout 10 nvidia-cuda-mps-control -d && run_step 20 "$LOG_DIR/mps-probe.txt" "$BUILD/bin/memcpy_bw" --probe; then
    MPS=on
    return 0
  fi
  MPS_WHY="the MPS daemon did not come up ($(tail -n 1 "$MPS_DIR/log/control.log" 2>/dev/null))"
  stop_mps
  return 1
}
mps_healthy() { # a client still gets a context
  [ "$MPS" = on ] || return 0
  run_step 20 "$LOG_DIR/mps-health.txt" "$BUILD/bin/memcpy_bw" --probe
}
stop_mps() {
  [ -n "$MPS_DIR" ] || return 0
  echo quit | timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  MPS_DIR=""
}

# ---- 1. the GPU ---------------------------------------------------------------------------------
say "braid GPU run on $(hostname), $(nproc) cores, budget ${BUDGET_S}s (${PERF_S}s kept for the measurements)"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! timeout 30 nvidia-smi -L >"$LOG_DIR/nvidia-smi.txt" 2>&1 ||
  ! grep -q '^GPU ' "$LOG_DIR/nvidia-smi.txt"; then
  why=$(head -n 1 "$LOG_DIR/nvidia-smi.txt" 2>/dev/null)
  command -v nvidia-smi >/dev/null 2>&1 || why="nvidia-smi is not installed"
  result gpu SKIP "no GPU here (${why:-nvidia-smi lists no device}): nothing to build or run"
  for part in build suite "torch ddp" "all_reduce_perf" bandwidth nccl-tests; do result "$part" SKIP "no GPU"; done
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

# ---- 2. build for this GPU only: the library first, then the GPU suite (no libcheck needed) ------
export PATH=$PATH:/usr/local/cuda/bin
if ! command -v nvcc >/dev/null 2>&1; then
  result build FAIL "nvcc not found (PATH, /usr/local/cuda/bin): cannot build the kernels"
  finish
fi
J=$(nproc)
if run_step 150 "$LOG_DIR/build.txt" make -j"$J" BUILD="$BUILD" NVCC_GENCODE="$GENCODE" all; then
  result build PASS "make all, NVCC_GENCODE=$GENCODE ($((SECONDS - START)) s so far)"
else
  tail -n 30 "$LOG_DIR/build.txt"
  result build FAIL "make all failed or timed out (build.txt)"
  finish
fi
gcc -std=gnu11 -O2 -Wall -D_GNU_SOURCE -DBRAID_NO_CUDA_HEADERS -Iinclude -Ibench/common tests/gpu/memcpy_bw.c \
  bench/common/cuda_rt.c -ldl -lpthread -o "$BUILD/bin/memcpy_bw" >>"$LOG_DIR/build.txt" 2>&1 ||
  result memcpy_bw FAIL "could not build tests/gpu/memcpy_bw.c (build.txt)"
SUITE_BIN=""
if run_step 60 "$LOG_DIR/build-suite.txt" make -j"$J" BUILD="$BUILD" NVCC_GENCODE="$GENCODE" "$BUILD/bin/braid-gpu-tests"; then
  SUITE_BIN=$BUILD/bin/braid-gpu-tests
else
  tail -n 20 "$LOG_DIR/build-suite.txt"
  result "suite build" FAIL "the GPU suite did not build (build-suite.txt): suite parts skipped"
fi
if NVCC_GENCODE="$GENCODE" run_step 30 "$LOG_DIR/cubins.txt" tests/cuda/cubins.sh "$BUILD"; then
  result cubins PASS "$(tail -n 1 "$LOG_DIR/cubins.txt")"
else
  result cubins FAIL "$(grep FAIL "$LOG_DIR/cubins.txt" | head -n 1) $(tail -n 1 "$LOG_DIR/cubins.txt")"
fi
if run_step 20 "$LOG_DIR/ptxas.txt" tests/cuda/ptxas.sh "$BUILD"; then
  result spills PASS "$(tail -n 1 "$LOG_DIR/ptxas.txt") (ptxas.txt: registers and stack per kernel)"
else
  result spills FAIL "$(grep FAIL "$LOG_DIR/ptxas.txt" | head -n 1 | cut -c1-120)"
fi
if ! run_step 30 "$LOG_DIR/probe.txt" "$BUILD/bin/memcpy_bw" --probe; then
  cat "$LOG_DIR/probe.txt"
  result cuda FAIL "no CUDA context: $(tail -n 1 "$LOG_DIR/probe.txt")"
  finish
fi
result cuda PASS "$(tail -n 1 "$LOG_DIR/probe.txt" | sed 's/^memcpy_bw: //')"

# suite NAME SECONDS CASES...: the GPU suite's cases (braid-gpu-tests CASE[:FROM-TO]).
suite() {
  local name=$1 secs=$2
  shift 2
  if [ -z "$SUITE_BIN" ]; then result "suite $name" SKIP "the suite did not build"; return; fi
  BRAID_GPU_SHARING=1 run_step "$secs" "$LOG_DIR/suite-$name.txt" "$SUITE_BIN" "$@"
  local rc=$? line
  grep -E '^gpu:|Assertion|did not|failed' "$LOG_DIR/suite-$name.txt" | head -n 30
  line=$(grep -Eo '^[0-9]+ passed, [0-9]+ failed' "$LOG_DIR/suite-$name.txt" | tail -n 1)
  if [ "$rc" -eq 0 ] && [ -n "$line" ]; then result "suite $name" PASS "$line ($*)"; else
    result "suite $name" FAIL "${line:-no summary} (exit $rc; suite-$name.txt)"; fi
}

# ---- 3. the suite without MPS: one process, and the kill case ----------------------------------
suite oneproc 80 matrix:6-9
suite nvls-oneproc 40 nvls:0-1
suite abort 45 abort:0-1

# ---- 4. MPS, then the multi-process parts -------------------------------------------------------
if start_mps; then
  result mps PASS "MPS on${MPS_DIR:+ (private daemon, $MPS_DIR)}"
  suite procs 90 matrix:0-5 graph nonblock
  suite nvls-procs 60 nvls:2-5
  if mps_healthy; then result "mps health" PASS "a client still gets a context after the suite"; else
    result "mps health" FAIL "no context through MPS after the suite (mps-health.txt)"; fi
else
  result mps SKIP "no MPS: $MPS_WHY"
  result "suite procs" SKIP "no MPS: 2 and 4 processes sharing the GPU would time-slice every ring hop"
fi

# ---- 4b. PyTorch: its own `nccl` backend on braid (preloaded), a 2-rank DDP step on this GPU -----
# The same steps on Gloo are the reference: the final losses must agree (summation order aside).
ddp() { # ddp NAME SECONDS ENV... -- ARGS...: torchrun of tests/gpu/ddp_step.py, 2 ranks
  local name=$1 secs=$2 envs=()
  shift 2
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  run_step "$secs" "$LOG_DIR/ddp-$name.txt" env "${envs[@]}" python3 -m torch.distributed.run --nproc-per-node 2 \
    --master-port $((29500 + RANDOM % 1000)) tests/gpu/ddp_step.py "$@"
}
if ! timeout 60 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >"$LOG_DIR/torch.txt" 2>&1; then
  result "torch ddp" SKIP "no torch with CUDA here ($(tail -n 1 "$LOG_DIR/torch.txt"))"
else
  lib=$(cd "$BUILD/lib" && pwd)/libnccl.so.2
  ddp braid 75 BRAID_GPU_SHARING=1 LD_PRELOAD="$lib" NCCL_DEBUG=WARN -- --expect-lib "$lib"
  rc=$?
  ddp gloo 75 CUDA_VISIBLE_DEVICES=0 -- --backend gloo
  lb=$(sed -nE 's/^final loss ([0-9.e+-]+).*/\1/p' "$LOG_DIR/ddp-braid.txt")
  lg=$(sed -nE 's/^final loss ([0-9.e+-]+).*/\1/p' "$LOG_DIR/ddp-gloo.txt")
  grep -E '^torch |^final loss|FAIL|Error|error' "$LOG_DIR/ddp-braid.txt" | head -n 8
  if [ "$rc" -ne 0 ] || [ -z "$lb" ]; then
    result "torch ddp" FAIL "init_process_group(\"nccl\") + DDP on braid failed (exit $rc; ddp-braid.txt)"
  elif [ -z "$lg" ]; then
    result "torch ddp" PASS "final loss $lb on braid (the Gloo reference did not run: ddp-gloo.txt)"
  elif awk -v a="$lb" -v b="$lg" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * (b < 0 ? -b : b) + 1e-6) }'; then
    result "torch ddp" PASS "2 ranks, 1 GPU, 20 steps: final loss $lb on braid = $lg on Gloo"
  else
    result "torch ddp" FAIL "final loss $lb on braid, $lg on Gloo (ddp-*.txt)"
  fi
fi

# ---- 5. measurements: cudaMemcpy, then all_reduce_perf with 1, 2 and 4 ranks --------------------
PERF_PHASE=1
copy_traffic=""
if run_step 20 "$LOG_DIR/memcpy.txt" "$BUILD/bin/memcpy_bw" -b $((1 << 30)) -n 20; then
  copy_traffic=$(sed -nE 's/.* traffic_GBps ([0-9.]+).*/\1/p' "$LOG_DIR/memcpy.txt")
  result memcpy PASS "1 GiB D2D: $(sed -nE 's/.*copy_GBps ([0-9.]+).*/\1/p' "$LOG_DIR/memcpy.txt") GB/s copied = $copy_traffic GB/s read+written"
else
  result memcpy FAIL "$(tail -n 2 "$LOG_DIR/memcpy.txt" | tr '\n' ' ')"
fi
# row FILE BYTES: "time_us busbw #wrong" of the out-of-place result of the row for BYTES.
row() { awk -v b="$2" '$1 == b && NF >= 13 { print $6, $8, $9; exit }' "$1"; }
# Bytes the kernels of n ranks sharing the GPU move for an all-reduce of S bytes each: every
# rank reads its input and writes its output (2S) and sends and receives 2(n-1)/n S, each byte
# written once into the peer's buffer and read once from it: (6n - 4) S; one rank: 2S.
moved() { awk -v n="$1" 'BEGIN { print (n == 1 ? 2 : 6 * n - 4) }'; }
# perf LABEL N SECONDS ARGS...: one all_reduce_perf run (8 B..1 GiB), a table row.
perf() {
  local label=$1 n=$2 secs=$3 name
  shift 3
  name=ar_$(echo "$label" | tr -c 'a-z0-9' '_')
  run_step "$secs" "$LOG_DIR/$name.txt" "$BUILD/bin/all_reduce_perf" -b 8 -e 1G -f 4 -n 10 -w 3 -c 1 "$@"
  local rc=$?
  grep -E '^#  Rank|^ +[0-9]+ ' "$LOG_DIR/$name.txt" | head -n 20
  if [ "$rc" -ne 0 ] || ! grep -q 'Out of bounds values : 0 OK' "$LOG_DIR/$name.txt"; then
    result "all_reduce $label" FAIL "exit $rc ($name.txt)"
    return
  fi
  local small big t bw ratio mv
  small=$(row "$LOG_DIR/$name.txt" 8 | cut -d' ' -f1)
  big=$(row "$LOG_DIR/$name.txt" 1073741824)
  t=$(echo "$big" | cut -d' ' -f1)
  bw=$(echo "$big" | cut -d' ' -f2)
  mv=$(awk -v k="$(moved "$n")" -v t="$t" 'BEGIN { if (t > 0) printf "%.1f", k * 1073741824 / (t * 1e-6) / 1e9 }')
  ratio=$(awk -v m="$mv" -v c="$copy_traffic" 'BEGIN { if (c > 0 && m > 0) printf "%.3f", m / c; else print "-" }')
  PERF_ROWS+=("$(printf '%-22s %12s %12s %10s %10s %8s' "$label" "${small:--}" "${t:--}" "${bw:--}" "${mv:--}" "$ratio")")
  result "all_reduce $label" PASS "8 B..1 GiB #wrong 0; 8 B $small us (target < 10); 1 GiB moves $mv GB/s = $ratio of memcpy (target 0.85)"
}
perf "1 rank" 1 25 -g 1
# One rank computing (AVG: a kernel over up to 64 blocks; the plain row above is cudaMemcpyAsync).
perf "1 rank, avg" 1 15 -g 1 -o avg
perf "1 proc x 2 ranks" 2 30 -g 2
if [ "$MPS" = on ]; then
  perf "4 procs (MPS)" 4 40 -P 4
  mps_healthy || result "mps health" FAIL "no context through MPS after all_reduce_perf -P 4"
else
  result "all_reduce 4 procs" SKIP "no MPS: $MPS_WHY"
fi
# More channels than the graph gives ranks sharing a GPU (16 for 2: graph_build.c; the tuner
# caps at the communicator's): how it scales.
NCCL_MIN_NCHANNELS=32 perf "1 proc x 2, 32 channels" 2 20 -g 2
# One-shot / two-shot (NCCL_ALGO=NVLS: up to BRAID_LSA_MAX_BYTES, 512 KiB) next to the ring at
# the sizes they are for: 8 B and 512 KiB times (tuner_tables.h's device LSA row is an estimate
# these replace).
perf_small() {
  local label=$1 secs=$2 name
  shift 2
  name=ar_small_$(echo "$label" | tr -c 'a-z0-9' '_')
  run_step "$secs" "$LOG_DIR/$name.txt" "$BUILD/bin/all_reduce_perf" -b 8 -e 512K -f 8 -n 100 -w 10 -c 1 -g 2
  local rc=$?
  grep -E '^ +[0-9]+ ' "$LOG_DIR/$name.txt" | head -n 8
  if [ "$rc" -ne 0 ] || ! grep -q 'Out of bounds values : 0 OK' "$LOG_DIR/$name.txt"; then
    result "all_reduce $label" FAIL "exit $rc ($name.txt)"
    return
  fi
  result "all_reduce $label" PASS "#wrong 0; 8 B $(row "$LOG_DIR/$name.txt" 8 | cut -d' ' -f1) us, 512 KiB $(row "$LOG_DIR/$name.txt" 524288 | cut -d' ' -f1) us"
}
NCCL_ALGO=Ring perf_small "1 proc x 2, Ring <= 512K" 15
NCCL_ALGO=NVLS BRAID_LSA_VARIANT=ONESHOT perf_small "1 proc x 2, one-shot" 15
NCCL_ALGO=NVLS BRAID_LSA_VARIANT=TWOSHOT perf_small "1 proc x 2, two-shot" 15

# ---- 7. NVIDIA's nccl-tests, unmodified, on braid (issue 19) ---------------------------------------
# NCCL_TESTS_DIR: an nccl-tests checkout (the machine has no network: bring it along). nccl-tests
# puts rank i of a process on GPU i, so ranks sharing the one GPU are MPI processes with
# NCCL_TESTS_DEVICE=0: built with MPI=1 (MPI_HOME from mpicc), run with mpirun -np 2 and 4, then
# with -R 2 -D 1 / -D 2 (its LSA device kernels: ncclDevCommCreate, LSA barriers, peer pointers).
nccl_tests() {
  if [ -z "${NCCL_TESTS_DIR:-}" ]; then result nccl-tests SKIP "NCCL_TESTS_DIR not set (an nccl-tests checkout)"; return; fi
  if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
    result nccl-tests SKIP "no MPI (mpicc, mpirun): nccl-tests cannot put several ranks on one GPU without it"
    return
  fi
  local mpi_home
  mpi_home=$(dirname "$(dirname "$(mpicc --showme:incdirs 2>/dev/null | awk '{print $1}')/x")")
  [ -d "$mpi_home/include" ] || mpi_home=$(dirname "$(dirname "$(command -v mpicc)")")
  if ! NVCC_GENCODE="$GENCODE" JOBS="$J" NCCL_TESTS_MAKE_ARGS="MPI=1 MPI_HOME=$mpi_home" OUTDIR="$BUILD/nccl-tests" \
    run_step 240 "$LOG_DIR/nccl-tests-build.txt" tests/compat/nccl-tests.sh "$NCCL_TESTS_DIR" "$BUILD"; then
    tail -n 20 "$LOG_DIR/nccl-tests-build.txt"
    result "nccl-tests build" FAIL "tests/compat/nccl-tests.sh (nccl-tests-build.txt)"
    return
  fi
  result "nccl-tests build" PASS "$(grep 'binaries:' "$LOG_DIR/nccl-tests-build.txt" | cut -c1-100)"
  local n d args out small wrong
  for n in 2 4; do
    for d in 0 1 2; do
      args=(-b 8 -e 16M -f 4 -c 1 -n 20 -w 5)
      [ "$d" -gt 0 ] && args+=(-R 2 -D "$d")
      out=$LOG_DIR/nccl-tests-ar-np$n-D$d.txt
      run_step 60 "$out" mpirun --allow-run-as-root --oversubscribe -np "$n" -x NCCL_TESTS_DEVICE=0 \
        -x LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BUILD/nccl-tests/build/all_reduce_perf" "${args[@]}"
      local rc=$?
      grep -E '^ +[0-9]+ ' "$out" | head -n 8
      small=$(awk '$1 == 8 && NF >= 13 { print $6; exit }' "$out")
      wrong=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 { w += $9 + $13 } END { print w + 0 }' "$out")
      if [ "$rc" -eq 0 ] && grep -q 'Out of bounds values : 0 OK' "$out" && [ "$wrong" = 0 ]; then
        result "nccl-tests ar np$n D$d" PASS "#wrong 0; 8 B ${small:--} us (one-shot target < 10 us)"
      else
        result "nccl-tests ar np$n D$d" FAIL "exit $rc, #wrong $wrong ($(basename "$out"))"
      fi
    done
  done
}
if [ "$MPS" = on ]; then nccl_tests; else result nccl-tests SKIP "no MPS: $MPS_WHY"; fi
finish
