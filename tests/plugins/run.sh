#!/usr/bin/env bash
# run.sh - tuner plugins (NCCL_TUNER_PLUGIN): the test tuner of tests/plugins/test_tuner.c,
# built once per ABI version (v2..v6), loaded by all_reduce_perf / broadcast_perf on 2 ranks
# (NCCL_COMM_ID, one node), checked through the INFO lines: the version loaded, every
# AllReduce TUNING line carrying the forced Ring / LL / one channel (a run without the plugin
# must choose otherwise, or the check proves nothing), the ignored NVLS request for Broadcast,
# and correct results (the benchmarks' exit status, -c 1). v6's chunk size: over the network
# (NCCL_SHM_DISABLE, NCCL_P2P_DISABLE), NET TRACE lines show every step smaller than v5's
# (braid's own chunk) and braid's INFO names the 3968 bytes it took of the plugin's 4000.
#
# Usage: tests/plugins/run.sh [BUILD]    Prints "N passed, N failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-${BUILD:-build}}
CC=${CC:-cc}
[ -x "$BUILD/bin/all_reduce_perf" ] || { echo "plugins: SKIPPED: $BUILD/bin/all_reduce_perf is missing: build first"; echo "0 passed, 0 failed"; exit 0; }
OUT=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$OUT"' EXIT
for v in 2 3 4 5 6; do
  $CC -shared -fPIC -fvisibility=hidden -Iinclude -Isrc -DBRAID_NO_CUDA_HEADERS -DTUNER_V=$v \
    -o "$OUT/libnccl-tuner-test$v.so" tests/plugins/test_tuner.c || { echo "plugins: cannot build the test tuner"; echo "0 passed, 1 failed"; exit 1; }
done

passed=0
failed=0
# run NAME BENCH "ENV...": 2 ranks of BENCH (8 B .. 1 MiB; ENV wins over the defaults), rank 0's log in $OUT/NAME.0
run() {
  local name=$1 bench=$2 env=$3 port r pids=() rc=0
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 12000)))
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 NCCL_COMM_ID=127.0.0.1:$port NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO \
      NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING $env timeout 60 "$BUILD/bin/$bench" -b 8 -e 1M -f 4 -c 1 -w 1 -n 2 \
      >"$OUT/$name.$r" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do wait "${pids[$r]}" || rc=$?; done
  return $rc
}
verdict() { # NAME PROBLEMS
  if [ -z "$2" ]; then
    passed=$((passed + 1))
    echo "plugins: $1: ok"
  else
    failed=$((failed + 1))
    echo "plugins: $1: FAILED:$2"
    grep -E "TUNER|TUNING|WARN" "$OUT/$1.0" | head -n 12
  fi
}
FORCED='Algo Ring proto LL channel{Lo..Hi}={0..0}'

run control all_reduce_perf "" || true
bad=""
grep -q 'AllReduce: .* Bytes -> Algo' "$OUT/control.0" || bad="$bad no TUNING line;"
[ "$(grep 'AllReduce: .* Bytes -> Algo' "$OUT/control.0" | grep -cvF "$FORCED")" -gt 0 ] ||
  bad="$bad braid alone already picks the forced choice everywhere: the check would prove nothing;"
verdict control "$bad"

for v in 2 3 4 5 6; do
  name=tuner-v$v
  bad=""
  run $name all_reduce_perf "NCCL_TUNER_PLUGIN=$OUT/libnccl-tuner-test$v.so" || bad="$bad exit status $?;"
  grep -q "TUNER/Plugin: Using braid-test-tuner (v$v)" "$OUT/$name.0" || bad="$bad no 'Using braid-test-tuner (v$v)';"
  grep -q "braid-test-tuner: getCollInfo call" "$OUT/$name.0" || bad="$bad the plugin was never asked;"
  lines=$(grep -c 'AllReduce: .* Bytes -> Algo' "$OUT/$name.0")
  forced=$(grep 'AllReduce: .* Bytes -> Algo' "$OUT/$name.0" | grep -cF "$FORCED")
  [ "$lines" -gt 0 ] && [ "$forced" = "$lines" ] || bad="$bad $forced of $lines AllReduce TUNING lines show the forced choice;"
  verdict $name "$bad"

  name=ignored-v$v
  bad=""
  run $name broadcast_perf "NCCL_TUNER_PLUGIN=$OUT/libnccl-tuner-test$v.so" || bad="$bad exit status $?;"
  grep -q "TUNER/Plugin: braid-test-tuner .* algorithm 4 protocol 2, which braid does not run here (ignored" \
    "$OUT/$name.0" || bad="$bad no 'ignored' line for NVLS;"
  grep -q 'Broadcast: .* Bytes -> Algo Ring' "$OUT/$name.0" || bad="$bad Broadcast did not keep braid's Ring;"
  verdict $name "$bad"
done

# the largest network step (bytes) in a log of NET TRACE lines
max_step() { grep -o 'sent step [0-9]* ([0-9]* bytes)' "$1" | tr -d '(' | awk '$4 > m { m = $4 } END { print m + 0 }'; }
NETRUN="NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_DEBUG=TRACE NCCL_DEBUG_SUBSYS=INIT,TUNING,NET"
for v in 5 6; do run chunk-v$v all_reduce_perf "$NETRUN NCCL_TUNER_PLUGIN=$OUT/libnccl-tuner-test$v.so" || echo "chunk-v$v: exit status $?" >>"$OUT/chunk-v$v.0"; done
name=chunk-v6
bad=""
grep -q "exit status" "$OUT/chunk-v5.0" "$OUT/chunk-v6.0" && bad="$bad a run failed;"
grep -q "Using network Socket" "$OUT/chunk-v6.0" || bad="$bad not over the network;"
grep -q "braid-test-tuner asked for 4000-byte chunks .*braid uses 3968-byte steps" "$OUT/$name.0" || bad="$bad no 'braid uses 3968-byte steps';"
m5=$(max_step "$OUT/chunk-v5.0") m6=$(max_step "$OUT/chunk-v6.0")
[ "$m6" -gt 0 ] && [ "$m6" -lt "$m5" ] || bad="$bad largest step $m6 bytes with v6's chunk, $m5 without;"
verdict $name "$bad"

name=search
bad=""
run $name all_reduce_perf "LD_LIBRARY_PATH=$OUT NCCL_TUNER_PLUGIN=test5" || bad="$bad exit status $?;"
grep -q "Successfully loaded external tuner plugin .*libnccl-tuner-test5.so" "$OUT/$name.0" || bad="$bad libnccl-tuner-test5.so not found by its short name;"
verdict $name "$bad"

name=missing
bad=""
run $name all_reduce_perf "NCCL_TUNER_PLUGIN=braid_nothere" || bad="$bad exit status $?;"
grep -q "TUNER/Plugin: Could not find: braid_nothere libnccl-tuner-braid_nothere.so" "$OUT/$name.0" || bad="$bad no 'Could not find';"
verdict $name "$bad"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
