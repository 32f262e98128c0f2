#!/usr/bin/env bash
# What the H200 checks for tensor parallelism (issue 7), in one device call: the NCCL tests
# (TP 1 on one GPU, init and collective timeouts, kvactor run over NCCL), the GPU rank tests that
# the communicator wiring touches, a `kvactor run` over NCCL, the clear error for more GPU ranks
# than GPUs, and the NCCL all-reduce benchmark.
#   here:   cmake --build build -j1 --target kvactor kvactor_gpu_tests kvactor_collectives_bench
#           bash bench/pack_for_device.sh build/bin/kvactor build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_collectives_bench
#   device: bash bench/tp_device_run.sh "$OUT"      (carry: [".devpack"])
# Logs go to OUT; a short table is printed last.
set -uo pipefail
out=${1:?usage: tp_device_run.sh OUT_DIR}
mkdir -p "$out"
export KVACTOR_MODELS_PATH=$PWD/deploy/models
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
declare -A status
start=$SECONDS
timeout 240 bash .devpack/run.sh kvactor_gpu_tests --gtest_filter='Nccl*:GpuRank*' \
  >"$out/nccl_tests.log" 2>&1
status[nccl_tests]=$?
grep -E "^\[( +OK|  FAILED|  SKIPPED) \]" "$out/nccl_tests.log"
timeout 90 bash .devpack/run.sh kvactor run --device cuda --communicator nccl --no-progress \
  --collective-timeout 60 --log-level info --summary-json "$out/run_nccl.json" \
  >"$out/run_nccl.log" 2>&1
status[run_nccl_tp1]=$?
grep -v "^\[" "$out/run_nccl.log" | tail -n 8
grep -E "NCCL|joined|agree" "$out/run_nccl.log" | head -n 5
timeout 60 bash .devpack/run.sh kvactor run --device cuda --tensor-parallel-size 2 --no-progress \
  >"$out/run_tp2.log" 2>&1
status[run_tp2]=$? # exit 2 with one GPU: "2 GPU ranks need 2 GPUs, 1 visible"
tail -n 3 "$out/run_tp2.log"
timeout 120 bash .devpack/run.sh kvactor_collectives_bench --nccl --benchmark_min_time=0.2 \
  >"$out/collectives.log" 2>&1
status[collectives_bench]=$?
tail -n 1 "$out/collectives.log"
echo "---- tp device run: $((SECONDS - start)) s"
for k in "${!status[@]}"; do printf '%-18s exit %s\n' "$k" "${status[$k]}"; done
