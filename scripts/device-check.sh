#!/usr/bin/env bash
# The device check (issue 26, "When a GPU is lent"): run it first whenever the library's `device`
# tool lends a GPU, in one call, e.g.
#
#   run(command="bash scripts/device-check.sh", carry=[".whl"], timeout_s=540)
#
# with the platformdirs wheel in .whl/ (the device image lacks it; DEVELOPERS.md says how to fetch
# it). At most about 8 minutes on an H100: every step has its own time limit and a failing step
# never stops the next. It writes everything it saw under $OUT (the device tool brings that folder
# back; at most 8 files) or, run by hand, under docs/hardware/device-check-<UTC time>/:
#   device-check.log   every command with its full output and exit status
#   results.tar.gz     the result JSON files, the history database, selftest/roofline JSON
# What the steps are for (items of issue 26):
#   selftest --quick         can this device's figures be trusted (timing, peak, precision, memory)
#   roofline                 FLOP/s and bandwidth ceilings (decode is read against the bandwidth)
#   resnet50 b128 fp32/tf32/amp-bf16, cudnn.benchmark on and off: peak memory (item 17)
#   gpt2 and llama-1b generate, bf16 and amp-bf16, --compile none,inductor (items 15, 16), with
#   the KV/weight bytes per token against the bandwidth
#
# DEVICE=cpu SIZE=tiny bash scripts/device-check.sh runs the same steps here, tiny, to test the script.
set -uo pipefail
cd "$(dirname "$0")/.."

DEVICE=${DEVICE:-cuda}
SIZE=${SIZE:-published}
DEST=${OUT:-docs/hardware/device-check-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$DEST/work"
LOG="$DEST/device-check.log"
export PYTHONUNBUFFERED=1 COLUMNS=160
export XDG_DATA_HOME="$DEST/work/data" XDG_CACHE_HOME="$DEST/work/cache"
DB="$DEST/work/history.db"
T0=$(date +%s)

say() { echo "== [$(( $(date +%s) - T0 )) s] $*" | tee -a "$LOG"; }
BUDGET=${BUDGET:-470}  # seconds for all steps together; each step also has its own limit
step() {  # step SECONDS NAME COMMAND...: run with a limit, log everything, never stop the script
  local limit=$1 name=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  if [ "$left" -lt 15 ]; then say "$name: skipped (the check's $BUDGET s are spent)"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "$name: $*"
  timeout -k 10 "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  say "$name: exit $rc$([ $rc = 124 ] && echo ' (time limit)')"
}

say "device check on $(hostname), $(date -u +%FT%TZ)"
if [ -d .whl ] && ! python3 -c 'import platformdirs' 2>/dev/null; then
  step 60 install-wheels python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! python3 -c 'import accelbench' 2>/dev/null; then
  step 120 install python3 -m pip install -q --no-deps --no-build-isolation -e .
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # works even where the install did not
fi
AB=(python3 -m accelbench)
command -v nvidia-smi >/dev/null && step 20 nvidia-smi nvidia-smi
step 30 versions python3 -c 'import sys, torch; c = torch.cuda.is_available(); print(sys.version)
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print(torch.cuda.get_device_properties(0) if c else "no cuda")'

step 60 doctor "${AB[@]}" doctor
step 120 selftest "${AB[@]}" selftest --device "$DEVICE" --quick -o "$DEST/work/selftest.json"
step 60 roofline "${AB[@]}" roofline --device "$DEVICE" --refresh -o "$DEST/work/roofline.json"

# Item 17: peak memory of ResNet-50 with cuDNN's autotuning on (default) and off.
if [ "$SIZE" = tiny ]; then RB=(--size tiny --steps 3); else RB=(--batch-size 128 --time-budget 4); fi
step 100 resnet50-cudnn-benchmark "${AB[@]}" run resnet50 --device "$DEVICE" --mode train \
  --precision fp32,tf32,amp-bf16 "${RB[@]}" --wide --quiet --db "$DB" -o "$DEST/work/resnet50-bench.json"
step 100 resnet50-no-cudnn-benchmark "${AB[@]}" run resnet50 --device "$DEVICE" --mode train \
  --precision fp32,tf32,amp-bf16 "${RB[@]}" --no-cudnn-benchmark --wide --quiet --db "$DB" \
  -o "$DEST/work/resnet50-nobench.json"

# Items 15, 16: generation, compiled and not, bf16 and amp-bf16, decode against the bandwidth.
if [ "$SIZE" = tiny ]; then GB=(--size tiny --prompt-len 8 --new-tokens 8 --steps 2);
else GB=(--prompt-len 128 --new-tokens 64 --time-budget 3); fi
for w in gpt2 llama-1b; do
  step 150 "$w-generate" "${AB[@]}" run "$w" --device "$DEVICE" --mode generate \
    --precision bf16,amp-bf16 --compile none,inductor "${GB[@]}" --wide --quiet --db "$DB" \
    -o "$DEST/work/$w-generate.json"
done

say "done in $(( $(date +%s) - T0 )) s"
tar -czf "$DEST/results.tar.gz" -C "$DEST/work" --exclude cache . && rm -rf "$DEST/work"
