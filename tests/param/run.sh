#!/usr/bin/env bash
# run.sh - the parameter table seen from outside the library, through braid-info:
#   - the env plugin (NCCL_ENV_PLUGIN): a test plugin built here (tests/param/env_plugin.c) wins
#     over the environment; NCCL's search rules (a path; a name -> libnccl-env-<name>.so; unset
#     -> libnccl-env.so; none); v2, then v1; a failing init or no table falls back to the
#     environment, with an INFO line saying why;
#   - every name NCCL 2.28, 2.29 and 2.30 reads (tests/param/nccl-*-names.txt) is known: set
#     all at once, none is reported unknown, each has a status in braid-info --all.
# Usage: tests/param/run.sh [BUILD]; prints "N passed, N failed"; exits non-zero on failure.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-${BUILD:-build}}
INFO=$BUILD/bin/braid-info
CC=${CC:-cc}
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/     /' | head -20; }
[ -x "$INFO" ] || { echo "param: SKIPPED: $INFO is missing: build first"; echo "0 passed, 0 failed"; exit 0; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
build() { $CC -shared -fPIC -fvisibility=hidden "$@" tests/param/env_plugin.c; }
build -o "$OUT/libnccl-env-braidtest.so" &&
  build -DENV_V1_ONLY -o "$OUT/libnccl-env-v1only.so" &&
  build -DENV_FAIL_INIT -o "$OUT/libnccl-env-failinit.so" &&
  build -DENV_NO_TABLE -o "$OUT/libnccl-env-notable.so" &&
  mkdir -p "$OUT/default" && build -o "$OUT/default/libnccl-env.so" ||
  { echo "param: cannot build the test env plugins"; echo "0 passed, 1 failed"; exit 1; }

# The row NAME of braid-info's table: "VALUE SOURCE..." (columns 4 and 5 on).
row() { awk -v n="$1" '$1 == n { v = $5; $1 = $2 = $3 = $4 = $5 = ""; sub(/^ */, ""); print v, $0; exit }'; }
# expect NAME "VALUE SOURCE-PREFIX" OUTPUT DESCRIPTION
expect() {
  local got
  got=$(row "$1" <<<"$3")
  if [[ "$got" == "$2"* ]]; then ok "$4"; else bad "$4" "$1: got '$got', want '$2...'"; fi
}
has() { if grep -qF -- "$2" <<<"$3"; then ok "$1"; else bad "$1" "no '$2' in the output"; fi; }
hasnt() { if grep -qF -- "$2" <<<"$3"; then bad "$1" "'$2' in the output"; else ok "$1"; fi; }
run() { env -u NCCL_ENV_PLUGIN NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_BUFFSIZE=65536 BRAID_TIMEOUT=5 "$@" "$INFO" 2>&1; }

out=$(run NCCL_ENV_PLUGIN="$OUT/libnccl-env-braidtest.so")
expect NCCL_BUFFSIZE "1048576 env plugin braid-test" "$out" "plugin by path: its NCCL_BUFFSIZE wins over the environment's"
expect BRAID_TIMEOUT "11 env plugin braid-test" "$out" "plugin by path: its BRAID_TIMEOUT wins too"
expect NCCL_SOCKET_RETRY_CNT "34 default" "$out" "plugin by path: names it has no value for keep their default"
has "plugin by path: the v2 table is used" "ENV/Plugin: Using braid-test (v2)" "$out"
has "plugin by path: it logs through braid's logger" "braid-test env plugin: init for NCCL 2." "$out"
has "plugin by path: the set-by line names the plugin" "NCCL_BUFFSIZE set by env plugin braid-test to 1048576." "$out"

out=$(LD_LIBRARY_PATH="$OUT" run NCCL_ENV_PLUGIN=braidtest)
expect NCCL_BUFFSIZE "1048576 env plugin braid-test" "$out" "plugin by name: libnccl-env-braidtest.so is found"
out=$(LD_LIBRARY_PATH="$OUT/default" run)
expect NCCL_BUFFSIZE "1048576 env plugin braid-test" "$out" "unset: libnccl-env.so is loaded"
out=$(LD_LIBRARY_PATH="$OUT/default" run NCCL_ENV_PLUGIN=none)
expect NCCL_BUFFSIZE "65536 environment" "$out" "none: no plugin, the environment is read"
out=$(run)
expect NCCL_BUFFSIZE "65536 environment" "$out" "unset and no libnccl-env.so: the environment"
has "unset and no libnccl-env.so: INFO says so" "ENV/Plugin: Could not find: libnccl-env.so" "$out"
out=$(run NCCL_ENV_PLUGIN="$OUT/libnccl-env-v1only.so")
expect NCCL_BUFFSIZE "1048576 env plugin braid-test-v1" "$out" "a v1-only plugin is used through v1"
has "a v1-only plugin: INFO names v1" "ENV/Plugin: Using braid-test-v1 (v1)" "$out"
out=$(run NCCL_ENV_PLUGIN="$OUT/libnccl-env-failinit.so")
expect NCCL_BUFFSIZE "65536 environment" "$out" "a plugin whose init fails: the environment"
has "a plugin whose init fails: INFO says so" "init returned 3, reading the environment instead" "$out"
out=$(run NCCL_ENV_PLUGIN="$OUT/libnccl-env-notable.so")
expect NCCL_BUFFSIZE "65536 environment" "$out" "a library without a table: the environment"
has "a library without a table: INFO says so" "is unsupported (no ncclEnvPlugin_v2 or _v1)" "$out"
out=$(run NCCL_ENV_PLUGIN=nosuchplugin)
has "a missing plugin: INFO lists what was tried" "Could not find: nosuchplugin libnccl-env-nosuchplugin.so" "$out"
conf=$OUT/nccl.conf
echo "NCCL_ENV_PLUGIN=$OUT/libnccl-env-braidtest.so" >"$conf"
out=$(run NCCL_CONF_FILE="$conf")
expect NCCL_BUFFSIZE "1048576 env plugin braid-test" "$out" "NCCL_ENV_PLUGIN from a conf file is honoured (NCCL applies conf files first)"

# Every name NCCL reads, set at once: none unknown, each listed with a status.
names=$(cat tests/param/nccl-2.*-names.txt | sort -u | grep -v -E '^NCCL_(DEBUG|CONF_FILE|ENV_PLUGIN|NO_CACHE|WARN_ENABLE)')
args=()
for n in $names; do args+=("$n=1"); done
out=$(env "${args[@]}" NCCL_DEBUG=WARN "$INFO" --all 2>&1)
hasnt "every NCCL name set: none reported unknown" "Unknown" "$out"
missing=""
for n in $names; do
  awk -v n="$n" '$1 == n && ($2 == "LIVE" || $2 == "PER_USE" || $2 == "ACCEPTED") { f = 1 } END { exit !f }' <<<"$out" ||
    missing="$missing $n"
done
if [ -z "$missing" ]; then ok "braid-info --all gives every NCCL name a status"; else bad "names without a status:$missing"; fi
out=$("$INFO")
has "braid-info says how many names it hides" "more names NCCL reads are ACCEPTED and ignored" "$out"
hasnt "braid-info hides the bare NCCL names by default" "NCCL_WORK_FIFO_BYTES" "$out"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
