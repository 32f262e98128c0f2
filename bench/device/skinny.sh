#!/usr/bin/env bash
# The skinny projections on the H200 in one device call: the GPU suite (every
# single-token step of the decoder tests runs them), kvactor_skinny_bench (kvactor's skinny kernel
# and cuBLAS at the 8B model's shapes, same run), then the Llama-3.1-8B-architecture checkpoint
# made by transformers and kvactor_decoder_bench's decode steps against their roofline.
#   here:   bash bench/pack_for_device.sh -z build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_skinny_bench build/bin/kvactor_decoder_bench
#   device: bash bench/device.sh "$OUT" skinny   (carry: [".devpack.tar.xz"])
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
start=$SECONDS
timeout 150 bash .devpack/run.sh kvactor_gpu_tests --gtest_brief=1 >"$out/gpu_tests.log" 2>&1
echo "gpu tests: rc $? ($((SECONDS - start)) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran" "$out/gpu_tests.log" | head -20
timeout 100 bash .devpack/run.sh kvactor_skinny_bench 2>&1 | tee "$out/skinny_bench.log"
timeout 100 bash .devpack/run.sh kvactor_skinny_bench --tokens 4 2>&1 | tail -n 7 \
  | tee "$out/skinny_bench_4.log"
echo "---- skinny bench done at $((SECONDS - start)) s"
timeout 170 python3 bench/hf/make_llama8b.py /tmp/l8b 2>&1 | grep -v -i "warn\|Writing\|crop" \
  >"$out/make_llama8b.log"
echo "make_llama8b: rc ${PIPESTATUS[0]} ($((SECONDS - start)) s)"
timeout 150 bash .devpack/run.sh kvactor_decoder_bench --model /tmp/l8b --batches 1,8,32,128 \
  >"$out/decoder_bench.log" 2>&1
echo "decoder bench: rc $? ($((SECONDS - start)) s)"
grep -E "^(decode|copy|step|roofline)" "$out/decoder_bench.log" | head -20
grep -vE "^\[" "$out/decoder_bench.log" | tail -12
