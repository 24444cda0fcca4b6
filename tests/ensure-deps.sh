#!/usr/bin/env bash
# ensure-deps.sh PKG... - install the Debian packages the tests or benchmarks need when they
# are missing, and say so. Known names: check, clang-format, libfuzzer, mpi, mpich (MPICH
# beside Open MPI: mpicc.mpich/mpirun.mpich; `make bench-deps`), matplotlib, ucx, ibverbs.
set -euo pipefail
need=()
for what in "$@"; do
  case "$what" in
    check) pkg-config --exists check 2>/dev/null || need+=(check pkg-config) ;;
    clang-format) command -v clang-format >/dev/null 2>&1 || need+=(clang-format) ;;
    libfuzzer) # clang and its libFuzzer runtime (Debian 12: clang-14, libclang-rt-14-dev)
      { command -v clang >/dev/null 2>&1 &&
        ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; } ||
        need+=(clang libclang-rt-14-dev) ;;
    ucx) [ -f /usr/include/ucp/api/ucp.h ] || need+=(libucx-dev ucx-utils) ;; # the UCX net plugin
    ibverbs) [ -f /usr/include/infiniband/verbs.h ] || need+=(libibverbs-dev) ;;
    mpi) command -v mpicc >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev) ;;
    mpich) command -v mpicc.mpich >/dev/null 2>&1 || need+=(mpich libmpich-dev) ;;
    matplotlib) python3 -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || need+=(python3-matplotlib) ;;
    *) echo "ensure-deps: unknown dependency '$what'" >&2; exit 2 ;;
  esac
done
[ ${#need[@]} -eq 0 ] && exit 0
echo "== installing missing packages: ${need[*]}"
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${need[@]}" >/dev/null
