#!/usr/bin/env bash
# nccl-tests.sh - build NVIDIA's nccl-tests, unmodified, against braid alone.
#
#   tests/compat/nccl-tests.sh DIR [BUILD]
#
# DIR: an nccl-tests checkout (e.g. `git -C <mirror> worktree add /tmp/nccl-tests`); nothing is
# written into it except its own build/ folder... which goes to OUTDIR instead (below). BUILD:
# braid's build folder (default: build), whose lib/libnccl.so.2 is linked; include/ is braid's.
# Without DIR the script says so and exits 0 as a skip (77 with STRICT=1).
#
# Why more than `make NCCL_HOME=...`: this machine also has NVIDIA's NCCL under CUDA_HOME
# (include/nccl.h, include/nccl_device*, lib64/libnccl.so*) and nccl-tests' link line puts
# -L$(CUDA_LIB) before -L$(NCCL_HOME)/lib, so -lnccl would bind NVIDIA's library. The script
# hands nccl-tests a CUDA_LIB that is CUDA's lib64 without libnccl* (a folder of links), and
# an NCCL_HOME of braid's include/ and lib/ only. Then it proves the result:
#   1. no NVIDIA NCCL header was read: every compile's dependency list (nvcc -M, the same
#      flags) names braid's nccl.h / nccl_device.h and none under CUDA_HOME;
#   2. the link used braid: each binary's undefined nccl* symbols are all defined by braid's
#      libnccl.so.2 (`nm`), and `ldd` with LD_LIBRARY_PATH=braid resolves libnccl.so.2 there;
#   3. every binary of nccl-tests' BIN_FILES_LIST was built.
# Environment: NVCC_GENCODE (default sm_90 only: a full nccl-tests build is long on 2 cores),
# OUTDIR (default $BUILD/nccl-tests), JOBS (default 2), NCCL_TESTS_MAKE_ARGS (more make
# arguments, e.g. "MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi"), STRICT=1.
set -u
DIR=${1:-}
BUILD=${2:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "$DIR" ]; then
  echo "nccl-tests.sh: SKIP: no nccl-tests checkout given (usage: $0 DIR [BUILD]; e.g. git -C /path/to/nccl-tests.git worktree add /tmp/nccl-tests)"
  [ "${STRICT:-0}" = 1 ] && exit 77
  exit 0
fi
DIR=$(cd "$DIR" && pwd) || { echo "nccl-tests.sh: FAIL: $1 is not a folder"; exit 1; }
[ -f "$DIR/src/Makefile" ] || { echo "nccl-tests.sh: FAIL: $DIR has no src/Makefile (not an nccl-tests checkout)"; exit 1; }
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LIB=$BUILD/lib/libnccl.so.2
[ -f "$LIB" ] || { echo "nccl-tests.sh: FAIL: $LIB not built (make lib BUILD=...)"; exit 1; }
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "nccl-tests.sh: SKIP: no nvcc"; [ "${STRICT:-0}" = 1 ] && exit 77; exit 0; }
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$NVCC")")")}
OUTDIR=${OUTDIR:-$BUILD/nccl-tests}
GENCODE=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}
fail() { echo "nccl-tests.sh: FAIL: $*"; exit 1; }

# NCCL_HOME: braid's header folder and library, nothing else.
HOME_DIR=$OUTDIR/nccl-home
rm -rf "$HOME_DIR" && mkdir -p "$HOME_DIR/lib" || fail "cannot create $HOME_DIR"
ln -s "$ROOT/include" "$HOME_DIR/include"
ln -s "$LIB" "$HOME_DIR/lib/libnccl.so.2"
ln -s libnccl.so.2 "$HOME_DIR/lib/libnccl.so"
# CUDA_LIB: CUDA's libraries without NVIDIA's NCCL.
CUDA_LIB_DIR=$OUTDIR/cuda-lib
rm -rf "$CUDA_LIB_DIR" && mkdir -p "$CUDA_LIB_DIR"
for f in "$CUDA_HOME"/lib64/*; do
  case $(basename "$f") in libnccl*) continue ;; esac
  ln -s "$f" "$CUDA_LIB_DIR/"
done

echo "nccl-tests.sh: building $DIR ($(git -C "$DIR" describe --always --tags 2>/dev/null || echo unknown)) against $LIB"
BIN=$OUTDIR/build
rm -rf "$BIN"
MAKEARGS=(NCCL_HOME="$HOME_DIR" CUDA_HOME="$CUDA_HOME" CUDA_LIB="$CUDA_LIB_DIR" NVCC="$NVCC" BUILDDIR="$BIN"
  NVCC_GENCODE="$GENCODE")
# shellcheck disable=SC2206 # words on purpose: "MPI=1 MPI_HOME=..."
[ -n "${NCCL_TESTS_MAKE_ARGS:-}" ] && MAKEARGS+=(${NCCL_TESTS_MAKE_ARGS})
make -C "$DIR/src" -j"${JOBS:-2}" "${MAKEARGS[@]}" >"$OUTDIR/make.log" 2>&1 ||
  { tail -40 "$OUTDIR/make.log"; fail "make failed (log: $OUTDIR/make.log)"; }

# 1. Headers: the dependency list of every .cu with nccl-tests' own include flags.
NVIDIA_HDR=0
for cu in "$DIR"/src/*.cu; do
  deps=$("$NVCC" -std=c++17 -DNCCL_OS_LINUX -I"$HOME_DIR/include" -I"$DIR/src/../os" -I"$DIR/src" -M "$cu" 2>/dev/null) ||
    fail "nvcc -M $cu"
  echo "$deps" | tr ' \\' '\n\n' | grep -E "/nccl(_device)?(\.h|/)" >"$OUTDIR/deps.$(basename "$cu").txt"
  grep -q "^$CUDA_HOME/.*nccl\|^/usr/.*include/nccl" "$OUTDIR/deps.$(basename "$cu").txt" && {
    echo "  $(basename "$cu") reads NVIDIA's NCCL headers:"
    grep "$CUDA_HOME\|/usr/" "$OUTDIR/deps.$(basename "$cu").txt"
    NVIDIA_HDR=1
  }
done
[ "$NVIDIA_HDR" = 0 ] || fail "an NVIDIA NCCL header was on the include path"
grep -qh "nccl_device.h" "$OUTDIR"/deps.*.txt || fail "no source included nccl_device.h (unexpected nccl-tests version?)"
echo "  headers: every nccl.h / nccl_device.h read is braid's ($ROOT/include)"

# 2 and 3. Binaries.
LIST=$(sed -n 's/^BIN_FILES_LIST *:= *//p' "$DIR/src/Makefile")
[ -n "$LIST" ] || fail "cannot read BIN_FILES_LIST from $DIR/src/Makefile"
braid_syms=$(nm -D --defined-only "$LIB" | awk '{print $3}' | sort -u)
n=0
for b in $LIST; do
  exe=$BIN/${b}_perf
  [ -x "$exe" ] || fail "$exe was not built"
  missing=$(nm -D --undefined-only "$exe" | awk '{print $2}' | grep '^nccl' | sort -u | comm -23 - <(echo "$braid_syms"))
  [ -z "$missing" ] || fail "$exe needs nccl symbols braid lacks: $missing"
  where=$(LD_LIBRARY_PATH="$BUILD/lib" ldd "$exe" | awk '/libnccl.so/ {print $3}')
  [ "$(readlink -f "$where")" = "$(readlink -f "$LIB")" ] || fail "$exe: ldd resolves libnccl.so.2 to '$where', not braid's"
  n=$((n + 1))
done
echo "  binaries: $n built ($LIST); ldd (LD_LIBRARY_PATH=$BUILD/lib) resolves libnccl.so.2 to $LIB in each"
echo "nccl-tests.sh: PASS: run them with LD_LIBRARY_PATH=$BUILD/lib $BIN/all_reduce_perf ..."
