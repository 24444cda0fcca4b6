#!/usr/bin/env bash
# run.sh - checks of braid-plan's output (tools/braid-plan.c): --help names every long option
# of the option table, bad flags and bad layouts exit non-zero, --json is valid JSON with
# the fields tools read, --search prints a ranked table, the XML (tuner) path works.
# Usage: tests/plan/run.sh [BUILD]; prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-${BUILD:-build}}
BIN=$BUILD/bin/braid-plan
PY=/usr/bin/python3
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@" >/dev/null 2>&1; then ok "$name"; else bad "$name"; fi; }

help=$("$BIN" --help)
for opt in $(grep -o '{"[a-z-]*", [01], 0,' tools/braid-plan.c | sed -E 's/\{"([a-z-]*)".*/\1/'); do
  if grep -q -- "--$opt" <<<"$help"; then ok "help documents --$opt"; else bad "help documents --$opt"; fi
done
check "bad flag exits 2" bash -c "! $BIN --bogus"
check "missing model is refused" bash -c "! $BIN -n 2"
check "invalid layout is refused" bash -c "! $BIN -n 2 -P llama-70b -t 3"
check "unknown preset is refused" bash -c "! $BIN -P nope"

json=$("$BIN" -n 8 -P llama-70b -t 8 -q 4 --json)
check "layout --json parses" $PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["tp"]==8 and d["pp"]==4 and d["dp"]==2; w={i["what"]:i for i in d["items"]}; assert w["TP"]["link"]=="NVLink" and w["DP"]["link"]=="network"' "$json"
json=$("$BIN" -n 16 -P mixtral-8x22b -S --json --top 0)
check "search --json parses and is ranked" $PY -c 'import json,sys; L=json.loads(sys.argv[1])["layouts"]; assert len(L)>10; f=[x for x in L if not any("fit" in w for w in x["warnings"])]; assert all(a["comm_us"]<=b["comm_us"] for a,b in zip(f,f[1:])); assert any(x["ep"]>1 for x in L)' "$json"
out=$("$BIN" -n 16 -P llama-70b -S)
check "search table has rank 1" grep -qE '^ +1 +[0-9]+ +[0-9]+ +[0-9]+ +1 ' <<<"$out"
check "search shows the best layout" grep -q '^# the best layout in detail' <<<"$out"
out=$("$BIN" -n 16 -g 8 -P llama-70b -t 16 -q 8)
check "TP 16 on 8-GPU nodes warns" grep -q 'TP is larger than the NVLink domain' <<<"$out"
out=$("$BIN" -x tests/topo/dgx-h100.xml -n 2 -P llama-70b -t 8 -q 2)
check "XML path uses the tuner" grep -qE '^TP +AllReduce .* NVLink +Ring/' <<<"$out"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
