#!/usr/bin/env bash
# run.sh DIR SECONDS [TARGET...] - run the libFuzzer targets built in DIR/bin (make fuzz-build):
# each first replays its regression inputs (fuzz/regress/<target>/, crashes found before:
# every one must pass), then fuzzes SECONDS from a scratch copy of its seed corpus
# (fuzz/corpus/<target>/; the repository's copy is not written). A crash leaves its input in
# DIR/crashes/ (copy it to fuzz/regress/<target>/ once fixed). Prints per target the runs,
# executions and coverage, and ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
dir=$1
secs=$2
shift 2
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi
passed=0
failed=0
mkdir -p "$dir/crashes"
for t in "${targets[@]}"; do
  bin=$dir/bin/$t
  name=${t#fuzz_}
  if [ ! -x "$bin" ]; then
    echo "== $t: not built ($bin)"
    failed=$((failed + 1))
    continue
  fi
  log=$dir/$t.log
  ok=1
  regress=(fuzz/regress/$name/*)
  if [ -e "${regress[0]}" ]; then
    if ! "$bin" "${regress[@]}" >"$log.regress" 2>&1; then
      echo "== $t: a regression input fails again (see $log.regress)"
      ok=0
    fi
  fi
  work=$(mktemp -d)
  scratch=$(mktemp -d) # the targets' own files (not in the corpus: libFuzzer re-reads that)
  cp fuzz/corpus/"$name"/* "$work"/ 2>/dev/null
  # -rss_limit_mb: the sanitizers' shadow and the library's threads; -timeout: one input
  TMPDIR=$scratch "$bin" "$work" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
    -artifact_prefix="$dir/crashes/$t-" >"$log" 2>&1
  rc=$?
  rm -rf "$work" "$scratch"
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]*' | tail -n 1 | grep -o '[0-9]*$')
  ft=$(grep -E '^#[0-9]+' "$log" | grep -o 'ft: [0-9]*' | tail -n 1 | grep -o '[0-9]*$')
  if [ "$rc" -ne 0 ]; then
    echo "== $t: libFuzzer exited $rc (see $log; inputs in $dir/crashes/)"
    grep -E 'ERROR|SUMMARY' "$log" | head -n 5
    ok=0
  fi
  echo "== $t: ${secs} s, ${execs:-?} executions, coverage ${cov:-?} edges, ${ft:-?} features"
  if [ $ok -eq 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
