#!/usr/bin/env bash
# run.sh - checks of braid-plan's output (tools/braid-plan.c): --help names every long option
# of the option table, bad flags and bad layouts exit non-zero, --json is valid JSON with
# the fields tools read, --search prints a ranked table, the XML (tuner) path works; the
# collective mode (--coll) gives the worked examples of issue 15: an 8-GPU ring all-reduce of
# 100 MB moves 175 MB per GPU, 0.097 ms at 1,800 GB/s and 3.5 ms at 50 GB/s, 7.8 ms vs 280 ms
# over 80 layers; at N = 32 a ring takes 62 steps and a tree 10, 124 us vs 20 us at 2 us per
# step; the 64 KB / 1 MB / 100 MB / 1 GB table of step vs transfer cost at N = 32.
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

# ---- collective mode ----
j() { "$BIN" --coll allreduce --json "$@"; }
fast=$(j --size 100M --ranks 8 --bw 1800 --lat 0 --repeat 80)
slow=$(j --size 100M --ranks 8 --bw 50 --lat 0 --repeat 80)
check "8 GPUs, 100 MB: 175 MB per GPU" $PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["ring"]["bytes_per_gpu"]==175e6' "$fast"
check "0.097 ms at 1,800 GB/s" $PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert round(d["ring"]["transfer_us"]/1e3,3)==0.097' "$fast"
check "3.5 ms at 50 GB/s" $PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert round(d["ring"]["transfer_us"]/1e3,3)==3.5' "$slow"
check "7.8 ms vs 280 ms over 80 layers" $PY -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); assert round(a["ring"]["repeat_ms"],1)==7.8 and round(b["ring"]["repeat_ms"],1)==280.0' "$fast" "$slow"
check "busbw of the ring at 1,800 GB/s is the link's" $PY -c 'import json,sys; d=json.loads(sys.argv[1]); r=d["ring"]; assert abs(r["busbw"]-1800)<0.01 and abs(r["algbw"]-1800/1.75)<0.01' "$fast"
n32=$(j --size 100M --ranks 32 --bw 50 --lat 2)
check "N = 32: ring 62 steps, tree 10" $PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["ring"]["steps"]==62 and d["tree"]["steps"]==10' "$n32"
check "124 us vs 20 us at 2 us per step" $PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["ring"]["step_us"]==124 and d["tree"]["step_us"]==20' "$n32"
table=$("$BIN" --coll allreduce --ranks 32 --bw 50 --lat 2 --table)
check "table: 64 KB, steps dominate, tree faster" grep -qE '^ +64000 +124\.00 +2\.48 +126\.48 +20\.00 +2\.56 +22\.56 +Tree +steps$' <<<"$table"
check "table: 1 MB" grep -qE '^ +1000000 +124\.00 +38\.75 +162\.75 +20\.00 +40\.00 +60\.00 +Tree +steps$' <<<"$table"
check "table: 100 MB, transfer dominates, ring faster" grep -qE '^ +100000000 +124\.00 +3875\.00 +3999\.00 +20\.00 +4000\.00 +4020\.00 +Ring +transfer$' <<<"$table"
check "table: 1 GB" grep -qE '^ +1000000000 +124\.00 +38750\.00 +38874\.00 +20\.00 +40000\.00 +40020\.00 +Ring +transfer$' <<<"$table"
out=$("$BIN" --coll allreduce --size 100M --ranks 8 --bw 1800 --lat 0 --repeat 80)
check "text: the model picks the ring, 0.097 ms" grep -q '^the model picks Ring: 0.097 ms per call, 7.778 ms over 80 calls' <<<"$out"
check "all-gather has no tree" $PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert "tree" not in d and d["ring"]["bytes_per_gpu"]==87.5e6 and d["ring"]["steps"]==7' "$("$BIN" --coll allgather --json --size 100M --ranks 8 --bw 50)"
out=$("$BIN" -x tests/topo/dgx-h100.xml -n 2 --coll allreduce --size 100M)
check "--xml: braid's tuner picks" grep -qE "^braid's tuner on tests/topo/dgx-h100.xml \(2 nodes x 8 GPUs\) picks (Ring|Tree)/" <<<"$out"
check "unknown --coll exits 2" bash -c "$BIN --coll allfoo >/dev/null 2>&1; [ \$? -eq 2 ]"
check "--bw 0 is refused" bash -c "$BIN --coll allreduce --bw 0 >/dev/null 2>&1; [ \$? -eq 2 ]"
check "--repeat 0 is refused" bash -c "$BIN --coll allreduce --repeat 0 >/dev/null 2>&1; [ \$? -eq 2 ]"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
