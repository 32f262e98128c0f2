#!/usr/bin/env python3
"""Fails when code outside the CLI's output writes to standard output. stdout holds only what a
command answers (a summary, JSON, generated text), written to the `out` stream the CLI hands
down; every log line, progress line and warning goes to stderr. Flags std::cout, printf, puts,
a fmt::print with no stream, and spdlog's stdout sinks. deploy/main.cpp, which hands std::cout to
the CLI, is the one place allowed to name it.

Usage: stdout_writes.py REPO_ROOT"""
import os
import re
import sys

FOLDERS = ("model", "actors", "deploy", "kernels", "comm", "net", "messages")
ALLOWED = {os.path.join("deploy", "main.cpp")}
PATTERNS = [
    (re.compile(r"\bstd::cout\b"), "std::cout"),
    (re.compile(r"(?<![\w:.>])(std::)?printf\s*\("), "printf"),
    (re.compile(r"(?<![\w:.>])(std::)?puts\s*\("), "puts"),
    (re.compile(r"\bstdout\b"), "stdout"),
    (re.compile(r"\bfmt::print\(\s*\""), "fmt::print without a stream (stdout)"),
    (re.compile(r"\bstdout_\w+"), "an spdlog stdout sink"),
]
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
LITERAL = re.compile(r'"(\\.|[^"\\\n])*"')


def code_of(text):
    """The text without comments, and with string literals emptied but kept as quotes (so a
    fmt::print whose first argument is a literal is still seen)."""
    text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return LITERAL.sub('""', text)


def findings(root):
    for folder in FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if rel in ALLOWED:
                    continue
                with open(path, encoding="utf-8") as f:
                    code = code_of(f.read())
                for lineno, line in enumerate(code.splitlines(), 1):
                    if line.lstrip().startswith("#include"):
                        continue
                    for pattern, what in PATTERNS:
                        if pattern.search(line):
                            yield f"{rel}:{lineno}: {what}: {line.strip()}"


def main():
    found = list(findings(sys.argv[1]))
    for f in found:
        print(f)
    if found:
        print(f"stdout_writes: {len(found)} write(s) to stdout outside the CLI's output; write "
              "to the `out` stream the CLI hands down, or log (stderr)")
        return 1
    print("stdout_writes: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
