#!/bin/sh
# rma_perf.sh LIBDIR [rma_perf flags] - build bench/rma/rma_perf.c against the libnccl.so.2 in
# LIBDIR (braid's build/lib, an older braid's, or NVIDIA's) and run it between two fake nodes
# over loopback. NCCL_NET picks the network as usual (Socket, UCX, IB with the emulator).
#   bench/rma/rma_perf.sh build/host/lib -e 16777216 -n 50
set -eu
here=$(cd "$(dirname "$0")" && pwd)
lib=$(cd "${1:?usage: rma_perf.sh LIBDIR [flags]}" && pwd)
shift
out=$(mktemp -d /tmp/rma_perf.XXXXXX)
trap 'rm -rf "$out"' EXIT
cc -O2 -I"$here/../../include" "$here/rma_perf.c" -o "$out/rma_perf" -L"$lib" -l:libnccl.so.2 -Wl,-rpath,"$lib"
NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} "$out/rma_perf" "$@"
