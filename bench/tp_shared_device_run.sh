#!/usr/bin/env bash
# Tensor-parallel GPU ranks sharing one H200 (issue 17), in one device call: the device-local
# communicator's tests and the shared-GPU `kvactor run` tests, then the Llama-3.1-8B shape
# (generated weights) at TP 1, 2, 4 and 8 on GPU 0 with the same workload: each TP size's tokens
# against TP 1 (first tokens, whole continuations) and its median step time; and a transformers
# checkpoint fixture at TP 1 and 2.
#   here:   cmake --build build --target kvactor kvactor_gpu_tests
#           bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests
#   device: bash bench/tp_shared_device_run.sh "$OUT"      (carry: [".devpack.tar.xz"])
# shellcheck source=bench/device_prelude.sh
source "$(dirname "$0")/device_prelude.sh" "$@"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
start=$SECONDS
timeout 240 bash .devpack/run.sh kvactor_gpu_tests --gtest_brief=1 \
  --gtest_filter="${KVACTOR_TEST_FILTER:-DeviceLocal*:GpuRanksSharing*:*Nccl*:*TpShared*}" \
  >"$out/gpu_tests.log" 2>&1
echo "gpu tests: rc=$? ($((SECONDS - start)) s)"
grep -E "^\[  FAILED|PASSED|SKIPPED \]|Failure| TP [0-9]" "$out/gpu_tests.log" | head -n 60

ids() { # 0,0,...: N ranks on GPU 0
  local n=$1 s=0
  for ((i = 1; i < n; ++i)); do s+=",0"; done
  echo "$s"
}
run() { # NAME TP ARGS...
  local name=$1 tp=$2
  shift 2
  local placement=()
  ((tp > 1)) && placement=(--gpu-ids "$(ids "$tp")")
  timeout 240 bash .devpack/run.sh kvactor run --device cuda --no-progress -tp "$tp" \
    "${placement[@]}" --summary-json "$out/$name.json" "$@" >"$out/$name.log" 2>&1
  echo "$name: rc=$? ($((SECONDS - start)) s)"
}
pairs=()
for tp in 1 2 4 8; do
  run "llama8b_tp$tp" "$tp" --model llama-3.1-8b --max-model-len 2048 --requests 32 \
    --prompt-len 64:512 --output-len 32 --seed 3 --log-level info
  ((tp > 1)) && pairs+=("llama-3.1-8b TP $tp vs 1=$out/llama8b_tp$tp.json,$out/llama8b_tp1.json")
done
for tp in 1 2; do
  run "fixture_tp$tp" "$tp" --model tests/data/transformers_gpu/llama --requests 12 \
    --prompt-len 16:64 --output-len 8:16 --seed 5
done
pairs+=("llama fixture TP 2 vs 1=$out/fixture_tp2.json,$out/fixture_tp1.json")
grep -h "KV cache budget\|ranks sharing" "$out"/llama8b_tp*.log | head -n 4
for tp in 1 2 4 8; do grep -v "^\[" "$out/llama8b_tp$tp.log" | grep -E "kvactor run|requests|steps|kv blocks" ; done
python3 bench/prefix_compare.py --pairs "${pairs[@]}" | tee "$out/compare.txt"
echo "---- tp shared device run: $((SECONDS - start)) s"
