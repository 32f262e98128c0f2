#!/usr/bin/env python3
"""Every numeric flag of every kvactor subcommand at hostile values, as the real binary takes
them: 0, -1, the limits of 32 and 64 bits, past 64 bits, and text that is not a number.

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

SLOWDOWN = int(os.environ.get("KVACTOR_TEST_SLOWDOWN", "1"))
TIMEOUT_S = 120 * SLOWDOWN
OPTION = re.compile(r"^\s+((?:-\w+, )?--[\w-]+(?:,--?[\w-]+)*)\s+(INT|UINT|FLOAT)\b")
NEVER_VALID = ["-1", "abc", "", "nan", "inf", "1e999", "99999999999999999999", "0x10"]
MAYBE_VALID = ["0", "1", "2147483647", "9223372036854775807"]


def numeric_flags(kvactor, command):
    """[(flag, type)] of `kvactor COMMAND --help`."""
    text = subprocess.run([kvactor, *command, "--help"], capture_output=True, text=True,
                          check=True).stdout
    out = []
    for line in text.splitlines():
        m = OPTION.match(line)
        if m:
            names = [n.strip() for n in re.split(r"[, ]+", m.group(1)) if n.strip()]
            out.append((next(n for n in names if n.startswith("--")), m.group(2)))
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
    if is_node:
        return run_node(args)
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S)
        return r.returncode, r.stderr
    except subprocess.TimeoutExpired:
        return None, "(timed out)"


def never_valid(value, kind):
    """Past 64 bits is a count no flag takes, but a finite number (1e20 seconds is silly, not
    wrong)."""
    return value in NEVER_VALID and not (kind == "FLOAT" and value == "99999999999999999999")


def judge(flag, kind, value, code, err):
    """The finding for one case, or None when it ended as it must."""
    if code is None:
        return f"hung past {TIMEOUT_S} s"
    if code < 0:
        return f"killed by signal {-code}"
    if code not in (0, 1, 2):
        return f"exit {code}"
    if code == 2 and flag not in err:
        return f"refused without naming {flag}: {err.strip().splitlines()[-1:]}"
    if never_valid(value, kind) and code != 2:
        return f"accepted (exit {code}) a value that is never valid"
    return None


def prepare(kvactor, work):
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "req.json"), "w") as f:
        f.write('{"type": "kvactor::request_spec", "payload": [7, [5, 6], 2, 0, '
                '[0.0, 0, 1.0, 0, []]]}')
    subprocess.run([kvactor, "run", "--requests", "2", "--prompt-len", "8", "--output-len", "2",
                    "--no-progress", "--device", "cpu", "--record",
                    os.path.join(work, "t.kvtrace")], check=True, capture_output=True)


def main():
    kvactor, source, work = sys.argv[1:4]
    prepare(kvactor, work)
    findings, cases = [], 0
    for command, base in base_arguments(source, work).items():
        for flag, kind in numeric_flags(kvactor, command):
            for value in NEVER_VALID + MAYBE_VALID:
                args = command_line(kvactor, command, base, flag, value)
                code, err = run_case(args, command == ("node",))
                cases += 1
                finding = judge(flag, kind, value, code, err)
                if finding:
                    findings.append(f"{' '.join(command)} {flag}={value!r}: {finding}")
    if cases < 100:
        findings.append(f"only {cases} cases: the flags were not read from --help")
    for f in findings:
        print(f"flag_sweep: {f}")
    if findings:
        print(f"flag_sweep: {len(findings)} of {cases} cases failed")
        return 1
    print(f"flag_sweep: ok ({cases} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
