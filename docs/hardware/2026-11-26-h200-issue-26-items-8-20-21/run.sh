#!/bin/bash
# issue 26 items 8, 20, 21 on a real GPU: NVML reasons/memory temperature/MIG mode, and a short
# roofline --sustained (the held figures beside the stored burst, events and sensors sampled).
export PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:/tmp/site
export XDG_DATA_HOME=/tmp/abdata XDG_CACHE_HOME=/tmp/abcache
nvidia-smi -L
python3 - <<'PY' 2>&1 | tee $OUT/nvml.txt
import pynvml
from accelbench.devices import nvml
p = nvml.nvml_session()
t = nvml.nvml_target(p, 0)
print("target", t.name, "mig", t.mig)
try: print("mig mode", p.nvmlDeviceGetMigMode(t.handle))
except Exception as e: print("mig mode:", e)
print("sensors", nvml.sensors(0))
print("memory threshold", p.nvmlDeviceGetTemperatureThreshold(t.board, 2) if True else None)
PY
timeout 170 python3 -m accelbench roofline --device cuda --sustained 0.15 --sustained-interval 0.5 --precision bf16 -o $OUT/roofline.json 2>&1 | tee $OUT/roofline.txt
python3 - <<'PY' 2>&1 | tee -a $OUT/roofline.txt
import json, os
(r,) = json.load(open(os.environ["OUT"] + "/roofline.json"))
for name, rec in r["sustained"].items():
    s = rec["series"]
    print(name, "stored_burst", rec["stored_burst"], "share", rec["share_of_stored_burst"])
    print("  figures.sensors", rec["figures"]["sensors"])
    print("  cause", rec["figures"]["cause"], "| verdict", rec["figures"]["verdict"])
    print("  events", s["events"][:3], "...", s["events_na"])
    for k, v in s["sensors"].items(): print("  ", k, [None if x is None else round(x,1) for x in v["values"]][:8], v["na"], v["limit"])
PY
