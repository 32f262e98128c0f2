#!/usr/bin/env bash
# Everything the H200 checks for the CUDA path, in one device call (device time is scarce):
# the GPU tests, the attention benchmark, `kvactor run --device cuda` on the default model and on
# the Llama-3.1-8B shape, and a GPU run recorded and replayed with --verify.
#   here:   cmake --build build --target kvactor kvactor_gpu_tests kvactor_attention_bench \
#             kvactor_graph_bench
#           bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_attention_bench build/bin/kvactor_graph_bench
#   device: bash bench/device_run.sh "$OUT"      (carry: [".devpack.tar.xz"])
# The logs come back as OUT/logs.tar (the device returns only a few files); a short table is
# printed last.
# shellcheck source=bench/device_prelude.sh
source "$(dirname "$0")/device_prelude.sh" "$@"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
declare -A status
start=$SECONDS
timeout 330 bash .devpack/run.sh kvactor_gpu_tests --gtest_brief=1 >"$out/gpu_tests.log" 2>&1
status[gpu_tests]=$?
tail -n 3 "$out/gpu_tests.log"
grep -E "GPU vs CPU" "$out/gpu_tests.log" || true
if [ -x .devpack/bin/kvactor_attention_bench ]; then
  start_clock_sampler "$out/clocks.csv" # see device_prelude.sh
  timeout 120 bash .devpack/run.sh kvactor_attention_bench --out "$out/attention.json" \
    >"$out/attention.log" 2>&1
  status[attention_bench]=$?
  tail -n 25 "$out/attention.log"
  stop_clock_sampler "$out/clocks.csv"
  # The same with a read flush (no dirty L2 lines written back inside the timed window).
  timeout 60 bash .devpack/run.sh kvactor_attention_bench --flush read \
    --out "$out/attention_read_flush.json" >"$out/attention_read_flush.log" 2>&1
  tail -n 1 "$out/attention_read_flush.log"
  # The peers on the same shapes, in the same call: PyTorch's SDPA back-ends beside kvactor.
  timeout 240 python3 bench/hf/sdpa_peers.py --kvactor "$out/attention.json" \
    --out "$out/sdpa_peers.json" >"$out/sdpa_peers.log" 2>&1
  status[sdpa_peers]=$?
  grep -v -i "warn" "$out/sdpa_peers.log" | tail -n 30
fi
if [ -x .devpack/bin/kvactor_graph_bench ]; then
  timeout 120 bash .devpack/run.sh kvactor_graph_bench --quick >"$out/graph_bench.log" 2>&1
  status[graph_bench]=$?
  tail -n 14 "$out/graph_bench.log"
fi
timeout 60 bash .devpack/run.sh kvactor run --device cuda --no-progress \
  --summary-json "$out/run_default.json" >"$out/run_default.log" 2>&1
status[run_default]=$?
cat "$out/run_default.log"
timeout 60 bash .devpack/run.sh kvactor run --device cuda --no-progress --record "$out/gpu.kvtrace" \
  >"$out/record.log" 2>&1 &&
  timeout 60 bash .devpack/run.sh kvactor replay "$out/gpu.kvtrace" --verify >"$out/replay.log" 2>&1
status[record_replay]=$?
cat "$out/replay.log"
timeout 100 bash .devpack/run.sh kvactor run --device cuda --model llama-3.1-8b --max-model-len 4096 \
  --requests 64 --prompt-len 128:1024 --output-len 32:128 --no-progress --log-level info \
  --summary-json "$out/run_llama.json" >"$out/run_llama.log" 2>&1
status[run_llama8b]=$?
grep -v "^\[" "$out/run_llama.log" | tail -n 8
grep -E "GPU 0|ledger|cudaMemGetInfo" "$out/run_llama.log" | head -n 5
echo "---- device run: $((SECONDS - start)) s"
for k in "${!status[@]}"; do printf '%-16s exit %s\n' "$k" "${status[$k]}"; done
