#!/usr/bin/env bash
# One detached chain for the next device calls (bench/RESULTS.md, 2026-12-06 sixth stop), in the
# order of what matters most when device time is short: the plain GEMM's tests and the decoder ops
# on it; racecheck with KVACTOR_GEMM=plain and kvactor's kernels only over the GPU tests it has not
# yet checked (issue 20 part 1), the long-prompt fixtures among them; the whole GPU suite; FULL
# graphs with KVACTOR_PDL unset and eager.
#   here:   bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_graph_bench
#   device: bash bench/detached.sh start /tmp/chain -- \
#             bash bench/racecheck_gemm_device_run.sh /tmp/chain   (carry: [".devpack.tar.xz"])
#           bash bench/detached.sh wait 540 /tmp/chain "$OUT/chain"; cat /tmp/chain/summary.txt
#           tar cf "$OUT/partial.tar" -C /tmp/chain logs   (what came so far, if still running)
#             (that call and each next one, issued at once: the machine is released when idle)
# DIR receives summary.txt (each result as it comes, each test's verdict included, tagged with
# the sanitizer's folder: racecheck_gemm, or racecheck_gqa_pdl0 for llama_gqa with KVACTOR_PDL=0)
# and logs/ (the steps' logs, and NAME_logs.tar, the sanitizer's, renewed after each racecheck
# run), tarred into logs.tar at the end, which `wait` brings back once finished.
# RACECHECK_FILTER replaces the tests (and skips the KVACTOR_PDL=0 rerun of llama_gqa),
# RACECHECK_WINDOWS (N:K) splits each into windows of launches, RACECHECK_SHARDS (6 for the 12
# tests, 4 for a filter) and RACECHECK_LIMIT (900 s for the 12, 540 s for a filter) as in
# sanitize_device_run.sh. A test with a verdict in /tmp/racecheck_gemm is not run again, unless
# it was stopped at a limit smaller than this run's.
# shellcheck source=bench/device_prelude.sh
source "$(dirname "$0")/device_prelude.sh" "$@"
summary=$dest/summary.txt
step() { echo "== $(date +%T) $*" | tee -a "$summary"; }
# The 12 tests racecheck has not yet checked (2026-12-06 sixth stop: 6 of the 18 before them, and
# the pair test whose hazards were cuBLAS's, clean with KVACTOR_GEMM=plain; the time ran out here).
short_filter='TpSharedGpuLlama8b.*:GpuRanksSharingAGpu.AGraphOneRankCannotCapture*'
short_filter+=':GpuRanksSharingAGpu.AStalledRank*'
long_filter='DenseFamilies/DecoderCudaFixtures.LongPrompts*'
# The one test whose verdict is the tool's "failure to track a kernel launch" (no hazard, three
# runs): the only fixture that splits to TP 4 and 8, eight threads launching at once. Run again
# with KVACTOR_PDL=0, to tell whether the programmatic launches are what the tool loses.
gqa='DenseFamilies/TpSharedGpuFixtures.EveryTpSizeGivesOneRanksLogitsOnEveryRank/llama_gqa'

# racecheck_plain DIR FILTER [LIMIT]: one racecheck run into DIR (sanitize_device_run.sh resumes:
# a test with a verdict there is skipped), its verdicts in the summary, tagged with DIR's name, and
# the sanitizer's logs in logs/NAME_logs.tar.
racecheck_plain() {
  local name
  name=$(basename "$1")
  KVACTOR_GEMM=plain KVACTOR_SANITIZE_KERNELS=kvactor KVACTOR_SANITIZE_PER_TEST=1 \
    KVACTOR_SANITIZE_TOOLS=racecheck KVACTOR_SANITIZE_SHARDS=${RACECHECK_SHARDS:-4} \
    KVACTOR_SANITIZE_LIMIT=${3:-${RACECHECK_LIMIT:-540}} KVACTOR_SANITIZE_BUDGET=100000 \
    KVACTOR_SANITIZE_RESUME=1 KVACTOR_SANITIZE_ALONE='GpuRanksSharingAGpu.A*Stalled*' \
    KVACTOR_SANITIZE_WINDOWS=${RACECHECK_WINDOWS:-} \
    bash bench/sanitize_device_run.sh "$1" "$2" 2>&1 | tee -a "$out/$name.txt" |
    grep --line-buffered -E "^racecheck|^  " | sed -u "s/^/[$name] /" >>"$summary"
  cp "$1/logs.tar" "$out/${name}_logs.tar" 2>/dev/null
}

step "the plain GEMM's tests, and the decoder ops on the plain GEMM"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$summary"
bash .devpack/run.sh kvactor_gpu_tests --gtest_filter='PlainGemm.*:PlainKernelChecks.*' \
  >"$out/plain_gemm.log" 2>&1
KVACTOR_GEMM=plain bash .devpack/run.sh kvactor_gpu_tests --gtest_filter='DecoderOpsCuda.*' \
  >"$out/decoder_ops_plain.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/plain_gemm.log" "$out/decoder_ops_plain.log" |
  tee -a "$summary"

# The short tests and the long-prompt fixtures in one run, 6 at a time (12.8 GiB of host memory
# at most per test last time, of 128), so that no slot idles while a slow test finishes; the
# stalled-rank test alone after them. llama_gqa's rerun (106 s last time) runs beside them.
step "racecheck, KVACTOR_GEMM=plain, kvactor's kernels only"
if [ -n "${RACECHECK_FILTER:-}" ]; then
  racecheck_plain /tmp/racecheck_gemm "$RACECHECK_FILTER"
else
  KVACTOR_PDL=0 racecheck_plain /tmp/racecheck_gqa_pdl0 "$gqa" 400 &
  gqa_pid=$!
  RACECHECK_SHARDS=${RACECHECK_SHARDS:-6} racecheck_plain /tmp/racecheck_gemm \
    "$short_filter:$long_filter" "${RACECHECK_LIMIT:-900}"
  wait "$gqa_pid"
fi

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
