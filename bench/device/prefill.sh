#!/usr/bin/env bash
# The prefill kernels on the H200 in one device call: their tests (both kernels against the CPU
# reference), the prefill and mixed cases of kvactor_attention_bench (the Hopper kernel beside
# the mma.sync one), PyTorch's SDPA back-ends on the same shapes, and the kernels' SASS.
#   here:   cmake --build build --target kvactor_gpu_tests kvactor_attention_bench
#           bash bench/pack_for_device.sh -z build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_attention_bench
#   device: bash bench/device.sh "$OUT" prefill      (carry: [".devpack.tar.xz"])
# KVACTOR_PREFILL_NCU=1 adds an ncu profile of one Hopper launch of the prefill 8x4096 case
# (tensor-pipe use, issue activity, stall reasons) as OUT/logs/ncu_prefill.txt, the stall samples
# of every SASS instruction as OUT/logs/ncu_source.csv, and the head-128 kernel's SASS;
# KVACTOR_PREFILL_PEERS=0 leaves the SDPA peers out; KVACTOR_TEST_FILTER narrows the tests. The
# diagnostic builds of bench/prefill_bounds.sh, when packed too, run beside the kernel.
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
/usr/local/cuda/bin/cuobjdump --dump-sass .devpack/bin/kvactor_attention_bench 2>/dev/null |
  grep -oE "HGMMA\.[0-9A-Za-z.]+|USETMAXREG[.A-Z]*" | sort | uniq -c | head -n 12
timeout 240 bash .devpack/run.sh kvactor_gpu_tests --gtest_brief=1 \
  --gtest_filter="${KVACTOR_TEST_FILTER:-*}" >"$out/gpu_tests.log" 2>&1
echo "gpu tests: rc=$?"
grep -E "^\[  FAILED|PASSED|SKIPPED \]" "$out/gpu_tests.log" | head -n 30
start_clock_sampler "$out/clocks.csv" # see device_prelude.sh
timeout 180 bash .devpack/run.sh kvactor_attention_bench --cases prefill mixed \
  --out "$out/attention.json" >"$out/attention.log" 2>&1
echo "attention bench: rc=$?"
tail -n 14 "$out/attention.log"
stop_clock_sampler "$out/clocks.csv"
# The kernel's bounds (bench/prefill_bounds.sh), when their diagnostic builds were packed: the
# K/V stream alone and everything but the softmax, in the same call as the kernel. Times only.
for bound in loads no_softmax; do
  [ -x ".devpack/bin/kvactor_attention_bench_$bound" ] || continue
  timeout 120 bash .devpack/run.sh "kvactor_attention_bench_$bound" --cases prefill \
    --max-rel-l2 1e30 >"$out/bound_$bound.log" 2>&1
  echo "bound $bound (outputs wrong on purpose):"
  grep -E "^prefill [0-9x]+ 32/8 " "$out/bound_$bound.log" | cut -c1-62
done
if [ "${KVACTOR_PREFILL_PEERS:-1}" = 1 ]; then
  timeout 200 python3 bench/hf/sdpa_peers.py --kvactor "$out/attention.json" --cases prefill \
    --out "$out/sdpa_peers.json" >"$out/sdpa_peers.log" 2>&1
  grep -v -i "warn" "$out/sdpa_peers.log" | tail -n 12
fi
if [ "${KVACTOR_PREFILL_NCU:-0}" = 1 ]; then
  timeout 200 /usr/local/cuda/bin/ncu --graph-profiling node -k regex:hopper_prefill -c 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section InstructionStats --section ComputeWorkloadAnalysis \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    bash .devpack/run.sh kvactor_attention_bench --cases prefill8x4096 \
    >"$out/ncu_prefill.txt" 2>&1
  echo "ncu: rc=$?"
  grep -E "Issue Slots|Achieved Occupancy|Executed Ipc|Duration|Warp Cycles Per Issued" \
    "$out/ncu_prefill.txt" | head -n 8
  # Stall reasons, largest first (warps stalled per issued instruction).
  grep -E "issue_stalled_.*ratio" "$out/ncu_prefill.txt" | sort -k3 -g -r | head -n 8
  # Where the warps stall, per SASS instruction (PC sampling): ncu_source.csv has one row per
  # instruction of the profiled kernel with its stall samples by reason.
  timeout 200 /usr/local/cuda/bin/ncu --graph-profiling node -k regex:hopper_prefill -c 1 \
    --section SourceCounters --section WarpStateStats -f -o "$out/ncu_prefill_source" \
    bash .devpack/run.sh kvactor_attention_bench --cases prefill8x4096 >"$out/ncu_source.log" 2>&1
  echo "ncu source counters: rc=$?"
  /usr/local/cuda/bin/ncu -i "$out/ncu_prefill_source.ncu-rep" --page source --csv \
    --print-source sass >"$out/ncu_source.csv" 2>"$out/ncu_source_print.log"
  echo "ncu source page: rc=$? ($(wc -l <"$out/ncu_source.csv") lines)"
  rm -f "$out/ncu_prefill_source.ncu-rep"
  # The bf16 head-128 kernel's SASS, to count a tile's instructions here.
  /usr/local/cuda/bin/cuobjdump --dump-sass .devpack/bin/kvactor_attention_bench 2>/dev/null |
    awk '/Function : .*hopper_prefill_kernelI13__nv_bfloat16Li128E/ { on = 1; print; next }
         /Function :/ { on = 0 } on' >"$out/hopper_prefill_bf16_128.sass"
fi
