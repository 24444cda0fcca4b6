#!/usr/bin/env bash
# compare.sh - braid against Open MPI on this machine, side by side (`make bench-compare`).
#
# Runs build/bin/<coll>_perf (braid, host mode, -P ranks) and the Open MPI peer
# (bench/peers/mpi_coll_perf, built here into build/bench/) alternately over the same sizes,
# ROUNDS times, then prints one table of medians: size, braid time and busbw, Open MPI time
# and busbw, and braid busbw / MPI busbw. Raw outputs, the median tables and compare.png
# (tools/plot-bench) land in build/bench/. Run from anywhere after `make`.
#
# Options (or the environment variable in brackets):
#   --coll NAME    all_reduce (default) | all_gather | reduce_scatter | broadcast | reduce |
#                  alltoall | gather | scatter | sendrecv                          [COLL]
#   --rounds N     runs per side (default 5)                                      [ROUNDS]
#   --min SIZE     smallest message, nccl-tests syntax (default 8)                [MINBYTES]
#   --max SIZE     largest message (default 256M)                                 [MAXBYTES]
#   --np N         ranks (default 2)                                              [NP]
#   --iters N      timed iterations per size (default 20)                         [ITERS]
#   --warmup N     warm-up iterations per size (default 5)                        [WARMUP]
#   --net          ranks on two fake nodes: braid with a different NCCL_HOSTID per rank (so
#                  it must use its network transport), MPI with --mca btl tcp,self  [BENCH_NET=1]
#   --net-plugin NAME  --net with braid's network NCCL_NET=NAME (Socket, UCX, IB)   [BENCH_NET_PLUGIN]
#                  IB runs over the emulated verbs provider (tests/ibemu/, BUILD/lib/
#                  libbraid-ibemu.so, one port): its correctness counts, its speed means nothing
#   --build DIR    the build directory (default build)                            [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."

COLL=${COLL:-all_reduce}
ROUNDS=${ROUNDS:-5}
MINBYTES=${MINBYTES:-8}
MAXBYTES=${MAXBYTES:-256M}
NP=${NP:-2}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
NET=${BENCH_NET:-0}
NET_PLUGIN=${BENCH_NET_PLUGIN:-}
BUILD=${BUILD:-build}
RUN_TIMEOUT=${RUN_TIMEOUT:-1800}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --coll) COLL=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --min) MINBYTES=$2; shift 2 ;;
    --max) MAXBYTES=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --net) NET=1; shift ;;
    --net-plugin) NET=1; NET_PLUGIN=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"
case " $COLLS " in *" $COLL "*) ;; *) echo "compare.sh: unknown collective '$COLL' (one of: $COLLS)" >&2; exit 2 ;; esac

BRAID=$BUILD/bin/${COLL}_perf
OUT=$BUILD/bench
if [ ! -x "$BRAID" ]; then
  echo "compare.sh: $BRAID not found: build braid first (make)" >&2
  exit 1
fi
tests/ensure-deps.sh mpi
PLOT=1
tests/ensure-deps.sh matplotlib || { echo "compare.sh: matplotlib unavailable, no plot" >&2; PLOT=0; }

# The Open MPI peer: the per-collective files of bench/ give it the same sizes, data checks
# and bandwidth formulas; rebuilt when any source is newer than it.
PEER=$(bench/peers/build.sh "$OUT") || { echo "compare.sh: cannot build the MPI peer" >&2; exit 1; }

# Open MPI's shared-memory BTL is "vader" up to 4.x and "sm" from 5.0.
SHM_BTL=sm
ompi_info 2>/dev/null | grep -q 'MCA btl: vader' && SHM_BTL=vader
ARGS=(-b "$MINBYTES" -e "$MAXBYTES" -f 2 -n "$ITERS" -w "$WARMUP" -c 1)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np "$NP" --mca pml ob1)
if [ "$NET" = 1 ]; then
  MPIRUN+=(--mca btl "tcp,self")
  MODE="two fake nodes (braid: NCCL_HOSTID per rank${NET_PLUGIN:+, NCCL_NET=$NET_PLUGIN}; MPI: btl tcp,self)"
  [ "${NET_PLUGIN,,}" != ib ] || MODE="$MODE; braid's IB is the emulated verbs provider: its speed means nothing"
else
  MPIRUN+=(--mca btl "self,$SHM_BTL")
  MODE="one node (braid: -P $NP; MPI: btl self,$SHM_BTL)"
fi

# braid, one round. Local: -P forks the ranks. Network: one process per rank through the
# launcher variables, each with its own NCCL_HOSTID, meeting at NCCL_COMM_ID.
run_braid() {
  local out=$1
  if [ "$NET" != 1 ]; then
    timeout "$RUN_TIMEOUT" "$BRAID" -P "$NP" "${ARGS[@]}" >"$out" 2>&1
    return
  fi
  local port pids=() r rc=0
  [ -z "$NET_PLUGIN" ] || export NCCL_NET=$NET_PLUGIN # (Open MPI ignores it)
  if [ "${NET_PLUGIN,,}" = ib ]; then # no HCA here: the emulation (process_vm_writev between ranks)
    export BRAID_IB_VERBS_LIBRARY=${BRAID_IB_VERBS_LIBRARY:-$PWD/$BUILD/lib/libbraid-ibemu.so}
    export IBEMU_DEVICES=${IBEMU_DEVICES:-mlx5_0:1:ib}
  fi
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  for ((r = 1; r < NP; r++)); do
    RANK=$r WORLD_SIZE=$NP LOCAL_RANK=0 NCCL_COMM_ID=127.0.0.1:$port NCCL_HOSTID=braid-fake-node-$r \
      timeout "$RUN_TIMEOUT" "$BRAID" "${ARGS[@]}" >"$out.rank$r" 2>&1 &
    pids+=($!)
  done
  RANK=0 WORLD_SIZE=$NP LOCAL_RANK=0 NCCL_COMM_ID=127.0.0.1:$port NCCL_HOSTID=braid-fake-node-0 \
    timeout "$RUN_TIMEOUT" "$BRAID" "${ARGS[@]}" >"$out" 2>&1 || rc=$?
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return "$rc"
}

run_mpi() {
  timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" "$PEER" "$COLL" "${ARGS[@]}" >"$1" 2>&1
}

echo "== $COLL: braid vs Open MPI, $NP ranks, $MODE, $ROUNDS rounds, $MINBYTES..$MAXBYTES"
failed=0
for ((i = 1; i <= ROUNDS; i++)); do
  for side in braid mpi; do
    f=$OUT/$side-$COLL-r$i.txt
    echo "-- round $i/$ROUNDS: $side -> $f"
    if ! { if [ "$side" = braid ]; then run_braid "$f"; else run_mpi "$f"; fi; }; then
      echo "compare.sh: $side round $i failed (exit status non-zero); see $f" >&2
      tail -n 5 "$f" >&2 || true
      failed=1
    fi
  done
done

# Medians per size over the rounds, one table, and median files in the benchmark format.
/usr/bin/python3 - "$OUT" "$COLL" "$ROUNDS" "$NP" "$MODE" <<'PY'
import sys
from importlib.machinery import SourceFileLoader
out, coll, rounds, np_, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
pb = SourceFileLoader("plot_bench", "tools/plot-bench").load_module()

def medians(side):
    per_size, header, wrong, key = {}, [], 0, ("float", "sum", "-1")
    for i in range(1, rounds + 1):
        path = f"{out}/{side}-{coll}-r{i}.txt"
        try:
            series = pb.parse_rows(path)
            text = open(path).read().splitlines()
        except OSError:
            continue
        if not header:
            header = [l for l in text if l.startswith("#") and "Out of bounds" not in l and "Avg bus" not in l
                      and "concluded" not in l]
        wrong += sum(1 for l in text if l.startswith("# Out of bounds") and "FAILED" in l)
        for key, rows in series.items():  # one series: compare runs one type/op/root
            for r in rows:
                per_size.setdefault(r[0], []).append(r)
    def mid(rs, t):  # the round with the median time, so time and busbw stay a pair
        r = sorted(rs, key=lambda r: r[t])[(len(rs) - 1) // 2]
        return r[t], r[t + 1]
    med = {s: mid(rs, 1) + mid(rs, 3) for s, rs in per_size.items()}
    return med, header, wrong, key

b, bh, bw_, bk = medians("braid")
m, mh, mw_, mk = medians("mpi")
for side, med, header, key in (("braid", b, bh, bk), ("mpi", m, mh, mk)):
    with open(f"{out}/{side}-{coll}-median.txt", "w") as f:
        f.write("\n".join(header) + "\n")
        for s in sorted(med):
            t_o, bw_o, t_i, bw_i = med[s]
            f.write(f"{s:12d}  {0:12d}  {key[0]:>8}  {key[1]:>6}  {key[2]:>6}  {t_o:7.2f}  {0:6.2f}  {bw_o:6.2f}  {0:6d}"
                    f"  {t_i:7.2f}  {0:6.2f}  {bw_i:6.2f}  {0:6d}\n")
lines = [f"# {coll}: braid vs Open MPI, {np_} ranks, {mode}; median of {rounds} rounds, out-of-place",
         f"# {'size':>12}  {'braid time':>11}  {'braid busbw':>11}  {'MPI time':>11}  {'MPI busbw':>11}  {'ratio':>7}",
         f"# {'(B)':>12}  {'(us)':>11}  {'(GB/s)':>11}  {'(us)':>11}  {'(GB/s)':>11}  {'b/MPI':>7}"]
for s in sorted(set(b) | set(m)):
    bt, bb = (b[s][0], b[s][1]) if s in b else (float("nan"),) * 2
    mt, mb = (m[s][0], m[s][1]) if s in m else (float("nan"),) * 2
    ratio = bb / mb if mb and mb == mb and bb == bb else float("nan")
    rs = f"{ratio:7.2f}" if ratio == ratio else f"{'-':>7}"
    lines.append(f"  {s:12d}  {bt:11.2f}  {bb:11.4f}  {mt:11.2f}  {mb:11.4f}  {rs}")
if bw_ or mw_:
    lines.append(f"# WARNING: rounds with wrong results: braid {bw_}, MPI {mw_} (see the raw outputs)")
print("\n".join(lines))
open(f"{out}/compare-{coll}.txt", "w").write("\n".join(lines) + "\n")
PY

if [ "$PLOT" = 1 ]; then
  tools/plot-bench -o "$OUT/compare.png" --title "$COLL, $NP ranks, $MODE (median of $ROUNDS)" \
    "braid=$OUT/braid-$COLL-median.txt" "Open MPI=$OUT/mpi-$COLL-median.txt"
fi
echo "== raw outputs: $OUT/{braid,mpi}-$COLL-r*.txt; table: $OUT/compare-$COLL.txt"
exit "$failed"
