#!/usr/bin/env bash
# compare.sh - braid against the CPU peers on this machine, side by side (`make bench-compare`).
#
# Per round and per collective: a cache-line ping-pong between the ranks' CPUs
# (bench/probe/pingpong.c), braid's build/bin/<coll>_perf (host mode, -P ranks), each peer
# (Open MPI always; MPICH, Gloo and Intel oneCCL when installed: bench/peers/, one program
# per library, the collectives each has: `PEER --colls`),
# the ping-pong again; before each round's all-reduce, the one-pass memory ceiling
# (bench/probe/memceil.c) at each --ceil size. Then bench/compare_tables.py prints, per
# collective and peer, busbw medians and the median per-round ratio braid/peer (all rounds,
# near rounds, far rounds), the all-reduce's busbw as a fraction of the ceiling, and a summary
# (collective x size class). Raw outputs, tables (compare-<coll>.txt, compare-summary.txt)
# and plots (compare-<coll>.png; compare.png: the first collective) land in BUILD/bench/.
# Run from anywhere after `make`; `make bench-deps` installs the optional peers.
#
# Options (or the environment variable in brackets):
#   --coll NAME    all (default: the 9 below) | all_reduce | all_gather | reduce_scatter |
#                  broadcast | reduce | alltoall | gather | scatter | sendrecv       [COLL]
#   --rounds N     runs per side (default 5)                                      [ROUNDS]
#   --min SIZE     smallest message, nccl-tests syntax (default 8)                [MINBYTES]
#   --max SIZE     largest message (default 256M)                                 [MAXBYTES]
#   --np N         ranks (default 2)                                              [NP]
#   --iters N      timed iterations per size (default 20)                         [ITERS]
#   --warmup N     warm-up iterations per size (default 5)                        [WARMUP]
#   --peers LIST   comma list of ompi, mpich, gloo, oneccl (default: ompi and every one
#                  installed; one asked for but not installed is said and skipped)  [PEERS]
#   --near-ns NS   a round is near when both ping-pongs' round trips are below NS
#                  (default 150: this machine shows 60-75 near, 275-355 far), far when both
#                  are at or above it, mixed otherwise; "gap": NS from the run's own round
#                  trips (the middle of their widest gap, if 1.8x wide; else 150)  [NEAR_NS]
#   --pp-cpus A,B  the CPUs of the ping-pong (default: the first two this shell may use,
#                  where -P 2's ranks run on a 2-CPU machine)                      [PP_CPUS]
#   --ceil LIST    comma list of memory-ceiling sizes (default 64M,256M; none: skip) [CEIL]
#   --net          ranks on two fake nodes: braid with a different NCCL_HOSTID per rank (so
#                  it must use its network transport), MPI with --mca btl tcp,self; Gloo
#                  and oneCCL as always (TCP over loopback); MPICH skipped       [BENCH_NET=1]
#   --net-plugin NAME  --net with braid's network NCCL_NET=NAME (Socket, UCX, IB)   [BENCH_NET_PLUGIN]
#                  IB runs over the emulated verbs provider (tests/ibemu/, BUILD/lib/
#                  libbraid-ibemu.so, one port): its correctness counts, its speed means nothing
#   --build DIR    the build directory (default build)                            [BUILD]
#   --out DIR      where outputs, tables and plots go (default BUILD/bench; the peers and
#                  probes are built in BUILD/bench either way)                    [BENCH_OUT]
set -euo pipefail
cd "$(dirname "$0")/.."

COLL=${COLL:-all}
ROUNDS=${ROUNDS:-5}
MINBYTES=${MINBYTES:-8}
MAXBYTES=${MAXBYTES:-256M}
NP=${NP:-2}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
PEERS=${PEERS:-}
NEAR_NS=${NEAR_NS:-150}
PP_CPUS=${PP_CPUS:-}
CEIL=${CEIL:-64M,256M}
NET=${BENCH_NET:-0}
NET_PLUGIN=${BENCH_NET_PLUGIN:-}
BUILD=${BUILD:-build}
OUT=${BENCH_OUT:-}
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
    --peers) PEERS=$2; shift 2 ;;
    --near-ns) NEAR_NS=$2; shift 2 ;;
    --pp-cpus) PP_CPUS=$2; shift 2 ;;
    --ceil) CEIL=$2; shift 2 ;;
    --net) NET=1; shift ;;
    --net-plugin) NET=1; NET_PLUGIN=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
ALL_COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"
if [ "$COLL" = all ]; then COLLS=$ALL_COLLS; else COLLS=$COLL; fi
for c in $COLLS; do
  case " $ALL_COLLS " in *" $c "*) ;; *) echo "compare.sh: unknown collective '$c' (all, or one of: $ALL_COLLS)" >&2; exit 2 ;; esac
done
case "$ROUNDS" in '' | *[!0-9]* | 0) echo "compare.sh: --rounds wants a positive integer, got '$ROUNDS'" >&2; exit 2 ;; esac
case "$NEAR_NS" in gap) ;; '' | *[!0-9.]*) echo "compare.sh: --near-ns wants a number of ns or 'gap', got '$NEAR_NS'" >&2; exit 2 ;; esac
[ "$CEIL" != none ] || CEIL=

TOOLS=$BUILD/bench
OUT=${OUT:-$TOOLS}
mkdir -p "$OUT"
for c in $COLLS; do
  if [ ! -x "$BUILD/bin/${c}_perf" ]; then
    echo "compare.sh: $BUILD/bin/${c}_perf not found: build braid first (make)" >&2
    exit 1
  fi
done
tests/ensure-deps.sh mpi
PLOT=1
tests/ensure-deps.sh matplotlib || { echo "compare.sh: matplotlib unavailable, no plot" >&2; PLOT=0; }
PROBE=$(bench/probe/build.sh "$TOOLS") || { echo "compare.sh: cannot build the probes" >&2; exit 1; }
PP=("$PROBE/pingpong")
[ -z "$PP_CPUS" ] || PP+=(-c "$PP_CPUS")

# The peers (bench/peers/build.sh: one program per library, rebuilt when a source is newer):
# the per-collective files of bench/ give them the same sizes, data checks and bandwidth
# formulas. Open MPI is required; the others are used when installed (build.sh exit 3: not).
ALL_PEERS="ompi mpich gloo oneccl"
declare -A PEER_BIN PEER_LABEL=([ompi]="Open MPI" [mpich]=MPICH [gloo]=Gloo [oneccl]="Intel oneCCL") PEER_LACKS
for p in ${PEERS//,/ }; do
  case " $ALL_PEERS " in *" $p "*) ;; *) echo "compare.sh: unknown peer '$p' (ompi, mpich, gloo, oneccl)" >&2; exit 2 ;; esac
done
for p in $ALL_PEERS; do
  [ -z "$PEERS" ] || case ",$PEERS," in *",$p,"*) ;; *) continue ;; esac
  if [ "$p" = mpich ] && [ "$NET" = 1 ]; then echo "== MPICH: no TCP-only mode in --net, skipped"; continue; fi
  if [ "$p" = mpich ] && ! command -v mpirun.mpich >/dev/null; then
    echo "== MPICH: not installed (make bench-deps), skipped"; continue
  fi
  rc=0
  PEER_BIN[$p]=$(bench/peers/build.sh "$TOOLS" "$p" 2>"$OUT/build-$p.txt") || rc=$?
  if [ "$rc" -eq 3 ]; then
    unset "PEER_BIN[$p]"
    echo "== ${PEER_LABEL[$p]}: not installed (make bench-deps), skipped: $(tail -n 1 "$OUT/build-$p.txt")"
    [ "$p" != ompi ] || exit 1
    continue
  elif [ "$rc" -ne 0 ]; then
    echo "compare.sh: cannot build the ${PEER_LABEL[$p]} peer" >&2
    tail -n 20 "$OUT/build-$p.txt" >&2
    exit 1
  fi
  # The collectives it lacks, said once: not run, "lacks" in the tables.
  has=" $("${PEER_BIN[$p]}" --colls 2>/dev/null | tr '\n' ' ')"
  PEER_LACKS[$p]=
  for c in $COLLS; do
    case "$has" in *" $c "*) ;; *) PEER_LACKS[$p]+=" $c" ;; esac
  done
  [ -z "${PEER_LACKS[$p]}" ] || echo "== ${PEER_LABEL[$p]} has no${PEER_LACKS[$p]}: skipped there"
done
PEER_LIST=$(for p in $ALL_PEERS; do [ -z "${PEER_BIN[$p]:-}" ] || echo -n "$p "; done)
lacks() { case " ${PEER_LACKS[$1]:-} " in *" $2 "*) return 0 ;; esac; return 1; } # lacks PEER COLL

# Open MPI's shared-memory BTL is "vader" up to 4.x and "sm" from 5.0.
SHM_BTL=sm
ompi_info 2>/dev/null | grep -q 'MCA btl: vader' && SHM_BTL=vader
ARGS=(-b "$MINBYTES" -e "$MAXBYTES" -f 2 -n "$ITERS" -w "$WARMUP" -c 1)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np "$NP" --mca pml ob1)
if [ "$NET" = 1 ]; then
  MPIRUN+=(--mca btl "tcp,self")
  MODE="two fake nodes (braid: NCCL_HOSTID per rank${NET_PLUGIN:+, NCCL_NET=$NET_PLUGIN}; Open MPI: btl tcp,self)"
  [ "${NET_PLUGIN,,}" != ib ] || MODE="$MODE; braid's IB is the emulated verbs provider: its speed means nothing"
else
  MPIRUN+=(--mca btl "self,$SHM_BTL")
  MODE="one node (braid: -P $NP; Open MPI: btl self,$SHM_BTL; MPICH: its default; Gloo, oneCCL: TCP over loopback)"
fi

# braid, one round. Local: -P forks the ranks. Network: one process per rank through the
# launcher variables, each with its own NCCL_HOSTID, meeting at NCCL_COMM_ID.
run_braid() { # run_braid PROGRAM OUT
  local prog=$1 out=$2
  if [ "$NET" != 1 ]; then
    timeout "$RUN_TIMEOUT" "$prog" -P "$NP" "${ARGS[@]}" >"$out" 2>&1
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
      timeout "$RUN_TIMEOUT" "$prog" "${ARGS[@]}" >"$out.rank$r" 2>&1 &
    pids+=($!)
  done
  RANK=0 WORLD_SIZE=$NP LOCAL_RANK=0 NCCL_COMM_ID=127.0.0.1:$port NCCL_HOSTID=braid-fake-node-0 \
    timeout "$RUN_TIMEOUT" "$prog" "${ARGS[@]}" >"$out" 2>&1 || rc=$?
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return "$rc"
}

run_peer() { # run_peer PEER COLL OUT
  case "$1" in
    ompi) timeout "$RUN_TIMEOUT" "${MPIRUN[@]}" "${PEER_BIN[ompi]}" "$2" "${ARGS[@]}" >"$3" 2>&1 ;;
    mpich) timeout "$RUN_TIMEOUT" mpirun.mpich -np "$NP" "${PEER_BIN[mpich]}" "$2" "${ARGS[@]}" >"$3" 2>&1 ;;
    gloo | oneccl) LAUNCH_TIMEOUT=$RUN_TIMEOUT bench/peers/launch.sh "$NP" "${PEER_BIN[$1]}" "$2" "${ARGS[@]}" >"$3" 2>&1 ;;
  esac
}

# side SIDE COLL ROUND: one run, its failure said with the output's tail.
side() {
  local f=$OUT/$1-$2-r$3.txt rc=0
  echo "-- round $3/$ROUNDS: $2 $1 -> $f"
  if [ "$1" = braid ]; then run_braid "$BUILD/bin/${2}_perf" "$f" || rc=$?; else run_peer "$1" "$2" "$f" || rc=$?; fi
  if [ "$rc" -ne 0 ]; then
    echo "compare.sh: $1 $2 round $3 failed (exit status $rc); see $f" >&2
    tail -n 5 "$f" >&2 || true
    failed=1
  fi
}

probe() { # probe OUTFILE CMD...: a probe's one line, or a failure said
  "${@:2}" >"$1" 2>&1 || { echo "compare.sh: probe failed: ${*:2}" >&2; cat "$1" >&2; failed=1; }
}

echo "== braid vs ${PEER_LIST% }: $COLLS; $NP ranks, $MODE, $ROUNDS rounds, $MINBYTES..$MAXBYTES"
failed=0
rm -f "$OUT"/pp-*-r*.txt "$OUT"/ceil-*-r*.txt "$OUT"/*-lacks.txt
for p in $PEER_LIST; do
  for c in ${PEER_LACKS[$p]}; do
    rm -f "$OUT/$p-$c"-r*.txt
    echo "${PEER_LABEL[$p]} has no $c" >"$OUT/$p-$c-lacks.txt"
  done
done
for ((i = 1; i <= ROUNDS; i++)); do
  for c in $COLLS; do
    if [ "$c" = all_reduce ]; then
      for s in ${CEIL//,/ }; do probe "$OUT/ceil-$s-r$i.txt" "$PROBE/memceil" -s "$s"; done
    fi
    probe "$OUT/pp-$c-r$i-before.txt" "${PP[@]}"
    side braid "$c" "$i"
    for p in $PEER_LIST; do lacks "$p" "$c" || side "$p" "$c" "$i"; done
    probe "$OUT/pp-$c-r$i-after.txt" "${PP[@]}"
    echo "   ping-pong before/after: $(cut -d' ' -f5 "$OUT/pp-$c-r$i-before.txt" 2>/dev/null) / $(cut -d' ' -f5 "$OUT/pp-$c-r$i-after.txt" 2>/dev/null) ns"
  done
done

/usr/bin/python3 bench/compare_tables.py --out "$OUT" --colls "${COLLS// /,}" --rounds "$ROUNDS" --np "$NP" \
  --mode "$MODE" --near-ns "$NEAR_NS" --peers "${PEER_LIST// /,}" --ceil "$CEIL" || failed=1

if [ "$PLOT" = 1 ]; then
  first=
  for c in $COLLS; do
    sides=("braid=$OUT/braid-$c-median.txt")
    for p in $PEER_LIST; do lacks "$p" "$c" || sides+=("${PEER_LABEL[$p]}=$OUT/$p-$c-median.txt"); done
    tools/plot-bench -o "$OUT/compare-$c.png" --title "$c, $NP ranks (median of $ROUNDS)" "${sides[@]}" || failed=1
    [ -n "$first" ] || { first=$c; cp "$OUT/compare-$c.png" "$OUT/compare.png" 2>/dev/null || true; }
  done
fi
echo "== raw outputs: $OUT/{braid,${PEER_LIST// /,}}-<coll>-r*.txt, probes $OUT/{pp,ceil}-*.txt;" \
  "tables: $OUT/compare-<coll>.txt, $OUT/compare-summary.txt"
exit "$failed"
