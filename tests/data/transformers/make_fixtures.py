#!/usr/bin/env python3
"""Makes the transformers fixtures kvactor's CPU decoder is checked against (run where
transformers and PyTorch are installed; the H200 machine has both).

For each dense family it builds a tiny model with the family's quirks switched on (sliding windows
shorter than the prompts, soft-caps, q/k norm, Llama-3 rope scaling, QKV bias, fused projections),
initialised at random from a fixed seed with weights large enough that greedy choices are not
near-ties, rounds every weight to bfloat16 (so that the bf16 checkpoint holds exactly the values
the float reference ran with), records transformers' greedy continuation of a few prompts (a full
forward pass per generated token, eager attention, float32) and the logits at the last position of
each prompt, and saves the model with save_pretrained in bfloat16.

  make_fixtures.py OUTDIR [FAMILY ...]     writes OUTDIR/<family>/{config.json,
                                           model.safetensors, expected.json} and OUTDIR.tar
  make_fixtures.py --gpu OUTDIR [FAMILY ...]
                                           the same families at head sizes the GPU kernels
                                           have (64; phi3 96), two layers (tests/data/
                                           transformers_gpu, for the GPU decoder's tests)
"""
import json
import os
import sys
import tarfile

import torch
import transformers

GENERATED = 32
PROMPT_LENGTHS = (5, 19, 27)


GPU = False  # --gpu: head sizes the GPU kernels have


def common(vocab=256):
    if GPU:
        return dict(vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                    initializer_range=0.08, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                initializer_range=0.08, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def head(small):
    """The head size: the CPU fixtures' small one, or the GPU kernels' 64."""
    return 64 if GPU else small


def families():
    t = transformers
    return {
        "llama": (t.LlamaConfig, t.LlamaForCausalLM, dict(
            common(), head_dim=head(16), rms_norm_eps=1e-5, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0,
                                 low_freq_factor=1.0, high_freq_factor=4.0,
                                 original_max_position_embeddings=16))),
        "mistral": (t.MistralConfig, t.MistralForCausalLM, dict(
            common(), head_dim=head(16), sliding_window=8, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
        "qwen2": (t.Qwen2Config, t.Qwen2ForCausalLM, dict(
            common(), use_sliding_window=False, tie_word_embeddings=True,
            rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
        "qwen3": (t.Qwen3Config, t.Qwen3ForCausalLM, dict(
            common(), head_dim=head(32), use_sliding_window=False, tie_word_embeddings=True,
            rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
        "gemma2": (t.Gemma2Config, t.Gemma2ForCausalLM, dict(
            common(), head_dim=head(16), query_pre_attn_scalar=24, sliding_window=8,
            attn_logit_softcapping=5.0, final_logit_softcapping=3.0,
            hidden_activation="gelu_pytorch_tanh",
            rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
        "gemma3_text": (t.Gemma3TextConfig, t.Gemma3ForCausalLM, dict(
            common(), head_dim=head(16), query_pre_attn_scalar=16, sliding_window=8,
            layer_types=(["sliding_attention", "full_attention"] if GPU else
                         ["sliding_attention", "sliding_attention", "sliding_attention",
                          "full_attention"]),
            hidden_activation="gelu_pytorch_tanh")),
        # --gpu only: grouped-query attention with more than one KV head, more than one warp's
        # worth of heads per CTA, and partial RoPE (phi3's partial_rotary_factor).
        **({"llama_gqa": (t.LlamaConfig, t.LlamaForCausalLM, dict(
            common(), num_attention_heads=8, num_key_value_heads=2, intermediate_size=128,
            head_dim=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="default", rope_theta=500000.0))),
            "phi3_partial": (t.Phi3Config, t.Phi3ForCausalLM, dict(
                common(), partial_rotary_factor=0.5, sliding_window=None, tie_word_embeddings=False,
                rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                     partial_rotary_factor=0.5)))} if GPU else {}),
        "phi3": (t.Phi3Config, t.Phi3ForCausalLM, dict(
            common(), **(dict(hidden_size=192) if GPU else {}),  # phi3's head size: 96
            sliding_window=None, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
    }


def make_config(config_class, kwargs):
    try:
        return config_class(**kwargs)
    except TypeError:
        # transformers 4.x: rope_theta / rope_scaling instead of rope_parameters
        rope = kwargs.pop("rope_parameters", None)
        if rope:
            kwargs["rope_theta"] = rope.pop("rope_theta")
            if rope.get("rope_type", "default") != "default":
                kwargs["rope_scaling"] = rope
        return config_class(**kwargs)


def randomise_norms_and_biases(model, gemma):
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                base = 0.0 if gemma else 1.0  # Gemma norms scale by (1 + w)
                p.copy_(base + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def greedy(model, prompt):
    ids = list(prompt)
    margins = []
    with torch.no_grad():
        for _ in range(GENERATED):
            logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1]
            top = torch.topk(logits, 2)
            margins.append(float(top.values[0] - top.values[1]))
            ids.append(int(top.indices[0]))
    return ids[len(prompt):], margins


def make(name, config_class, model_class, kwargs, outdir):
    torch.manual_seed(1234)
    config = make_config(config_class, dict(kwargs))
    config._attn_implementation = "eager"
    model = model_class(config).to(torch.float32).eval()
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    randomise_norms_and_biases(model, name.startswith("gemma"))
    gen = torch.Generator().manual_seed(99)
    vocab = config.vocab_size
    prompts = [[int(x) for x in torch.randint(3, vocab, (n,), generator=gen)]
               for n in PROMPT_LENGTHS]
    expected = {"family": name, "transformers": transformers.__version__,
                "torch": torch.__version__, "prompts": [], "continuations": [],
                "last_logits": [], "min_margin": []}
    with torch.no_grad():
        for p in prompts:
            logits = model(torch.tensor([p]), use_cache=False).logits[0, -1]
            out, margins = greedy(model, p)
            expected["prompts"].append(p)
            expected["continuations"].append(out)
            expected["last_logits"].append([float(x) for x in logits])
            expected["min_margin"].append(min(margins))
    path = os.path.join(outdir, name)
    os.makedirs(path, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(path, extra)):
            os.remove(os.path.join(path, extra))
    with open(os.path.join(path, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"{name}: min greedy margin {min(expected['min_margin']):.4f}, "
          f"{os.path.getsize(os.path.join(path, 'model.safetensors'))} bytes", flush=True)


def main():
    global GPU
    args = sys.argv[1:]
    if args and args[0] == "--gpu":
        GPU = True
        args = args[1:]
    outdir = args[0]
    wanted = args[1:] or list(families())
    os.makedirs(outdir, exist_ok=True)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    failed = 0
    for name in wanted:
        config_class, model_class, kwargs = families()[name]
        try:
            make(name, config_class, model_class, kwargs, outdir)
        except Exception as e:  # report every family, then fail
            failed += 1
            print(f"{name}: FAILED: {type(e).__name__}: {e}", flush=True)
    with tarfile.open(outdir.rstrip("/") + ".tar", "w") as tar:
        tar.add(outdir, arcname=os.path.basename(outdir.rstrip("/")))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
