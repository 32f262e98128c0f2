#!/usr/bin/env python3
"""Every field of a model config at the wrong type and out of range, as `kvactor plan` and
`kvactor run` read it: the shipped kvactor-tiny config with one field changed at a time.

Each case ends in one of two ways, never a signal, never a hang: refused before any work (exit 2),
or run to its end (exit 0, or 1 saying why). A value that is never valid for the field (a negative
size, text for a number, a list, a fraction or 2^40 for a count, an unknown name) must be refused
with an error that names the field. A field left out, or null, is a case too.

Usage: config_sweep.py KVACTOR_BINARY SOURCE_DIR WORK_DIR"""
import json
import os
import sys

from sweep_support import ended_badly, last_line, run, sweep
ABSENT = object()

COUNTS = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
          "sliding_window"]
REALS = ["rms_norm_eps", "rope_theta"]
NEVER_VALID_COUNT = [-1, "16", [16], {"a": 1}, True, 1.5, 1e30, 2 ** 40]
NEVER_VALID_REAL = [-1.0, "x", [1.0], {"a": 1}, True]
MAYBE_VALID = [0, 1, 2 ** 31 - 1, None, ABSENT]
# field: (values never valid, values that may be valid)
OTHER_FIELDS = {
    "model_type": (["", "llama2", 7], [None, ABSENT]),
    "layer_types": ([["full_attention"], ["sliding_attention"] * 3 + ["x"], "full_attention",
                     []], [None, ABSENT]),
    "torch_dtype": (["float8", 16], [None, ABSENT]),
    "tie_word_embeddings": (["yes", 1], [None, ABSENT]),
    "rope_scaling": ([{"rope_type": "unknown"}, "x", [1]], [None]),
    "eos_token_id": (["2", [2, -1], 1.5, -1], [None, [2, 3], 0]),
}


def cases():
    for field in COUNTS:
        for v in NEVER_VALID_COUNT:
            yield field, v, True
        for v in MAYBE_VALID:
            yield field, v, False
    for field in REALS:
        for v in NEVER_VALID_REAL:
            yield field, v, True
        for v in MAYBE_VALID:
            yield field, v, False
    for field, (never, maybe) in OTHER_FIELDS.items():
        for v in never:
            yield field, v, True
        for v in maybe:
            yield field, v, False


def write_config(base, field, value, path):
    config = dict(base)
    if value is ABSENT:
        config.pop(field, None)
    else:
        config[field] = value
    with open(path, "w") as f:
        json.dump(config, f)


def judge(field, must_refuse, code, err):
    if ended_badly(code):
        return ended_badly(code)
    # A value that may be valid may still be refused for what it leads to (the memory a model of
    # that size needs); a value that is never valid must be refused by name.
    if code == 2 and must_refuse and field not in err:
        return f"refused without naming {field}: {last_line(err)}"
    if must_refuse and code != 2:
        return f"accepted (exit {code}) a value that is never valid"
    return None


def main():
    kvactor, source, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(source, "deploy/models/kvactor-tiny.json")) as f:
        base = json.load(f)
    path = os.path.join(work, "config.json")
    commands = {
        "plan": [kvactor, "plan", "--model", path, "--device", "cpu"],
        "run": [kvactor, "run", "--model", path, "--requests", "1", "--prompt-len", "4",
                "--output-len", "2", "--no-progress", "--device", "cpu", "--kv-cache-memory",
                "8MiB"],
    }
    results = sweep("config_sweep")
    for field, value, must_refuse in cases():
        write_config(base, field, value, path)
        shown = "absent" if value is ABSENT else json.dumps(value)
        for name, args in commands.items():
            code, err = run(args)
            results.judge(f"{name} with {field} = {shown}", judge(field, must_refuse, code, err))
    return results.report()


if __name__ == "__main__":
    sys.exit(main())
