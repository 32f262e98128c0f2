#!/usr/bin/env bash
# `kvactor serve --nodes` and `kvactor batch --nodes`: the ranks (tensor parallel 2) on a `kvactor
# node` process, the ingress and driver in the serving process. A greedy completion over HTTP
# equals `kvactor generate`'s; a stream ends with [DONE]; SIGTERM stops the server (exit 0) and
# the node stays up for the batch that follows; a node that is not there is refused by address.
#   usage: serve_nodes.sh KVACTOR_BINARY SOURCE_DIR WORKDIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=wait_for.sh
source "$(dirname "$0")/wait_for.sh"
kvactor=$1
src=$2
dir=$3
model=$src/tests/data/transformers/qwen2
mkdir -p "$dir"
pids=()
stop_all() { kill -9 "${pids[@]}" 2>/dev/null || true; }
trap stop_all EXIT
fail() {
  echo "serve_nodes: FAIL: $*"
  for f in node.log serve.err batch.err; do [[ -f $dir/$f ]] && tail -n 15 "$dir/$f"; done
  exit 1
}

"$kvactor" node --listen 127.0.0.1:0 --cpu-ranks 2 >"$dir/node.log" 2>&1 &
pids+=($!)
wait_for 30 in_file 'listening on 127\.0\.0\.1:[0-9]+' "$dir/node.log" || fail "the node never listened"
node=$(grep -oE 'listening on 127\.0\.0\.1:[0-9]+' "$dir/node.log" | awk '{print $3}')

"$kvactor" serve --model "$model" --nodes "$node" -tp 2 --port 0 --served-model-name tiny \
  >"$dir/serve.out" 2>"$dir/serve.err" &
pid=$!
pids+=("$pid")
url=$(served_url "$dir/serve.err") || fail "the server never listened"
curl -sS -o "$dir/completion.json" -H "Content-Type: application/json" -d \
  '{"prompt": "Hello world", "max_tokens": 8, "temperature": 0, "ignore_eos": true}' \
  "$url/v1/completions"
served=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' \
  "$dir/completion.json") || fail "no completion: $(cat "$dir/completion.json")"
generated=$("$kvactor" generate --model "$model" --prompt "Hello world" --max-tokens 8 \
  --ignore-eos --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["text"])')
[[ $served == "$generated" ]] || fail "served on the node '$served', generate gave '$generated'"
curl -sS -N -d '{"prompt": "Hello", "max_tokens": 4, "stream": true}' "$url/v1/completions" \
  >"$dir/stream.txt"
[[ $(grep -v '^$' "$dir/stream.txt" | tail -n 1) == "data: [DONE]" ]] || fail "stream: no [DONE]"
kill -TERM "$pid"
wait_for 60 gone "$pid" || fail "the server did not stop on SIGTERM"
rc=0
wait "$pid" || rc=$?
[[ $rc == 0 ]] || fail "serve exit $rc after SIGTERM"

# The node serves the next command: a batch.
printf '%s\n' \
  '{"custom_id": "a", "url": "/v1/completions", "body": {"prompt": "Hello world", "max_tokens": 8, "temperature": 0, "ignore_eos": true}}' \
  '{"custom_id": "b", "url": "/v1/completions", "body": {"prompt": "Hi", "max_tokens": 3}}' \
  >"$dir/in.jsonl"
"$kvactor" batch --model "$model" --nodes "$node" -tp 2 -i "$dir/in.jsonl" -o "$dir/out.jsonl" \
  >"$dir/batch.out" 2>"$dir/batch.err" || fail "batch --nodes exit $?"
grep -q "2 lines: 2 answered" "$dir/batch.out" || fail "batch: $(cat "$dir/batch.out")"
batched=$(python3 -c 'import json,sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    if j["custom_id"] == "a":
        print(j["response"]["body"]["choices"][0]["text"])' "$dir/out.jsonl")
[[ $batched == "$generated" ]] || fail "batch on the node gave '$batched', generate '$generated'"

# A node that is not there: refused, naming its address.
rc=0
"$kvactor" serve --model "$model" --nodes 127.0.0.1:1 --port 0 2>"$dir/dead.err" || rc=$?
[[ $rc == 2 ]] || fail "serve --nodes to nothing: exit $rc, not 2"
grep -q "127.0.0.1:1" "$dir/dead.err" || fail "the refusal names no node: $(cat "$dir/dead.err")"
echo "serve_nodes: ok"
