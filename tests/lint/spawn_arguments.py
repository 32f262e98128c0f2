#!/usr/bin/env python3
"""Fails when C++ code spawns an actor without arguments (`spawn(behaviour)`,
`spawn<caf::detached>(behaviour)`): CAF 0.17 then binds a reference to a null argument tuple,
undefined behaviour that UBSan stops on. Spawn such behaviours as `spawn(plain<&behaviour>,
nullptr)` (actors/spawn_plain.hpp).

Usage: spawn_arguments.py REPO_ROOT"""
import os
import re
import sys

NO_ARGUMENTS = re.compile(r'\bspawn(<[^<>()]*>)?\(\s*[A-Za-z_][A-Za-z_0-9:]*\s*\)')
FOLDERS = ("actors", "deploy", "kernels", "messages", "tests", "bench", "examples")


def main():
    root = sys.argv[1]
    found = []
    for folder in FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if not name.endswith((".cpp", ".hpp", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                for n, line in enumerate(open(path, encoding="utf-8"), 1):
                    code = re.sub(r"//.*", "", line)
                    if NO_ARGUMENTS.search(code):
                        found.append(f"{os.path.relpath(path, root)}:{n}: {line.strip()}")
    for f in found:
        print(f"spawn without arguments (use plain<&behaviour>, nullptr): {f}")
    if not found:
        print("spawn_arguments: ok")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
