#!/usr/bin/env bash
# CUDA graphs in one device call: the GPU tests (graph replay bit for bit, lazy capture,
# the memory cap), the graph benchmark (Llama-3.1-8B shape: eager vs FULL vs PIECEWISE per batch,
# the default ladder's capture time and memory), and time to ready of `kvactor run` on the
# Llama-3.1-8B shape with graphs off, captured at start-up, and captured lazily.
#   here:   cmake --build build --target kvactor kvactor_gpu_tests kvactor_graph_bench
#           bash bench/pack_for_device.sh build/bin/kvactor build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_graph_bench
#   device: bash bench/device.sh "$OUT" graphs[=GTEST_FILTER]   (carry: [".devpack"]; the filter
#           defaults to the graph tests, so that the tests suite beside it does not run them twice)
set -uo pipefail
out=${1:?usage: graphs.sh OUT_DIR [GTEST_FILTER]}
filter=${2:-StackGraph.*:PiecewiseGraph.*:GraphRunner.*:GpuRank.*Graph*:GpuRank.Lazy*}
mkdir -p "$out"
export KVACTOR_MODELS_PATH=$PWD/deploy/models
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
declare -A status
timeout 240 bash .devpack/run.sh kvactor_gpu_tests --gtest_brief=1 --gtest_filter="$filter" \
  >"$out/gpu_tests.log" 2>&1
status[gpu_tests]=$?
grep -E "FAILED|\[ (graph|piecewise)|graphs|lazy:|GPU vs CPU" "$out/gpu_tests.log" | head -40
tail -n 3 "$out/gpu_tests.log"
if [ -x .devpack/bin/kvactor_graph_bench ]; then
  timeout 240 bash .devpack/run.sh kvactor_graph_bench >"$out/graph_bench.log" 2>&1
  status[graph_bench]=$?
  cat "$out/graph_bench.log"
fi
# Time to ready on the 8B shape (max_model_len 4096 keeps the block tables of FULL graphs short).
for mode in none startup lazy; do
  args=(--cudagraph-capture startup)
  [ "$mode" = none ] && args=(--cudagraph-mode none)
  [ "$mode" = lazy ] && args=(--cudagraph-capture lazy)
  timeout 120 bash .devpack/run.sh kvactor run --device cuda --no-progress --model llama-3.1-8b \
    --max-model-len 4096 --requests 64 --prompt-len 64:256 --output-len 64:128 "${args[@]}" \
    --summary-json "$out/ready_$mode.json" --log-level info >"$out/ready_$mode.log" 2>&1
  status[ready_$mode]=$?
  grep -E "ready in|graph capture|steps |graphs " "$out/ready_$mode.log" | sed "s/^/$mode: /"
done
echo "---- status"
for k in "${!status[@]}"; do echo "$k ${status[$k]}"; done | sort
