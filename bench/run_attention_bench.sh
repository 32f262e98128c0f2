#!/usr/bin/env bash
# Runs kvactor_attention_bench once and saves what it prints and writes under the folder $1:
#   attention_bench.log   stdout + stderr (progress lines, the table, the summary line last)
#   attention_bench.json  the results (attention_bench.csv: the same cases as CSV)
#   nvidia-smi.txt        the device's state before the run, when nvidia-smi exists
# usage: bench/run_attention_bench.sh OUT_DIR [kvactor_attention_bench flags...]
# The binary: $KVACTOR_ATTENTION_BENCH if set, else .devpack/ (bench/pack_for_device.sh, run
# through its run.sh), else the first of build-bench/, build-cuda/, build/ that has it.
# Exits with the benchmark's status: 0 also without a CUDA device (it says so), 1 on a failure.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [kvactor_attention_bench flags...]" >&2; exit 2; }
out=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
name=kvactor_attention_bench

cmd=()
if [ -n "${KVACTOR_ATTENTION_BENCH:-}" ]; then
  cmd=("$KVACTOR_ATTENTION_BENCH")
elif [ -x "$root/.devpack/bin/$name" ] && [ -f "$root/.devpack/run.sh" ]; then
  cmd=(bash "$root/.devpack/run.sh" "$name")
else
  for dir in build-bench build-cuda build; do
    if [ -x "$root/$dir/bin/$name" ]; then
      cmd=("$root/$dir/bin/$name")
      break
    fi
  done
fi
if [ ${#cmd[@]} -eq 0 ]; then
  echo "$name is not built; build it with:" >&2
  echo "  cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DKVACTOR_BUILD_BENCH=ON -DKVACTOR_BUILD_TESTS=OFF" >&2
  echo "  cmake --build build-bench --target $name" >&2
  exit 2
fi

mkdir -p "$out"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
fi
status=0
"${cmd[@]}" --out "$out/attention_bench.json" --out "$out/attention_bench.csv" "$@" 2>&1 \
  | tee "$out/attention_bench.log" || status=${PIPESTATUS[0]}
exit "$status"
