#!/usr/bin/env bash
# The real-model checks of the H200 in one device call (device time is scarce): the
# GPU fixtures made again by transformers and the GPU decoder's tests on them; the
# Llama-3.1-8B-architecture checkpoint made by transformers and measured by
# kvactor_decoder_bench (plain, with the fused MLP, and kernel by kernel under ncu); and
# `kvactor run` on it for the time to ready and a served workload.
#   here:   cmake --build build --target kvactor kvactor_gpu_tests kvactor_decoder_bench
#           (-DKVACTOR_BUILD_BENCH=ON)
#           bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_decoder_bench
#   device: bash bench/device.sh "$OUT" decoder[=--cpu]   (carry: [".devpack.tar.xz"])
# --cpu: kvactor's CPU decoder (float) on the 8B too, against transformers in float32 (minutes).
# The logs come back as OUT/logs.tar (the device returns only a few files), the regenerated GPU
# fixtures as OUT/transformers_gpu.tar; the lines RESULTS.md quotes are printed.
set -uo pipefail
dest=${1:?usage: decoder.sh OUT_DIR [--cpu]}
cpu=${2:-}
out=$dest/logs
mkdir -p "$out"
trap 'tar cf "$dest/logs.tar" -C "$dest" logs && rm -rf "$out"' EXIT
[ -d .devpack ] || tar xJf .devpack.tar.xz
export KVACTOR_SOURCE_DIR=$PWD KVACTOR_MODELS_PATH=$PWD/deploy/models
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

# 1. The GPU fixtures made by transformers now (make_fixtures.py --gpu), in place of the committed
#    ones, then the GPU decoder's tests on them; OUT/transformers_gpu.tar is what to commit.
timeout 180 python3 tests/data/transformers/make_fixtures.py --gpu "$dest/transformers_gpu" \
  2>&1 | grep -v -i "warn\|Writing" | tail -3
[ -f "$dest/transformers_gpu.tar" ] && tar xf "$dest/transformers_gpu.tar" -C tests/data
rm -rf "$dest/transformers_gpu"
timeout 240 bash .devpack/run.sh kvactor_gpu_tests --gtest_filter='*DecoderCuda*:*Shapes*' \
  >"$out/gpu_tests.log" 2>&1
echo "gpu tests: rc $?"
grep -E "worst relative L2|FAILED|PASSED" "$out/gpu_tests.log" | head -40

# 2. The 8B checkpoint and its transformers references, then kvactor's figures on it.
timeout 240 python3 bench/hf/make_llama8b.py /tmp/l8b 2>&1 | grep -v -i "warn\|Writing\|crop" \
  | tee "$out/make_llama8b.log" | tail -8
timeout 300 bash .devpack/run.sh kvactor_decoder_bench --model /tmp/l8b ${cpu:+"$cpu"} \
  >"$out/decoder_bench.log" 2>&1
echo "decoder bench: rc $?"
grep -vE "^\[" "$out/decoder_bench.log" | tail -20
timeout 120 bash .devpack/run.sh kvactor_decoder_bench --model /tmp/l8b --fused --batches 1 \
  >"$out/decoder_bench_fused.log" 2>&1
grep -E "^decode" "$out/decoder_bench_fused.log" | sed 's/^/fused: /'

# 3. Where a batch-1 decode step's time goes: each kernel of one eager step under ncu.
timeout 150 /usr/local/cuda/bin/ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum \
  bash .devpack/run.sh kvactor_decoder_bench --model /tmp/l8b --profile --batches 1 \
  >"$out/ncu_batch1.csv" 2>"$out/ncu.err"
echo "ncu: rc $?, $(grep -c gpu__time_duration "$out/ncu_batch1.csv") kernels"

# 4. Served by kvactor run: the time to ready (graphs included) and a workload.
timeout 180 bash .devpack/run.sh kvactor run --model /tmp/l8b --device cuda --requests 32 \
  --no-progress --summary-json "$out/run_8b.json" >"$out/run_8b.log" 2>&1
echo "kvactor run: rc $?"
tail -n 12 "$out/run_8b.log"
