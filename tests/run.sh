#!/usr/bin/env bash
# run.sh - the whole test suite, as `make test` runs it: the Check suites (build/bin/braid-tests),
# the network suite once more with BRAID_NET_DIRECT=0, the ABI and export checks, the CUDA
# kernels' cubins and ptxas reports (spills), nccl_device.h's device code (tests/cuda/devapi.sh), the GPU run's no-GPU path (it skips), the
# benchmark output checks, a short fuzzing round (fuzz/), and last that the suite left nothing
# of braid's in /dev/shm. Ends with one line
# "N passed, N failed" summing every case of every part; exits non-zero if anything failed.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
passed=0
failed=0
tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"; rm -f "${shm_before:-}"' EXIT

# checks_of LOG: "N F E" from the last Check summary ("Checks: N, Failures: F, Errors: E") in
# LOG, or nothing.
checks_of() {
  grep -Eo 'Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$1" | tail -n 1 |
    sed -E 's/Checks: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+)/\1 \2 \3/'
}

# part NAME COMMAND... : run one part, add its counts. A part prints either Check's summary
# ("Checks: N, Failures: F, Errors: E") or a "N passed, N failed" line; with neither, its exit
# status counts as one case.
part() {
  local name=$1
  shift
  echo "== $name: $*"
  local start=$SECONDS log
  log=$(mktemp -p "$tmpdir")
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local p f
  if line=$(checks_of "$log") && [ -n "$line" ]; then
    read -r p f e <<<"$line"
    f=$((f + e))
    p=$((p - f))
  elif line=$(grep -Eo '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1) && [ -n "$line" ]; then
    read -r p f <<<"$(echo "$line" | sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/')"
  elif [ "$rc" -eq 0 ]; then
    p=1 f=0
  else
    p=0 f=1
  fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + p))
  failed=$((failed + f))
  echo "== $name: $p passed, $f failed ($((SECONDS - start)) s)"
  rm -f "$log"
}

# bg_part NAME COMMAND... : run one part in the background (its output kept until bg_wait), for
# a wait-bound part beside CPU-bound ones; bg_wait prints it and adds its counts.
bg_part() {
  bg_name=$1
  bg_log=$(mktemp -p "$tmpdir")
  (part "$@") >"$bg_log" 2>&1 &
  bg_pid=$!
}
bg_wait() {
  wait "$bg_pid"
  cat "$bg_log"
  local line p f
  line=$(grep -E "^== $bg_name: [0-9]+ passed, [0-9]+ failed" "$bg_log" | tail -n 1)
  if [ -n "$line" ]; then
    read -r p f <<<"$(echo "$line" | sed -E 's/^== [^:]*: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/')"
  else
    p=0 f=1 # it died before its summary
  fi
  passed=$((passed + p))
  failed=$((failed + f))
}

# Nothing the suite runs may leave shared memory behind (FIFO segments, fake-GPU memory), not
# even the cases that kill -9 a rank: what /dev/shm holds of braid's afterwards that it did not
# hold before is one failed case.
shm_list() { ls /dev/shm 2>/dev/null | grep '^braid-' | sort; }
shm_before=$(mktemp)
shm_list >"$shm_before"
shm_check() {
  local left
  left=$(shm_list | comm -13 "$shm_before" -)
  if [ -n "$left" ]; then
    echo "left in /dev/shm by the suite:"
    echo "$left" | sed 's/^/  /'
    return 1
  fi
  echo "/dev/shm: nothing left behind"
}

# The unit suites as two processes at once (without arguments): the wait-bound suites, which
# spend most of their time asleep until a deadline (kill -9 and timeout cases, the watchdog),
# beside the CPU-bound rest, so their waiting costs no wall time on 2 cores. Both print Check's
# summary; unit_pair ends with their sum. BRAID_TEST_SERIAL=1 runs them as one process.
# ALONE_SUITES run afterwards with nothing beside them: they pick a free port, close it and have
# the bootstrap root bind it (NCCL_COMM_ID), which a concurrent suite's connection can take in
# between (seen once: test_fault's init failed with no allocation failure logged).
WAIT_SUITES="net watchdog rma_net init_fail init_kill blame flight net_nccl lsa_line"
ALONE_SUITES="bootstrap fault"
unit_pair() {
  local bin=$1 all s wait_list=() cpu_list=() alone_list=() wlog clog alog
  all=$("$bin" --list) || return 1
  for s in $all; do
    case " $WAIT_SUITES " in
    *" $s "*) wait_list+=("$s") ;;
    *)
      case " $ALONE_SUITES " in
      *" $s "*) alone_list+=("$s") ;;
      *) cpu_list+=("$s") ;;
      esac
      ;;
    esac
  done
  wlog=$(mktemp -p "$tmpdir") clog=$(mktemp -p "$tmpdir")
  "$bin" "${wait_list[@]}" >"$wlog" 2>&1 &
  local wpid=$!
  "$bin" "${cpu_list[@]}" 2>&1 | tee "$clog"
  local crc=${PIPESTATUS[0]}
  wait "$wpid"
  local wrc=$?
  echo "== the wait-bound suites, run beside the others: ${wait_list[*]}"
  cat "$wlog"
  echo "== the suites run alone: ${alone_list[*]}"
  alog=$(mktemp -p "$tmpdir")
  local arc=0
  if [ ${#alone_list[@]} -gt 0 ]; then
    "$bin" "${alone_list[@]}" 2>&1 | tee "$alog"
    arc=${PIPESTATUS[0]}
  else
    echo "Checks: 0, Failures: 0, Errors: 0" >"$alog"
  fi
  local n=0 f=0 e=0 one
  for one in "$clog" "$wlog" "$alog"; do
    line=$(checks_of "$one")
    if [ -z "$line" ]; then
      e=$((e + 1)) # a shard that died before its summary is one error
      continue
    fi
    read -r a b c <<<"$line"
    n=$((n + a)) f=$((f + b)) e=$((e + c))
  done
  rm -f "$wlog" "$clog" "$alog"
  echo "all three runs: Checks: $n, Failures: $f, Errors: $e"
  [ "$crc" -eq 0 ] && [ "$wrc" -eq 0 ] && [ "$arc" -eq 0 ]
}
if [ $# -eq 0 ] && [ "${BRAID_TEST_SERIAL:-0}" != 1 ]; then
  part unit unit_pair "$BUILD/bin/braid-tests"
else
  part unit "$BUILD/bin/braid-tests" "$@"
fi
if [ $# -eq 0 ]; then
  # The network suite again with the host-only zero-copy path off (kernels/direct.h: the plain
  # primitives on every network connection).
  # (In the background: mostly kill and timeout cases asleep until their deadlines, beside the
  # CPU-bound collective runs below.)
  bg_part net-nodirect env BRAID_NET_DIRECT=0 CK_RUN_SUITE=net "$BUILD/bin/braid-tests"
  # The collective suite again with the shm direct path forced on (every Simple step between
  # local ranks by pointer, transport/shm.c) and with cross-memory attach denied by a seccomp
  # filter (tests/shm/deny-cma.c: the FIFO fallback); AUTO ran above, OFF in shm_direct.
  part coll-shm-direct-on env BRAID_SHM_DIRECT=ON CK_RUN_SUITE=coll "$BUILD/bin/braid-tests"
  # And with every host output of 4 KiB pieces and more written by non-temporal stores
  # (kernels/reduce_stream.c; by default only outputs of a quarter of the LLC and more).
  part coll-stream env BRAID_STREAM_BYTES=1 CK_RUN_SUITE=coll "$BUILD/bin/braid-tests"
  if cc -O2 -Wall -Wextra -o "$BUILD/bin/deny-cma" tests/shm/deny-cma.c; then
    part coll-cma-denied env CK_RUN_SUITE=coll "$BUILD/bin/deny-cma" "$BUILD/bin/braid-tests"
  else
    echo "FAIL coll-cma-denied: tests/shm/deny-cma.c does not compile"
    failed=$((failed + 1))
  fi
  # The one-/two-shot all-reduce in device mode: the same cases over the fake GPU's device
  # memory scratch (core/sym/lsa.c, kernels/lsa.h; test_lsa_device.c has the device-only rules).
  part coll-nvls-fake-gpu env BRAID_FAKE_GPU=1 BRAID_GPU_SHARING=1 CK_RUN_SUITE=coll CK_RUN_CASE=nvls "$BUILD/bin/braid-tests"
  part coll-nvls-premul-fake-gpu env BRAID_FAKE_GPU=1 BRAID_GPU_SHARING=1 CK_RUN_SUITE=coll CK_RUN_CASE=nvls-premul \
    "$BUILD/bin/braid-tests"
  bg_wait # net-nodirect
  part format tests/format-check.sh
  part abi tests/abi/check.sh
  part exports tests/abi/exports.sh "$BUILD"
  part torch-imports tests/abi/torch-imports.sh "$BUILD"
  [ -x tests/cuda/cubins.sh ] && part cubins tests/cuda/cubins.sh "$BUILD"
  # No spills on any architecture (sm_100's kernels are bound to 384 threads: kernel.cuh).
  [ -x tests/cuda/ptxas.sh ] && part ptxas tests/cuda/ptxas.sh "$BUILD"
  # The device half of include/nccl_device.h, for every architecture (issue 19).
  [ -x tests/cuda/devapi.sh ] && part devapi tests/cuda/devapi.sh
  # Without a GPU the GPU run only says what it skips (its parts count as skipped, not passed);
  # on a GPU machine it is run by hand (tests/gpu/README.md).
  command -v nvidia-smi >/dev/null 2>&1 || part gpu-run env BUILD="$BUILD/gpu" tests/gpu/run.sh
  [ -x tests/bench/run.sh ] && part bench tests/bench/run.sh "$BUILD"
  [ -x tests/plan/run.sh ] && part plan tests/plan/run.sh "$BUILD"
  [ -x tests/topo/run.sh ] && part topo-cli tests/topo/run.sh "$BUILD"
  [ -x tests/param/run.sh ] && part param tests/param/run.sh "$BUILD"
  [ -x tests/net/plugin.sh ] && part net-plugin tests/net/plugin.sh "$BUILD"
  [ -x tests/plugins/run.sh ] && part plugins tests/plugins/run.sh "$BUILD"
  [ -x tests/net/netns.sh ] && part netns tests/net/netns.sh "$BUILD"
  # a short round of every libFuzzer target (make fuzz runs them longer)
  [ -d "$BUILD/fuzz/bin" ] && part fuzz fuzz/run.sh "$BUILD/fuzz" "${FUZZ_SECONDS:-5}"
  part shm-leftovers shm_check
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
