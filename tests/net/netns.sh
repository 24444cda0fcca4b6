#!/usr/bin/env bash
# netns.sh - braid's network transport between real interfaces: two network namespaces joined
# by a veth pair (optionally rate-limited with tc), two ranks in each, every collective checked.
#
# Each namespace is a node (its own NCCL_HOSTID): the two ranks inside talk over shared memory,
# the namespaces over sockets on the veth pair (NCCL_SOCKET_IFNAME names the veth end). The
# ranks are the nccl-tests-compatible benchmarks of $BUILD/bin, launched through the launcher
# variables (RANK, WORLD_SIZE, NCCL_COMM_ID at rank 0's address); each must exit 0 with
# "Out of bounds values : 0 OK", and rank 0's log must show both transports at work.
#
# Usage: tests/net/netns.sh [BUILD]          (BUILD: the build directory, default build)
# Environment: NETNS_RATE   e.g. 500mbit: a tbf qdisc on both veth ends (default: none)
#              NETNS_MAX    largest message (default 4M)
#              NETNS_TIMEOUT seconds per collective (default 120)
# Needs root, iproute2 (ip netns, veth) and tc for a rate; skips with a message otherwise.
# Prints "N passed, N failed" like the other parts of tests/run.sh; exits non-zero on failure.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-${BUILD:-build}}
RATE=${NETNS_RATE:-}
MAX=${NETNS_MAX:-4M}
TIMEOUT=${NETNS_TIMEOUT:-120}
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"

skip() {
  echo "netns: SKIPPED: $*"
  echo "0 passed, 0 failed"
  exit 0
}

[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces and a veth pair"
command -v ip >/dev/null 2>&1 || skip "needs iproute2 (the ip command)"
[ -z "$RATE" ] || command -v tc >/dev/null 2>&1 || skip "NETNS_RATE=$RATE needs tc (iproute2)"
for c in $COLLS; do
  [ -x "$BUILD/bin/${c}_perf" ] || skip "$BUILD/bin/${c}_perf is missing: build first (make, or BUILD=dir)"
done

ID=$$
NS1=braid-a-$ID
NS2=braid-b-$ID
IF1=brda$ID
IF2=brdb$ID
ADDR1=10.213.0.1
ADDR2=10.213.0.2
OUT=$(mktemp -d)

cleanup() {
  ip netns del "$NS1" 2>/dev/null
  ip netns del "$NS2" 2>/dev/null # takes its veth end, and so the pair, with it
  rm -rf "$OUT"
}
trap cleanup EXIT

ip netns add "$NS1" 2>"$OUT/err" || skip "cannot create a network namespace: $(cat "$OUT/err")"
ip netns add "$NS2" 2>"$OUT/err" || skip "cannot create a network namespace: $(cat "$OUT/err")"
ip link add "$IF1" type veth peer name "$IF2" 2>"$OUT/err" || skip "cannot create a veth pair: $(cat "$OUT/err")"
ip link set "$IF1" netns "$NS1" && ip link set "$IF2" netns "$NS2" || skip "cannot move the veth ends"
ip -n "$NS1" addr add "$ADDR1/24" dev "$IF1" && ip -n "$NS2" addr add "$ADDR2/24" dev "$IF2" ||
  skip "cannot address the veth ends"
for ns in "$NS1" "$NS2"; do ip -n "$ns" link set lo up; done
ip -n "$NS1" link set "$IF1" up && ip -n "$NS2" link set "$IF2" up || skip "cannot bring the veth pair up"
if [ -n "$RATE" ]; then
  tc -n "$NS1" qdisc add dev "$IF1" root tbf rate "$RATE" burst 256kb latency 100ms &&
    tc -n "$NS2" qdisc add dev "$IF2" root tbf rate "$RATE" burst 256kb latency 100ms || skip "tc cannot limit the rate to $RATE"
fi
echo "netns: $NS1 ($IF1 $ADDR1) <-> $NS2 ($IF2 $ADDR2)${RATE:+, $RATE each way}; 2 ranks per namespace"

passed=0
failed=0
port=29500
for c in $COLLS; do
  port=$((port + 1))
  pids=()
  for r in 0 1 2 3; do
    if [ $r -lt 2 ]; then ns=$NS1 ifn=$IF1 node=1; else ns=$NS2 ifn=$IF2 node=2; fi
    ip netns exec "$ns" env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) NCCL_COMM_ID=$ADDR1:$port \
      NCCL_HOSTID=braid-netns-node$node NCCL_SOCKET_IFNAME="=$ifn" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      timeout "$TIMEOUT" "$BUILD/bin/${c}_perf" -b 8 -e "$MAX" -f 8 -c 1 -w 1 -n 2 >"$OUT/$c.$r" 2>&1 &
    pids+=($!)
  done
  bad=""
  for i in 0 1 2 3; do
    wait "${pids[$i]}" || bad="$bad rank $i exited with $?;"
  done
  grep -q "Out of bounds values : 0 OK" "$OUT/$c.0" || bad="$bad no 'Out of bounds values : 0 OK' from rank 0;"
  grep -q "via NET/Socket" "$OUT/$c.0" || bad="$bad rank 0 used no socket connection;"
  grep -q "via SHM" "$OUT/$c.0" || bad="$bad rank 0 used no shared-memory connection;"
  if [ -z "$bad" ]; then
    passed=$((passed + 1))
    echo "netns: $c: ok"
  else
    failed=$((failed + 1))
    echo "netns: $c: FAILED:$bad"
    for r in 0 1 2 3; do
      echo "---- $c rank $r (last lines)"
      grep -v "NCCL INFO" "$OUT/$c.$r" | tail -n 15
      grep "WARN" "$OUT/$c.$r" | head -n 5
    done
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
