#!/usr/bin/env bash
# Tensor parallelism on the GPU machine it runs on, in one device call:
#   1. the NCCL and device-local tests, the TP decoder tests and the TP graph tests on one GPU;
#   2. the Llama-3.1-8B shape (generated weights) at TP 1, 2, 4 and 8 with one workload: on a
#      machine with at least TP GPUs over NCCL, one rank per GPU; otherwise the ranks share GPU 0
#      (the device-local communicator). Each size's tokens against TP 1 and its median step time,
#      with CUDA graphs (the default) and, for ranks sharing GPU 0, eagerly (--cudagraph-mode none);
#      and a transformers checkpoint fixture at TP 1 and 2 the same way;
#   3. all-reduce latency at 4 KiB-4 MiB (a decode step of batch 1 reduces 16 KiB, of batch 256
#      4 MiB on this model): NCCL over 1, 2, 4 and 8 GPUs as visible, device-local with 2-8 ranks;
#   4. the clear error for more NCCL ranks than GPUs.
#   here:   cmake --build build --target kvactor kvactor_gpu_tests kvactor_collectives_bench
#           bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_collectives_bench
#   device: bash bench/device.sh "$OUT" tp      (carry: [".devpack.tar.xz"])
# Ask for nvidia-h200-x8 (or -x2/-x4) for the NCCL figures; on one GPU everything else still runs.
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
echo "visible GPUs: $gpus"
declare -A status
start=$SECONDS
timeout 300 bash .devpack/run.sh kvactor_gpu_tests --gtest_brief=1 \
  --gtest_filter='*Nccl*:DeviceLocal*:GpuRanksSharing*:*TpShared*:GraphRunner.TensorParallel*' \
  >"$out/tp_tests.log" 2>&1
status[tp_tests]=$?
grep -E "^\[  (FAILED|PASSED|SKIPPED) \]| TP [0-9]" "$out/tp_tests.log" | grep -v "not split"

pairs=()
for tp in 1 2 4 8; do
  placement=()
  how=nccl
  if ((tp > 1 && tp > gpus)); then
    how=shared
    placement=(--gpu-ids "$(printf '0%.0s,' $(seq "$tp") | sed 's/,$//')")
  fi
  timeout 240 bash .devpack/run.sh kvactor run --device cuda --no-progress -tp "$tp" \
    "${placement[@]}" --model llama-3.1-8b --max-model-len 2048 --requests 32 \
    --prompt-len 64:512 --output-len 32 --seed 3 --log-level info \
    --summary-json "$out/llama8b_tp$tp.json" \
    >"$out/llama8b_tp$tp.log" 2>&1
  status[run_tp$tp]=$?
  echo "TP $tp ($how): rc=${status[run_tp$tp]} ($((SECONDS - start)) s)"
  ((tp > 1)) && pairs+=("TP $tp ($how) vs 1=$out/llama8b_tp$tp.json,$out/llama8b_tp1.json")
  [[ $how == shared ]] || continue
  timeout 240 bash .devpack/run.sh kvactor run --device cuda --no-progress -tp "$tp" \
    "${placement[@]}" --model llama-3.1-8b --max-model-len 2048 --requests 32 \
    --prompt-len 64:512 --output-len 32 --seed 3 --log-level info --cudagraph-mode none \
    --summary-json "$out/llama8b_tp${tp}_eager.json" >"$out/llama8b_tp${tp}_eager.log" 2>&1
  status[run_tp${tp}_eager]=$?
  pairs+=("TP $tp graphs vs eager=$out/llama8b_tp$tp.json,$out/llama8b_tp${tp}_eager.json")
done
for tp in 1 2; do
  placement=()
  ((tp > 1 && tp > gpus)) && placement=(--gpu-ids "0,0")
  timeout 60 bash .devpack/run.sh kvactor run --device cuda --no-progress -tp "$tp" \
    "${placement[@]}" --model tests/data/transformers_gpu/llama --requests 12 \
    --prompt-len 16:64 --output-len 8:16 --seed 5 --summary-json "$out/fixture_tp$tp.json" \
    >"$out/fixture_tp$tp.log" 2>&1
  status[fixture_tp$tp]=$?
done
pairs+=("llama fixture TP 2 vs 1=$out/fixture_tp2.json,$out/fixture_tp1.json")
grep -h "ranks sharing it" "$out"/llama8b_tp*.log | head -n 3
python3 bench/compare_runs.py --pairs "${pairs[@]}" | tee "$out/compare.txt"

timeout 200 bash .devpack/run.sh kvactor_collectives_bench --nccl --device-local \
  --benchmark_min_time=0.2 >"$out/collectives.log" 2>&1
status[collectives_bench]=$?
tail -n 1 "$out/collectives.log"

over=$((gpus * 2))
timeout 60 bash .devpack/run.sh kvactor run --device cuda --communicator nccl \
  --tensor-parallel-size "$over" --no-progress >"$out/run_too_many.log" 2>&1
status[too_many_ranks]=$? # exit 2: "N GPU ranks need N GPUs, M visible"
tail -n 2 "$out/run_too_many.log"
echo "---- tp device run: $((SECONDS - start)) s"
for k in "${!status[@]}"; do printf '%-18s exit %s\n' "$k" "${status[$k]}"; done
