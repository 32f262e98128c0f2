#!/usr/bin/env python3
"""Fails when a function in model/, actors/ or deploy/ is longer than the limit (80 lines) without a
reason: a comment line `// long: WHY` right above it. Classes and namespaces do not count, only
function bodies at namespace or class scope.

Usage: function_length.py REPO_ROOT [LIMIT]
A brace counter, not a parser: it drops comments, string and character literals first, and does
not understand raw strings (none in these folders; it says so if one appears)."""
import os
import re
import sys

SCOPE_OPENERS = re.compile(r'^\s*(namespace\b|extern\s+"C"|(template\s*<[^>]*>\s*)?'
                           r'(class|struct|union|enum)\b[^;(]*$)')


def strip(line):
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return re.sub(r'//.*', '', line)


def long_functions(path, limit):
    lines = open(path, encoding='utf-8').read().split('\n')
    if any('R"(' in l for l in lines):
        yield (0, 0, 'contains a raw string literal: check it by hand')
        return
    stack = []  # per open brace: 'scope' or ('function', start line)
    in_block_comment = False
    for i, raw in enumerate(lines):
        line = raw
        if in_block_comment:
            if '*/' not in line:
                continue
            line = line.split('*/', 1)[1]
            in_block_comment = False
        line = re.sub(r'/\*.*?\*/', '', line)
        if '/*' in line:
            line, in_block_comment = line.split('/*', 1)[0], True
        code = strip(line)
        for ch in code:
            if ch == '{':
                inside_function = any(isinstance(s, tuple) for s in stack)
                # The declaration may start on an earlier line: look back to the last ; { or }.
                head = code.split('{')[0]
                j = i
                while not head.strip() and j > 0:
                    j -= 1
                    head = strip(lines[j])
                if inside_function:
                    stack.append('block')
                elif SCOPE_OPENERS.search(head) or re.search(r'\b(namespace|class|struct)\b', head):
                    stack.append('scope')
                else:
                    stack.append(('function', i))
            elif ch == '}':
                if not stack:
                    continue
                top = stack.pop()
                if isinstance(top, tuple):
                    start = top[1]
                    length = i - start + 1
                    reason = start > 0 and any(
                        lines[k].strip().startswith('// long:') for k in range(max(0, start - 3), start))
                    if length > limit and not reason:
                        yield (start + 1, length, lines[start].strip()[:80])


def main():
    root = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    found = 0
    for folder in ('model', 'actors', 'net', 'comm', 'deploy'):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith(('.cpp', '.hpp', '.h')):
                    continue
                path = os.path.join(dirpath, name)
                for line, length, text in long_functions(path, limit):
                    found += 1
                    rel = os.path.relpath(path, root)
                    print(f'{rel}:{line}: {length} lines (limit {limit}): {text}')
    if found:
        print(f'function_length: {found} function(s) over {limit} lines without a "// long:" reason')
        return 1
    print(f'function_length: ok (no function in model/, actors/ or deploy/ over {limit} lines)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
