#!/usr/bin/env bash
# Prefix caching on the H200 in one device call:
#   1. the same tokens with and without it on the CUDA decoder: the GPU checkpoint fixtures of
#      every dense family (48-token shared prefix, 12 requests) and the Llama-3.1-8B shape
#      (generated weights, 512-token prefix, 64 requests): digest, first tokens, continuations;
#   2. a chat-like workload on the Llama-3.1-8B shape: a 2048-token system prompt shared by 512
#      requests arriving at once, with and without caching: prefill tokens computed, TTFT
#      p50/p99, throughput.
#   here:   cmake --build build --target kvactor
#           bash bench/pack_for_device.sh -z build/bin/kvactor
#   device: bash bench/device.sh "$OUT" prefix      (carry: [".devpack.tar.xz"])
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
start=$SECONDS

# run NAME TIMEOUT ARGS...: one `kvactor run --device cuda`, its summary in $out/NAME.json.
run() {
  local name=$1 limit=$2
  shift 2
  timeout "$limit" bash .devpack/run.sh kvactor run --device cuda --no-progress \
    --summary-json "$out/$name.json" "$@" >"$out/$name.log" 2>&1
  echo "$name: rc=$? ($((SECONDS - start)) s)"
}

pairs=()
for family in llama qwen2 qwen3 phi3 mistral gemma2 gemma3_text; do
  model=tests/data/transformers_gpu/$family
  [ -d "$model" ] || model=tests/data/transformers/$family
  for mode in on off; do
    flag=--enable-prefix-caching
    [ $mode = off ] && flag=--no-enable-prefix-caching
    run "fixture_${family}_$mode" 60 --model "$model" $flag --shared-prefix-len 48 \
      --prompt-len 56:80 --output-len 4:8 --requests 12 --max-num-batched-tokens 96 --seed 5
  done
  pairs+=("$family=$out/fixture_${family}_on.json,$out/fixture_${family}_off.json")
done
for mode in on off; do
  flag=--enable-prefix-caching
  [ $mode = off ] && flag=--no-enable-prefix-caching
  run "llama8b_$mode" 120 --model llama-3.1-8b --max-model-len 4096 $flag \
    --shared-prefix-len 512 --prompt-len 600:1024 --output-len 16:64 --requests 64 \
    --max-num-batched-tokens 1024 --seed 3
done
pairs+=("llama-3.1-8b=$out/llama8b_on.json,$out/llama8b_off.json")
for mode in on off; do
  flag=--enable-prefix-caching
  [ $mode = off ] && flag=--no-enable-prefix-caching
  run "chat_$mode" 240 --model llama-3.1-8b --max-model-len 4096 $flag \
    --shared-prefix-len 2048 --prompt-len 2176:2560 --output-len 32:96 --requests 512 \
    --seed 7 --log-level info
done
python3 bench/compare_runs.py --pairs "${pairs[@]}" \
  --chat "$out/chat_on.json" "$out/chat_off.json" | tee "$out/compare.txt"
echo "---- prefix device run: $((SECONDS - start)) s"
