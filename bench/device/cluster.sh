#!/usr/bin/env bash
# Cluster mode on the lent GPU machine, in one device call: the GPU tests, a GPU node serving a
# driver over loopback (NCCL bootstrapped through the node; tokens as in local mode), the CPU
# cluster test, and the step fan-out benchmark on its 16 cores.
#   here:   bash bench/pack_for_device.sh build/bin/kvactor build/bin/kvactor_gpu_tests
#   device: bash bench/device.sh "$OUT" cluster      (carry: [".devpack"])
set -uo pipefail
out=${1:?usage: cluster.sh OUT_DIR}
mkdir -p "$out"
export KVACTOR_MODELS_PATH=$PWD/deploy/models
k() { bash .devpack/run.sh kvactor "$@"; }
timeout 240 bash .devpack/run.sh kvactor_gpu_tests --gtest_brief=1 >"$out/gpu_tests.log" 2>&1
echo "gpu_tests rc=$?"
tail -n 3 "$out/gpu_tests.log"
k node --listen 127.0.0.1:0 --gpus 0 >"$out/gpu_node.log" 2>&1 &
node=$!
sleep 2
addr=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$out/gpu_node.log" | awk '{print $3}')
cat "$out/gpu_node.log"
timeout 120 bash .devpack/run.sh kvactor run --nodes "$addr" --no-progress --log-level info \
  --summary-json "$out/gpu_cluster.json" >"$out/gpu_cluster.out" 2>"$out/gpu_cluster.err"
echo "gpu cluster rc=$?"
cat "$out/gpu_cluster.out"
grep -E "error|cluster:" "$out/gpu_cluster.err" | head
timeout 120 bash .devpack/run.sh kvactor run --device cuda --no-progress >"$out/gpu_local.out" 2>&1
grep digest "$out/gpu_local.out" | sed 's/^/local /'
kill "$node"
# The packed binary needs its libraries: the scripts call it through run.sh (exec keeps the pid).
cat >"$out/kvactor" <<SH
#!/usr/bin/env bash
exec bash $PWD/.devpack/run.sh kvactor "\$@"
SH
chmod +x "$out/kvactor"
timeout 120 bash tests/deploy/cluster_local.sh "$out/kvactor" "$out/cluster_local" \
  >"$out/cluster_local.log" 2>&1
echo "cluster_local rc=$?"
tail -n 6 "$out/cluster_local.log"
timeout 200 bash bench/cluster_fanout.sh "$out/kvactor" 5 2>&1 | tee "$out/fanout.log"
