set -x
export PYTHONPATH=src:.devcheck34 XDG_DATA_HOME=/tmp/abdata ACCELBENCH_PEAK_CACHE=/tmp/abdata/peak.json PYTHONUNBUFFERED=1 COLUMNS=160
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,power.draw --format=csv
python3 -c "import torch, pynvml; print(torch.__version__, torch.cuda.get_device_name(0))"
timeout 200 python3 -m accelbench selftest --device cuda:0 --only peak --quick -o $OUT/selftest-peak.json; echo "selftest rc=$?"
timeout 60 python3 -m accelbench roofline --device cuda:0; echo "roofline rc=$?"
timeout 30 python3 -m accelbench roofline --device cuda:0 --json > $OUT/roofline.json
timeout 90 python3 .devcheck34/event_trace.py  # this folder's event_trace.py; echo "event trace rc=$?"
timeout 120 python3 -m accelbench run mnist --device cuda:0 --mode train --size tiny --precision bf16 --isolation none --time-budget 3 --wide --json -o $OUT/run.json > /dev/null; echo "run rc=$?"
python3 - <<'PY'
import json, os
r = json.load(open(os.environ["OUT"] + "/run.json"))
for c in r.get("cases", []):
    f = c.get("flops") or {}
    print({k: f.get(k) for k in ("achieved_flops", "peak_flops", "fraction_of_peak", "peak_limited_by", "peak_clock_mhz", "peak_burst_flops", "peak_busy")})
PY
