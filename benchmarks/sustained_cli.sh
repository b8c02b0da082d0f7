#!/bin/bash
# docs/performance.md (g): accelbench run --sustained on a quiet core, then with a busy loop started
# on the same core 25 s in. The results go to $OUT (default /tmp/sus): quiet.json, burner.json.
cd "$(dirname "$0")/.."; mkdir -p "${OUT:-/tmp/sus}"
export COLUMNS=160
for kind in quiet burner; do
  taskset -c 0 .venv/bin/python -m accelbench run mnist --device cpu --mode train --threads 1 --sustained 1 --sustained-interval 2 --quiet -o ${OUT:-/tmp/sus}/$kind.json > ${OUT:-/tmp/sus}/$kind.out 2>&1 &
  pid=$!
  if [ $kind = burner ]; then
    sleep 25
    taskset -c 0 python3 -c 'while True: pass' &
    b=$!
  fi
  wait $pid
  [ $kind = burner ] && kill $b
  date
done
echo DONE
