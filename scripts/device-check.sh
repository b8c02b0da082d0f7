#!/usr/bin/env bash
# The device check (issues 33 and 34): run it first whenever the library's `device` tool lends a
# GPU, in one call, e.g.
#
#   run(command="bash scripts/device-check.sh", carry=[".whl"], timeout_s=330)
#
# with the platformdirs wheel in .whl/ (the device image lacks it; docs/hardware/index.md says how
# to fetch it). Every step has its own time limit (the table below: about 1.3-1.6x its estimate,
# room for a slower card or host), a failing or slow step never stops the next, the steps run
# most important first, and the whole check stops at BUDGET (default 290 s: a step never runs past
# it, and with the last step's kill grace and the archive the check ends within 300 s), short
# enough to rerun once within a 15-minute lease. The limits sum to more than the budget: where
# steps run long, the last ones (int4-wo, repeat-stream) are cut, never the headline bf16 figure.
#
# Its time on a GPU is an ESTIMATE, about 257 s on an H100: this form has not run on one yet. The
# estimate adds the step times recorded there (docs/hardware/2026-11-27-h100-issue-33-decode-recipe:
# llama-1b's warm-up round, compile and CUDA-graph capture, bf16 46.0 s, int8-wo 56.7 s, int4-wo
# 33.2 s; -issue-34-peaks-events: selftest --only peak --quick 14 s) to the set-up costs measured
# on a CPU (benchmarks/case_setup.py: llama-1b's weights took 11 s of one core to build, one after
# another, before version 2 drew them in parallel: 5.6 s on 2 threads, about 2 s on a GPU host's
# 16). docs/hardware/index.md has each step's sources; the log gives each step's seconds, to set
# the limits again from the first run.
#
# Everything it saw goes under $OUT (the device tool brings that folder back; at most 8 files) or,
# run by hand, under docs/hardware/device-check-<UTC time>/:
#   device-check.log   every command with its full output, exit status and seconds
#   gpu-samples.csv    GPU SM/memory clocks, power, limit, temperature and clock-event reasons, 2/s
#   host-load.txt      the host's load average, 1/s (decode on a GPU is launched from this CPU)
#   results.tar.gz     the result JSON files, the history database, selftest/roofline JSON
#
# step (limit, estimate on an H100)  what it is for
#   event-trace (15, 7 s)      the versions (Python, host CPU, torch, CUDA, cuDNN, the device),
#                              then no timing event created inside a timed window
#                              (scripts/event_trace.py)
#   selftest (30, 17 s)        the measured peaks and bandwidth against the vendor's figures, capped
#                              peaks labelled (issue 34); the roofline it measures is kept ...
#   roofline (12, 4 s)          ... and printed, the power cap visible: every decode row's floor
#   gpt-fast-bf16 (90, 58 s)   llama-1b decode by gpt-fast's recipe (static cache, decode compiled
#                              fullgraph with CUDA graphs); target: at least 50% of the bandwidth
#   yardstick (40, 22 s)       a plain gpt-fast-style loop and accelbench's rounds in one process on
#                              one 2-layer llama-1b, eager, then compiled by the recipe
#                              (TORCH_LOGS=recompiles,graph_breaks): accelbench within 5%
#   check-quantized (25, 15 s) gpt2's int8/int4 kernels on the device against the CPU's fp64
#   gpt-fast-int8-wo (90, 68 s), gpt-fast-int4-wo (65, 46 s): the recipe quantized, faster than bf16
#   repeat-stream (30, 18 s)   the process spread of a --repeat 3 case, each token streamed
# and first install-wheels (10, 1 s: only where .whl/ is carried) and nvidia-smi (10, 1 s). Sum of
# the estimates: 257 s, inside the 290 s budget.
#
# DEVICE=cpu SIZE=tiny bash scripts/device-check.sh runs the same steps here, tiny, each limit
# stretched 3x (STRETCH): the CI test (tests/project/test_device_check.py).
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
BUDGET=${BUDGET:-290}  # seconds for all steps together; each step also has its own limit
# The limits are a GPU host's; a CPU (DEVICE=cpu, CI) stretches them, its Python starts slower.
STRETCH=${STRETCH:-$([ "$DEVICE" = cpu ] && echo 3 || echo 1)}
step() {  # step SECONDS NAME COMMAND...: run with a limit, log everything, never stop the script
  local limit=$(( $1 * STRETCH )) name=$2 began rc; shift 2
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  if [ "$left" -lt 5 ]; then say "$name: skipped (the check's $BUDGET s are spent)"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "$name: $*"
  began=$(date +%s)
  timeout -k 5 "$limit" "$@" >>"$LOG" 2>&1
  rc=$?
  say "$name: exit $rc$([ $rc = 124 ] && echo ' (time limit)') after $(( $(date +%s) - began )) s of $limit"
}

PY=${PYTHON:-python3}
say "device check on $(hostname), $(date -u +%FT%TZ), DEVICE=$DEVICE SIZE=$SIZE BUDGET=$BUDGET"
if [ -d .whl ] && ! "$PY" -c 'import platformdirs' 2>/dev/null; then
  step 10 install-wheels "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
# accelbench from this checkout, without installing it (pip's editable install cost 3 s).
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
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

command -v nvidia-smi >/dev/null && step 10 nvidia-smi nvidia-smi
step 15 event-trace "$PY" scripts/event_trace.py --device "$DEVICE"

# The selftest's ceiling checks measure a roofline (128 MiB copies with --quick) and keep it for
# `roofline`, which then prints it without measuring again.
step 30 selftest "${AB[@]}" selftest --device "$DEVICE" --only peak --quick -o "$DEST/work/selftest.json"
step 12 roofline "${AB[@]}" roofline --device "$DEVICE" -o "$DEST/work/roofline.json"

# Issue 33's target: llama-1b decode by gpt-fast's recipe, each precision a step of its own (a
# slow one cannot starve the rest), inline (no worker process to start: the step's limit bounds
# the case). At tiny size (CI, a CPU) the recipe runs through dynamo without inductor's minutes.
if [ "$SIZE" = tiny ]; then RECIPE=eager:reduce-overhead; TINY=(--size tiny --compile "$RECIPE" --threads 1);
else RECIPE=inductor:reduce-overhead; TINY=(); fi
gpt_fast() {  # gpt_fast LIMIT PRECISION
  step "$1" "gpt-fast-$2" "${AB[@]}" run llama-1b --device "$DEVICE" --mode generate --protocol gpt-fast \
    --precision "$2" "${TINY[@]}" --isolation none --wide --db "$DB" -o "$DEST/work/gpt-fast-$2.json"
}
gpt_fast 90 bf16

# The yardstick: a plain loop and accelbench in one process on one model, eager, then compiled by
# the recipe (2 of llama-1b's 16 layers: a short compile; their ratio is the figure).
if [ "$SIZE" = tiny ]; then YS=(--size tiny --layers 1 --new-tokens 8 --repeats 2);
else YS=(--layers 2 --new-tokens 64 --repeats 3 --threads 8); fi
step 40 yardstick env TORCH_LOGS=recompiles,graph_breaks "$PY" benchmarks/quantized_decode.py \
  --device "$DEVICE" --in-process --recipe "$RECIPE" --and-eager "${YS[@]}" \
  --save "$DEST/work/yardstick.json"

# Issue 34: the CUDA quantized kernels against the CPU's fp64 reference.
if [ "$SIZE" = tiny ]; then CQ=(--size tiny --prompt-len 4 --new-tokens 8); else CQ=(--prompt-len 16 --new-tokens 32); fi
step 25 check-quantized "${AB[@]}" check gpt2 --device "$DEVICE" --mode generate \
  --precision bf16,int8-wo,int4-wo "${CQ[@]}" -o "$DEST/work/check-quantized.json"

gpt_fast 90 int8-wo
gpt_fast 65 int4-wo

# The spread between processes (--repeat 3: three worker processes), each token read to the host
# as it is made (--stream); nanogpt-char, whose weights take no time to build.
if [ "$SIZE" = tiny ]; then GR=(--size tiny --prompt-len 4 --new-tokens 8); else GR=(--prompt-len 32 --new-tokens 32); fi
step 30 repeat-stream "${AB[@]}" run nanogpt-char --device "$DEVICE" --mode generate --precision bf16 \
  --steps 3 --repeat 3 --stream "${GR[@]}" --db "$DB" -o "$DEST/work/repeat-stream.json"

say "done in $(( $(date +%s) - T0 )) s"
tar -czf "$DEST/results.tar.gz" -C "$DEST/work" --exclude cache --exclude data/accelbench/compile . \
  && rm -rf "$DEST/work"
