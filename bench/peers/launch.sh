#!/usr/bin/env bash
# launch.sh NP PROGRAM ARGS... - runs NP processes of a peer program that has no launcher of
# its own (gloo_coll_perf, oneccl_coll_perf) on this host: each with RANK, WORLD_SIZE and a
# fresh PEER_RENDEZVOUS_DIR (where Gloo's FileStore and oneCCL's KVS address meet). Rank 0's
# output is this script's; the other ranks' go to stderr, prefixed "[rank N]". Exit status:
# the first non-zero of the ranks', or 0. A rank still running after $LAUNCH_TIMEOUT seconds
# (default 1800) is killed, with all the others.
set -u
NP=$1
shift
case "$NP" in '' | *[!0-9]* | 0) echo "launch.sh: NP wants a positive integer, got '$NP'" >&2; exit 2 ;; esac
DIR=$(mktemp -d "${TMPDIR:-/tmp}/braid-peer-rdv.XXXXXX")
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/braid-peer-log.XXXXXX")
pids=()
# shellcheck disable=SC2317 # (called by the trap)
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$DIR" "$LOGS"
}
trap cleanup EXIT
trap 'exit 143' INT TERM
for ((r = 1; r < NP; r++)); do
  RANK=$r WORLD_SIZE=$NP LOCAL_RANK=$r PEER_RENDEZVOUS_DIR=$DIR timeout "${LAUNCH_TIMEOUT:-1800}" "$@" >"$LOGS/$r" 2>&1 &
  pids+=($!)
done
rc=0
RANK=0 WORLD_SIZE=$NP LOCAL_RANK=0 PEER_RENDEZVOUS_DIR=$DIR timeout "${LAUNCH_TIMEOUT:-1800}" "$@" || rc=$?
if [ "$rc" -ne 0 ]; then # a failed rank 0 leaves the others waiting: end them
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
fi
for ((r = 1; r < NP; r++)); do
  wait "${pids[r - 1]}" || { s=$?; [ "$rc" -ne 0 ] || rc=$s; }
  [ ! -s "$LOGS/$r" ] || sed "s/^/[rank $r] /" "$LOGS/$r" >&2
done
pids=()
exit "$rc"
