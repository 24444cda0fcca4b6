#!/usr/bin/env bash
# build.sh OUT_DIR [PEER] - builds a peer program of bench/compare.sh (bench/peers/peer_main.c
# with one library's file) into OUT_DIR when any of its sources is newer; prints its path.
# PEER: ompi (default: mpicc, mpi_coll_perf), mpich (mpicc.mpich, mpich_coll_perf), gloo
# (Debian libgloo-dev, gloo_coll_perf), oneccl (Intel oneCCL from PyPI oneccl-cpu-devel in
# $ONECCL_ROOT, default ~/.cache/braid-bench/oneccl-venv: oneccl_coll_perf). Exit status 3
# and one line when the library is not installed (`make bench-deps` installs them all).
# Used by bench/compare.sh, tests/bench/pages.sh and tests/bench/compare.sh.
set -eu
cd "$(dirname "$0")/../.."
OUT=$1
PEER=${2:-ompi}
ONECCL_ROOT=${ONECCL_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/braid-bench/oneccl-venv}
CC_=cc
LIBSRC='' LINK=() CXXFL=()
case "$PEER" in
  ompi) CC_=mpicc NAME=mpi_coll_perf LIBSRC=bench/peers/mpi_coll_perf.c ;;
  mpich) CC_=mpicc.mpich NAME=mpich_coll_perf LIBSRC=bench/peers/mpi_coll_perf.c ;;
  gloo) NAME=gloo_coll_perf LIBSRC=bench/peers/gloo_coll_perf.cc LINK=(-lgloo -lpthread)
    if [ ! -f /usr/include/gloo/allreduce.h ] || [ -z "$(find /usr/lib -maxdepth 2 -name libgloo.so 2>/dev/null)" ]; then
      echo "build.sh: Gloo not installed (Debian libgloo-dev; make bench-deps)" >&2
      exit 3
    fi ;;
  oneccl) NAME=oneccl_coll_perf LIBSRC=bench/peers/oneccl_coll_perf.cc
    # shellcheck disable=SC2054 # (-Wl, takes commas)
    CXXFL=(-I"$ONECCL_ROOT/include") LINK=(-L"$ONECCL_ROOT/lib" -Wl,--disable-new-dtags,-rpath,"$ONECCL_ROOT/lib" -lccl -lintlc -lpthread)
    if [ ! -f "$ONECCL_ROOT/include/oneapi/ccl.hpp" ] || [ -z "$(find "$ONECCL_ROOT/lib" -maxdepth 1 -name 'libccl.so*' 2>/dev/null)" ]; then
      echo "build.sh: Intel oneCCL not installed in $ONECCL_ROOT (PyPI oneccl-cpu-devel; make bench-deps)" >&2
      exit 3
    fi ;;
  *) echo "build.sh: unknown peer '$PEER' (ompi, mpich, gloo, oneccl)" >&2; exit 2 ;;
esac
if ! command -v "$CC_" >/dev/null; then
  echo "build.sh: $CC_ not found ($PEER not installed; make bench-deps)" >&2
  exit 3
fi
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"
COMMON="bench/common/opts.c bench/common/report.c bench/common/dtype.c bench/common/verify.c bench/common/pages.c"
BIN=$OUT/$NAME
SRCS="$LIBSRC bench/peers/peer_main.c bench/peers/peer.h bench/peers/nccl_stubs.c $COMMON bench/common/*.h bench/*_perf.c include/nccl.h bench/peers/build.sh"
OBJ=$OUT/peer-obj-$NAME
mkdir -p "$OBJ"
# shellcheck disable=SC2086
if [ ! -x "$BIN" ] || [ -n "$(find $SRCS -newer "$BIN" 2>/dev/null | head -n 1)" ]; then
  echo "== building $BIN ($PEER)" >&2
  CFL="-std=gnu11 -O2 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -DBRAID_NO_CUDA_HEADERS -Iinclude -Ibench/common"
  objs=()
  for c in $COLLS; do
    # shellcheck disable=SC2086
    "$CC_" $CFL -Dbench_coll=bench_coll_$c -c "bench/${c}_perf.c" -o "$OBJ/$c.o"
    objs+=("$OBJ/$c.o")
  done
  for f in bench/peers/peer_main.c bench/peers/nccl_stubs.c $COMMON; do
    # shellcheck disable=SC2086
    "$CC_" $CFL -c "$f" -o "$OBJ/$(basename "$f" .c).o"
    objs+=("$OBJ/$(basename "$f" .c).o")
  done
  case "$LIBSRC" in
    *.cc) c++ -std=c++17 -O2 -Wall -Wextra -Wno-unused-parameter -Ibench/peers -Ibench/common "${CXXFL[@]}" \
        -c "$LIBSRC" -o "$OBJ/lib.o"
      c++ -o "$BIN" "$OBJ/lib.o" "${objs[@]}" "${LINK[@]}" -lm ;;
    *) # shellcheck disable=SC2086
      "$CC_" $CFL -Ibench/peers -c "$LIBSRC" -o "$OBJ/lib.o"
      "$CC_" -o "$BIN" "$OBJ/lib.o" "${objs[@]}" -lm ;;
  esac
fi
echo "$BIN"
