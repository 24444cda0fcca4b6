#!/bin/sh
# kill-soak.sh [TRIALS] - issue 16's soak (not in make test): TRIALS (default 100) kill trials
# over phases (init-connect, init-shm, coll, coll-early) and layouts (4 ranks: one per fake
# node, two per node, one node; 3 ranks one per node), victims in turn. Each trial must end
# with 0 hangs, 0 /dev/shm leaks and every survivor naming the victim first (kill_soak.c).
# Needs the host build: make CUDA=0 BUILD=build/host -j2 all. Prints a line per trial and a table.
set -u
BUILD=${BUILD:-build/host}
TRIALS=${1:-100}
BIN=$BUILD/soak/kill_soak
mkdir -p "$BUILD/soak"
cc -O2 -pthread -Iinclude -o "$BIN" tests/soak/kill_soak.c -L"$BUILD/lib" -lnccl -Wl,-rpath,"$PWD/$BUILD/lib" || exit 1
LAYOUTS="4:1 4:2 4:0 3:1"
PHASES="init-connect init-shm coll coll-early"
out=$(mktemp)
i=0
while [ "$i" -lt "$TRIALS" ]; do
  for layout in $LAYOUTS; do
    for phase in $PHASES; do
      [ "$i" -ge "$TRIALS" ] && break 2
      n=${layout%%:*}; per=${layout#*:}
      victim=$(( (i / 16) % n ))
      line=$(timeout 90 "$BIN" "$n" "$per" "$victim" "$phase" 2>/dev/null || true)
      [ -z "$line" ] && line="trial FAIL hang=1 (no verdict: the trial itself was killed)"
      echo "$n ranks, $per per node, victim $victim, $phase: $line" | tee -a "$out"
      i=$((i + 1))
    done
  done
done
echo
echo "| layout | phase | trials | ok | hangs | leaks | all survivors named the victim |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for layout in $LAYOUTS; do
  n=${layout%%:*}; per=${layout#*:}
  for phase in $PHASES; do
    sel=$(grep "^$n ranks, $per per node, victim [0-9]*, $phase:" "$out")
    [ -z "$sel" ] && continue
    t=$(echo "$sel" | wc -l); ok=$(echo "$sel" | grep -c "trial ok")
    h=$(echo "$sel" | sed -n 's/.*hang=\([0-9]*\).*/\1/p' | awk '{s+=$1} END {print s+0}')
    l=$(echo "$sel" | sed -n 's/.*leaks=\([0-9]*\).*/\1/p' | awk '{s+=$1} END {print s+0}')
    nm=$(echo "$sel" | awk '{ if (match($0, /named=[0-9]+\/[0-9]+/)) { split(substr($0, RSTART + 6, RLENGTH - 6), a, "/"); if (a[1] == a[2]) c++ } } END {print c+0}')
    echo "| $n ranks, $per per node | $phase | $t | $ok | $h | $l | $nm/$t |"
  done
done
fails=$(grep -c "trial FAIL" "$out")
rm -f "$out"
echo
echo "$TRIALS trials, $fails failed"
[ "$fails" -eq 0 ]
