#!/usr/bin/env python3
"""Compares `kvactor run` summaries (kvactor.run/1): with and without prefix caching, or any two
runs of the same workload (tensor-parallel sizes, devices).

--pairs NAME=A.json,B.json ...: per pair, whether the digests agree, the share of requests whose
first generated token and whole continuation agree, the prompt tokens A's prefix cache served,
and each run's median step time.
--chat ON.json OFF.json: the chat workload's figures side by side (prefill tokens computed, TTFT
p50/p99, throughput, wall time) and the TTFT ratio.
"""
import argparse
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"{path}: {e}", file=sys.stderr)
        return None


def outputs(summary):
    return {o["request_id"]: o["tokens"] for o in summary.get("outputs", [])}


def compare_pair(name, on, off):
    if on is None or off is None:
        return f"| {name} | missing summary | | | |"
    a, b = outputs(on), outputs(off)
    ids = sorted(set(a) & set(b))
    first = sum(1 for i in ids if a[i][:1] == b[i][:1])
    whole = sum(1 for i in ids if a[i] == b[i])
    digest = "same" if on["output_digest"] == off["output_digest"] else "differs"
    hits = on["prefix_cache"]["hit_tokens"]
    return (f"| {name} | {digest} | {first}/{len(ids)} | {whole}/{len(ids)} | "
            f"{hits} of {on['tokens']['prompt']} | {on['step_ms']['p50']:.2f} / "
            f"{off['step_ms']['p50']:.2f} |")


def chat_row(label, s):
    prompt = s["tokens"]["prompt"]
    hits = s["prefix_cache"]["hit_tokens"]
    return (f"| {label} | {prompt - hits} of {prompt} | {s['ttft_ms']['p50']:.0f} | "
            f"{s['ttft_ms']['p99']:.0f} | {s['throughput_tok_s']:.0f} | "
            f"{s['generation_throughput_tok_s']:.0f} | {s['wall_s']:.1f} | "
            f"{s['requests']['finished']} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", nargs="*", default=[])
    ap.add_argument("--chat", nargs=2)
    args = ap.parse_args()
    print("| pair (A vs B) | digest | first tokens equal | continuations equal | "
          "prompt tokens from A's cache | step p50 ms A / B |")
    print("|---|---|---|---|---|---|")
    for p in args.pairs:
        name, files = p.split("=", 1)
        on, off = files.split(",")
        print(compare_pair(name, load(on), load(off)))
    if args.chat:
        on, off = load(args.chat[0]), load(args.chat[1])
        if on is None or off is None:
            return 1
        print()
        print("| caching | prefill tokens computed | TTFT p50 ms | TTFT p99 ms | tok/s (all) | "
              "output tok/s | wall s | finished |")
        print("|---|---|---|---|---|---|---|---|")
        print(chat_row("on", on))
        print(chat_row("off", off))
        if on["ttft_ms"]["p50"] > 0:
            print(f"\nTTFT p50 off/on: {off['ttft_ms']['p50'] / on['ttft_ms']['p50']:.2f}x, "
                  f"p99 off/on: {off['ttft_ms']['p99'] / on['ttft_ms']['p99']:.2f}x, "
                  f"throughput on/off: {on['throughput_tok_s'] / off['throughput_tok_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
