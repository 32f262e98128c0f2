#!/usr/bin/env bash
# The soak on one GPU node: a `kvactor node --gpus 0` serves run
# after run of MODEL (TP 1, requests arriving at a steady rate) for DURATION seconds. Runs take
# turns: a calm run; a run whose driver is killed -9 once it serves (the node must free the rank
# and its GPU memory for the next driver); a run whose node is killed -9 once it serves and
# started again at its address (the driver, under --restart-policy rebuild, must finish every
# request). After each run, with nothing serving, the node's RSS and the GPU's used memory are
# recorded (idle.csv): both must stay flat. Every 10 s during runs both are sampled (samples.csv).
#   device: bash bench/device.sh "$OUT" soak[=DURATION_S]   (carry: [".devpack.tar.xz"]; the
#           10-minute default outlasts one device command: start it with bench/detached.sh)
#   or:     bash bench/device/soak.sh WORKDIR [DURATION_S=600] [MODEL=llama-3.1-8b]
#   KVACTOR_BIN: the kvactor to soak (default: the packed one, .devpack/run.sh kvactor).
#   NODE_FLAGS (default "--gpus 0"; "--cpu-ranks 1" tries the script on a machine without a GPU)
#   and MAX_MODEL_LEN (default 4096; 2048 for kvactor-tiny). RUN_FLAGS: more flags for every
#   driver (e.g. "--gpu-memory-utilization 0.5" to leave the card room for other work).
# Prints one line per run and a summary (soak.json); exits 1 when a request of a run whose driver
# lived was lost or failed.
set -uo pipefail
# shellcheck source=tests/deploy/wait_for.sh
source "$(dirname "$0")/../../tests/deploy/wait_for.sh"
dir=${1:?usage: soak.sh WORKDIR [DURATION_S] [MODEL]}
duration=${2:-600}
model=${3:-llama-3.1-8b}
requests=48
mkdir -p "$dir"
if [ -n "${KVACTOR_BIN:-}" ]; then
  kvactor=$(realpath "$KVACTOR_BIN")
else
  [ -d .devpack ] || tar xJf .devpack.tar.xz
  kvactor=$dir/kvactor
  printf '#!/usr/bin/env bash\nexec bash %q/.devpack/run.sh kvactor "$@"\n' "$PWD" >"$kvactor"
  chmod +x "$kvactor"
fi
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

start_node() { # LOG ADDRESS: sets node_pid, node_addr
  # shellcheck disable=SC2086 # NODE_FLAGS is a list of flags
  "$kvactor" --log-level info node --listen "$2" ${NODE_FLAGS:---gpus 0} >"$1" 2>&1 &
  node_log=$1
  node_pid=$!
  pids+=("$node_pid")
  wait_for 60 in_file 'listening on 127\.0\.0\.1:[0-9]+' "$1" || { cat "$1"; exit 1; }
  node_addr=$(grep -oE 'listening on 127\.0\.0\.1:[0-9]+' "$1" | tail -n 1 | awk '{print $3}')
}
# Every rank the node spawned has stopped (its down message freed the slot and the GPU memory).
ranks_freed() {
  local spawned stopped
  spawned=$(grep -c 'node: rank [0-9]* of' "$node_log")
  stopped=$(grep -c 'node: rank on slot [0-9]* stopped' "$node_log")
  ((stopped >= spawned))
}
rss_kb() { ps -o rss= -p "$1" 2>/dev/null | tr -d ' ' || true; }
gpu_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | tr -d ' ' || echo 0; }
sample() { echo "$((SECONDS - start)),$1,$(rss_kb "$node_pid"),$(gpu_mib)" >>"$dir/samples.csv"; }
json_field() { python3 -c "import json;print(json.load(open('$1'))['requests']['$2'])" 2>/dev/null; }

start_node "$dir/node0.log" 127.0.0.1:0
addr=$node_addr
echo "t_s,run,node_rss_kb,gpu_used_mib" >"$dir/samples.csv"
echo "run,kind,node_rss_kb,gpu_used_mib" >"$dir/idle.csv"
echo "0,before,$(rss_kb "$node_pid"),$(gpu_mib)" >>"$dir/idle.csv"
start=$SECONDS
runs=0 served=0 failed=0 lost=0 killed_drivers=0 node_restarts=0 bad_runs=0
while ((SECONDS - start < duration)); do
  runs=$((runs + 1))
  kind=$(case $((runs % 3)) in 1) echo calm ;; 2) echo kill-driver ;; 0) echo kill-node ;; esac)
  trace=$dir/run$runs.kvtrace
  # shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
  "$kvactor" run --nodes "$addr" --model "$model" --max-model-len "${MAX_MODEL_LEN:-4096}" --requests $requests \
    --arrival-rate 4 --prompt-len 128:1024 --output-len 64:256 --seed "$runs" --no-progress \
    --restart-policy rebuild --restart-wait 60 --record "$trace" ${RUN_FLAGS:-} \
    --summary-json "$dir/run$runs.json" >"$dir/run$runs.out" 2>"$dir/run$runs.err" &
  driver=$!
  pids+=("$driver")
  wait_for 120 in_file 'kvactor::step_done' "$trace" || { cat "$dir/run$runs.err"; exit 1; }
  sample "$runs"
  if [[ $kind == kill-driver ]]; then
    sleep 3 # serving, not starting: a KV cache and graphs on the GPU
    kill -9 "$driver"
    killed_drivers=$((killed_drivers + 1))
  elif [[ $kind == kill-node ]]; then
    sleep 3
    kill -9 "$node_pid"
    wait "$node_pid" 2>/dev/null || true
    wait_for 30 in_file 'waiting up to 60 s to rebuild the group' "$dir/run$runs.err" ||
      { cat "$dir/run$runs.err"; echo "gpu_soak: run $runs: the loss was not reported"; }
    start_node "$dir/node$runs.log" "$addr"
    node_restarts=$((node_restarts + 1))
  fi
  while ! gone "$driver"; do
    sample "$runs"
    wait_for 10 gone "$driver" || true
  done
  rc=0
  wait "$driver" || rc=$?
  # The node frees a rank once its driver is gone: wait for it before calling the node idle.
  wait_for 60 ranks_freed || echo "gpu_soak: run $runs: the node still holds a rank 60 s after its driver ended"
  echo "$runs,$kind,$(rss_kb "$node_pid"),$(gpu_mib)" >>"$dir/idle.csv"
  if [[ $kind == kill-driver ]]; then
    echo "gpu_soak: run $runs (t=$((SECONDS - start)) s): driver killed (exit $rc)"
    continue
  fi
  f=$(json_field "$dir/run$runs.json" finished || echo 0)
  x=$(json_field "$dir/run$runs.json" failed || echo $requests)
  served=$((served + ${f:-0})) failed=$((failed + ${x:-0}))
  lost=$((lost + requests - ${f:-0} - ${x:-0}))
  ((rc == 0 && f == requests)) || bad_runs=$((bad_runs + 1))
  echo "gpu_soak: run $runs ($kind, t=$((SECONDS - start)) s): exit $rc, $f finished, $x failed"
done
read -r first_rss first_gpu < <(awk -F, 'NR==3 {print $3, $4}' "$dir/idle.csv")
read -r last_rss last_gpu < <(tail -n 1 "$dir/idle.csv" | awk -F, '{print $3, $4}')
peak_gpu=$(cut -d, -f4 "$dir/samples.csv" | tail -n +2 | sort -n | tail -n 1)
cat >"$dir/soak.json" <<JSON
{"duration_s": $((SECONDS - start)), "model": "$model", "runs": $runs,
 "requests_served": $served, "requests_failed": $failed, "requests_lost": $lost,
 "drivers_killed": $killed_drivers, "node_restarts": $node_restarts,
 "runs_not_all_served": $bad_runs,
 "idle_after_run_1": {"node_rss_kb": ${first_rss:-0}, "gpu_used_mib": ${first_gpu:-0}},
 "idle_after_last_run": {"node_rss_kb": ${last_rss:-0}, "gpu_used_mib": ${last_gpu:-0}},
 "gpu_used_mib_peak": ${peak_gpu:-0}}
JSON
echo "gpu_soak: $runs runs in $((SECONDS - start)) s: $served served, $failed failed, $lost lost; $killed_drivers drivers and $node_restarts nodes killed; idle GPU memory ${first_gpu} MiB after run 1, ${last_gpu} MiB after run $runs (node RSS ${first_rss} -> ${last_rss} kB)"
((lost == 0 && bad_runs == 0))
