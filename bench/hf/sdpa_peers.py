#!/usr/bin/env python3
"""PyTorch's scaled-dot-product-attention back-ends on the shapes of kvactor_attention_bench, in
the same device call, printed beside kvactor's figures. Runs on the H200
machine, where PyTorch is installed; a benchmark peer, not a dependency of kvactor.

    python3 bench/hf/sdpa_peers.py [--kvactor attention.json] [--out peers.json] [--replays 30]

Each case times the flash, cuDNN and memory-efficient back-ends (and FlashAttention-3 where
PyTorch can activate it) in bf16, head size 128, on contiguous K/V: the peers read no block table,
so on paged shapes they do less work than kvactor. Grouped-query attention runs natively
(enable_gqa) where a back-end takes it; a back-end that refuses is reported with its reason, never
timed on expanded K/V (that would read 4x the bytes). Decode: one query per request, no mask.
Prefill: causal, queries = keys. The mixed batch has no single SDPA call and is not timed.

Timing: CUDA events around one call, after a 256 MiB memset that flushes the L2 (kvactor's
default flush, stated in its JSON), median over the replays after 3 warm-ups. Each back-end's
output is compared with the flash back-end's (relative L2), so that a back-end that computes
something else is seen.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HEAD = 128
# key: (kind, batch, context or sequence, q heads, kv heads), as kvactor_attention_bench's cases.
CASES = {
    "decode1x4096": ("decode", 1, 4096, 32, 8),
    "decode32x4096": ("decode", 32, 4096, 32, 8),
    "decode128x4096": ("decode", 128, 4096, 32, 8),
    "decode256x2048": ("decode", 256, 2048, 32, 8),
    "decode64x16384": ("decode", 64, 16384, 32, 8),
    "decode256x8192": ("decode", 256, 8192, 32, 8),
    "decode128x4096h64": ("decode", 128, 4096, 64, 8),
    "prefill8x4096": ("prefill", 8, 4096, 32, 8),
    "prefill1x16384": ("prefill", 1, 16384, 32, 8),
}
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def tensors(kind, batch, length, hq, hkv):
    g = torch.Generator(device="cuda").manual_seed(1)
    q_len = 1 if kind == "decode" else length

    def rand(*shape):
        return torch.randn(*shape, generator=g, device="cuda", dtype=torch.bfloat16)

    return rand(batch, hq, q_len, HEAD), rand(batch, hkv, length, HEAD), rand(batch, hkv, length, HEAD)


def time_call(fn, flush, replays):
    for _ in range(3):
        fn()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(replays):
        flush.zero_()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm())


def work(kind, batch, length, hq):
    """FLOPs by kvactor's count: decode 4.ctx.h.d per query; prefill 4.b.h.s^2.d/2."""
    if kind == "decode":
        return 4.0 * batch * length * hq * HEAD
    return 4.0 * batch * hq * length * length * HEAD / 2


def run_case(key, flush, replays, fa3):
    kind, batch, length, hq, hkv = CASES[key]
    q, k, v = tensors(kind, batch, length, hq, hkv)
    causal = kind == "prefill"
    out, ref = {}, None
    backends = dict(BACKENDS)
    if fa3:
        backends = {"fa3": SDPBackend.FLASH_ATTENTION, **backends}
    for name, backend in backends.items():
        def call():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        try:
            if name == "fa3":
                torch.nn.attention.activate_flash_attention_impl("FA3")
            o = call()
            us = time_call(call, flush, replays)
        except Exception as e:  # a back-end that refuses the shape is reported, not hidden
            out[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
            continue
        finally:
            if name == "fa3":
                torch.nn.attention.restore_flash_attention_impl()
        entry = {"median_us": us, "tflops": work(kind, batch, length, hq) / us / 1e6}
        if ref is None:
            ref = o
        else:
            entry["rel_l2_to_first"] = rel_l2(o, ref)
        out[name] = entry
    del q, k, v
    torch.cuda.empty_cache()
    return out


def fa3_available():
    try:
        torch.nn.attention.activate_flash_attention_impl("FA3")
        torch.nn.attention.restore_flash_attention_impl()
        return True, ""
    except Exception as e:
        return False, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"


def cell(entry):
    return f"{entry['median_us']:.1f}" if "median_us" in entry else "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvactor", help="kvactor_attention_bench --out JSON of the same call")
    ap.add_argument("--out", default="sdpa_peers.json")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--cases", nargs="*", default=[],
                    help="time only the cases whose key contains one of these")
    args = ap.parse_args()
    kv = {}
    if args.kvactor:
        with open(args.kvactor) as f:
            kv = {c["key"]: c for c in json.load(f)["cases"]}
    fa3, why = fa3_available()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    results = {}
    for key in CASES:
        if not args.cases or any(c in key for c in args.cases):
            results[key] = run_case(key, flush, args.replays, fa3)
    names = (["fa3"] if fa3 else []) + list(BACKENDS)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; L2 flush: 256 MiB memset "
          f"before each call; median of {args.replays}; FA3: "
          f"{'active' if fa3 else 'not available (' + why + ')'}")
    header = f"{'case':<20}{'kvactor us':>12}" + "".join(f"{n + ' us':>14}" for n in names)
    print(header + f"{'peer / kvactor':>16}  (above 1: kvactor faster)")
    for key, peers in results.items():
        mine = kv.get(key, {}).get("time", {}).get("median_us")
        timed = [p["median_us"] for p in peers.values() if "median_us" in p]
        ratio = f"{min(timed) / mine:.2f}x" if mine and timed else "-"
        print(f"{key:<20}{(f'{mine:.1f}' if mine else '-'):>12}"
              + "".join(f"{cell(peers.get(n, {})):>14}" for n in names) + f"{ratio:>16}")
    for key, peers in results.items():
        for name, p in peers.items():
            if "error" in p:
                print(f"  {key} {name}: {p['error']}")
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "flush": "256 MiB memset", "replays": args.replays, "fa3": fa3 or why,
                   "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
