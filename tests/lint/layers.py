#!/usr/bin/env python3
"""Fails when a lower layer of the tree includes a higher one. The layers, lowest first:
messages/ (the vocabulary), kernels/ (CPU references, CUDA kernels), comm/ (the communicators),
model/ (checkpoints, model configs, tokenizers), actors/ (the actors and their pure cores), net/
(the guarded transport and the step channel, a networking library), deploy/ (the kvactor
command). A file may include its own layer and those below, except that kernels/ and comm/ know
no messages/ (device pointers never enter a message); tests/, bench/ and examples/ stand above
them all.

Usage: layers.py REPO_ROOT"""
import os
import re
import sys

LAYERS = [("messages/", 0), ("kernels/", 1), ("kvactor/kernels/", 1), ("comm/", 2),
          ("kvactor/comm/", 2), ("model/", 3), ("actors/", 4), ("net/", 5), ("deploy/", 6)]
APART = {(1, 0), (2, 0)}  # (including layer, included layer) pairs not allowed though downward
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    for prefix, layer in LAYERS:
        if path.startswith(prefix):
            return layer, prefix
    return None, None


def findings(root):
    for folder in ("messages", "kernels", "comm", "model", "actors", "net", "deploy"):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                own, own_prefix = layer_of(rel)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    target, target_prefix = layer_of(m.group(1))
                    if target is None or (target <= own and (own, target) not in APART):
                        continue
                    line = text.count("\n", 0, m.start()) + 1
                    why = "is above it" if target > own else "is kept apart from it"
                    yield f"{rel}:{line}: {own_prefix} includes {m.group(1)} ({target_prefix} {why})"


def main():
    found = list(findings(sys.argv[1]))
    for f in found:
        print(f)
    if found:
        print(f"layers: {len(found)} upward include(s)")
        return 1
    print("layers: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
