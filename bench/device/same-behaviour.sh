#!/usr/bin/env bash
# Behaviour unchanged on the GPU, in one device call: the GPU tests of this build, then the same
# `kvactor run`s with a reference build and this one, digest against digest (CUDA graphs on and
# off, lazy capture, two ubatches, kvactor-tiny and the Llama-3.1-8B shape), and the 8B-shaped
# run's block count, steps, replays and time to ready from both.
#   here:   build the reference commit elsewhere, copy its binary to /tmp/kvactor_old, then
#           bash bench/pack_for_device.sh build/bin/kvactor build/bin/kvactor_gpu_tests \
#             /tmp/kvactor_old
#   device: bash bench/device.sh "$OUT" same-behaviour   (carry: [".devpack"])
set -u
out=${1:?usage: same-behaviour.sh OUT_DIR}
mkdir -p "$out"
export KVACTOR_MODELS_PATH=$PWD/deploy/models
timeout 300 bash .devpack/run.sh kvactor_gpu_tests --gtest_brief=1 > "$out"/gpu_tests.log 2>&1
echo "gpu_tests rc $?"; grep -E "FAILED|PASSED|SKIPPED \]" "$out"/gpu_tests.log | tail -8
same() { # args...: the digest of the reference and of this build
  o=$(bash .devpack/run.sh kvactor_old run --no-progress "$@" 2>/dev/null | awk '/^digest/{print $2}')
  n=$(bash .devpack/run.sh kvactor run --no-progress "$@" 2>"$out"/last.err | awk '/^digest/{print $2}')
  echo "[$*] reference $o new $n $([ "$o" = "$n" ] && echo same || echo DIFF)"
}
same --device cuda
same --device cuda --seed 3
same --device cuda --seed 5 --ubatches 2
same --device cuda --cudagraph-mode none --seed 2
same --device cuda --cudagraph-capture lazy --seed 2
same --device cuda --model llama-3.1-8b --max-model-len 4096 --requests 32 --prompt-len 64:256 \
  --output-len 32:64
same --device cuda --model llama-3.1-8b --max-model-len 4096 --requests 32 --prompt-len 64:256 \
  --output-len 32:64 --cudagraph-mode none
for mode in reference new; do
  b=kvactor
  [ $mode = reference ] && b=kvactor_old
  bash .devpack/run.sh "$b" run --device cuda --no-progress --model llama-3.1-8b \
    --max-model-len 4096 --requests 64 --prompt-len 64:256 --output-len 64:128 \
    >"$out/8b_$mode.txt" 2>&1
  grep -E "blocks of KV|steps |graphs |ready in|tokens " "$out/8b_$mode.txt" | sed "s/^/$mode: /"
done
