#!/usr/bin/env python3
"""The serving benchmark: one workload three ways, in one call, on one machine.

  run    `kvactor run`: the driver serves synthetic requests of the same lengths in-process (no
         front door): the engine's own throughput, the baseline;
  batch  `kvactor batch`: the same number of requests, of the same lengths, as an OpenAI batch
         file through the ingress (no HTTP);
  serve  `kvactor serve` and a load generator here: every request streamed over HTTP by
         --concurrency clients (TTFT, inter-token latency, end-to-end per request).

Every request has --prompt-len prompt tokens (random ids) and --output-len output tokens
(ignore_eos), all submitted at once, so the three do the same work; the ratios to `run` are the
cost of the front door. Python's standard library only (it runs on the GPU machine too).

  usage: bench/serve_bench.py --kvactor BIN --model HF_DIR [--requests 256] [--prompt-len 64]
         [--output-len 128] [--concurrency N (default: every request at once)] [--json OUT]
         [-- ENGINE FLAGS...]
"""
import argparse
import http.client
import json
import os
import random
import resource
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


def percentile(values, q):
    """Nearest rank, as kvactor's summaries compute it."""
    if not values:
        return 0.0
    v = sorted(values)
    rank = max(1, min(len(v), int(-(-q * len(v) // 1))))
    return v[rank - 1]


def prompts(model, n, length, seed):
    vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
    rng = random.Random(seed)
    # Away from both ends of the vocabulary, where the special tokens usually are.
    lo, hi = min(10, vocab // 4), max(vocab - 300, vocab * 3 // 4)
    return [[rng.randrange(lo, hi) for _ in range(length)] for _ in range(n)]


def bench_run(a, engine):
    with tempfile.NamedTemporaryFile(suffix=".json") as summary:
        subprocess.run([*a.kvactor, "run", "--model", a.model, "--requests", str(a.requests),
                        "--prompt-len", str(a.prompt_len), "--output-len", str(a.output_len),
                        "--no-progress", "--summary-json", summary.name, *engine],
                       check=True, stdout=subprocess.DEVNULL)
        s = json.load(open(summary.name))
    return {"output_tok_s": s["generation_throughput_tok_s"], "wall_s": s["wall_s"]}


def bench_batch(a, engine, ps):
    with tempfile.TemporaryDirectory() as d:
        inp, out = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        with open(inp, "w") as f:
            for i, p in enumerate(ps):
                body = {"prompt": p, "max_tokens": a.output_len, "ignore_eos": True}
                f.write(json.dumps({"custom_id": f"r{i}", "method": "POST",
                                    "url": "/v1/completions", "body": body}) + "\n")
        r = subprocess.run([*a.kvactor, "batch", "--model", a.model, "-i", inp, "-o", out, *engine],
                           check=True, capture_output=True, text=True)
        m = re.search(r"(\d+) tokens generated in ([\d.]+) s \((\d+) tokens/s\)", r.stdout)
        answered = re.search(r"(\d+) answered", r.stdout)
    if not m or int(answered.group(1)) != a.requests:
        sys.exit(f"serve_bench: batch did not answer every request: {r.stdout}")
    return {"output_tok_s": int(m.group(1)) / float(m.group(2)), "wall_s": float(m.group(2))}


class server:
    def __init__(self, a, engine):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([*a.kvactor, "serve", "--model", a.model, "--port", "0",
                                      "--max-waiting-requests", str(max(4096, a.requests)),
                                      *engine],
                                     stdout=subprocess.DEVNULL, stderr=self.log, text=True)
        deadline = time.time() + 600
        while time.time() < deadline and self.proc.poll() is None:
            self.log.seek(0)
            m = re.search(r"listening on (http://[\d.]+:\d+)", self.log.read())
            if m:
                self.url = urllib.parse.urlparse(m.group(1))
                return
            time.sleep(0.05)
        self.log.seek(0)
        sys.exit(f"serve_bench: the server never listened:\n{self.log.read()}")

    def stop(self):
        self.proc.terminate()
        return self.proc.wait(timeout=120)


def stream_one(url, prompt, output_len):
    """One streamed completion: (send time, [chunk times], completion tokens)."""
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": output_len, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
    chunks, tokens = [], 0
    for line in r:
        if not line.startswith(b"data: {"):
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        elif event["choices"] and event["choices"][0]["text"]:
            chunks.append(time.perf_counter())
    conn.close()
    return t0, chunks, tokens


def bench_serve(a, engine, ps):
    srv = server(a, engine)
    results, failures, lock = [], [], threading.Lock()
    queue = list(enumerate(ps))

    def client():
        while True:
            with lock:
                if not queue:
                    return
                _, p = queue.pop()
            try:
                res = stream_one(srv.url, p, a.output_len)
                with lock:
                    results.append(res)
            except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                with lock:
                    failures.append(str(e))

    start = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    threads = [threading.Thread(target=client) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    # The load generator's own CPU time: on a machine of few cores it competes with the server.
    client_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    rc = srv.stop()
    if failures or rc != 0:
        sys.exit(f"serve_bench: {len(failures)} requests failed ({failures[:3]}), serve exit {rc}")
    ttft = [(c[0] - t0) * 1e3 for t0, c, _ in results if c]
    itl = [(b - x) * 1e3 for _, c, _ in results for x, b in zip(c, c[1:])]
    e2e = [(c[-1] - t0) * 1e3 for t0, c, _ in results if c]
    tokens = sum(n for _, _, n in results)
    return {"output_tok_s": tokens / wall, "wall_s": wall,
            "ttft_ms_p50": percentile(ttft, 0.5), "ttft_ms_p99": percentile(ttft, 0.99),
            "itl_ms_p50": percentile(itl, 0.5), "itl_ms_p99": percentile(itl, 0.99),
            "e2e_ms_p50": percentile(e2e, 0.5), "e2e_ms_p99": percentile(e2e, 0.99),
            "itl_ms_mean": statistics.fmean(itl) if itl else 0.0, "client_cpu_s": client_cpu}


def main():
    argv = sys.argv[1:]
    engine = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kvactor", required=True, help="the binary, or a command that runs it")
    ap.add_argument("--model", required=True)
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=0, help="default: every request at once")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    a.concurrency = a.concurrency or a.requests
    a.kvactor = shlex.split(a.kvactor)
    ps = prompts(a.model, a.requests, a.prompt_len, a.seed)
    out = {"workload": {"requests": a.requests, "prompt_len": a.prompt_len,
                        "output_len": a.output_len, "concurrency": a.concurrency,
                        "engine_flags": engine, "model": os.path.basename(a.model.rstrip("/"))},
           "run": bench_run(a, engine), "batch": bench_batch(a, engine, ps),
           "serve": bench_serve(a, engine, ps)}
    base = out["run"]["output_tok_s"]
    print(f"serve_bench: {a.requests} requests, {a.prompt_len} prompt + {a.output_len} output "
          f"tokens, {a.concurrency} clients, {out['workload']['model']} {' '.join(engine)}")
    print(f"{'':6} {'output tok/s':>12} {'vs run':>7} {'wall s':>7}")
    for k in ("run", "batch", "serve"):
        r = out[k]
        print(f"{k:6} {r['output_tok_s']:12.0f} {r['output_tok_s'] / base:7.2f} {r['wall_s']:7.2f}")
    s = out["serve"]
    print(f"serve latencies (ms): TTFT p50 {s['ttft_ms_p50']:.1f} p99 {s['ttft_ms_p99']:.1f}, "
          f"ITL p50 {s['itl_ms_p50']:.2f} p99 {s['itl_ms_p99']:.2f}, "
          f"end-to-end p50 {s['e2e_ms_p50']:.0f} p99 {s['e2e_ms_p99']:.0f}; the load generator "
          f"used {s['client_cpu_s']:.2f} s of CPU ({os.cpu_count()} cores here)")
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        json.dump(out, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
