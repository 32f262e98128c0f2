#!/usr/bin/env bash
# `kvactor batch` on the qwen2 checkpoint fixture (CPU): every input line gets one output line
# (requests answered, a bad body answered 400, lines that are no request refused with the line
# number); a greedy completion equals `kvactor generate`'s; SIGTERM fails what is not finished,
# with the reason on its line, and exits 1. Usage: batch_live.sh KVACTOR_BINARY SOURCE_DIR WORKDIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=wait_for.sh
source "$(dirname "$0")/wait_for.sh"
kvactor=$1
src=$2
dir=$3
model=$src/tests/data/transformers/qwen2
template=$src/tests/data/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja
mkdir -p "$dir"
fail() {
  echo "batch_live: FAIL: $*"
  [[ -f $dir/batch.err ]] && tail -n 20 "$dir/batch.err"
  exit 1
}
# The response line of custom_id $2 in output file $1, as one field ($3, a Python expression on j).
field() {
  python3 - "$@" <<'PY'
import json, sys
path, custom_id, expr = sys.argv[1:4]
for line in open(path):
    j = json.loads(line)
    if j["custom_id"] == custom_id and j["response"] is not None:
        print(eval(expr))
PY
}

cat >"$dir/in.jsonl" <<'JSONL'
{"custom_id": "greedy", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Hello world", "max_tokens": 8, "temperature": 0, "ignore_eos": true}}
{"custom_id": "chat", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}}
{"custom_id": "sampled", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Hello", "max_tokens": 4, "n": 2, "seed": 3}}

{"custom_id": "hot", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "temperature": "hot"}}
{"custom_id": "stream", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "stream": true}}
{"custom_id": "greedy", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x"}}
not json at all
JSONL
"$kvactor" batch --model "$model" --chat-template "$template" -i "$dir/in.jsonl" \
  -o "$dir/out.jsonl" >"$dir/batch.out" 2>"$dir/batch.err" || fail "exit $? on a good batch"
grep -q "^kvactor batch: 7 lines: 3 answered, 1 failed, 3 not requests -> " "$dir/batch.out" ||
  fail "summary: $(cat "$dir/batch.out")"
[[ $(wc -l <"$dir/out.jsonl") == 7 ]] || fail "$(wc -l <"$dir/out.jsonl") output lines, not 7"
served=$(field "$dir/out.jsonl" greedy 'j["response"]["body"]["choices"][0]["text"]')
generated=$("$kvactor" generate --model "$model" --prompt "Hello world" --max-tokens 8 \
  --ignore-eos --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["text"])')
[[ $served == "$generated" ]] || fail "batch gave '$served', generate '$generated'"
[[ $(field "$dir/out.jsonl" chat 'j["response"]["body"]["choices"][0]["message"]["role"]') == assistant ]] ||
  fail "chat: no assistant answer"
[[ $(field "$dir/out.jsonl" sampled 'len(j["response"]["body"]["choices"])') == 2 ]] ||
  fail "sampled: not 2 choices"
[[ $(field "$dir/out.jsonl" hot 'j["response"]["status_code"], j["response"]["body"]["error"]["param"]') == "(400, 'temperature')" ]] ||
  fail "hot: not a 400 naming temperature"
grep -q '"message":"line 6: .body.stream.: a batch answers whole responses"' "$dir/out.jsonl" ||
  fail "the stream line is not refused by its line number"
grep -q "line 7: custom_id 'greedy' was used before" "$dir/out.jsonl" || fail "duplicate custom_id"
grep -q '"custom_id":null,"response":null,"error":{"code":"invalid_request","message":"line 8: ' \
  "$dir/out.jsonl" || fail "the line that is not JSON"

# An input file that cannot be read: exit 2 naming -i.
set +e
"$kvactor" batch --model "$model" -i "$dir/missing.jsonl" -o "$dir/x.jsonl" 2>"$dir/missing.err"
rc=$?
set -e
[[ $rc == 2 ]] || fail "missing input: exit $rc, not 2"
grep -q -- "-i: cannot read" "$dir/missing.err" || fail "missing input: $(cat "$dir/missing.err")"

# The input named as the output: refused, and the input is left as it was.
lines=$(wc -l <"$dir/in.jsonl")
rc=0
"$kvactor" batch --model "$model" -i "$dir/in.jsonl" -o "$dir/in.jsonl" 2>"$dir/same.err" || rc=$?
[[ $rc == 2 ]] || fail "-o naming the input: exit $rc, not 2"
grep -q "is the input file" "$dir/same.err" || fail "-o naming the input: $(cat "$dir/same.err")"
[[ $(wc -l <"$dir/in.jsonl") == "$lines" ]] || fail "the input was overwritten"

# SIGTERM in the middle of a long batch: every line is answered, the unfinished with the reason.
# 256 lines of 8 choices each, in waves of --max-num-seqs (256) choices: the first line answered
# ends the first wave, with seven to go.
python3 -c 'import json
for i in range(256):
    print(json.dumps({"custom_id": f"r{i}", "url": "/v1/completions",
                      "body": {"prompt": f"Hello {i}", "max_tokens": 250, "n": 8,
                               "ignore_eos": True}}))' >"$dir/long.jsonl"
rm -f "$dir/long_out.jsonl" # a previous run's must not look like this one's first answer
"$kvactor" batch --model "$model" -i "$dir/long.jsonl" -o "$dir/long_out.jsonl" \
  >"$dir/batch.out" 2>"$dir/batch.err" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
wait_for 120 in_file '"custom_id"' "$dir/long_out.jsonl" || fail "the long batch answered nothing"
kill -TERM $pid
wait_for 60 gone $pid || fail "batch did not stop on SIGTERM"
rc=0
wait $pid || rc=$?
trap - EXIT
[[ $rc == 1 ]] || fail "exit $rc after SIGTERM, not 1"
[[ $(wc -l <"$dir/long_out.jsonl") == 256 ]] || fail "$(wc -l <"$dir/long_out.jsonl") of 256 lines"
grep -q 'interrupted (SIGTERM)' "$dir/long_out.jsonl" || fail "no line says it was interrupted"
echo "batch_live: ok"
