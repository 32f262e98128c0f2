#!/usr/bin/env bash
# Machine-readable output stays machine-readable: every subcommand that has --json, run at
# --log-level debug (the most log lines there are), prints on stdout one JSON document and
# nothing else; its log lines go to stderr. With DEVICE=cuda the GPU variants run (the GPU
# rank's weight upload logs progress lines); without a GPU that part exits 77 (skipped).
#   usage: json_stdout.sh KVACTOR_BINARY SOURCE_DIR WORKDIR [cpu|cuda]
set -euo pipefail
kvactor=$1
source_dir=$2
dir=$3
device=${4:-cpu}
mkdir -p "$dir"
fail() {
  echo "json_stdout: FAIL: $*"
  exit 1
}
if [[ $device == cuda ]] && ! "$kvactor" run --device cuda --requests 1 --prompt-len 4 \
  --output-len 1 --no-progress >/dev/null 2>"$dir/probe.err"; then
  echo "json_stdout: no usable GPU ($(tail -1 "$dir/probe.err")): skipped"
  exit 77
fi
fixture=$source_dir/tests/data/transformers/qwen3
[[ $device == cuda ]] && fixture=$source_dir/tests/data/transformers_gpu/llama
"$kvactor" run --device cpu --requests 2 --prompt-len 8 --output-len 2 --no-progress \
  --record "$dir/t.kvtrace" >/dev/null 2>&1 || fail "recording a trace"
echo '{"type": "kvactor::request_spec", "payload": [7, [5, 6], 2, 0, [0.0, 0, 1.0, 0, [], -1]]}' \
  >"$dir/msg.json"

# NAME EXPECTED_EXIT ARGS...: stdout must be one JSON document, whatever the exit code.
check() {
  local name=$1 want=$2
  shift 2
  local got=0
  "$kvactor" --log-level debug "$@" >"$dir/$name.out" 2>"$dir/$name.err" || got=$?
  ((got == want)) || { cat "$dir/$name.err"; fail "$name: exit $got, not $want"; }
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$dir/$name.out" ||
    { head -c 600 "$dir/$name.out"; fail "$name: stdout is not one JSON document"; }
  echo "json_stdout: $name: stdout is JSON ($(wc -l <"$dir/$name.err") log lines on stderr)"
}

check "generate-$device" 0 generate --model "$fixture" --prompt-ids 1,2,3 --max-tokens 4 \
  --device "$device" --json
check "plan-$device" 0 plan --model kvactor-tiny --device "$device" --kv-cache-memory 64MiB --json
if [[ $device == cpu ]]; then
  check trace-show 0 trace show "$dir/t.kvtrace" --json
  check replay 0 replay "$dir/t.kvtrace" --verify --json
  check inject-error 1 inject --to 127.0.0.1:1 --message "$dir/msg.json" --timeout 2 --json
  check plan-error 2 plan --model kvactor-tiny --block-size 0 --json
fi
echo "json_stdout: ok"
