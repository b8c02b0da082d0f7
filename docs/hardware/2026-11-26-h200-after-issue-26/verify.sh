#!/usr/bin/env bash
# Issue 26 after its fixes, on a lent GPU: items 16 (amp bytes), 17 (steady peak), 19 (--stream),
# and issue 28's int8-wo/int4-wo decode through PyTorch's kernels. Writes under $OUT.
set -uo pipefail
cd "$(dirname "$0")"
DEST=${OUT:-/tmp/v26}; mkdir -p "$DEST"
LOG="$DEST/verify.log"
export PYTHONUNBUFFERED=1 COLUMNS=160 ACCELBENCH_HOME="$DEST/home" XDG_DATA_HOME="$DEST/data"
DEVICE=${DEVICE:-cuda}; SIZE=${SIZE:-published}
T0=$(date +%s); BUDGET=${BUDGET:-170}
if [ -d ../.whl ] && ! python3 -c 'import platformdirs' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site ../.whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
step() { local limit=$1 name=$2; shift 2; local left=$(( BUDGET - ($(date +%s) - T0) ))
  [ "$left" -lt 10 ] && { echo "== $name skipped" >> "$LOG"; return; }
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== [$(( $(date +%s) - T0 )) s] $name: $*" >> "$LOG"
  timeout -k 5 "$limit" "$@" >> "$LOG" 2>&1; echo "== $name: exit $?" >> "$LOG"; }
AB=(python3 -m accelbench)
if [ "$SIZE" = tiny ]; then R=(--size tiny --steps 3); G=(--size tiny --prompt-len 8 --new-tokens 8 --steps 2)
else R=(--batch-size 128 --time-budget 3); G=(--prompt-len 128 --new-tokens 64 --time-budget 2); fi
step 30 roofline "${AB[@]}" roofline --device "$DEVICE" -o "$DEST/roofline.json"
step 50 resnet50 "${AB[@]}" run resnet50 --device "$DEVICE" --mode train --precision fp32 "${R[@]}" --wide --quiet -o "$DEST/resnet50.json"
step 80 gpt2-precisions "${AB[@]}" run gpt2 --device "$DEVICE" --mode generate --precision bf16,amp-bf16,int8-wo,int4-wo "${G[@]}" --wide --quiet -o "$DEST/gpt2.json"
step 40 gpt2-stream "${AB[@]}" run gpt2 --device "$DEVICE" --mode generate --precision bf16 --stream "${G[@]}" --wide --quiet -o "$DEST/stream.json"
echo "== done in $(( $(date +%s) - T0 )) s" >> "$LOG"
