#!/usr/bin/env bash
# `kvactor run --device cuda` as a user runs it: the default model, a GPU run recorded and
# replayed with --verify, and 64 requests on the Llama-3.1-8B shape (generated weights) with the
# memory the rank reports.
#   here:   bash bench/pack_for_device.sh -z build/bin/kvactor
#   device: bash bench/device.sh "$OUT" serve   (carry: [".devpack.tar.xz"])
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
rc=0
timeout 60 bash .devpack/run.sh kvactor run --device cuda --no-progress \
  --summary-json "$out/run_default.json" >"$out/run_default.log" 2>&1 || rc=1
cat "$out/run_default.log"
{ timeout 60 bash .devpack/run.sh kvactor run --device cuda --no-progress \
  --record "$out/gpu.kvtrace" >"$out/record.log" 2>&1 &&
  timeout 60 bash .devpack/run.sh kvactor replay "$out/gpu.kvtrace" --verify \
    >"$out/replay.log" 2>&1; } || rc=1
cat "$out/replay.log"
timeout 100 bash .devpack/run.sh kvactor run --device cuda --model llama-3.1-8b \
  --max-model-len 4096 --requests 64 --prompt-len 128:1024 --output-len 32:128 --no-progress \
  --log-level info --summary-json "$out/run_llama.json" >"$out/run_llama.log" 2>&1 || rc=1
grep -v "^\[" "$out/run_llama.log" | tail -n 8
grep -E "GPU 0|ledger|cudaMemGetInfo" "$out/run_llama.log" | head -n 5
exit $rc
