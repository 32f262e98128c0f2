#!/usr/bin/env python3
"""Every file kvactor reads, absent, empty and damaged, through the real binary: a model
directory's config.json, safetensors, index, tokenizer and generation_config.json; a config file;
a trace; an inject message; TLS files.

Each case must end with exit 1 or 2 and an error that names the file, never a signal, a hang or
a silent success; a file that is only optional for the command (a tokenizer when the prompt is
token ids) may be passed over with a warning that names it.

Usage: file_sweep.py KVACTOR_BINARY SOURCE_DIR WORK_DIR"""
import os
import shutil
import subprocess
import sys

from sweep_support import ended_badly, last_line, run, sweep


def damages(original):
    """(name, bytes) of each way the file is broken; None: the file is absent."""
    head = original[: max(len(original) // 2, 1)]
    return [("absent", None), ("empty", b""), ("truncated", head),
            ("garbage", b"\x93\x00\xffnot what it should be\x00" * 7)]


def model_dir(work, source, family, broken, content):
    """A copy of a fixture directory (links to its files) with `broken` replaced by `content`."""
    d = os.path.join(work, "model")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    fixture = os.path.join(source, "tests/data/transformers", family)
    for name in os.listdir(fixture):
        if name != broken:
            os.symlink(os.path.join(fixture, name), os.path.join(d, name))
    if content is not None:
        with open(os.path.join(d, broken), "wb") as f:
            f.write(content)
    return d


def judge(name, code, err, optional):
    if ended_badly(code):
        return ended_badly(code)
    if code == 0 and not (optional and name in err and "warning" in err):
        return "succeeded without a word about the file"
    if name not in err:
        return f"the error does not name {name}: {last_line(err)}"
    return None


def directory_cases(kvactor, source, work):
    """(label, args builder, file name, optional) over a model directory's files."""
    cpu = ["--device", "cpu"]
    small = ["--requests", "1", "--prompt-len", "4", "--output-len", "2", "--no-progress"]
    for family, broken, optional in [("qwen3", "config.json", False),
                                     ("qwen3", "model.safetensors", False),
                                     ("qwen3", "generation_config.json", False),
                                     ("mistral", "tokenizer.model", False),
                                     ("mistral", "tokenizer.model", True)]:
        original = b""
        path = os.path.join(source, "tests/data/transformers", family, broken)
        if os.path.exists(path):
            with open(path, "rb") as f:
                original = f.read()
        for label, content in damages(original):
            if broken == "generation_config.json" and content is None:
                continue  # absent: config.json's eos_token_id is used, as transformers does
            if broken == "tokenizer.model" and content is None and optional:
                continue
            d = model_dir(work, source, family, broken, content)
            if broken == "generation_config.json":
                # `run` serves a synthetic workload to its length and reads no end-of-sequence ids
                commands = [[kvactor, "generate", "--model", d, "--prompt-ids", "1,2,3",
                             "--max-tokens", "2", *cpu]]
            elif broken == "tokenizer.model":
                prompt = ["--prompt-ids", "1,2,3"] if optional else ["--prompt", "Hello"]
                commands = [[kvactor, "generate", "--model", d, *prompt, "--max-tokens", "2", *cpu]]
            else:
                commands = [[kvactor, "generate", "--model", d, "--prompt-ids", "1,2,3",
                             "--max-tokens", "2", *cpu],
                            [kvactor, "run", "--model", d, *small, *cpu]]
            for args in commands:
                yield f"{args[1]} {family}/{broken} {label}", args, broken, optional


def file_cases(kvactor, source, work):
    """Files named on the command line: a config, a trace, an inject message, TLS files."""
    trace = os.path.join(work, "good.kvtrace")
    subprocess.run([kvactor, "run", "--requests", "2", "--prompt-len", "8", "--output-len", "2",
                    "--no-progress", "--device", "cpu", "--record", trace], check=True,
                   capture_output=True)
    originals = {}
    for name, path in [("config.json", os.path.join(source, "deploy/models/kvactor-tiny.json")),
                       ("t.kvtrace", trace)]:
        with open(path, "rb") as f:
            originals[name] = f.read()
    originals["msg.json"] = (b'{"type": "kvactor::request_spec", "payload": [7, [5, 6], 2, 0, '
                             b'[0.0, 0, 1.0, 0, [], -1]]}')
    originals["cert.pem"] = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    for name, original in originals.items():
        for label, content in damages(original):
            path = os.path.join(work, name)
            if os.path.exists(path):
                os.remove(path)
            if content is not None:
                with open(path, "wb") as f:
                    f.write(content)
            if name == "config.json":
                commands = [[kvactor, "plan", "--model", path, "--device", "cpu"],
                            [kvactor, "run", "--model", path, "--requests", "1", "--prompt-len",
                             "4", "--output-len", "2", "--no-progress", "--device", "cpu"]]
            elif name == "t.kvtrace":
                commands = [[kvactor, "trace", "show", path], [kvactor, "trace", "export", path],
                            [kvactor, "replay", path, "--verify"]]
            elif name == "msg.json":
                if label == "truncated":
                    continue  # half a JSON object is the garbage case again
                commands = [[kvactor, "inject", "--to", "127.0.0.1:1", "--message", path]]
            else:
                commands = [[kvactor, "node", "--listen", "127.0.0.1:0", "--tls-cert", path,
                             "--tls-key", path, "--tls-ca", path]]
            for args in commands:
                yield f"{' '.join(args[1:3])} {name} {label}", args, name, False


def main():
    kvactor, source, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    results = sweep("file_sweep")
    for cases in (directory_cases(kvactor, source, work), file_cases(kvactor, source, work)):
        for label, args, name, optional in cases:
            code, err = run(args)
            results.judge(label, judge(name, code, err, optional))
    return results.report()


if __name__ == "__main__":
    sys.exit(main())
