#!/usr/bin/env bash
# run.sh - checks of braid-topo's command line (tools/braid-topo.c) on the files of real
# machines (tests/topo/real): every file prints rings and both trees for 1 and 2 nodes;
# --nccl-graph and --nccl-log exit 0 where braid agrees with NCCL and 3 (with the
# differences printed) where it does not; --graph-dump writes what --nccl-graph reads;
# --help documents every long option; bad options exit 2.
# Usage: tests/topo/run.sh [BUILD]; prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-${BUILD:-build}}
BIN=$BUILD/bin/braid-topo
R=tests/topo/real
TMP=$(mktemp -d /tmp/braid-topo-cli.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@" >/dev/null 2>&1; then ok "$name"; else bad "$name"; fi; }
# exit status of a command, output dropped
rc() { "$@" >/dev/null 2>&1; echo $?; }

help=$("$BIN" --help)
for opt in $(grep -o '{"[a-z-]*", [a-z_]*, 0,' tools/braid-topo.c | sed -E 's/\{"([a-z-]*)".*/\1/'); do
  if grep -q -- "--$opt" <<<"$help"; then ok "help documents --$opt"; else bad "help documents --$opt"; fi
done
check "bad flag exits 2" test "$(rc "$BIN" --bogus)" = 2
check "bad NCCL version exits 2" test "$(rc "$BIN" -x $R/b200-vastai.xml -V two)" = 2

for f in $R/*.xml; do
  case $f in *graph.xml) continue ;; esac
  for n in 1 2; do
    out=$("$BIN" -x "$f" -n $n -s channels 2>/dev/null)
    name="$(basename "$f") on $n node(s): rings and two trees"
    if grep -q '^Channel 00/' <<<"$out" && grep -q '^Tree 0 ' <<<"$out" && grep -q '^Tree 1 ' <<<"$out" &&
      grep -q '^ring search: pattern 4' <<<"$out"; then ok "$name"; else bad "$name"; fi
  done
done

# NCCL's graph dumps: the same searches with the tables of the NCCL version that wrote them
for m in b200-vastai:2.27.3 h200-vastai:2.27.3 a100-perlmutter:2.29.7 gb300-nvl72-tray:2.29.7 \
  gb300-nvl72-2tray:2.29.7; do
  x=${m%%:*}
  v=${m##*:}
  check "$x agrees with NCCL $v's graph dump" test "$(rc "$BIN" -x $R/$x.xml -s channels -V "$v" -g $R/$x.graph.xml)" = 0
done
out=$("$BIN" -x $R/b200-vastai.xml -s channels -g $R/b200-vastai.graph.xml)
check "B200 with 2.30's tables differs (tree 45 vs 40) and exits 3" test $? = 3
check "the difference is printed" grep -q '^tree graph: NCCL pattern' <<<"$out"

# NCCL INFO logs: nodes, ranks and version from the log
for x in b200-vastai h200-vastai a100-perlmutter; do
  check "$x agrees with its NCCL log" test "$(rc "$BIN" -x $R/$x.xml -s channels -l $R/$x.nccl.log)" = 0
done
sed -E 's/(Channel 00\/[0-9]+ :) 0 1 /\1 1 0 /' $R/h200-vastai.nccl.log >"$TMP/changed.log"
check "a changed Channel line is found" test "$(rc "$BIN" -x $R/h200-vastai.xml -s channels -l "$TMP/changed.log")" = 3
check "a missing log is an error" test "$(rc "$BIN" -x $R/h200-vastai.xml -l "$TMP/none.log")" = 1

# braid's own graph dump is NCCL's format: read back, it agrees
check "graph dump is written" "$BIN" -x $R/gb300-nvl72-2tray.xml -s channels -G "$TMP/g.xml"
check "graph dump reads back as NCCL's" test "$(rc "$BIN" -x $R/gb300-nvl72-2tray.xml -s channels -g "$TMP/g.xml")" = 0
check "NCCL_GRAPH_FILE with braid's dump" env NCCL_GRAPH_FILE="$TMP/g.xml" "$BIN" -x $R/gb300-nvl72-2tray.xml -s channels
check "NCCL_GRAPH_FILE missing is an error" test "$(rc env NCCL_GRAPH_FILE="$TMP/none.xml" "$BIN" -x $R/b200-vastai.xml -s channels)" = 1
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
