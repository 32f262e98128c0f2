#!/usr/bin/env python3
"""Fails when C++ code spawns an actor without arguments (`spawn(behaviour)`,
`spawn<caf::detached>(behaviour)`, `spawn([](...) { ... })`): CAF 0.17 then binds a reference to
a null argument tuple, undefined behaviour that UBSan stops on. Spawn such behaviours as
`spawn(plain<&behaviour>, nullptr)` (actors/spawn_plain.hpp), or a lambda as
`spawn([](std::nullptr_t) { ... }, nullptr)`.
A spawn of a class with no argument at all (`spawn<impl>()`) takes another path and passes.

Usage: spawn_arguments.py REPO_ROOT"""
import os
import re
import sys

SPAWN = re.compile(r"\bspawn(<[^;{}()]*?>)?\(")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
LITERAL = re.compile(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'')
OPEN, CLOSE = "([{", ")]}"
FOLDERS = ("model", "actors", "deploy", "kernels", "comm", "net", "messages", "tests", "bench", "examples")


def top_level_arguments(code, start):
    """How many arguments the call whose '(' is at code[start - 1] has: 0, 1 or 2 (two or
    more), and where it ends; None when the parentheses do not close."""
    depth, seen, commas = 0, False, 0
    for i in range(start, len(code)):
        c = code[i]
        if c in OPEN:
            depth += 1
        elif c in CLOSE:
            if depth == 0:
                return (0 if not seen else min(commas + 1, 2)), i
            depth -= 1
        elif c == "," and depth == 0:
            commas += 1
        if not c.isspace():
            seen = True
    return None


def blank(match):
    """A comment or literal blanked out, keeping its newlines so that line numbers hold."""
    return re.sub(r"[^\n]", " ", match.group(0))


def spawns_without_arguments(text):
    code = LITERAL.sub(blank, COMMENT.sub(blank, text))
    for m in SPAWN.finditer(code):
        counted = top_level_arguments(code, m.end())
        if counted is None or counted[0] != 1:
            continue
        # A pack (`spawn(std::forward<Ts>(xs)...)`, a wrapper's own `spawn(Ts&&... xs)`) may
        # carry any number: its callers are checked instead.
        if "..." not in code[m.end():counted[1]]:
            yield code.count("\n", 0, m.start()) + 1


def main():
    root = sys.argv[1]
    found = []
    for folder in FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if not name.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                text = open(path, encoding="utf-8").read()
                lines = text.splitlines()
                for n in spawns_without_arguments(text):
                    found.append(f"{os.path.relpath(path, root)}:{n}: {lines[n - 1].strip()}")
    for f in found:
        print("spawn without arguments (use plain<&behaviour>, nullptr; a lambda: one taking an "
              f"ignored std::nullptr_t, nullptr): {f}")
    if not found:
        print("spawn_arguments: ok")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
