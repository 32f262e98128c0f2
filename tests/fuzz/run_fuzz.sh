#!/usr/bin/env bash
# Builds the fuzz targets as libFuzzer binaries (clang, with ASan and UBSan; build-fuzz/) and runs
# each for a bounded time over a working copy of its corpus (tests/fuzz/corpus/NAME: the seeds
# and every past finding). New inputs stay in build-fuzz/corpus/NAME; a finding is saved there as
# crash-*/leak-*/timeout-* (copy it into tests/fuzz/corpus/NAME once fixed: ctest replays it).
#   usage: tests/fuzz/run_fuzz.sh [SECONDS_PER_TARGET=60] [TARGET...]
#   TARGET: trace config safetensors tokenizer_json tokenize_text inject frame_guard peer_auth
#           step_frame codec http_request openai_body
#   (default: all)
# Needs clang and Debian's libclang-rt-14-dev. Prints each target's executions and exits non-zero
# when any target found something.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]} > 0)) ||
  targets=(trace config safetensors tokenizer_json tokenize_text inject frame_guard peer_auth
    step_frame codec http_request openai_body)
out=build-fuzz
mkdir -p "$out"
flags="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
CC=clang CXX=clang++ cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKVACTOR_FUZZ=ON \
  -DKVACTOR_BUILD_TESTS=OFF -DKVACTOR_WITH_CUDA=OFF -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >"$out/configure.log" 2>&1 ||
  { tail -20 "$out/configure.log"; exit 1; }
cmake --build "$out" -j2 --target "${targets[@]/#/kvactor_fuzz_}"
export KVACTOR_SOURCE_DIR=$PWD
found=0
for t in "${targets[@]}"; do
  corpus=$out/corpus/$t
  mkdir -p "$corpus" "$out/findings/$t"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  log=$out/$t.log
  rc=0
  "$out/bin/kvactor_fuzz_$t" "$corpus" -max_total_time="$seconds" -max_len=65536 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$out/findings/$t/" >"$log" 2>&1 ||
    rc=$?
  execs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" || echo 0)
  echo "fuzz $t: $execs executions in ${seconds} s, exit $rc"
  if ((rc != 0)); then
    found=1
    grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -n 5 || tail -n 5 "$log"
  fi
done
exit "$found"
