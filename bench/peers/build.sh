#!/usr/bin/env bash
# build.sh OUT_DIR [MPICC [NAME]] - builds the MPI peer OUT_DIR/NAME (default mpicc and
# mpi_coll_perf: Open MPI; bench/compare.sh also builds it with mpicc.mpich as
# mpich_coll_perf) when any of its sources is newer than it; prints its path. Used by
# bench/compare.sh and tests/bench/pages.sh.
set -eu
cd "$(dirname "$0")/../.."
OUT=$1
MPICC=${2:-mpicc}
NAME=${3:-mpi_coll_perf}
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"
COMMON="bench/common/opts.c bench/common/report.c bench/common/dtype.c bench/common/verify.c bench/common/pages.c"
PEER=$OUT/$NAME
SRCS="bench/peers/*.c $COMMON bench/common/*.h bench/*_perf.c include/nccl.h bench/peers/build.sh"
mkdir -p "$OUT/peer-obj-$NAME"
# shellcheck disable=SC2086
if [ ! -x "$PEER" ] || [ -n "$(find $SRCS -newer "$PEER" 2>/dev/null | head -n 1)" ]; then
  echo "== building $PEER ($MPICC)" >&2
  CFL="-std=gnu11 -O2 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -DBRAID_NO_CUDA_HEADERS -Iinclude -Ibench/common"
  objs=()
  for c in $COLLS; do
    # shellcheck disable=SC2086
    "$MPICC" $CFL -Dbench_coll=bench_coll_$c -c "bench/${c}_perf.c" -o "$OUT/peer-obj-$NAME/$c.o"
    objs+=("$OUT/peer-obj-$NAME/$c.o")
  done
  # shellcheck disable=SC2086
  "$MPICC" $CFL -o "$PEER" bench/peers/mpi_coll_perf.c bench/peers/nccl_stubs.c $COMMON "${objs[@]}" -lm
fi
echo "$PEER"
