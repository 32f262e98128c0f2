#!/usr/bin/env python3
"""Where a step's time goes, from the marks of `--debug-step-times` (actors/step_timeline.hpp).

usage: step_times.py DRIVER_CSV [NODE_CSV ...] [--json OUT]

Each DRIVER_CSV holds one or more `kvactor run`s (local or cluster; the last one is read); the
NODE_CSVs are the files of the nodes it ran on (one per `kvactor node`, holding any number of runs: a node's marks belong to the driver
run whose time span holds them). Every process must have run on one host: the marks are its
monotonic clock. For each step and node the script takes the differences of consecutive points
(plan -> frame written -> node thread -> node actor -> ranks -> gathered -> answer written ->
driver reader -> driver actor -> step counted) and prints their medians and 90th percentiles over
the steps, so that the segments add up to the step's time, node by node.
"""
import json
import statistics
import sys
from collections import defaultdict

# Per node: (name, from point, to point). The step's last segment, from the last node's answer
# to the step counted, is the step's own.
SEGMENTS = [
    ("driver: plan to writing the node's frame", "driver_plan", "driver_send"),
    ("driver: encode and write the frame", "driver_send", "driver_written"),
    ("loopback to the node's channel thread", "driver_written", "node_read"),
    ("node: channel thread to the node actor", "node_read", "node_relay"),
    ("node: node actor to the first rank", "node_relay", "rank_received"),
    ("ranks: the step (builders, graph manager)", "rank_received", "rank_answered"),
    ("node: last rank's answer to the node actor", "rank_answered", "node_gathered"),
    ("node: encode and write the answer", "node_gathered", "node_written"),
    ("loopback to the driver's reader", "node_written", "driver_read"),
    ("driver: reader to the driver actor", "driver_read", "driver_answer"),
]
LAST = "driver: last answer to the step counted"
WHOLE = "the whole step"
LOCAL_SEGMENTS = [
    ("driver: plan to the first rank", "driver_plan", "rank_received"),
    ("ranks: the step (builders, graph manager)", "rank_received", "rank_answered"),
]


def read_marks(path, last_run_only=False):
    """Marks as (label, seq, where, point, ns) and the file's notes as (label, text). A driver's file
    may gather several runs, each after a "run" note: with last_run_only, the last one's. Lines a
    process cut short (killed while it wrote) are skipped."""
    marks, notes = [], []
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("# "):
            label, _, text = line[2:].partition(" ")
            if last_run_only and text == "run":
                marks, notes = [], []
            notes.append((label, text))
            continue
        fields = line.split(",")
        try:
            marks.append((fields[0], int(fields[1]), int(fields[2]), fields[3], int(fields[4])))
        except (IndexError, ValueError):
            continue
    return marks, notes


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class step_marks:
    """The marks of one step, by process label and point."""

    def __init__(self):
        self.by = defaultdict(list)  # (label, point) -> [(where, ns)]

    def at(self, label, point, where=None, last=False):
        xs = [ns for w, ns in self.by.get((label, point), []) if where is None or w == where]
        if not xs:
            return None
        return max(xs) if last else min(xs)


def segment_times(driver, nodes, route_ports):
    """Per segment, the microseconds of every step (and node, for the per-node segments)."""
    steps = defaultdict(step_marks)
    for label, seq, where, point, ns in driver + nodes:
        steps[seq].by[(label, point)].append((where, ns))
    cluster = any(m[3] == "driver_send" for m in driver)
    out = defaultdict(list)
    for seq in sorted(steps):
        s = steps[seq]
        plan, done = s.at("driver", "driver_plan"), s.at("driver", "driver_step_done")
        if plan is None or done is None:
            continue
        out[WHOLE].append((done - plan) / 1e3)
        if not cluster:
            points = {"driver_plan": plan, "rank_received": s.at("driver", "rank_received"),
                      "rank_answered": s.at("driver", "rank_answered", last=True)}
            if None not in points.values():
                for name, a, b in LOCAL_SEGMENTS:
                    out[name].append((points[b] - points[a]) / 1e3)
                out[LAST].append((done - points["rank_answered"]) / 1e3)
            continue
        last_answer = s.at("driver", "driver_answer", last=True)
        if last_answer is not None:
            out[LAST].append((done - last_answer) / 1e3)
        for route, port in route_ports.items():
            node = f"node:{port}"
            points = {
                "driver_plan": plan,
                "driver_send": s.at("driver", "driver_send", route),
                "driver_written": s.at("driver", "driver_written", route),
                "node_read": s.at(node, "node_read"),
                "node_relay": s.at(node, "node_relay"),
                "rank_received": s.at(node, "rank_received"),
                "rank_answered": s.at(node, "rank_answered", last=True),
                "node_gathered": s.at(node, "node_gathered"),
                "node_written": s.at(node, "node_written"),
                "driver_read": s.at("driver", "driver_read", route),
                "driver_answer": s.at("driver", "driver_answer", route),
            }
            if None in points.values():
                continue
            for name, a, b in SEGMENTS:
                out[name].append((points[b] - points[a]) / 1e3)
    return out, cluster


def main(argv):
    json_out = None
    if "--json" in argv:
        i = argv.index("--json")
        json_out = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    driver, notes = read_marks(argv[0], last_run_only=True)
    nodes = []
    for path in argv[1:]:
        nodes += read_marks(path)[0]
    if not driver:
        print(f"step_times.py: {argv[0]} has no marks", file=sys.stderr)
        return 1
    lo, hi = min(m[4] for m in driver), max(m[4] for m in driver)
    nodes = [m for m in nodes if lo <= m[4] <= hi]
    route_ports = {}
    for label, text in notes:
        words = text.split()
        if label == "driver" and len(words) == 4 and words[0] == "route" and words[2] == "port":
            route_ports[int(words[1])] = int(words[3])
    times, cluster = segment_times(driver, nodes, route_ports)
    if not cluster and not any(m[3] == "rank_received" for m in driver):
        print(f"step_times.py: {argv[0]} has no rank or channel marks: a run through the middleman "
              "is not marked", file=sys.stderr)
        return 1
    names = [s[0] for s in (SEGMENTS if cluster else LOCAL_SEGMENTS)] + [LAST, WHOLE]
    steps = len(times.get(WHOLE, []))
    print(f"{'cluster' if cluster else 'local'} run: {steps} steps"
          + (f", {len(route_ports)} nodes (a per-node row counts every step on every node)" if cluster else ""))
    print(f"  {'segment':50s} {'p50 us':>9s} {'p90 us':>9s}")
    summary = {}
    for name in names:
        xs = times.get(name, [])
        if not xs:
            continue
        summary[name] = {"p50_us": statistics.median(xs), "p90_us": pct(xs, 0.9), "n": len(xs)}
        print(f"  {name:50s} {summary[name]['p50_us']:9.1f} {summary[name]['p90_us']:9.1f}")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"mode": "cluster" if cluster else "local", "steps": steps,
                       "segments": summary}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
