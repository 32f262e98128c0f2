#!/usr/bin/env python3
"""Every numeric flag of every kvactor subcommand at hostile values, as the real binary takes
them: 0, -1, the limits of 32 and 64 bits, past 64 bits, and text that is not a number; and the
flags whose text holds numbers (byte sizes, token ranges, lists) at their own hostile values.

Each value must end in one of three ways, never a signal, never a hang:
  - refused before any work: exit 2, with an error that names the flag;
  - accepted and run to its end: exit 0, or exit 1 (the work failed, saying why);
  - for `node`, accepted: it announces where it listens and stops cleanly on SIGTERM.
Values that are never a valid setting (negative, not a number, not finite, past 64 bits) must be
refused. The flags are read from each subcommand's --help, so a new flag is swept without a change
here.

Usage: flag_sweep.py KVACTOR_BINARY SOURCE_DIR WORK_DIR"""
import os
import re
import signal
import subprocess
import sys
import time

from sweep_support import TIMEOUT_S, ended_badly, last_line, run, sweep

OPTION = re.compile(r"^\s+((?:-\w+, )?--[\w-]+(?:,--?[\w-]+)*)\s+(INT|UINT|FLOAT)\b")
NEVER_VALID = ["-1", "abc", "", "nan", "inf", "1e999", "99999999999999999999", "0x10"]
MAYBE_VALID = ["0", "1", "2147483647", "9223372036854775807"]
# Flags whose text holds numbers (byte sizes, token ranges, lists, RANK:STEP): --help calls them
# TEXT, so they are named here.
NUMBER_TEXT_FLAGS = {
    ("plan",): ["--kv-cache-memory", "--gpu-memory", "--weights-memory",
                "--cudagraph-capture-sizes"],
    ("run",): ["--kv-cache-memory", "--prompt-len", "--output-len", "--arrival-rate",
               "--cudagraph-capture-sizes", "--cudagraph-memory", "--max-message-bytes",
               "--gpu-ids", "--chaos", "--chaos-kill", "--chaos-stall", "--debug-stall",
               "--collective-timeout", "--step-timeout"],
    ("generate",): ["--prompt-ids", "--stop-token-ids"],
    ("node",): ["--max-message-bytes", "--gpus"],
    ("inject",): ["--max-message-bytes"],
}
NEVER_VALID_TEXT = ["-1", "abc", "", "nan", "99999999999999999999", "-5GiB", "1,,2", "0:-1"]
# Text flags that take a real number: 1e20 (a rate, seconds) is silly, not wrong.
REAL_TEXT_FLAGS = {"--arrival-rate", "--collective-timeout", "--step-timeout"}
MAYBE_VALID_TEXT = ["0", "1", "1:1", "0,0"]


def numeric_flags(kvactor, command):
    """[(flag, type)] of `kvactor COMMAND --help`, and the TEXT flags that hold numbers."""
    text = subprocess.run([kvactor, *command, "--help"], capture_output=True, text=True,
                          check=True).stdout
    out = []
    for line in text.splitlines():
        m = OPTION.match(line)
        if m:
            names = [n.strip() for n in re.split(r"[, ]+", m.group(1)) if n.strip()]
            out.append((next(n for n in names if n.startswith("--")), m.group(2)))
    for flag in NUMBER_TEXT_FLAGS.get(tuple(command), []):
        if flag not in text:
            raise SystemExit(f"flag_sweep: {' '.join(command)} has no {flag} any more")
        out.append((flag, "TEXT"))
    return out


def base_arguments(source, work):
    """Each subcommand with the fewest arguments that make it do real work, by flag."""
    qwen3 = os.path.join(source, "tests/data/transformers/qwen3")
    return {
        ("plan",): {"--model": "kvactor-tiny", "--device": "cpu"},
        ("run",): {"--requests": "2", "--prompt-len": "8", "--output-len": "2",
                   "--no-progress": None, "--device": "cpu", "--kv-cache-memory": "8MiB"},
        ("generate",): {"--model": qwen3, "--prompt-ids": "1,2,3", "--max-tokens": "2",
                        "--device": "cpu"},
        ("node",): {"--listen": "127.0.0.1:0", "--cpu-ranks": "1"},
        ("inject",): {"--to": "127.0.0.1:1", "--message": os.path.join(work, "req.json"),
                      "--timeout": "5"},
        ("replay",): {os.path.join(work, "t.kvtrace"): None},
        ("trace", "show"): {os.path.join(work, "t.kvtrace"): None},
        ("trace", "export"): {os.path.join(work, "t.kvtrace"): None},
    }


def command_line(kvactor, command, base, flag, value):
    args = [kvactor, *command]
    for k, v in base.items():
        if k == flag:
            continue
        args.append(k)
        if v is not None:
            args.append(v)
    return args + [f"{flag}={value}"]


def run_node(args):
    """A node that takes the value listens; it must then stop cleanly on SIGTERM."""
    # The node prints where it listens on stdout, its errors on stderr: one stream here.
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + TIMEOUT_S
    seen = []
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        if "listening on" in line:
            p.send_signal(signal.SIGTERM)
            rest = p.communicate(timeout=TIMEOUT_S)
            return p.returncode, "".join(seen) + rest[0]
    try:
        p.wait(timeout=max(deadline - time.time(), 1))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None, "".join(seen)
    return p.returncode, "".join(seen) + p.stdout.read()


def run_case(args, is_node):
    return run_node(args) if is_node else run(args)


def values_for(kind):
    return NEVER_VALID_TEXT + MAYBE_VALID_TEXT if kind == "TEXT" else NEVER_VALID + MAYBE_VALID


def never_valid(flag, value, kind):
    """Past 64 bits is a count no flag takes, but a finite number (1e20 seconds is silly, not
    wrong)."""
    if kind == "TEXT":
        return value in NEVER_VALID_TEXT and not (
            flag in REAL_TEXT_FLAGS and value == "99999999999999999999")
    return value in NEVER_VALID and not (kind == "FLOAT" and value == "99999999999999999999")


def judge(flag, kind, value, code, err):
    """The finding for one case, or None when it ended as it must."""
    if ended_badly(code):
        return ended_badly(code)
    if code == 2 and flag not in err:
        return f"refused without naming {flag}: {last_line(err)}"
    if never_valid(flag, value, kind) and code != 2:
        return f"accepted (exit {code}) a value that is never valid"
    return None


def prepare(kvactor, work):
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "req.json"), "w") as f:
        f.write('{"type": "kvactor::request_spec", "payload": [7, [5, 6], 2, 0, '
                '[0.0, 0, 1.0, 0, [], -1]]}')
    subprocess.run([kvactor, "run", "--requests", "2", "--prompt-len", "8", "--output-len", "2",
                    "--no-progress", "--device", "cpu", "--record",
                    os.path.join(work, "t.kvtrace")], check=True, capture_output=True)


def main():
    kvactor, source, work = sys.argv[1:4]
    prepare(kvactor, work)
    results = sweep("flag_sweep")
    for command, base in base_arguments(source, work).items():
        for flag, kind in numeric_flags(kvactor, command):
            for value in values_for(kind):
                args = command_line(kvactor, command, base, flag, value)
                code, err = run_case(args, command == ("node",))
                results.judge(f"{' '.join(command)} {flag}={value!r}",
                              judge(flag, kind, value, code, err))
    if results.cases < 100:
        results.judge("the sweep", f"only {results.cases} cases: were the flags read from --help?")
    return results.report()


if __name__ == "__main__":
    sys.exit(main())
