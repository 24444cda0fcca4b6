#!/usr/bin/env bash
# ensure-deps.sh PKG... - install the Debian packages the tests or benchmarks need when they
# are missing, and say so. Known names: check, clang-format, libfuzzer, mpi, mpich (MPICH
# beside Open MPI: mpicc.mpich/mpirun.mpich; `make bench-deps`), gloo (libgloo-dev, the Gloo
# peer), oneccl (Intel oneCCL from PyPI oneccl-cpu-devel into a venv in $ONECCL_ROOT, default
# ~/.cache/braid-bench/oneccl-venv, kept between runs; the oneCCL peer), matplotlib, ucx, ibverbs.
set -euo pipefail
need=()
# Intel oneCCL for CPU from PyPI, into its own venv (no system Python touched). The wheel's
# libccl.so.1 lists libccl.so.2 (itself, under another name it does not ship) and Intel's
# compiler runtime (libintlc: intel-cmplr-lib-rt) as needed without either: both supplied.
oneccl_venv() {
  local root=${ONECCL_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/braid-bench/oneccl-venv}
  if [ ! -f "$root/include/oneapi/ccl.hpp" ] || [ ! -e "$root/lib/libintlc.so" ]; then
    echo "== installing Intel oneCCL (PyPI oneccl-cpu-devel, intel-cmplr-lib-rt) into $root"
    { [ -x "$root/bin/pip" ] || python3 -m venv "$root"; } &&
      "$root/bin/pip" install -q oneccl-cpu-devel intel-cmplr-lib-rt || return 1
  fi
  [ -e "$root/lib/libccl.so.2" ] || ln -s libccl.so.1 "$root/lib/libccl.so.2"
}
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
    gloo) [ -f /usr/include/gloo/allreduce.h ] || need+=(libgloo-dev) ;;
    oneccl) oneccl_venv ;;
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
