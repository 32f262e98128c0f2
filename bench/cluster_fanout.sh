#!/usr/bin/env bash
# Step fan-out latency of cluster mode: driver -> NODES node processes (RANKS
# ranks each, one tensor-parallel group of NODES x RANKS) -> step_done, with the step protocol
# alone (--no-kernels: builders and the graph manager run, no attention stack), on loopback; next
# to local mode (the same ranks in the driver's process). Cluster mode runs twice: with steps on the
# nodes' step channels (the default) and through CAF's middleman (--step-path middleman). Each
# run's p50 and p99 step times come from its summary; the modes take turns, REPEATS runs each, and
# the script reports the medians and each cluster path's added cost per step: its p50 (p99) less
# local mode's, the control plane's share.
#   usage: bench/cluster_fanout.sh KVACTOR_BINARY [REPEATS [JSON_OUT [NODESxRANKS [MODEL]]]]
# JSON_OUT (may be "") receives the medians for bench/plot.py --fanout; NODESxRANKS is 2x1 unless
# given (the goals: 2x2 and 8x1); MODEL is kvactor-tiny unless given (its 4 heads allow
# at most 4 ranks: 8x1 takes llama-3.1-8b, whose KV cache is then held to 64 MiB per rank).
# FANOUT_SPIN_US=N gives the nodes and the channel runs --step-spin-us N. FANOUT_STEP_TIMES=DIR
# keeps every process's step marks (--debug-step-times) in DIR and prints, run by run, where the
# local and the channel steps' time goes (bench/step_times.py).
set -euo pipefail
kvactor=${1:?usage: cluster_fanout.sh KVACTOR_BINARY [REPEATS [JSON_OUT]]}
repeats=${2:-5}
json_out=${3:-}
layout=${4:-2x1}
model=${5:-kvactor-tiny}
num_nodes=${layout%x*}
per_node=${layout#*x}
[[ $num_nodes =~ ^[1-9][0-9]*$ && $per_node =~ ^[1-9][0-9]*$ ]] ||
  { echo "cluster_fanout.sh: layout '$layout' is not NODESxRANKS (e.g. 2x2)" >&2; exit 2; }
dir=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
addr=()
for i in $(seq 1 "$num_nodes"); do
  "$kvactor" node --listen 127.0.0.1:0 --cpu-ranks "$per_node" \
    ${FANOUT_SPIN_US:+--step-spin-us "$FANOUT_SPIN_US"} \
    ${FANOUT_STEP_TIMES:+--debug-step-times "$FANOUT_STEP_TIMES/node$i.csv"} >"$dir/node$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 200); do
    a=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$dir/node$i.log" | awk '{print $3}' || true)
    [[ -n $a ]] && break
    sleep 0.05
  done
  addr+=("$a")
done
nodes_flag=$(IFS=,; echo "${addr[*]}")
workload=(--tensor-parallel-size $((num_nodes * per_node)) --no-kernels --no-progress --requests 64 --prompt-len 16:16
  --output-len 128:128 --model "$model")
[[ $model != kvactor-tiny ]] && workload+=(--kv-cache-memory 64MiB --max-model-len 2048)
modes=(local middleman cluster)
for mode in "${modes[@]}"; do : >"$dir/$mode.txt"; done
[[ -n ${FANOUT_STEP_TIMES:-} ]] && mkdir -p "$FANOUT_STEP_TIMES" && rm -f "$FANOUT_STEP_TIMES"/*.csv
for run in $(seq 1 "$repeats"); do
  for mode in "${modes[@]}"; do
    extra=()
    [[ $mode != local ]] && extra=(--nodes "$nodes_flag")
    [[ $mode == middleman ]] && extra+=(--step-path middleman)
    [[ $mode == cluster && -n ${FANOUT_SPIN_US:-} ]] && extra+=(--step-spin-us "$FANOUT_SPIN_US")
    [[ $mode != middleman && -n ${FANOUT_STEP_TIMES:-} ]] &&
      extra+=(--debug-step-times "$FANOUT_STEP_TIMES/${mode}_$run.csv")
    "$kvactor" run "${workload[@]}" "${extra[@]}" --summary-json "$dir/s.json" >/dev/null
    python3 -c "import json; s = json.load(open('$dir/s.json')); print(s['step_ms']['p50'] * 1000, s['step_ms']['p99'] * 1000, s['steps'])" >>"$dir/$mode.txt"
  done
done
if [[ -n ${FANOUT_STEP_TIMES:-} ]]; then
  sleep 1 # the nodes append a run's marks when the driver releases them
  for run in $(seq 1 "$repeats"); do
    for mode in local cluster; do
      python3 "$(dirname "$0")/step_times.py" "$FANOUT_STEP_TIMES/${mode}_$run.csv" \
        "$FANOUT_STEP_TIMES"/node*.csv --json "$FANOUT_STEP_TIMES/${mode}_$run.json"
    done
  done
fi
python3 - "$dir" "$repeats" "$json_out" "$num_nodes" "$per_node" <<'PY'
import json, statistics, sys
d, n, json_out = sys.argv[1], sys.argv[2], sys.argv[3]
num_nodes, per_node = int(sys.argv[4]), int(sys.argv[5])
rows = {}
names = {"local": "local", "middleman": "middleman", "cluster": "channel"}
for mode in ("local", "middleman", "cluster"):
    xs = [tuple(map(float, l.split())) for l in open(f"{d}/{mode}.txt")]
    rows[mode] = (statistics.median(x[0] for x in xs), statistics.median(x[1] for x in xs), int(xs[0][2]))
    print(f"{names[mode]:9s} step fan-out: median p50 {rows[mode][0]:7.1f} us, median p99 {rows[mode][1]:7.1f} us "
          f"({rows[mode][2]} steps x {n} runs)")
def added(mode):
    return (rows[mode][0] - rows['local'][0], rows[mode][1] - rows['local'][1])
goal = 120 if num_nodes >= 8 else 60
for mode in ("middleman", "cluster"):
    a = added(mode)
    print(f"{num_nodes}x{per_node} {names[mode]}: cluster / local (p50): {rows[mode][0] / rows['local'][0]:.2f}x; "
          f"the cluster's added cost per step: {a[0]:.1f} us p50, {a[1]:.1f} us p99 (goal: {goal} us p50)")
if json_out:
    ranks = {"local": f"{num_nodes * per_node} ranks in the driver's process",
             "middleman": f"{num_nodes} node processes x {per_node} rank(s), steps via the middleman",
             "cluster": f"{num_nodes} node processes x {per_node} rank(s), steps on the step channel"}
    with open(json_out, "w") as f:
        json.dump({"title": f"Step fan-out on loopback, median of {n} runs each",
                   "goal_p50_us": goal,
                   "added_p50_us": added("cluster")[0], "added_p99_us": added("cluster")[1],
                   "middleman_added_p50_us": added("middleman")[0],
                   "middleman_added_p99_us": added("middleman")[1],
                   **{m: {"p50_us": r[0], "p99_us": r[1], "steps": r[2], "ranks": ranks[m]}
                      for m, r in rows.items()}}, f, indent=2)
PY
