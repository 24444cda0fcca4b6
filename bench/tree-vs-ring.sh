#!/usr/bin/env bash
# tree-vs-ring.sh - tree against ring all-reduce in host mode over fake nodes, and the tuner's
# automatic choice against the better of the two (issue 6: "tree beats ring for 8 B to 64 KiB,
# and the automatic choice is within 10% of the better at every size").
#
# Each round runs all_reduce_perf three times, one after the other, in an order that rotates
# from round to round: NCCL_ALGO=allreduce:Ring, NCCL_ALGO=allreduce:Tree, and NCCL_ALGO unset
# (the tuner decides). A run is NODES processes,
# one rank each, each with its own NCCL_HOSTID (so every hop is a socket through the network
# transport), meeting at NCCL_COMM_ID. "allreduce:" limits the forcing to all-reduce: the
# benchmark's launcher mode also runs all-gathers of its own. Every timing run holds
# /tmp/braid-bench.lock (flock), so no two benchmarks on the machine overlap.
#
# The time of a size in one run is the mean of its out-of-place and in-place columns (two
# measurements of the same call); the table shows the median over the rounds and the minimum
# (the least disturbed round: on a shared machine other work only ever adds time). What the tuner
# chose comes from one extra untimed run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING (the
# choice is deterministic; logging stays off in the timed runs). Columns: size; ring, tree and
# auto times (us) and auto / min(ring, tree), by median and by minimum; the faster forced
# algorithm (by median); chosen/best, the forced run of the algorithm the tuner chose over the
# faster forced run (medians: the choice alone, apart from any cost the automatic run pays that
# the forced ones do not); the tuner's choice (algorithm/protocol x channels). Raw outputs and
# the table (table.txt) stay in --out.
#
# Options (or the environment variable in brackets):
#   --rounds N     rounds (default 9)                                     [ROUNDS]
#   --nodes N      fake nodes = ranks (default 4)                         [NODES]
#   --min SIZE     smallest message, nccl-tests syntax (default 8)        [MINBYTES]
#   --max SIZE     largest message (default 8M)                           [MAXBYTES]
#   --iters N      timed iterations per size (default 40)                 [ITERS]
#   --warmup N     warm-up iterations per size (default 10)               [WARMUP]
#   --build DIR    the build directory holding bin/all_reduce_perf (default build)  [BUILD]
#   --out DIR      raw outputs and the table (default DIR/bench/tree-vs-ring)        [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-9}
NODES=${NODES:-4}
MINBYTES=${MINBYTES:-8}
MAXBYTES=${MAXBYTES:-8M}
ITERS=${ITERS:-40}
WARMUP=${WARMUP:-10}
BUILD=${BUILD:-build}
OUT=${OUT:-}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --min) MINBYTES=$2; shift 2 ;;
    --max) MAXBYTES=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "tree-vs-ring.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$BUILD/bench/tree-vs-ring}
BIN=$BUILD/bin/all_reduce_perf
if [ ! -x "$BIN" ]; then
  echo "tree-vs-ring.sh: $BIN not found: build braid first (make, or make BUILD=$BUILD bench)" >&2
  exit 1
fi
if ! [ "$NODES" -ge 2 ] 2>/dev/null; then
  echo "tree-vs-ring.sh: --nodes must be at least 2 (got '$NODES')" >&2
  exit 2
fi
mkdir -p "$OUT"
rm -f "$OUT"/ring-r*.txt "$OUT"/tree-r*.txt "$OUT"/auto-r*.txt "$OUT"/choice.txt

# One run: NODES processes (ranks 1.. in the background, rank 0 in front), rank 0's output to
# $1. $2 is NCCL_ALGO ("" = unset); the rest are extra environment assignments for every rank.
run_once() {
  local out=$1 algo=$2 port r rc=0 pids=()
  shift 2
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local args=(-b "$MINBYTES" -e "$MAXBYTES" -f 2 -n "$ITERS" -w "$WARMUP" -c 1)
  for ((r = NODES - 1; r >= 0; r--)); do
    local env=(RANK=$r WORLD_SIZE=$NODES LOCAL_RANK=0 NCCL_COMM_ID=127.0.0.1:$port NCCL_HOSTID=braid-fake-node-$r)
    [ -n "$algo" ] && env+=(NCCL_ALGO=$algo)
    if [ "$r" -gt 0 ]; then
      env "${env[@]}" "$@" timeout "$RUN_TIMEOUT" "$BIN" "${args[@]}" >"$out.rank$r" 2>&1 &
      pids+=($!)
    else
      env "${env[@]}" "$@" timeout "$RUN_TIMEOUT" "$BIN" "${args[@]}" >"$out" 2>&1 || rc=$?
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  rm -f "$out".rank*
  return "$rc"
}
export -f run_once
export NODES MINBYTES MAXBYTES ITERS WARMUP BIN RUN_TIMEOUT

echo "== all_reduce, $NODES fake nodes (one rank each, sockets), $ROUNDS rounds, $MINBYTES..$MAXBYTES, $ITERS iters"
failed=0
# The tuner's choice per size: one untimed run with the TUNING lines on.
if ! flock /tmp/braid-bench.lock bash -c 'run_once "$0" "" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING' \
    "$OUT/choice.txt" </dev/null; then
  echo "tree-vs-ring.sh: the choice run failed; see $OUT/choice.txt" >&2
  failed=1
fi
SIDES=(ring tree auto)
for ((i = 1; i <= ROUNDS; i++)); do
  # the order rotates each round, so no side always runs first or right after another one
  for ((k = 0; k < 3; k++)); do
    side=${SIDES[$(((i + k) % 3))]}
    case $side in ring) algo=allreduce:Ring ;; tree) algo=allreduce:Tree ;; auto) algo= ;; esac
    f=$OUT/$side-r$i.txt
    if ! flock /tmp/braid-bench.lock bash -c 'run_once "$0" "$1"' "$f" "$algo" </dev/null; then
      echo "tree-vs-ring.sh: $side round $i failed; see $f" >&2
      tail -n 5 "$f" >&2 || true
      failed=1
    fi
  done
  echo "-- round $i/$ROUNDS done"
done

/usr/bin/python3 - "$OUT" "$ROUNDS" "$NODES" <<'PY'
import re
import statistics
import sys

out, rounds, nodes = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def rows(path):
    """{size: mean of the out-of-place and in-place times} of one output, and its #wrong."""
    res, wrong = {}, 0
    try:
        text = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return res, 0
    for line in text:
        if line.startswith("# Out of bounds") and "FAILED" in line:
            wrong += 1
        c = line.split()
        if line.startswith("#") or len(c) < 13 or not c[0].isdigit():
            continue
        try:
            res[int(c[0])] = (float(c[5]) + float(c[9])) / 2
        except ValueError:
            pass
    return res, wrong

med, low, wrong = {}, {}, 0
for side in ("ring", "tree", "auto"):
    per = {}
    for i in range(1, rounds + 1):
        r, w = rows(f"{out}/{side}-r{i}.txt")
        wrong += w
        for s, t in r.items():
            per.setdefault(s, []).append(t)
    med[side] = {s: statistics.median(ts) for s, ts in per.items()}
    low[side] = {s: min(ts) for s, ts in per.items()}

# The tuner's choice: the most frequent TUNING line per byte count (the benchmark's own small
# all-reduces of results also log one, once).
votes = {}
try:
    log = open(f"{out}/choice.txt", encoding="utf-8", errors="replace").read()
except OSError:
    log = ""
for m in re.finditer(r"AllReduce: (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{0\.\.(\d+)\}", log):
    key = f"{m.group(2)}/{m.group(3)} x{int(m.group(4)) + 1}"
    v = votes.setdefault(int(m.group(1)), {})
    v[key] = v.get(key, 0) + 1
choice = {s: max(v, key=v.get) for s, v in votes.items()}

lines = [f"# all_reduce_perf, {nodes} fake nodes, {rounds} rounds; time = mean of out-of-place and in-place (us)",
         "# median: of the rounds; min: the least disturbed round (other work on the machine only adds time)",
         f"# {'size':>10}  {'--------------- median ---------------':>39}  {'---------------- min -----------------':>39}",
         f"# {'(B)':>10}  {'ring':>8} {'tree':>8} {'auto':>8} {'auto/best':>9}  {'ring':>8} {'tree':>8} {'auto':>8} {'auto/best':>9}"
         f"  {'faster':>6}  {'chosen/best':>11}  tuner chose"]
worst = {"median": 0.0, "min": 0.0, "chosen": 0.0}
fmt = lambda x: f"{x:8.1f}" if x is not None else f"{'-':>8}"
def ratio(m, s, kind):
    r, t, a = m["ring"].get(s), m["tree"].get(s), m["auto"].get(s)
    if a is None or r is None or t is None:
        return f"{fmt(r)} {fmt(t)} {fmt(a)} {'-':>9}", None
    q = a / min(r, t)
    worst[kind] = max(worst[kind], q)
    return f"{fmt(r)} {fmt(t)} {fmt(a)} {q:9.2f}", "tree" if t < r else "ring"
for s in sorted(set(med["ring"]) | set(med["tree"]) | set(med["auto"])):
    a, faster = ratio(med, s, "median")
    b, _ = ratio(low, s, "min")
    # the forced run of the algorithm the tuner chose against the faster forced run (medians):
    # the quality of the choice alone, apart from any difference between auto and forced runs
    algo = choice.get(s, "?").split("/")[0].lower()
    r, t = med["ring"].get(s), med["tree"].get(s)
    cb = med[algo].get(s) / min(r, t) if algo in ("ring", "tree") and r and t and med[algo].get(s) else None
    if cb is not None:
        worst["chosen"] = max(worst["chosen"], cb)
    cbs = f"{cb:11.2f}" if cb is not None else f"{'-':>11}"
    lines.append(f"  {s:10d}  {a}  {b}  {faster or '-':>6}  {cbs}  {choice.get(s, '?')}")
lines.append(f"# worst auto/best: {worst['median']:.2f} (medians), {worst['min']:.2f} (minima); "
             f"worst chosen/best: {worst['chosen']:.2f}")
if wrong:
    lines.append(f"# WARNING: {wrong} run(s) reported wrong results (see the raw outputs)")
print("\n".join(lines))
open(f"{out}/table.txt", "w").write("\n".join(lines) + "\n")
PY
echo "== raw outputs: $OUT/{ring,tree,auto}-r*.txt, $OUT/choice.txt; table: $OUT/table.txt"
exit "$failed"
