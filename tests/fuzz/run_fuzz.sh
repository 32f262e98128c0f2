#!/usr/bin/env bash
# Builds the trace/message decoder fuzz target with clang (libFuzzer + ASan + UBSan) and runs it
# for a bounded time. Usage: tests/fuzz/run_fuzz.sh [seconds=60]. Needs clang and Debian's
# libclang-rt-14-dev; seeds its corpus with a trace of a short `kvactor run` when build/bin/kvactor
# exists. Prints libFuzzer's final stats line; exits non-zero on any finding.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
out=build-fuzz
mkdir -p "$out/corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -DMSGPACK_NO_BOOST -DMSGPACK_DEFAULT_API_VERSION=3 -I. \
  tests/fuzz/trace_fuzz.cpp messages/trace.cpp messages/codec.cpp messages/errc.cpp \
  messages/dtype.cpp messages/names.cpp messages/kv_spec.cpp -lfmt -o "$out/trace_fuzz"
if [ -x build/bin/kvactor ] && [ ! -f "$out/corpus/seed.kvtrace" ]; then
  build/bin/kvactor run --requests 3 --prompt-len 8:16 --output-len 4 --no-progress \
    --record "$out/corpus/seed.kvtrace" > /dev/null
fi
"$out/trace_fuzz" "$out/corpus" -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 \
  2>&1 | tail -n 20
