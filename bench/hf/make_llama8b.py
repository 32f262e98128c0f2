#!/usr/bin/env python3
"""A Llama-3.1-8B-architecture model initialised at random by transformers, in bf16, saved with
save_pretrained, and transformers' own answers for it: the greedy continuation (64 tokens), the
last-position logits and the top-2 margins of a few prompts (in bf16, and again from the same
weights in float32), and
the eager decode-step time of transformers itself
at several batch sizes (the peer measured in the same run). Runs on the H200 machine:

    python3 bench/hf/make_llama8b.py OUT_DIR [--steps-only]

OUT_DIR receives config.json, generation_config.json, the safetensors shards and expected.json
(prompts; continuations, last_logits, min_margin, first_margin and the same with _fp32;
transformers' decode timings).
"""
import argparse
import json
import os
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

CONFIG = dict(
    vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=8, head_dim=128, hidden_act="silu",
    max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=False,
    rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                         low_freq_factor=1.0, high_freq_factor=4.0,
                         original_max_position_embeddings=8192),
    bos_token_id=128000, eos_token_id=[128001, 128008, 128009],
    attention_bias=False, mlp_bias=False)

PROMPT_LENGTHS = [7, 33, 120, 511]
NEW_TOKENS = 64


def prompts():
    g = torch.Generator().manual_seed(1234)  # after --lite has set the vocabulary
    return [torch.randint(0, CONFIG["vocab_size"], (n,), generator=g).tolist()
            for n in PROMPT_LENGTHS]


@torch.no_grad()
def greedy(model, prompt):
    ids = torch.tensor([prompt], device="cuda")
    out = model(ids, use_cache=True)
    cache = out.past_key_values
    logits = out.logits[0, -1].float()
    first = logits.clone()
    top2 = torch.topk(logits, 2).values
    first_margin = margin = float(top2[0] - top2[1])
    tokens = []
    for _ in range(NEW_TOKENS):
        nxt = int(torch.argmax(logits))
        tokens.append(nxt)
        out = model(torch.tensor([[nxt]], device="cuda"), past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        logits = out.logits[0, -1].float()
        top2 = torch.topk(logits, 2).values
        margin = min(margin, float(top2[0] - top2[1]))
    return tokens, first.cpu().tolist(), margin, first_margin


@torch.no_grad()
def decode_step_ms(model, batch, context):
    """transformers' eager decode step (one token per request, `context` cached tokens each)."""
    ids = torch.randint(0, CONFIG["vocab_size"], (batch, context), device="cuda")
    out = model(ids, use_cache=True, logits_to_keep=1)
    cache = out.past_key_values
    step = torch.randint(0, CONFIG["vocab_size"], (batch, 1), device="cuda")
    times = []
    for i in range(12):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = model(step, past_key_values=cache, use_cache=True, logits_to_keep=1)
        torch.argmax(out.logits[:, -1], dim=-1)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
        cache.crop(context)  # the same step again
    times = sorted(times[2:])
    return times[len(times) // 2]


def record_greedy(model, record, suffix):
    """Each prompt's greedy continuation, last-position logits and top-2 margins, under keys
    ending in `suffix`."""
    for key in ("continuations", "last_logits", "min_margin", "first_margin"):
        record[key + suffix] = []
    for p in record["prompts"]:
        tokens, logits, margin, first_margin = greedy(model, p)
        record["continuations" + suffix].append(tokens)
        record["last_logits" + suffix].append(logits)
        record["min_margin" + suffix].append(margin)
        record["first_margin" + suffix].append(first_margin)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--lite", action="store_true",
                    help="the 8B's heads, RoPE and depth pattern at hidden 1024, 8 layers, vocab "
                         "32000 (small enough for kvactor's CPU decoder)")
    ap.add_argument("--layers", type=int, help="override num_hidden_layers")
    ap.add_argument("--hidden", type=int, help="override hidden_size (and intermediate 3.5x)")
    args = ap.parse_args()
    if args.lite:
        CONFIG.update(hidden_size=1024, intermediate_size=2048, num_hidden_layers=8,
                      vocab_size=32000, bos_token_id=1, eos_token_id=2)
    if args.layers:
        CONFIG.update(num_hidden_layers=args.layers)
    if args.hidden:
        CONFIG.update(hidden_size=args.hidden, intermediate_size=args.hidden * 7 // 2)
    if args.lite or args.layers or args.hidden:
        global NEW_TOKENS
        NEW_TOKENS = 8
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    t0 = time.time()
    config = LlamaConfig(**CONFIG)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config)
    # The parameters in bf16, the RoPE frequencies left in float32: Module.to(bfloat16) would
    # round the inv_freq buffer too, and every reference below would then rotate by frequencies
    # 0.4% off (angles wrong by radians at position 500), as no checkpoint loader does.
    for p in model.parameters():
        p.data = p.data.to(torch.bfloat16)
    model.eval()
    model.generation_config.eos_token_id = CONFIG["eos_token_id"]
    t1 = time.time()
    model.save_pretrained(args.out, max_shard_size="5GB")
    t2 = time.time()
    print(f"initialised in {t1 - t0:.1f} s, saved in {t2 - t1:.1f} s; RoPE frequencies in "
          f"{model.model.rotary_emb.inv_freq.dtype}", flush=True)
    record = dict(transformers=transformers.__version__, torch=torch.__version__,
                  prompts=prompts())
    record_greedy(model, record, "")
    print(f"references in {time.time() - t2:.1f} s", flush=True)
    # The same weights in float32: how far transformers' own bf16 answers are from exact ones
    # (the noise floor any bf16 implementation is measured against).
    model.float()
    t3 = time.time()
    record_greedy(model, record, "_fp32")
    print(f"float32 references in {time.time() - t3:.1f} s", flush=True)
    for p in model.parameters():
        p.data = p.data.to(torch.bfloat16)
    torch.cuda.empty_cache()
    path = os.path.join(args.out, "expected.json")
    with open(path, "w") as f:
        json.dump(record, f)
    record["decode_step_ms"] = {}
    record["context"] = args.context
    for b in [int(x) for x in args.batches.split(",")]:
        try:
            ms = decode_step_ms(model, b, args.context)
        except Exception as e:  # the references above stand without the peer's timings
            print(f"transformers decode step, batch {b}: {type(e).__name__}: {e}", flush=True)
            break
        record["decode_step_ms"][str(b)] = ms
        print(f"transformers eager decode step, batch {b}, context {args.context}: {ms:.2f} ms",
              flush=True)
        torch.cuda.empty_cache()
    with open(path, "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main()
