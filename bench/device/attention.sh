#!/usr/bin/env bash
# kvactor_attention_bench (every case, with the write and the read L2 flush) and PyTorch's SDPA
# back-ends on the same shapes in the same call (bench/hf/sdpa_peers.py), with the SM clock
# sampled while the kernels run.
#   here:   bash bench/pack_for_device.sh -z build/bin/kvactor_attention_bench
#   device: bash bench/device.sh "$OUT" attention   (carry: [".devpack.tar.xz"])
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
rc=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
start_clock_sampler "$out/clocks.csv"
timeout 120 bash .devpack/run.sh kvactor_attention_bench --out "$out/attention.json" \
  >"$out/attention.log" 2>&1 || rc=1
tail -n 25 "$out/attention.log"
stop_clock_sampler "$out/clocks.csv"
# No dirty L2 lines written back inside the timed window.
timeout 60 bash .devpack/run.sh kvactor_attention_bench --flush read \
  --out "$out/attention_read_flush.json" >"$out/attention_read_flush.log" 2>&1 || rc=1
tail -n 1 "$out/attention_read_flush.log"
timeout 240 python3 bench/hf/sdpa_peers.py --kvactor "$out/attention.json" \
  --out "$out/sdpa_peers.json" >"$out/sdpa_peers.log" 2>&1 || rc=1
grep -v -i "warn" "$out/sdpa_peers.log" | tail -n 30
exit $rc
