#!/usr/bin/env python3
"""Fails when an engine setting is declared twice. The settings are the fields of the groups in
messages/engine_config.hpp (parallel_settings, dtype_settings, cache_settings, scheduler_limits);
a struct that carries them derives from the group. This check lists every field of that name
declared again in a config struct elsewhere: a struct or class whose name ends in _config,
_flags, _options, _request, _settings or _setup, under messages/, model/, actors/, net/ or
deploy/. (memory_limits carries the planner's resolved max_model_len, a derived figure.)

Usage: engine_settings.py REPO_ROOT"""
import os
import re
import sys

GROUPS = os.path.join("messages", "engine_config.hpp")
CONFIG_NAME = re.compile(r"_(config|flags|options|request|settings|setup)$")
OPEN = re.compile(r"^\s*(?:struct|class)\s+(\w+)\b[^;]*\{\s*(?://.*)?$")
FIELD = re.compile(r"^\s+(?!return\b|using\b|static\b|friend\b)[\w:<>, *&]+?[\s*&]+(\w+)\s*"
                   r"(?:=[^;]*|\{[^;]*\})?;")


def structs_and_fields(text):
    """(struct name, field name, line) for the members declared at each struct's top level."""
    stack = []  # (name, depth at which its members live)
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("//", 1)[0]
        opened = OPEN.match(code)
        if stack and depth == stack[-1][1] and not opened:
            field = FIELD.match(code)
            if field and "(" not in code:
                yield stack[-1][0], field.group(1), number
        depth += code.count("{") - code.count("}")
        if opened:
            stack.append((opened.group(1), depth))
        while stack and depth < stack[-1][1]:
            stack.pop()


def settings(root):
    with open(os.path.join(root, GROUPS), encoding="utf-8") as f:
        return {field for _, field, _ in structs_and_fields(f.read())}


def findings(root):
    names = settings(root)
    for folder in ("messages", "model", "actors", "net", "deploy"):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith((".hpp", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if rel == GROUPS:
                    continue
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                for struct, field, line in structs_and_fields(text):
                    if field in names and CONFIG_NAME.search(struct):
                        yield f"{rel}:{line}: {struct}::{field} is an engine setting " \
                              f"(declare it once, in {GROUPS})"


def main():
    root = sys.argv[1]
    if not settings(root):
        print(f"engine_settings: no setting found in {GROUPS}")
        return 1
    found = list(findings(root))
    for f in found:
        print(f)
    if found:
        print(f"engine_settings: {len(found)} setting(s) declared twice")
        return 1
    print(f"engine_settings: ok ({len(settings(root))} settings, each declared once)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
