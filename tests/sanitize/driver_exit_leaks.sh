#!/usr/bin/env bash
# Counts LeakSanitizer reports at the exit of cluster drivers: a fresh node, one
# two-rank run on it, the node stopped, RUNS times. A shutdown race inside CAF 0.17 showed in a
# few exits in a hundred; bench/RESULTS.md has the figures and the remedy.
#   usage: tests/sanitize/driver_exit_leaks.sh ASAN_KVACTOR [RUNS [OUT_DIR]]
# ASAN_KVACTOR: a kvactor built by tests/sanitize.sh asan (build-asan/bin/kvactor). Exits 1 when
# any driver reported a leak; its output stays in OUT_DIR/runN.out.
set -uo pipefail
kvactor=${1:?usage: driver_exit_leaks.sh ASAN_KVACTOR [RUNS [OUT_DIR]]}
runs=${2:-100}
dir=${3:-$(mktemp -d)}
mkdir -p "$dir"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0}
leaks=0
for i in $(seq 1 "$runs"); do
  "$kvactor" node --listen 127.0.0.1:0 --cpu-ranks 2 --metrics-port 0 --log-level info \
    >"$dir/node$i.log" 2>&1 &
  node=$!
  for _ in $(seq 1 200); do
    grep -q 'listening on' "$dir/node$i.log" && break
    sleep 0.05
  done
  addr=$(grep -oE 'listening on 127\.0\.0\.1:[0-9]+' "$dir/node$i.log" | awk '{print $3}')
  [[ -n $addr ]] || { cat "$dir/node$i.log"; echo "driver_exit_leaks: node $i did not listen"; exit 2; }
  "$kvactor" run --nodes "$addr" --tensor-parallel-size 2 --requests 3 --no-progress \
    --metrics-port 0 --log-level info >"$dir/run$i.out" 2>&1
  kill -TERM "$node"
  wait "$node"
  if grep -q LeakSanitizer "$dir/run$i.out"; then
    leaks=$((leaks + 1))
    echo "driver_exit_leaks: run $i leaked ($dir/run$i.out)"
  fi
done
echo "driver_exit_leaks: $leaks of $runs driver exits leaked"
[[ $leaks -eq 0 ]]
