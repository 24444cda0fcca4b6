#!/bin/bash
# bench/small-rounds.sh - small all-reduce times of several builds, interleaved rounds (issue
# 20: "8 B-4 KiB no slower than before"). Each round runs every build once, in the order
# given, so a noisy machine hits them alike; prints the out-of-place time (us) per size and
# round, then the minimum over rounds, and the load average before and after.
#   bench/small-rounds.sh [-r ROUNDS] NAME=BIN_DIR[:ENV=VAL,...] ...
#   bench/small-rounds.sh -r 5 base=/work/baseline/build/host/bin new=build/host/bin \
#       new-noflight=build/host/bin:BRAID_FLIGHT_CALLS=0
# BENCH_ARGS overrides "-b 8 -e 4K -f 8 -P 2 -n 20000 -w 500 -c 0".
set -euo pipefail
rounds=5
if [ "${1:-}" = "-r" ]; then rounds=$2; shift 2; fi
[ $# -ge 1 ] || { sed -n 2,10p "$0"; exit 2; }
args=${BENCH_ARGS:--b 8 -e 4K -f 8 -P 2 -n 20000 -w 500 -c 0}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  for spec in "$@"; do
    name=${spec%%=*} rest=${spec#*=} dir=${rest%%:*} envs=""
    [ "$rest" != "$dir" ] && envs=${rest#*:}
    # shellcheck disable=SC2086
    env ${envs//,/ } "$dir/all_reduce_perf" $args 2>/dev/null |
      awk -v n="$name" -v r="$r" '$1 ~ /^[0-9]+$/ && NF >= 12 {print n, r, $1, $6}' >>"$out/t"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '{k=$1" "$3; v[k]=v[k] " " $4; if (!(k in m) || $4 < m[k]) m[k]=$4; if (!($1 in seen)) {seen[$1]=1; order[++no]=$1}
      if (!($3 in sz)) {sz[$3]=1; sizes[++ns]=$3}}
     END {printf "%-16s %8s  %-10s  %s\n", "build", "bytes", "min us", "per round";
          for (i=1;i<=ns;i++) for (j=1;j<=no;j++) {k=order[j]" "sizes[i]; printf "%-16s %8s  %-10s %s\n", order[j], sizes[i], m[k], v[k]}}' "$out/t"
