#!/usr/bin/env bash
# The GPU test suite (kvactor_gpu_tests), with the GPU-vs-CPU agreement lines it prints.
#   here:   cmake --build build --target kvactor kvactor_gpu_tests
#           bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests
#   device: bash bench/device.sh "$OUT" tests[=GTEST_FILTER]   (carry: [".devpack.tar.xz"])
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
filter=${2:-*}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
timeout 330 bash .devpack/run.sh kvactor_gpu_tests --gtest_brief=1 --gtest_filter="$filter" \
  >"$out/gpu_tests.log" 2>&1
rc=$?
tail -n 3 "$out/gpu_tests.log"
grep -E "GPU vs CPU|graphs vs eager" "$out/gpu_tests.log" || true
exit $rc
