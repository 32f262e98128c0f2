#!/usr/bin/env bash
# compute-sanitizer over the GPU tests on the H200 (issue 20 part 1): memcheck (out-of-bounds and
# misaligned accesses, leaks of device memory), racecheck (shared-memory hazards) and initcheck
# (reads of uninitialised device memory), each over the kernel suites and the rank and decoder
# suites, with a time limit each (the sanitizers slow kernels 10-100x). Each tool's summary line
# ("ERROR SUMMARY: N errors") and its first reports are printed; logs come back in logs.tar.
#   here:   cmake --build build --target kvactor_gpu_tests
#           bash bench/pack_for_device.sh -z build/bin/kvactor_gpu_tests
#   device: bash bench/sanitize_device_run.sh "$OUT" [FILTER]   (carry: [".devpack.tar.xz"])
# KVACTOR_SANITIZE_TOOLS picks the tools (default: all three), KVACTOR_SANITIZE_LIMIT the seconds
# each may run (170), KVACTOR_SANITIZE_SHARDS how many processes split the tests (1); racecheck
# reports its peak host memory (it can exhaust the machine).
# shellcheck source=bench/device_prelude.sh
source "$(dirname "$0")/device_prelude.sh" "$@"
filter=${2:-"KvWriteCuda*:PagedAttentionCuda*:AllSupported/*:EveryKernel/*:PrefillKernelChoice*:MetadataCuda*:DeviceLocal*:GpuRank.*:DenseFamilies/DecoderCudaFixtures.PromptLogits*"}
sanitizer=/usr/local/cuda/bin/compute-sanitizer
shards=${KVACTOR_SANITIZE_SHARDS:-1}
start=$SECONDS

# One tool over shard $2 of $shards (GoogleTest's own sharding) into $out/$1[.$2].log.
sanitize_shard() {
  local tool=$1 shard=$2 name=$1 extra=()
  [ "$shards" -gt 1 ] && name=$tool.$shard
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard \
    KVACTOR_GPU_TIMING_REPS=${KVACTOR_GPU_TIMING_REPS:-3} /usr/bin/time -f "peak RSS %M kB" -o "$out/$name.rss" timeout "${KVACTOR_SANITIZE_LIMIT:-170}" "$sanitizer" --tool "$tool" "${extra[@]}" \
    --print-limit 20 --error-exitcode 3 \
    bash .devpack/run.sh kvactor_gpu_tests --gtest_filter="$filter" \
    >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name: rc=$rc ($((SECONDS - start)) s, $(tail -n 1 "$out/$name.rss" 2>/dev/null))"
  # Each test's own lines (not --gtest_brief): a shard stopped by its time limit still shows
  # which tests finished under the tool, and which one it was in.
  echo "  $(grep -c '^\[       OK \]' "$out/$name.log") tests finished"
  [ "$rc" -eq 124 ] && echo "  stopped in: $(grep '^\[ RUN      \]' "$out/$name.log" | tail -n 1)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|\[  PASSED|\[  FAILED|tests ran" "$out/$name.log" | head -n 6
  grep -E "^========= (Invalid|Uninitialized|Error|Race|Warning|Leaked)" "$out/$name.log" | sort | uniq -c | head -n 12
}

# KVACTOR_SANITIZE_SHARDS=N runs N processes of each tool at once on the one GPU, each over 1/N of
# the tests, so that their host-side work runs on cores of its own (how much that saves is not
# measured yet).
for tool in ${KVACTOR_SANITIZE_TOOLS:-memcheck racecheck initcheck}; do
  for ((shard = 0; shard < shards; ++shard)); do
    sanitize_shard "$tool" "$shard" >"$out/$tool.$shard.summary" &
  done
  wait
  cat "$out/$tool".*.summary
done
echo "---- sanitize device run: $((SECONDS - start)) s"
