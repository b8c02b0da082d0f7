set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .devcheck26/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160 XDG_DATA_HOME=/tmp/xd XDG_CACHE_HOME=/tmp/xc ACCELBENCH_HOME=/tmp/ab
L=$OUT/issue26-items-6-7-15.log
s() { echo "== [$SECONDS s] $*" | tee -a $L; }
s graphs; timeout 120 python3 .devcheck26/graphs.py >>$L 2>&1; s "rc $?"
s check; timeout 60 python3 -m accelbench check nanogpt-char --size tiny --device cuda --mode generate --precision bf16 --compile inductor --reference cpu --quiet -o $OUT/check.json >>$L 2>&1; s "rc $?"
s tiny-defaults; timeout 30 python3 -m accelbench run nanogpt-char --size tiny --device cuda --mode generate --steps 2 --quiet >>$L 2>&1; s "rc $?"
s run; timeout 130 python3 -m accelbench run gpt2 --device cuda --mode generate --precision bf16 --compile none,inductor --prompt-len 128 --new-tokens 64 --steps 5 --isolation none --quiet -o $OUT/gen.json >>$L 2>&1; s "rc $?"
