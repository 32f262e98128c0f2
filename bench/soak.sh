#!/usr/bin/env bash
# A soak of cluster mode on one machine: two `kvactor node` processes with one
# CPU rank each serve run after run (TP 2, requests arriving at a steady rate) for DURATION
# seconds under --restart-policy rebuild. In every run node b is killed with -9 once the run is
# serving and started again at its address; the driver must rebuild the group and finish every
# request. Node a lives through the whole soak: its memory is the leak check, compared like for
# like: its RSS once each run has ended (the run's KV cache freed) and its peak during each run.
# Every 10 s the RSS of node a, node b and the driver is sampled into rss.csv.
#   usage: bench/soak.sh KVACTOR_BINARY WORKDIR [DURATION_S=1800] [RESULT_JSON]
# Prints one line per run and a summary; exits 1 when a request was lost or a run failed.
set -uo pipefail
# shellcheck source=tests/deploy/wait_for.sh
source "$(dirname "$0")/../tests/deploy/wait_for.sh"
kvactor=$(realpath "${1:?usage: soak.sh KVACTOR_BINARY WORKDIR [DURATION_S] [RESULT_JSON]}")
dir=${2:?usage: soak.sh KVACTOR_BINARY WORKDIR [DURATION_S] [RESULT_JSON]}
duration=${3:-1800}
result=${4:-$dir/soak.json}
mkdir -p "$dir"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

start_node() { # LOG ADDRESS: sets node_pid, node_addr
  "$kvactor" node --listen "$2" --cpu-ranks 1 >"$1" 2>&1 &
  node_pid=$!
  pids+=("$node_pid")
  wait_for 30 in_file 'listening on 127\.0\.0\.1:[0-9]+' "$1" || { cat "$1"; exit 1; }
  node_addr=$(grep -oE 'listening on 127\.0\.0\.1:[0-9]+' "$1" | tail -n 1 | awk '{print $3}')
}
rss_kb() { ps -o rss= -p "$1" 2>/dev/null | tr -d ' ' || true; }

start_node "$dir/a.log" 127.0.0.1:0
a_pid=$node_pid a=$node_addr
start_node "$dir/b0.log" 127.0.0.1:0
b_pid=$node_pid b=$node_addr
samples=$dir/rss.csv
echo "t_s,node_a_kb,node_b_kb,driver_kb" >"$samples"
: >"$dir/idle.csv"
start=$SECONDS
runs=0 served=0 failed=0 lost=0 restarts=0 bad_runs=0
while ((SECONDS - start < duration)); do
  runs=$((runs + 1))
  trace=$dir/run$runs.kvtrace
  rm -f "$trace"
  "$kvactor" run --nodes "$a,$b" --tensor-parallel-size 2 --requests 120 --arrival-rate 2 \
    --prompt-len 32:128 --output-len 32:96 --seed "$runs" --no-progress --restart-policy rebuild \
    --restart-wait 30 --collective-timeout 10 --record "$trace" --summary-json "$dir/run$runs.json" \
    >"$dir/run$runs.out" 2>"$dir/run$runs.err" &
  driver=$!
  pids+=("$driver")
  wait_for 60 in_file 'kvactor::step_done' "$trace" || { cat "$dir/run$runs.err"; exit 1; }
  # Let it serve a while, sampling; then kill node b and bring it back at its address.
  for _ in 1 2 3; do
    echo "$((SECONDS - start)),$(rss_kb "$a_pid"),$(rss_kb "$b_pid"),$(rss_kb "$driver")" >>"$samples"
    sleep 10
  done
  kill -9 "$b_pid"
  wait "$b_pid" 2>/dev/null || true
  wait_for 30 in_file 'waiting up to 30 s to rebuild the group' "$dir/run$runs.err" ||
    { cat "$dir/run$runs.err"; echo "soak: run $runs: the loss was not reported"; }
  start_node "$dir/b$runs.log" "$b"
  b_pid=$node_pid
  while ! gone "$driver"; do
    echo "$((SECONDS - start)),$(rss_kb "$a_pid"),$(rss_kb "$b_pid"),$(rss_kb "$driver")" >>"$samples"
    wait_for 10 gone "$driver" || true
  done
  rc=0
  wait "$driver" || rc=$?
  idle=$(rss_kb "$a_pid")
  echo "$runs,$idle" >>"$dir/idle.csv"
  s=$dir/run$runs.json
  f=$(python3 -c "import json;print(json.load(open('$s'))['requests']['finished'])" 2>/dev/null || echo 0)
  x=$(python3 -c "import json;print(json.load(open('$s'))['requests']['failed'])" 2>/dev/null || echo 120)
  r=$(grep -oE '^restarts +[0-9]+' "$dir/run$runs.out" | awk '{print $2}')
  served=$((served + f)) failed=$((failed + x)) restarts=$((restarts + ${r:-0}))
  lost=$((lost + 120 - f - x))
  ((rc == 0 && f == 120)) || bad_runs=$((bad_runs + 1))
  echo "soak: run $runs (t=$((SECONDS - start)) s): exit $rc, $f finished, $x failed, restarts ${r:-0}"
done
first=$(head -n 1 "$dir/idle.csv" | cut -d, -f2)
last=$(tail -n 1 "$dir/idle.csv" | cut -d, -f2)
peak=$(cut -d, -f2 "$samples" | tail -n +2 | sort -n | tail -n 1)
cat >"$result" <<JSON
{"duration_s": $((SECONDS - start)), "runs": $runs, "requests_served": $served,
 "requests_failed": $failed, "requests_lost": $lost, "restarts": $restarts,
 "runs_not_all_served": $bad_runs,
 "node_a_rss_kb": {"after_first_run": $first, "after_last_run": $last, "peak": $peak},
 "rss_samples_csv": "$(basename "$samples")"}
JSON
echo "soak: $runs runs in $((SECONDS - start)) s: $served served, $failed failed, $lost lost, $restarts restarts; node a RSS after the first run $first kB, after the last $last kB (peak $peak)"
((lost == 0 && bad_runs == 0))
