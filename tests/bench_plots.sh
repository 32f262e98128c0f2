#!/usr/bin/env bash
# bench/plot.py draws the committed benchmark data (bench/data/) into PNGs: every plot is
# written and is a PNG. Needs matplotlib (Debian's python3-matplotlib, which deploy/setup.sh
# installs for /usr/bin/python3); without it the test is skipped (77), not passed.
#   usage: bench_plots.sh REPO_ROOT OUT_DIR
set -euo pipefail
root=$1
out=$2
python=""
for p in /usr/bin/python3 python3; do
  if "$p" -c "import matplotlib" 2>/dev/null; then
    python=$p
    break
  fi
done
if [[ -z $python ]]; then
  echo "bench_plots: skipped: no python3 with matplotlib (apt-get install python3-matplotlib)"
  exit 77
fi
data=$root/bench/data/2026-12-04
ops=$root/bench/data/2026-12-04-ops
rm -rf "$out"
"$python" "$root/bench/plot.py" --attention "$data/attention.json" --peers "$data/sdpa_peers.json" \
  --decoder "$data/decoder_bench.txt" --ready "CPU=$ops/ready_tiny_cpu.json" \
  "H200=$ops/ready_8b_cuda.json" --fanout "$ops/cluster_fanout.json" --out "$out"
for png in attention_decode attention_prefill decoder_step time_to_ready cluster_fanout; do
  head -c 8 "$out/$png.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" ||
    { echo "bench_plots: FAIL: $png.png is not a PNG"; exit 1; }
done
echo "bench_plots: ok"
