#!/usr/bin/env bash
# `kvactor serve --device cuda` as an OpenAI client sees it, on the qwen2 checkpoint fixture in
# bf16: a greedy completion equals `kvactor generate --device cuda`'s, a stream ends with
# [DONE], 64 concurrent requests are all answered 200, /metrics counts them, and SIGTERM exits 0;
# then bench/serve_bench.py on the GPU (run, batch and serve on one workload).
#   here:   bash bench/pack_for_device.sh -z build/bin/kvactor
#   device: bash bench/device.sh "$OUT" openai   (carry: [".devpack.tar.xz"])
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
model=tests/data/transformers/qwen2
engine=(--model "$model" --device cuda --dtype bfloat16)
bash .devpack/run.sh kvactor serve "${engine[@]}" --port 0 --served-model-name tiny \
  >"$out/serve.out" 2>"$out/serve.err" &
pid=$!
for _ in $(seq 1200); do
  grep -q "listening on http://" "$out/serve.err" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
url=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$out/serve.err" | head -n 1)
[ -n "$url" ] || { cat "$out/serve.err"; exit 1; }
generated=$(timeout 120 bash .devpack/run.sh kvactor generate "${engine[@]}" --prompt "Hello world" \
  --max-tokens 8 --ignore-eos --json 2>"$out/generate.err")
timeout 120 python3 - "$url" "$generated" <<'PY' | tee "$out/client.txt"
import concurrent.futures, json, sys, time, urllib.request
url, generated = sys.argv[1], json.loads(sys.argv[2])["text"]
def post(body):
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return r.status, r.read().decode()
status, body = post({"prompt": "Hello world", "max_tokens": 8, "temperature": 0, "ignore_eos": True})
served = json.loads(body)["choices"][0]["text"]
print(f"greedy: served {served!r}, generate {generated!r}: {'same' if served == generated else 'DIFFERENT'}")
status, body = post({"prompt": "Hello", "max_tokens": 8, "stream": True})
print(f"stream: ends with [DONE]: {body.rstrip().endswith('data: [DONE]')}")
t0 = time.time()
with concurrent.futures.ThreadPoolExecutor(64) as pool:
    answers = list(pool.map(lambda i: post({"prompt": f"Hello {i}", "max_tokens": 64, "ignore_eos": True}), range(64)))
codes = sorted({s for s, _ in answers})
tokens = sum(json.loads(b)["usage"]["completion_tokens"] for _, b in answers)
print(f"64 concurrent: status {codes}, {tokens} tokens in {time.time() - t0:.2f} s")
metrics = urllib.request.urlopen(url + "/metrics").read().decode()
print("\n".join(l for l in metrics.splitlines() if l.startswith("kvactor:api_requests_total")))
sys.exit(0 if served == generated and codes == [200] and tokens == 64 * 64 else 1)
PY
rc=$?
kill -TERM $pid
wait $pid
serve_rc=$?
echo "serve exit after SIGTERM: $serve_rc"
# The front door's cost on the GPU: run, batch and serve on one workload (a tiny model, so the
# host's work per token is all there is to see: the worst case for the front door).
timeout 240 python3 bench/serve_bench.py --kvactor "bash .devpack/run.sh kvactor" --model "$model" \
  --requests 256 --prompt-len 64 --output-len 128 --json "$dest/serve_bench.json" \
  -- "${engine[@]:2}" | tee "$out/serve_bench.txt"
bench_rc=${PIPESTATUS[0]}
[ $rc = 0 ] && [ $serve_rc = 0 ] && [ "$bench_rc" = 0 ]
