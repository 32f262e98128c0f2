#!/usr/bin/env bash
# Two kvactor builds side by side on the step fan-out (bench/cluster_fanout.sh with the step
# timeline): PAIRS pairs of one run each, the order alternating, so that a change to the step
# path shows against the build before it on the same host in the same minutes. Prints, per build,
# the medians over the pairs and every pair's figures: local and channel p50, what the channel
# adds (p50 and p99), the node actor's hop to its first rank, the ranks' step on the nodes and in
# local mode, and local mode's hop from the driver to its first rank.
#   usage: bench/fanout_ab.sh OLD_KVACTOR NEW_KVACTOR PAIRS NODESxRANKS OUT_DIR [MODEL]
# OUT_DIR keeps each run's summaries (fanout.json, local_1.json, cluster_1.json) and marks. MODEL
# as cluster_fanout.sh takes it (kvactor-tiny unless given; 8x1 needs llama-3.1-8b).
set -euo pipefail
old=${1:?usage: fanout_ab.sh OLD NEW PAIRS NODESxRANKS OUT_DIR}
new=${2:?} pairs=${3:?} layout=${4:?} out=${5:?} model=${6:-kvactor-tiny}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for p in $(seq 1 "$pairs"); do
  if ((p % 2)); then order=(old new); else order=(new old); fi
  for which in "${order[@]}"; do
    bin=$old
    [[ $which == new ]] && bin=$new
    d=$out/$which-$p
    mkdir -p "$d"
    FANOUT_STEP_TIMES=$d bash "$here/cluster_fanout.sh" "$bin" 1 "$d/fanout.json" "$layout" "$model" \
      >"$d/log.txt" 2>&1 || { tail -5 "$d/log.txt"; exit 1; }
  done
done
python3 - "$out" "$pairs" <<'PY'
import json, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
names = ["local p50", "channel p50", "adds p50", "adds p99", "node hop", "ranks' step (nodes)",
         "ranks' step (local)", "local hop"]
def row(d):
    f = json.load(open(f"{d}/fanout.json"))
    c = json.load(open(f"{d}/cluster_1.json"))["segments"]
    l = json.load(open(f"{d}/local_1.json"))["segments"]
    step = "ranks: the step (builders, graph manager)"
    return (f["local"]["p50_us"], f["cluster"]["p50_us"], f["added_p50_us"], f["added_p99_us"],
            c["node: node actor to the first rank"]["p50_us"], c[step]["p50_us"], l[step]["p50_us"],
            l["driver: plan to the first rank"]["p50_us"])
print("us, medians over the pairs: " + ", ".join(names))
for which in ("old", "new"):
    rows = [row(f"{out}/{which}-{p}") for p in range(1, pairs + 1)]
    print(f"{which}: " + "  ".join(f"{statistics.median(r[i] for r in rows):.1f}" for i in range(len(names))))
    for p, r in enumerate(rows, 1):
        print(f"  pair {p:2d}: " + " ".join(f"{x:7.1f}" for x in r))
PY
