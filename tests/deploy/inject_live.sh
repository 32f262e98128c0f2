#!/usr/bin/env bash
# Live injection into a running kvactor process: a request injected into the driver is served
# with the workload; a stale step injected into a rank is refused with a clear error; the run
# ends normally. Usage: inject_live.sh KVACTOR_BINARY WORKDIR
set -euo pipefail
kvactor=$1
dir=$2
mkdir -p "$dir"
rm -f "$dir"/run.out "$dir"/run.err
"$kvactor" run --inject-port 0 --requests 12 --arrival-rate 6 --prompt-len 8:24 --output-len 4:8 \
  --no-progress --record "$dir/live.kvtrace" >"$dir/run.out" 2>"$dir/run.err" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 100); do
  port=$(grep -o '127\.0\.0\.1:[0-9]*' "$dir/run.err" | head -1 || true)
  [[ -n $port ]] && break
  sleep 0.05
done
[[ -n $port ]] || { echo "no injection port announced"; cat "$dir/run.err"; exit 1; }
echo '{"type": "kvactor::request_spec", "payload": [4242, [5, 6, 7, 8], 3, 0]}' >"$dir/req.json"
"$kvactor" inject --to "$port" --message "$dir/req.json" | tee "$dir/inject.out"
grep -q "driver accepted request 4242" "$dir/inject.out"
echo '["kvactor::step_plan", 5, [0, 0, [], [], [], [], 1]]' >"$dir/stale.json"
if "$kvactor" inject --to "$port" --message "$dir/stale.json" --actor 'rank[0]' 2>"$dir/stale.err"; then
  echo "a stale step was accepted"; exit 1
fi
cat "$dir/stale.err"
grep -q "epoch" "$dir/stale.err"
wait $pid
trap - EXIT
cat "$dir/run.out"
grep -q "requests   13 finished, 0 failed" "$dir/run.out"
"$kvactor" trace show "$dir/live.kvtrace" >"$dir/show.txt"
grep -q "inject -> driver" "$dir/show.txt"
echo "live injection: ok"
