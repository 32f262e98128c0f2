#!/usr/bin/env bash
# One detached chain for the next device calls (bench/RESULTS.md, 2026-12-06 fifth stop), in the
# order of what matters most when device time is short: the plain GEMM's tests and the decoder ops
# on it; racecheck with KVACTOR_GEMM=plain and kvactor's kernels only over the GPU tests that run
# GEMMs and were too slow for it with every kernel instrumented (issue 20 part 1), the long-prompt
# fixtures last; the whole GPU suite; FULL graphs with KVACTOR_PDL unset and eager.
#   here:   bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_graph_bench
#   device: bash bench/detached.sh start /tmp/chain -- \
#             bash bench/racecheck_gemm_device_run.sh /tmp/chain   (carry: [".devpack.tar.xz"])
#           bash bench/detached.sh wait 540 /tmp/chain "$OUT/chain"; cat /tmp/chain/summary.txt
#             (that call and each next one, issued at once: the machine is released when idle)
# DIR receives summary.txt (each result as it comes, each test's verdict included) and, at the
# end, logs.tar (the steps' logs and the sanitizer's), which `wait` brings back once finished.
# RACECHECK_FILTER overrides the tests, RACECHECK_WINDOWS (N:K) splits each into windows of
# launches, RACECHECK_SHARDS (4) and RACECHECK_LIMIT (540 s) as in sanitize_device_run.sh.
# shellcheck source=bench/device_prelude.sh
source "$(dirname "$0")/device_prelude.sh" "$@"
summary=$dest/summary.txt
step() { echo "== $(date +%T) $*" | tee -a "$summary"; }
# The 12 tests racecheck has not yet checked (2026-12-06 sixth stop: 7 of the 18 before them
# clean with KVACTOR_GEMM=plain, the call's time spent before these), the 8-rank test first.
short_filter='TpSharedGpuLlama8b.*:GpuRanksSharingAGpu.AGraphOneRankCannotCapture*'
short_filter+=':GpuRanksSharingAGpu.AStalledRank*'
long_filter='DenseFamilies/DecoderCudaFixtures.LongPrompts*'
# The one test whose verdict is the tool's "failure to track a kernel launch" (no hazard, three
# runs): the only fixture that splits to TP 4 and 8, eight threads launching at once. Run again
# with KVACTOR_PDL=0, to tell whether the programmatic launches are what the tool loses.
gqa='DenseFamilies/TpSharedGpuFixtures.EveryTpSizeGivesOneRanksLogitsOnEveryRank/llama_gqa'

# One racecheck run over FILTER (sanitize_device_run.sh resumes: a test with a verdict is skipped).
racecheck_plain() {
  KVACTOR_GEMM=plain KVACTOR_SANITIZE_KERNELS=kvactor KVACTOR_SANITIZE_PER_TEST=1 \
    KVACTOR_SANITIZE_TOOLS=racecheck KVACTOR_SANITIZE_SHARDS=${RACECHECK_SHARDS:-4} \
    KVACTOR_SANITIZE_LIMIT=${RACECHECK_LIMIT:-540} KVACTOR_SANITIZE_BUDGET=100000 \
    KVACTOR_SANITIZE_RESUME=1 KVACTOR_SANITIZE_ALONE='GpuRanksSharingAGpu.A*Stalled*' \
    KVACTOR_SANITIZE_WINDOWS=${RACECHECK_WINDOWS:-} \
    bash bench/sanitize_device_run.sh /tmp/racecheck_gemm "$1" \
    2>&1 | tee -a "$out/racecheck.txt" | grep --line-buffered -E "^racecheck|^  " >>"$summary"
}

step "the plain GEMM's tests, and the decoder ops on the plain GEMM"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$summary"
bash .devpack/run.sh kvactor_gpu_tests --gtest_filter='PlainGemm.*:PlainKernelChecks.*' \
  >"$out/plain_gemm.log" 2>&1
KVACTOR_GEMM=plain bash .devpack/run.sh kvactor_gpu_tests --gtest_filter='DecoderOpsCuda.*' \
  >"$out/decoder_ops_plain.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/plain_gemm.log" "$out/decoder_ops_plain.log" |
  tee -a "$summary"

# The long-prompt fixtures last: device time is short and they are the slowest.
step "racecheck, KVACTOR_GEMM=plain, kvactor's kernels only"
if [ -n "${RACECHECK_FILTER:-}" ]; then
  racecheck_plain "$RACECHECK_FILTER"
else
  racecheck_plain "$short_filter"
  step "racecheck over the TP 8 fixture with KVACTOR_PDL=0"
  sanitizer=${KVACTOR_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
  KVACTOR_PDL=0 KVACTOR_GEMM=plain timeout 400 "$sanitizer" --tool racecheck \
    --kernel-name kns=kvactor --print-limit 20 --error-exitcode 3 \
    bash .devpack/run.sh kvactor_gpu_tests --gtest_filter="$gqa" >"$out/gqa_pdl0.log" 2>&1
  echo "exit $?" >>"$summary"
  grep -E "Internal Sanitizer|RACECHECK SUMMARY|^\[  (PASSED|FAILED) " "$out/gqa_pdl0.log" |
    tee -a "$summary"
  step "racecheck over the long-prompt fixtures"
  racecheck_plain "$long_filter"
fi
cp /tmp/racecheck_gemm/logs.tar "$out/racecheck_logs.tar" 2>/dev/null

step "the whole GPU suite"
bash .devpack/run.sh kvactor_gpu_tests >"$out/gpu_suite.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/gpu_suite.log" | tee -a "$summary"

step "FULL graphs with PDL (unset) and without (eager), two rounds alternating"
for round in 1 2; do
  order=("" eager)
  [ "$round" = 2 ] && order=(eager "")
  for pdl in "${order[@]}"; do
    log=$out/graph_pdl_${pdl:-unset}_$round.log
    KVACTOR_PDL=$pdl timeout 120 bash .devpack/run.sh kvactor_graph_bench --quick >"$log" 2>&1
    echo "round $round, KVACTOR_PDL=${pdl:-unset}: exit $?" >>"$summary"
    grep -E "^ +[0-9]+ " "$log" >>"$summary"
  done
done

step "done"
