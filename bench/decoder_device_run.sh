#!/usr/bin/env bash
# The real-model checks of the H200 in one device call (issue 15; device time is scarce):
# the GPU decoder's tests, the new GPU fixtures made by transformers, the
# Llama-3.1-8B-architecture checkpoint made by transformers and measured by
# kvactor_decoder_bench (plain and with the fused MLP), and `kvactor run` on it for the time to
# ready and a served workload.
#   here:   cmake --build build --target kvactor kvactor_gpu_tests kvactor_decoder_bench
#           (-DKVACTOR_BUILD_BENCH=ON)
#           bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_decoder_bench
#   device: bash bench/decoder_device_run.sh "$OUT"      (carry: [".devpack.tar.xz"])
# Logs go to OUT; the lines RESULTS.md quotes are printed.
set -uo pipefail
out=${1:?usage: decoder_device_run.sh OUT_DIR}
mkdir -p "$out"
[ -d .devpack ] || tar xJf .devpack.tar.xz
export KVACTOR_SOURCE_DIR=$PWD KVACTOR_MODELS_PATH=$PWD/deploy/models
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

# 1. The GPU decoder's tests on the committed fixtures.
timeout 240 bash .devpack/run.sh kvactor_gpu_tests --gtest_filter='*DecoderCuda*:*Shapes*' \
  >"$out/gpu_tests.log" 2>&1
echo "gpu tests: rc $?"
grep -E "relative L2|FAILED|PASSED" "$out/gpu_tests.log" | head -40

# 2. The next GPU fixtures (more than one KV head, partial RoPE), for tests/data/transformers_gpu.
timeout 120 python3 tests/data/transformers/make_fixtures.py --gpu "$out/transformers_gpu" \
  llama_gqa phi3_partial 2>&1 | grep -v -i "warn\|Writing" | tail -3

# 3. The 8B checkpoint and its transformers references, then kvactor's figures on it.
timeout 240 python3 bench/hf/make_llama8b.py /tmp/l8b 2>&1 | grep -v -i "warn\|Writing\|crop" \
  | tee "$out/make_llama8b.log" | tail -8
timeout 240 bash .devpack/run.sh kvactor_decoder_bench --model /tmp/l8b \
  >"$out/decoder_bench.log" 2>&1
echo "decoder bench: rc $?"
grep -vE "^\[" "$out/decoder_bench.log" | tail -20
timeout 120 bash .devpack/run.sh kvactor_decoder_bench --model /tmp/l8b --fused --batches 1 \
  >"$out/decoder_bench_fused.log" 2>&1
grep -E "^decode" "$out/decoder_bench_fused.log" | sed 's/^/fused: /'

# 4. Served by kvactor run: the time to ready (graphs included) and a workload.
timeout 180 bash .devpack/run.sh kvactor run --model /tmp/l8b --device cuda --requests 32 \
  --no-progress --summary-json "$out/run_8b.json" >"$out/run_8b.log" 2>&1
echo "kvactor run: rc $?"
tail -n 12 "$out/run_8b.log"
