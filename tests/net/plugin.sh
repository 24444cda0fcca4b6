#!/usr/bin/env bash
# plugin.sh - NCCL_NET_PLUGIN and NCCL_NET: external net plugin libraries are looked for, loaded
# or refused with an INFO line saying why, and the built-in Socket network takes over; a
# NCCL_NET naming a network that cannot start fails with a clear error instead of hanging.
# Builds the fake plugins of tests/net/fake_plugin.c (and uses $BUILD/lib/libnccl-net-braid.so), then runs 2 ranks on 2 fake nodes
# (all_reduce_perf through NCCL_COMM_ID) once per case.
#
# Usage: tests/net/plugin.sh [BUILD]    Prints "N passed, N failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-${BUILD:-build}}
BIN=$BUILD/bin/all_reduce_perf
CC=${CC:-cc}
[ -x "$BIN" ] || { echo "plugin: SKIPPED: $BIN is missing: build first"; echo "0 passed, 0 failed"; exit 0; }
OUT=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$OUT"' EXIT
for v in NCCL_ABI:ncclabi NCCL_V13:v13 BROKEN:broken NODEV:nodev; do
  $CC -shared -fPIC -fvisibility=hidden -Iinclude -Isrc -DBRAID_NO_CUDA_HEADERS -DFAKE_${v%%:*} \
    -o "$OUT/libnccl-net-${v##*:}.so" tests/net/fake_plugin.c || { echo "plugin: cannot build the fake plugins"; echo "0 passed, 1 failed"; exit 1; }
done

passed=0
failed=0
SOCK_IF=lo # NCCL_SOCKET_IFNAME of every case; empty: not set
# case NAME EXPECT_RC(0|fail) "ENV..." GREP...: run, check the exit status and every pattern in
# rank 0's log.
case_run() {
  local name=$1 want=$2 env=$3
  shift 3
  local port pids=() r rc bad=""
  # A port the kernel just handed out as free (a random one could be some connection's
  # ephemeral port: the root's bind then fails), below the ephemeral range as a fallback.
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 12000)))
  for r in 0 1; do
    env $env LD_LIBRARY_PATH="$OUT:$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" RANK=$r WORLD_SIZE=2 \
      NCCL_COMM_ID=127.0.0.1:$port NCCL_HOSTID=braid-plugin-node$r ${SOCK_IF:+NCCL_SOCKET_IFNAME=$SOCK_IF} NCCL_DEBUG=INFO \
      NCCL_DEBUG_SUBSYS=INIT,NET timeout 60 "$BIN" -b 8 -e 64K -f 8 -c 1 -w 1 -n 2 >"$OUT/$name.$r" 2>&1 &
    pids+=($!)
  done
  rc=0
  for r in 0 1; do wait "${pids[$r]}" || rc=$?; done
  if [ "$want" = 0 ] && [ "$rc" != 0 ]; then bad="$bad exit status $rc;"; fi
  if [ "$want" = fail ] && { [ "$rc" = 0 ] || [ "$rc" = 124 ]; }; then bad="$bad exit status $rc (expected a failure, not success or a hang);"; fi
  for pat in "$@"; do grep -q -- "$pat" "$OUT/$name.0" || bad="$bad no '$pat';"; done
  if [ -z "$bad" ]; then
    passed=$((passed + 1))
    echo "plugin: $name: ok"
  else
    failed=$((failed + 1))
    echo "plugin: $name: FAILED:$bad"
    grep -E "NET|WARN" "$OUT/$name.0" | head -n 20
  fi
}

case_run default 0 "" "NET/Plugin: Could not find: libnccl-net.so\$" "Using network Socket" "via NET/Socket/0"
case_run missing 0 "NCCL_NET_PLUGIN=braid_nothere" "Could not find: braid_nothere libnccl-net-braid_nothere.so" "Using network Socket"
case_run none 0 "NCCL_NET_PLUGIN=none" "NCCL_NET_PLUGIN=none" "Using network Socket"
case_run nccl-abi 0 "NCCL_NET_PLUGIN=ncclabi" "NET/Plugin: Loaded net plugin FakeNccl (v8)" "init through NCCL's v8 logger" \
  "NET/FakeNccl : No device found." "Using network Socket"
case_run nccl-v13 0 "NCCL_NET_PLUGIN=v13" "External network plugin .*libnccl-net-v13.so is unsupported (it exports ncclNetPlugin_v13" \
  "Using network Socket"
# a list (NCCL 2.27+): the first that starts wins, the rest is not opened
case_run list 0 "NCCL_NET_PLUGIN=braid_nothere,nodev,ncclabi,broken" "Could not find: braid_nothere" \
  "NET/Nodev : No device found." "NET/FakeNccl : No device found." "Loaded net plugin Broken" "Using network Socket"
# braid's own Socket network under NCCL's ABI (libnccl-net-braid.so, found by its short name)
case_run braid 0 "NCCL_NET_PLUGIN=braid" "NET/Plugin: Loaded net plugin BraidSocket (v12)" "Using network BraidSocket" \
  "via NET/BraidSocket/0"
# ... with its own instance of braid's parameter table (it must load into NVIDIA's NCCL too, where
# braid's is absent), built from the same rows and loaders: a value only a conf file gives reaches
# it, as its interface shows (without the file it takes lo, the interface of NCCL_COMM_ID)
other=$(ip -o -4 addr show 2>/dev/null | awk '$2 != "lo" { print $2; exit }')
if [ -z "$other" ]; then
  echo "plugin: braid-conf: SKIPPED: no interface but lo with an IPv4 address (or no 'ip' command)"
else
  echo "NCCL_SOCKET_IFNAME=$other" >"$OUT/nccl.conf"
  SOCK_IF= case_run braid-conf 0 "NCCL_NET_PLUGIN=braid NCCL_CONF_FILE=$OUT/nccl.conf" "Using network BraidSocket" \
    "NET/Socket : Using .0.$other:" "via NET/BraidSocket/0"
  SOCK_IF= case_run braid-noconf 0 "NCCL_NET_PLUGIN=braid" "NET/Socket : Using .0.lo:" "via NET/BraidSocket/0"
fi
case_run broken 0 "NCCL_NET_PLUGIN=broken" "Loaded net plugin Broken" "Using network Socket"
case_run nodev 0 "NCCL_NET_PLUGIN=nodev" "NET/Nodev : No device found." "Using network Socket"
case_run nodev-forced fail "NCCL_NET_PLUGIN=nodev NCCL_NET=Nodev" "NCCL_NET=Nodev could not start"
case_run unknown fail "NCCL_NET=Bogus" "NCCL_NET=Bogus: no network of that name"
# UCX (when built: src/transport/net/ucx/): chosen by name only, loaded with dlopen, so
# libnccl.so.2 itself needs no UCX (nor verbs) library to load.
if grep -q "NET/UCX" "$BUILD/lib/libnccl.so.2"; then
  case_run ucx 0 "NCCL_NET=UCX" "NET/UCX : Loaded UCX" "Using network UCX" "via NET/UCX/0"
else
  echo "plugin: ucx: SKIPPED: built without UCX (UCX=0 or no libucx-dev headers)"
fi
if readelf -d "$BUILD/lib/libnccl.so.2" | grep -E "NEEDED.*(libuc[pst]|libibverbs)"; then
  echo "plugin: needed: FAILED: libnccl.so.2 links a UCX or verbs library (it must dlopen them)"
  failed=$((failed + 1))
else
  passed=$((passed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
