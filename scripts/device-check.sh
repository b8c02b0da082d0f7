#!/usr/bin/env bash
# The device check (issues 33 and 34): run it first whenever the library's `device` tool lends a
# GPU, in one call, e.g.
#
#   run(command="bash scripts/device-check.sh", carry=[".whl"], timeout_s=540)
#
# with the platformdirs wheel in .whl/ (the device image lacks it; docs/development.md says how to
# fetch it). Every step has its own time limit, a failing step never stops the next, and the steps
# run most important first, so a check cut short by BUDGET (default 300 s) has the headline figures:
# on an H100/H200 it takes 5-7 minutes (the compiles dominate), short enough to rerun once within a
# 15-minute lease. Everything it saw goes under $OUT (the device tool brings that folder back; at
# most 8 files) or, run by hand, under docs/hardware/device-check-<UTC time>/:
#   device-check.log   every command with its full output and exit status
#   gpu-samples.csv    GPU SM/memory clocks, power, limit, temperature and clock-event reasons, 2/s
#   host-load.txt      the host's load average, 1/s (decode on a GPU is launched from this CPU)
#   results.tar.gz     the result JSON files, the history database, selftest/roofline JSON
# What the steps are for:
#   roofline            measured bandwidth: every decode row's floor (issue 33)
#   gpt-fast            llama-1b decode by gpt-fast's recipe (static cache, decode compiled
#                       fullgraph with CUDA graphs) in bf16, int8-wo and int4-wo. Target: bf16 at
#                       least 50% of the measured bandwidth, int8/int4 faster than bf16
#   yardstick-compiled  a plain gpt-fast-style loop and accelbench's rounds in one process, the same
#                       recipe, TORCH_LOGS=recompiles,graph_breaks: accelbench within 5%
#   yardstick-eager     the same without compiling (the host's launch rate)
#   selftest            against the vendor's figures, capped peaks labelled (issue 34)
#   check-quantized     gpt2's CUDA int8/int4 kernels against the CPU's fp64 reference (issue 34)
#   repeat, stream      the process spread of a --repeat 3 case; a --stream case
#
# DEVICE=cpu SIZE=tiny bash scripts/device-check.sh runs the same steps here, tiny (a CI test).
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
BUDGET=${BUDGET:-300}  # seconds for all steps together; each step also has its own limit
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

PY=${PYTHON:-python3}
say "device check on $(hostname), $(date -u +%FT%TZ), DEVICE=$DEVICE SIZE=$SIZE BUDGET=$BUDGET"
if [ -d .whl ] && ! "$PY" -c 'import platformdirs' 2>/dev/null; then
  step 60 install-wheels "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$PY" -c 'import accelbench' 2>/dev/null; then
  step 120 install "$PY" -m pip install -q --no-deps --no-build-isolation -e .
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # works even where the install did not
fi
AB=("$PY" -m accelbench)

# Sampled throughout, in the background: the GPU's clocks, power and clock-event reasons (a
# power-capped peak or decode says so), and the host's load (decode launches come from it).
SAMPLERS=()
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,utilization.gpu,clocks_event_reasons.active \
    --format=csv -lms 500 >"$DEST/gpu-samples.csv" 2>&1 &
  SAMPLERS+=($!)
fi
(while sleep 1; do echo "$(date +%s) $(cat /proc/loadavg 2>/dev/null)"; done) >"$DEST/host-load.txt" &
SAMPLERS+=($!)
trap 'kill "${SAMPLERS[@]}" 2>/dev/null' EXIT

command -v nvidia-smi >/dev/null && step 20 nvidia-smi nvidia-smi
step 30 versions "$PY" -c 'import platform, sys, torch; c = torch.cuda.is_available(); print(sys.version)
from accelbench.devices.cpuinfo import cpu_model; print("host CPU", cpu_model(), platform.machine())
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print(torch.cuda.get_device_properties(0) if c else "no cuda")'

step 60 roofline "${AB[@]}" roofline --device "$DEVICE" --refresh -o "$DEST/work/roofline.json"

# Issue 33's target: llama-1b decode by gpt-fast's recipe, three precisions.
# At tiny size (CI, a CPU) the recipe's path runs through dynamo without inductor's minutes.
if [ "$SIZE" = tiny ]; then RECIPE=eager:reduce-overhead; TINY=(--size tiny --compile "$RECIPE");
else RECIPE=inductor:reduce-overhead; TINY=(); fi
step 240 gpt-fast "${AB[@]}" run llama-1b --device "$DEVICE" --mode generate --protocol gpt-fast \
  --precision bf16,int8-wo,int4-wo "${TINY[@]}" --wide --db "$DB" -o "$DEST/work/gpt-fast.json"

# The yardstick: a plain loop and accelbench in one process, compiled with graphs and eager.
if [ "$SIZE" = tiny ]; then YS=(--layers 1 --new-tokens 8 --repeats 2); else YS=(--new-tokens 200 --repeats 5); fi
step 150 yardstick-compiled env TORCH_LOGS=recompiles,graph_breaks "$PY" benchmarks/quantized_decode.py \
  --device "$DEVICE" --in-process --recipe "$RECIPE" "${YS[@]}" \
  --save "$DEST/work/yardstick-compiled.json"
step 60 yardstick-eager "$PY" benchmarks/quantized_decode.py --device "$DEVICE" --in-process "${YS[@]}" \
  --save "$DEST/work/yardstick-eager.json"

# Issue 34: the selftest against vendor figures; the CUDA quantized kernels against the CPU.
if [ "$SIZE" = tiny ]; then CQ=(--size tiny --prompt-len 4 --new-tokens 8); else CQ=(--prompt-len 16 --new-tokens 32); fi
step 90 check-quantized "${AB[@]}" check gpt2 --device "$DEVICE" --mode generate \
  --precision bf16,int8-wo,int4-wo "${CQ[@]}" -o "$DEST/work/check-quantized.json"

step 90 selftest "${AB[@]}" selftest --device "$DEVICE" --quick -o "$DEST/work/selftest.json"
# The spread between processes (--repeat 3) and a streamed case.
if [ "$SIZE" = tiny ]; then GR=(--size tiny --prompt-len 4 --new-tokens 8); else GR=(--prompt-len 64 --new-tokens 64); fi
step 60 repeat "${AB[@]}" run gpt2 --device "$DEVICE" --mode generate --precision bf16 --steps 3 \
  --repeat 3 "${GR[@]}" --db "$DB" -o "$DEST/work/repeat.json"
step 40 stream "${AB[@]}" run gpt2 --device "$DEVICE" --mode generate --precision bf16 --steps 3 \
  --stream "${GR[@]}" --db "$DB" -o "$DEST/work/stream.json"

say "done in $(( $(date +%s) - T0 )) s"
tar -czf "$DEST/results.tar.gz" -C "$DEST/work" --exclude cache --exclude data/accelbench/compile . \
  && rm -rf "$DEST/work"
