#!/usr/bin/env python3
"""The benchmarks' figures as pictures (PNG), for bench/RESULTS.md:

    python3 bench/plot.py --attention attention.json --peers sdpa_peers.json \
        --decoder decoder_bench.txt --out bench/plots

  --attention  kvactor_attention_bench --out JSON (one device call)
  --peers      bench/hf/sdpa_peers.py --out JSON, same call (PyTorch SDPA back-ends)
  --decoder    kvactor_decoder_bench's output (its "decode: batch ..." lines)
  --ready      LABEL=SUMMARY_JSON ...: `kvactor run --summary-json` files (their ready_phases)
  --fanout     bench/cluster_fanout.sh --json output

Writes attention_decode.png (decode bandwidth of kvactor and the peers against the copy ceiling),
attention_prefill.png (prefill TFLOP/s) and decoder_step.png (the decode step of a real model
against its weight-streaming roofline and transformers), and with --ready and --fanout
time_to_ready.png (each run's start-up phases) and cluster_fanout.png (step fan-out of local and
cluster mode). Needs Debian's python3-matplotlib.
"""
import argparse
import json
import os
import re

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

PEERS = [("flash", "PyTorch SDPA flash"), ("cudnn", "PyTorch SDPA cuDNN")]


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cases_of(attention, prefix):
    return [c for c in attention["cases"] if c["key"].startswith(prefix)]


def peer_time(peers, key, name):
    entry = peers.get("cases", {}).get(key, {}).get(name, {})
    return entry.get("median_us")


def bars(ax, labels, series, ylabel):
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series):
        xs = [k + (i - (len(series) - 1) / 2) * width for k in range(len(labels))]
        ax.bar(xs, [v if v is not None else 0 for v in values], width, label=name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)


def plot_decode(attention, peers, out):
    cases = cases_of(attention, "decode")
    ceiling = attention["copy_ceiling"]["tbs"]
    labels = [c["name"] for c in cases]
    series = [("kvactor (paged)", [c["kv_tbs"] for c in cases])]
    for name, label in PEERS:
        values = []
        for c in cases:
            us = peer_time(peers, c["key"], name) if not c["key"].endswith("_fp8") else None
            values.append(c["kv_bytes"] / (us * 1e-6) / 1e12 if us else None)
        series.append((label, values))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    bars(ax, labels, series, "K+V read, TB/s")
    ax.axhline(ceiling, color="black", linestyle="--", linewidth=1)
    # The ceiling is a device-to-device copy (read + write): pure reads may pass it.
    ax.text(-0.4, ceiling, f"copy ceiling {ceiling:.2f} TB/s (read + write)", ha="left",
            va="bottom", fontsize=8)
    ax.set_title(f"Decode attention on {attention['device']['name']} (bf16, head 128; fp8: "
                 "FP8 cache, peers n/a)", fontsize=10)
    ax.set_ylim(0, ceiling * 1.25)
    ax.legend(fontsize=8, loc="upper right", ncol=3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "attention_decode.png"), dpi=110)
    plt.close(fig)


def plot_prefill(attention, peers, out):
    cases = cases_of(attention, "prefill")
    labels = [c["name"] for c in cases]
    series = [("kvactor (paged)", [c["tflops"] for c in cases])]
    for name, label in PEERS:
        values = []
        for c in cases:
            us = peer_time(peers, c["key"], name) if not c["key"].endswith("_fp8") else None
            values.append(c["flops"] / (us * 1e-6) / 1e12 if us else None)
        series.append((label, values))
    fig, ax = plt.subplots(figsize=(7, 4))
    bars(ax, labels, series, "TFLOP/s (causal, 4.b.h.s^2.d/2)")
    ax.set_title("Prefill attention (bf16, head 128)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "attention_prefill.png"), dpi=110)
    plt.close(fig)


LINE = re.compile(r"^decode( \(fp8 KV cache\))?: batch\s+(\d+), context (\d+):\s+([\d.]+) us .*"
                  r"roofline ([\d.]+) us(?:.*transformers eager ([\d.]+) ms)?")


def plot_decoder(path, out):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line.strip())
            if m and not m.group(1) and m.group(3) == "512":
                rows.append((int(m.group(2)), float(m.group(4)), float(m.group(5)),
                             float(m.group(6)) * 1e3 if m.group(6) else None))
    if not rows:
        return
    batches = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(batches, [r[1] / 1e3 for r in rows], "o-", label="kvactor (CUDA graph)")
    ax.plot(batches, [r[2] / 1e3 for r in rows], "k--", label="roofline (weights + KV at copy rate)")
    if all(r[3] for r in rows):
        ax.plot(batches, [r[3] / 1e3 for r in rows], "s:", label="transformers eager")
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches)
    ax.set_xticklabels([str(b) for b in batches])
    ax.set_xlabel("batch (requests, one token each, 512 cached)")
    ax.set_ylabel("decode step, ms")
    ax.set_title("Llama-3.1-8B architecture, bf16, one H200", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "decoder_step.png"), dpi=110)
    plt.close(fig)


def plot_ready(runs, out):
    """runs: [(label, summary JSON path)]: rank 0's start-up phases as one stacked bar per run."""
    rows = []
    for label, path in runs:
        summary = load(path)
        phases = [p for p in summary.get("ready_phases", []) if p["rank"] == 0]
        if phases:
            rows.append((label, summary["ready_s"], phases))
    if not rows:
        return
    names = []
    for _, _, phases in rows:
        for p in phases:
            if p["phase"] not in names:
                names.append(p["phase"])
    fig, ax = plt.subplots(figsize=(9.5, 1.4 + 0.7 * len(rows)))
    colors = plt.get_cmap("tab10")
    labelled = set()  # each phase once in the legend
    for i, (label, ready_s, phases) in enumerate(rows):
        left = 0.0
        for p in phases:
            k = names.index(p["phase"])
            ax.barh(i, p["seconds"], left=left, color=colors(k % 10),
                    label=None if p["phase"] in labelled else p["phase"])
            labelled.add(p["phase"])
            left += p["seconds"]
        ax.text(ready_s, i, f" ready in {ready_s:.2f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from start (rank 0's start-up phases; the rest is the driver's)")
    ax.set_xlim(0, max(r[1] for r in rows) * 1.35)
    ax.set_title("Time to ready: kvactor run", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "time_to_ready.png"), dpi=110)
    plt.close(fig)


def plot_fanout(path, out):
    """bench/cluster_fanout.sh --json: step fan-out p50/p99, local mode against cluster mode."""
    data = load(path)
    modes = [m for m in ("local", "middleman", "cluster") if m in data]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.35
    for k, stat in enumerate(("p50_us", "p99_us")):
        xs = [i + (k - 0.5) * width for i in range(len(modes))]
        ax.bar(xs, [data[m][stat] for m in modes], width, label=stat.replace("_us", ""))
    goal = data.get("goal_p50_us")
    if goal:
        ax.axhline(goal, color="k", ls="--", lw=1, label=f"goal: p50 <= {goal:g} us (cluster)")
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels([f"{m}\n({data[m]['ranks']})" for m in modes], fontsize=8)
    ax.set_ylabel("step time, us (no kernels)")
    ax.set_title(data.get("title", "Step fan-out"), fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "cluster_fanout.png"), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attention", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--decoder")
    ap.add_argument("--ready", nargs="*", default=[], metavar="LABEL=SUMMARY_JSON")
    ap.add_argument("--fanout")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    attention, peers = load(args.attention), load(args.peers)
    plot_decode(attention, peers, args.out)
    plot_prefill(attention, peers, args.out)
    if args.decoder:
        plot_decoder(args.decoder, args.out)
    if args.ready:
        plot_ready([tuple(r.split("=", 1)) for r in args.ready], args.out)
    if args.fanout:
        plot_fanout(args.fanout, args.out)
    print(f"plots written to {args.out}")


if __name__ == "__main__":
    main()
