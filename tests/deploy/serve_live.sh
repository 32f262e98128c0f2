#!/usr/bin/env bash
# `kvactor serve` as a client sees it, with curl, on the qwen2 checkpoint fixture (CPU): the
# completion of a prompt is `kvactor generate`'s (greedy, the same tokens); a chat through a
# real template answers; a stream sends SSE chunks and data: [DONE]; the models list, /health,
# bad bodies (400), an unknown model (404), an unknown path (404), a missing API key (401), a
# body over --max-body-bytes (413); /tokenize and /detokenize; /metrics;
# SIGTERM drains (503 for new requests, the one in flight finishes) and the server exits 0; with
# --shutdown-timeout 0 what is in flight fails at once with the reason. Usage: serve_live.sh KVACTOR_BINARY SOURCE_DIR WORKDIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=wait_for.sh
source "$(dirname "$0")/wait_for.sh"
kvactor=$1
src=$2
dir=$3
model=$src/tests/data/transformers/qwen2
mkdir -p "$dir"
fail() {
  echo "serve_live: FAIL: $*"
  [[ -f $dir/serve.err ]] && tail -n 20 "$dir/serve.err"
  exit 1
}
command -v curl >/dev/null || fail "curl is not installed"
"$kvactor" serve --model "$model" --port 0 --api-key sesame --served-model-name tiny \
  --max-body-bytes 64KiB \
  --chat-template "$src/tests/data/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja" \
  >"$dir/serve.out" 2>"$dir/serve.err" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
url=$(served_url "$dir/serve.err") || fail "the server never listened"
auth=(-H "Authorization: Bearer sesame" -H "Content-Type: application/json")
post() { curl -sS -o "$dir/$1.json" -w '%{http_code}' "${auth[@]}" -d "$3" "$url$2"; }

# A greedy completion equals kvactor generate's for the same prompt.
code=$(post completion /v1/completions \
  '{"model": "tiny", "prompt": "Hello world", "max_tokens": 8, "temperature": 0, "ignore_eos": true}')
[[ $code == 200 ]] || fail "completion: HTTP $code: $(cat "$dir/completion.json")"
served=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' \
  "$dir/completion.json")
generated=$("$kvactor" generate --model "$model" --prompt "Hello world" --max-tokens 8 \
  --ignore-eos --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["text"])')
[[ $served == "$generated" ]] || fail "served '$served', generate gave '$generated'"
usage=$(python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["usage"]; print(u["completion_tokens"])' \
  "$dir/completion.json")
[[ $usage == 8 ]] || fail "usage.completion_tokens is $usage, not 8"

# A chat through the model's template.
code=$(post chat /v1/chat/completions \
  '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}')
[[ $code == 200 ]] || fail "chat: HTTP $code: $(cat "$dir/chat.json")"
grep -q '"role":"assistant"' "$dir/chat.json" || fail "chat: no assistant message"

# A stream: chunks, then data: [DONE].
curl -sS -N "${auth[@]}" -d '{"prompt": "Hello", "max_tokens": 4, "stream": true,
  "stream_options": {"include_usage": true}}' "$url/v1/completions" >"$dir/stream.txt"
[[ $(grep -c '^data: {' "$dir/stream.txt") -ge 2 ]] || fail "stream: too few chunks"
[[ $(grep -v '^$' "$dir/stream.txt" | tail -n 1) == "data: [DONE]" ]] || fail "stream: no [DONE]"

# The rest of the API, and its refusals.
[[ $(curl -sS -o /dev/null -w '%{http_code}' "$url/health") == 200 ]] || fail "/health"
curl -sS "${auth[@]}" "$url/v1/models" | grep -q '"id":"tiny"' || fail "/v1/models"
[[ $(post bad /v1/completions '{"prompt": "x", "temperature": "hot"}') == 400 ]] || fail "bad type"
grep -q '"param":"temperature"' "$dir/bad.json" || fail "400 names no param"
[[ $(post nojson /v1/completions '{') == 400 ]] || fail "bad JSON"
[[ $(post other /v1/completions '{"model": "other", "prompt": "x"}') == 404 ]] || fail "model"
[[ $(curl -sS -o /dev/null -w '%{http_code}' "${auth[@]}" "$url/nowhere") == 404 ]] || fail "path"
[[ $(curl -sS -o /dev/null -w '%{http_code}' "$url/v1/models") == 401 ]] || fail "no API key"
head -c 100000 /dev/zero | tr '\0' 'a' >"$dir/big.txt"
[[ $(curl -sS -o "$dir/big.json" -w '%{http_code}' "${auth[@]}" --data-binary @"$dir/big.txt" \
  "$url/v1/completions") == 413 ]] || fail "a body over --max-body-bytes is not 413"
grep -q '"code":413' "$dir/big.json" || fail "413 is not an error object"

# /tokenize and /detokenize: the prompt's tokens as a completion counts them, and back.
code=$(post tokens /tokenize '{"prompt": "Hello world"}')
[[ $code == 200 ]] || fail "/tokenize: HTTP $code: $(cat "$dir/tokens.json")"
count=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["count"])' "$dir/tokens.json")
prompt_tokens=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' \
  "$dir/completion.json")
[[ $count == "$prompt_tokens" ]] || fail "/tokenize counts $count tokens, the completion $prompt_tokens"
ids=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tokens"]))' "$dir/tokens.json")
code=$(post text /detokenize "{\"tokens\": $ids}")
[[ $code == 200 ]] || fail "/detokenize: HTTP $code: $(cat "$dir/text.json")"
grep -q '"prompt":"Hello world"' "$dir/text.json" || fail "/detokenize: $(cat "$dir/text.json")"

# /metrics: the engine's gauges and the server's answers by status.
curl -sS "$url/metrics" >"$dir/metrics.txt"
grep -q '^kvactor:num_requests_running ' "$dir/metrics.txt" || fail "/metrics: no engine gauges"
grep -q '^kvactor:api_requests_total{status="200"} ' "$dir/metrics.txt" || fail "/metrics: no 200s"
grep -q '^kvactor:api_streams_open 0$' "$dir/metrics.txt" || fail "/metrics: streams left open"

# n samples share their prompt's blocks through the prefix cache: a fresh 64-token prompt with
# n = 4 computes its 3 full blocks (16 tokens each) once; the 3 other choices hit 48 tokens each.
hits() { curl -sS "$url/metrics" | awk '$1 == "kvactor:prefix_cache_hit_tokens_total" {print $2}'; }
before=$(hits)
ids=$(python3 -c 'print(list(range(100, 164)))')
code=$(post shared /v1/completions "{\"prompt\": $ids, \"n\": 4, \"max_tokens\": 2}")
[[ $code == 200 ]] || fail "n = 4: HTTP $code: $(cat "$dir/shared.json")"
after=$(hits)
[[ $(python3 -c "print(int(float('$after') - float('$before')))") == 144 ]] ||
  fail "n = 4 over a 64-token prompt hit $before -> $after prompt tokens, not 144 more"

# A long stream (128 choices of 250 tokens: seconds on the CPU) in flight at SIGTERM.
long_stream() {
  curl -sS -N "${auth[@]}" -d '{"prompt": "Hello", "max_tokens": 250, "n": 128,
    "ignore_eos": true, "stream": true}' "$url/v1/completions" >"$1" &
  wait_for 60 in_file "data: {" "$1" || fail "the long stream never started"
}

# The server, sent SIGTERM, stops and exits 0.
exits_0_after_sigterm() {
  wait_for 60 gone $pid || fail "the server did not stop on SIGTERM"
  local rc=0
  wait $pid || rc=$?
  [[ $rc == 0 ]] || fail "exit $rc after SIGTERM"
}

# SIGTERM: new requests get 503 while the one in flight finishes (--shutdown-timeout is 30 s);
# then the server exits 0.
long_stream "$dir/drained.txt"
kill -TERM $pid
health_is() { [[ $(curl -sS -o /dev/null -w '%{http_code}' "$url/health") == "$1" ]]; }
wait_for 30 health_is 503 || fail "/health did not turn 503 after SIGTERM"
[[ $(post late /v1/completions '{"prompt": "x"}') == 503 ]] || fail "a request while draining"
grep -q "shutting down" "$dir/late.json" || fail "the 503 says no why: $(cat "$dir/late.json")"
exits_0_after_sigterm
finished=$(grep -c '"finish_reason":"length"' "$dir/drained.txt" || true)
[[ $finished == 128 ]] || fail "$finished of 128 choices finished during the drain"
[[ $(grep -v '^$' "$dir/drained.txt" | tail -n 1) == "data: [DONE]" ]] || fail "drained: no [DONE]"

# --shutdown-timeout 0: what is in flight at SIGTERM fails at once, naming the flag.
"$kvactor" serve --model "$model" --port 0 --api-key sesame --shutdown-timeout 0 \
  >"$dir/serve.out" 2>"$dir/serve.err" &
pid=$!
url=$(served_url "$dir/serve.err") || fail "the second server never listened"
long_stream "$dir/cut.txt"
kill -TERM $pid
exits_0_after_sigterm
grep -q -- '--shutdown-timeout 0 s' "$dir/cut.txt" || fail "the cut stream names no reason"
[[ $(grep -v '^$' "$dir/cut.txt" | tail -n 1) == "data: [DONE]" ]] || fail "cut: no [DONE]"
trap - EXIT
echo "serve_live: ok"
