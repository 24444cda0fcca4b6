#!/usr/bin/env bash
# backend.sh BUILD_DIR [TORCH_VERSION] - `make test-torch-backend`: the braid torch.distributed
# backend (integrations/torch), built against torch (default 2.15.0, the newest):
#   1. tests/pytorch/test_backend.py under torchrun, 2 and 3 processes: every collective,
#      dtype and op against Gloo's results (or a local reference where Gloo has none);
#   2. examples/ddp.py under torchrun, 2 processes, on braid and on Gloo: the final losses
#      agree to 1e-5 (relative) and the loss fell.
# Ends with "N passed, N failed". Needs the torch virtualenv (tests/pytorch/venv.sh: a
# download the first time); not part of `make test`.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
v=${2:-2.15.0}
run() { "$here/with-torch.sh" "$v" "$build" "$@"; }
p=0 f=0
tally() { if [ "$1" = 0 ]; then p=$((p + 1)); echo "PASS: $2"; else f=$((f + 1)); echo "FAIL: $2"; fi; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
port=$((29500 + $$ % 1000))
for n in 2 3; do
  run torchrun --nproc-per-node "$n" --master-port "$port" "$root/tests/pytorch/test_backend.py" >"$log" 2>&1
  rc=$?
  grep -E "^backend suite|FAILED|Error|error" "$log" | grep -v FutureWarning | head -20
  tally "$rc" "backend suite against Gloo, $n ranks (torch $v)"
done
declare -A loss
for b in braid gloo; do
  run torchrun --nproc-per-node 2 --master-port "$port" "$root/examples/ddp.py" --backend "$b" >"$log" 2>&1
  rc=$?
  grep -E "^step|^final" "$log" | sed 's/^/    /'
  loss[$b]=$(sed -nE 's/^final loss ([0-9.e+-]+).*/\1/p' "$log")
  first=$(sed -nE 's/^step +0 loss ([0-9.e+-]+)/\1/p' "$log")
  [ $rc = 0 ] && [ -n "${loss[$b]}" ] && python3 -c "import sys; sys.exit(0 if float('${loss[$b]}') < float('$first') / 10 else 1)"
  tally $? "DDP example on $b: ran, loss fell tenfold (${first:-?} -> ${loss[$b]:-?})"
done
python3 -c "import sys; a, b = float('${loss[braid]:-nan}'), float('${loss[gloo]:-nan}'); sys.exit(0 if abs(a - b) <= 1e-5 * abs(b) else 1)"
tally $? "DDP converges as with Gloo: final loss braid ${loss[braid]:-?}, gloo ${loss[gloo]:-?}"
echo "$p passed, $f failed"
[ "$f" = 0 ]
