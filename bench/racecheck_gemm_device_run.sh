#!/usr/bin/env bash
# The detached chain that finished racecheck over the GPU suite (bench/RESULTS.md, 2026-12-06 eighth
# stop; written at the seventh), in the order of what mattered most when device time was short: the
# tests changed for running under a tool, without it; racecheck with KVACTOR_GEMM=plain and
# kvactor's kernels only over the six tests added since the suite was counted and the stalled-rank
# test (issue 20 part 1); FULL graphs with KVACTOR_PDL unset and eager; racecheck over the two slow
# tests, and llama_gqa's TP test with every module loaded eagerly; the whole suite.
#   here:   bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests \
#             build/bin/kvactor_graph_bench
#   device: bash bench/detached.sh start /tmp/chain -- \
#             bash bench/racecheck_gemm_device_run.sh /tmp/chain   (carry: [".devpack.tar.xz"])
#           bash bench/detached.sh wait 540 /tmp/chain "$OUT/chain"; cat /tmp/chain/summary.txt
#           tar czf "$OUT/partial.tgz" -C /tmp racecheck_gemm racecheck_gqa_eager chain  (so far)
#             (that call and each next one, issued at once: the machine is released when idle)
# DIR receives summary.txt (each result as it comes, each test's verdict included, tagged with
# the sanitizer's folder, racecheck_gemm or racecheck_gqa_eager) and logs/ (the steps' logs, and
# NAME_logs.tar, the sanitizer's, renewed after each racecheck run), tarred into logs.tar at the
# end, which `wait` brings back once finished.
# RACECHECK_FILTER replaces the tests (llama_gqa's run too), RACECHECK_WINDOWS (N:K) splits each
# into windows of launches, RACECHECK_SHARDS (2) and RACECHECK_LIMIT (1500 s) as in
# sanitize_device_run.sh, and KVACTOR_TEST_SLOWDOWN (40; 200 for the stalled-rank test) scales
# the tests' collective timeouts and bounds, and makes the two slow tests do less work. A test
# with a verdict in /tmp/racecheck_gemm is not run again, unless it was stopped at a limit smaller
# than this run's.
# shellcheck source=bench/device_prelude.sh
source "$(dirname "$0")/device_prelude.sh" "$@"
summary=$dest/summary.txt
step() { echo "== $(date +%T) $*" | tee -a "$summary"; }
# The three tests racecheck had not yet checked to the end at the seventh stop (all three ran to
# their end at the eighth: two clean, the Llama-8B shape with the tool's own error only): the
# stalled-rank and failed-capture tests, 0 hazards, failed their own collective timeouts under the
# tool (these now scale with KVACTOR_TEST_SLOWDOWN, and the failed-capture test serves 4 requests
# under a tool, not 12); the Llama-8B-shape TP test did not finish in 900 s (under a tool it now
# runs one prompt and two tokens, and says on stderr how far it got).
# And the six tests added since the suite's 284 were counted: the plain GEMM's GPU test and five
# host checks.
added='PlainGemm.*:PlainKernelChecks.*:ProjectionGemmChoice.*:PdlScope.*'
added+=':DecoderCudaChecks.RefusesAnUnknownKvactor*'
stalled='GpuRanksSharingAGpu.AStalledRank*'
slow_filter='TpSharedGpuLlama8b.*:GpuRanksSharingAGpu.AGraphOneRankCannotCapture*'
# The one test whose verdict was the tool's "failure to track a kernel launch" when this chain was
# written (no hazard, four runs, with and without PDL; at the eighth stop a fifth, and the
# Llama-8B shape too): beside the slow pair, with every module loaded at start-up instead
# of at a kernel's first launch, to tell whether the tool loses a launch that loads its module
# while other threads launch.
gqa='DenseFamilies/TpSharedGpuFixtures.EveryTpSizeGivesOneRanksLogitsOnEveryRank/llama_gqa'
export KVACTOR_TEST_SLOWDOWN=${KVACTOR_TEST_SLOWDOWN:-40}

# racecheck_plain DIR FILTER: one racecheck run into DIR (sanitize_device_run.sh resumes:
# a test with a verdict there is skipped), its verdicts in the summary, tagged with DIR's name, and
# the sanitizer's logs in logs/NAME_logs.tar.
racecheck_plain() {
  local name
  name=$(basename "$1")
  KVACTOR_GEMM=plain KVACTOR_SANITIZE_KERNELS=kvactor KVACTOR_SANITIZE_PER_TEST=1 \
    KVACTOR_SANITIZE_TOOLS=racecheck KVACTOR_SANITIZE_SHARDS=${RACECHECK_SHARDS:-2} \
    KVACTOR_SANITIZE_LIMIT=${RACECHECK_LIMIT:-1500} KVACTOR_SANITIZE_BUDGET=100000 \
    KVACTOR_SANITIZE_RESUME=1 KVACTOR_SANITIZE_ALONE='GpuRanksSharingAGpu.A*Stalled*' \
    KVACTOR_SANITIZE_WINDOWS=${RACECHECK_WINDOWS:-} \
    bash bench/sanitize_device_run.sh "$1" "$2" 2>&1 | tee -a "$out/$name.txt" |
    grep --line-buffered -E "^racecheck|^  " | sed -u "s/^/[$name] /" >>"$summary"
  cp "$1/logs.tar" "$out/${name}_logs.tar" 2>/dev/null
}

step "the tests changed for running under a tool, without it"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$summary"
KVACTOR_TEST_SLOWDOWN=1 timeout 600 bash .devpack/run.sh kvactor_gpu_tests \
  --gtest_filter='GpuRanksSharingAGpu.*:TpSharedGpuLlama8b.*' >"$out/changed_tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/changed_tests.log" | tee -a "$summary"

# The six added tests (seconds); the stalled-rank test alone (it compares the device's free
# memory before and after), its 0.5 s timeout scaled to 100 s (a collective outlasted 10 s under
# the tool); the PDL A/B (about a minute, with the GPU to itself); then the two slow tests side
# by side, and the whole suite last.
step "racecheck, KVACTOR_GEMM=plain, kvactor's kernels only"
if [ -n "${RACECHECK_FILTER:-}" ]; then
  racecheck_plain /tmp/racecheck_gemm "$RACECHECK_FILTER"
else
  racecheck_plain /tmp/racecheck_gemm "$added"
  KVACTOR_TEST_SLOWDOWN=200 racecheck_plain /tmp/racecheck_gemm "$stalled"
fi

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

if [ -z "${RACECHECK_FILTER:-}" ]; then
  step "racecheck over the two slow tests, and llama_gqa's TP test with CUDA_MODULE_LOADING=EAGER"
  CUDA_MODULE_LOADING=EAGER racecheck_plain /tmp/racecheck_gqa_eager "$gqa" &
  racecheck_plain /tmp/racecheck_gemm "$slow_filter"
  wait
fi

step "the whole GPU suite"
KVACTOR_TEST_SLOWDOWN=1 timeout 900 bash .devpack/run.sh kvactor_gpu_tests \
  >"$out/gpu_suite.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/gpu_suite.log" | tee -a "$summary"

step "done"
