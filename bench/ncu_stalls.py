#!/usr/bin/env python3
"""Where a kernel's warps wait, from ncu's per-instruction PC sampling.

Reads the CSV that `ncu -i REPORT --page source --csv --print-source sass` prints (as
bench/device/prefill.sh writes to logs/ncu_source.csv) and prints the stall reasons over the
whole kernel, then the instructions with the most samples: their index in the SASS listing, share
of all samples, times executed, the instruction, and their two largest reasons.

  usage: python3 bench/ncu_stalls.py ncu_source.csv [TOP]
"""
import csv
import sys


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.reader(f))
    header = next((i for i, r in enumerate(rows) if "Source" in r and "Address" in r), None)
    if header is None:
        print(f"{sys.argv[1]}: no 'Address,Source,...' header: not ncu's source page", file=sys.stderr)
        return 1
    names, data = rows[header], rows[header + 1 :]
    col = {n: i for i, n in enumerate(names)}
    reasons = [n for n in names if n.startswith("stall_") and "Not Issued" not in n]
    samples = "Warp Stall Sampling (All Samples)"

    def count(row, name):
        value = row[col[name]].replace(",", "")
        return int(value) if value.isdigit() else 0

    total = sum(count(r, samples) for r in data)
    if total == 0:
        print("no stall samples in the report", file=sys.stderr)
        return 1
    print(f"{total} samples over {len(data)} instructions")
    by_reason = sorted(((sum(count(r, n) for r in data), n[6:]) for n in reasons), reverse=True)
    for n, name in by_reason[:10]:
        print(f"  {name:20s} {100 * n / total:5.1f}%")
    print(f"\n{'index':>6} {'share':>6} {'executed':>10}  instruction / largest reasons")
    ranked = sorted(range(len(data)), key=lambda i: -count(data[i], samples))[:top]
    for i in ranked:
        row = data[i]
        why = sorted(((count(row, n), n[6:]) for n in reasons), reverse=True)[:2]
        why_text = ", ".join(f"{name} {100 * n / total:.1f}%" for n, name in why if n)
        print(f"{i:6d} {100 * count(row, samples) / total:5.1f}% {row[col['Instructions Executed']]:>10}"
              f"  {row[col['Source']].strip()[:58]:58s} {why_text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
