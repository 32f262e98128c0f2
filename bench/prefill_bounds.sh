#!/usr/bin/env bash
# What bounds the Hopper prefill, measured in one device call: two diagnostic builds of
# kvactor_attention_bench whose prefill kernel runs only its K/V stream ("loads": the consumers
# release each stage as it arrives) or everything but the softmax ("no_softmax"). Timed beside the
# real kernel in the same call, they say whether the data path, the MMAs or the softmax sets the
# pace. Their outputs are wrong on purpose: the benchmark's accuracy check fails, so pass
# --max-rel-l2 1e30 and read the times only.
#   here:   bash bench/prefill_bounds.sh [BUILD_DIR]       (default build; needs CUDA and sm_90a)
#           -> BUILD_DIR/bin/kvactor_attention_bench_loads, ..._no_softmax
#           bash bench/pack_for_device.sh -z build/bin/kvactor_attention_bench \
#             build/bin/kvactor_attention_bench_loads build/bin/kvactor_attention_bench_no_softmax
#   device: for b in kvactor_attention_bench kvactor_attention_bench_loads \
#             kvactor_attention_bench_no_softmax; do
#             bash .devpack/run.sh "$b" --cases prefill --max-rel-l2 1e30; done
# Each diagnostic build lives in BUILD_DIR-bound-MODE (CMake's KVACTOR_PREFILL_BOUND=MODE, which
# changes the flags of the prefill kernel's source alone).
set -euo pipefail
build=${1:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
launchers=()
if command -v ccache >/dev/null; then
  launchers=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
mkdir -p "$build/bin"
for mode in loads no_softmax; do
  dir=$build-bound-$mode
  start=$SECONDS
  mkdir -p "$dir"
  cmake -S "$src" -B "$dir" -G Ninja -DKVACTOR_BUILD_BENCH=ON -DKVACTOR_BUILD_TESTS=OFF \
    -DKVACTOR_PREFILL_BOUND="$mode" "${launchers[@]}" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log" >&2; exit 1; }
  cmake --build "$dir" --target kvactor_attention_bench
  cp "$dir/bin/kvactor_attention_bench" "$build/bin/kvactor_attention_bench_$mode"
  echo "prefill_bounds: $build/bin/kvactor_attention_bench_$mode ($((SECONDS - start)) s)"
done
