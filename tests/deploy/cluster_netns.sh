#!/usr/bin/env bash
# Cluster mode across "hosts": two node processes in their own network namespaces, joined to the
# driver's namespace by a bridge (10.231.0.0/24), listening off loopback with mutual TLS. The run
# has local mode's digest; then the link of one node is cut mid-run (its veth goes down: no FIN,
# no RST) and the driver reports it within 5 s with every request accounted for, and the other
# node, whose ranks waited on the cut peer, serves the next run at once. Needs root (ip netns):
# without it, or where the machine refuses namespaces, bridges or veths, it prints why and exits
# 77, which ctest reports as skipped.
# Each step waits on the event it needs (a log line, a step in the run's trace), never on a fixed
# sleep; the only timing checked is the detection bound under test.
#   usage: cluster_netns.sh KVACTOR_BINARY WORKDIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=wait_for.sh
source "$(dirname "$0")/wait_for.sh"
kvactor=$1
dir=$2
mkdir -p "$dir"
tag=kv$$
# A run killed at ctest's time limit runs no trap and leaves its namespaces and bridge behind;
# they hold this test's addresses, so remove any left by an earlier run first.
remove_stale() {
  local ns dev
  for ns in $(ip netns list 2>/dev/null | grep -oE '^kv[0-9]+[ab]\b'); do ip netns del "$ns"; done
  for dev in $(ip -br link 2>/dev/null | grep -oE '^kv[0-9]+(br|ha|hb)\b'); do ip link del "$dev"; done
}
[[ $(id -u) -ne 0 ]] || remove_stale 2>/dev/null || true
if [[ $(id -u) -ne 0 ]] || ! ip netns add "${tag}a" 2>/dev/null; then
  echo "cluster_netns: SKIPPED: network namespaces need root (ip netns add failed)"
  exit 77
fi
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  ip netns del "${tag}a" 2>/dev/null || true
  ip netns del "${tag}b" 2>/dev/null || true
  ip link del "${tag}br" 2>/dev/null || true
}
trap cleanup EXIT
fail() {
  echo "cluster_netns: FAIL: $*"
  exit 1
}
# Namespaces may be allowed where bridges or veths are not: any refusal skips the test.
setup_net() {
  ip netns add "${tag}b" || return 1
  ip link add "${tag}br" type bridge || return 1
  ip addr add 10.231.0.1/24 dev "${tag}br" || return 1
  ip link set "${tag}br" up || return 1
  local i=2 ns
  for ns in a b; do
    ip link add "${tag}h$ns" type veth peer name "${tag}n$ns" || return 1
    ip link set "${tag}n$ns" netns "$tag$ns" || return 1
    ip link set "${tag}h$ns" master "${tag}br" up || return 1
    ip -n "$tag$ns" addr add "10.231.0.$i/24" dev "${tag}n$ns" || return 1
    ip -n "$tag$ns" link set "${tag}n$ns" up || return 1
    ip -n "$tag$ns" link set lo up || return 1
    i=$((i + 1))
  done
}
if ! setup_net 2>"$dir/net.err"; then
  echo "cluster_netns: SKIPPED: this machine refuses the test network: $(head -1 "$dir/net.err")"
  exit 77
fi
certs="$dir/certs"
KVACTOR_CERT_NAMES="10.231.0.1 10.231.0.2 10.231.0.3" \
  bash "$(dirname "$0")/../../deploy/tls/make-test-certs.sh" "$certs" >"$dir/certs.log" 2>&1 ||
  { cat "$dir/certs.log"; fail "test certificates"; }
node_tls=(--tls-cert "$certs/node.crt" --tls-key "$certs/node.key" --tls-ca "$certs/ca.crt")
drv_tls=(--tls-cert "$certs/driver.crt" --tls-key "$certs/driver.key" --tls-ca "$certs/ca.crt")
i=2
for ns in a b; do
  ip netns exec "$tag$ns" "$kvactor" node --listen "10.231.0.$i:7401" --cpu-ranks 2 \
    "${node_tls[@]}" >"$dir/node$ns.log" 2>&1 &
  pids+=($!)
  wait_for 30 in_file "listening on" "$dir/node$ns.log" ||
    { cat "$dir/node$ns.log"; fail "node in $tag$ns did not announce its address within 30 s"; }
  grep -q "listening on 10.231.0.$i:7401" "$dir/node$ns.log" ||
    { cat "$dir/node$ns.log"; fail "node in $tag$ns did not start on 10.231.0.$i:7401"; }
  i=$((i + 1))
done
nodes=10.231.0.2:7401,10.231.0.3:7401
"$kvactor" run --nodes "$nodes" --tensor-parallel-size 4 --seed 5 --no-progress "${drv_tls[@]}" \
  >"$dir/run.out" 2>"$dir/run.err" || { cat "$dir/run.err"; fail "the run over namespaces failed"; }
"$kvactor" run --tensor-parallel-size 4 --seed 5 --no-progress >"$dir/local.out" 2>&1
got=$(awk '/^digest/ {print $2}' "$dir/run.out")
want=$(awk '/^digest/ {print $2}' "$dir/local.out")
[[ -n $got && $got == "$want" ]] || fail "digest $got across namespaces, $want locally"
echo "cluster_netns: 2 namespaced nodes x 2 CPU ranks over TLS: digest $got, as local mode"

# Cut node b's link mid-run: once the run has finished a step (its trace, written as the driver
# goes, holds a step_done); 48 requests of 200-300 tokens take hundreds of steps, so the cut lands
# mid-run however fast the machine is. The last run's trace goes first: a stale step must not count.
rm -f "$dir/cut.kvtrace"
"$kvactor" run --nodes "$nodes" --tensor-parallel-size 4 --requests 48 --output-len 200:300 \
  --no-progress --log-level info --summary-json "$dir/cut.json" --record "$dir/cut.kvtrace" \
  "${drv_tls[@]}" >"$dir/cut.out" 2>"$dir/cut.err" &
run=$!
pids+=("$run")
wait_for 60 in_file 'kvactor::step_done' "$dir/cut.kvtrace" ||
  { cat "$dir/cut.err"; fail "the run finished no step within 60 s"; }
t0=$(date +%s.%N)
ip link set "${tag}hb" down
status=0
wait "$run" || status=$?
t1=$(date +%s.%N)
took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
[[ $status -ne 0 ]] || fail "a cut link went unreported"
python3 - "$dir/cut.json" <<'PY' || fail "requests lost"
import json, sys
s = json.load(open(sys.argv[1]))
r = s["requests"]
assert r["finished"] + r["failed"] == 48, r
assert "unreachable" in s["error"], s["error"]
print(f"cluster_netns: {r['finished']} finished + {r['failed']} failed = 48: none lost")
PY
awk -v t="$took" 'BEGIN { exit !(t < 5.0) }' || fail "the cut link took $took s to end the run"
echo "cluster_netns: a cut link (veth down) ended the run $took s later: $(grep -o 'rank [0-9] on node [^ ]* slot [0-9] is unreachable' "$dir/cut.err" | head -1)"
# The surviving node released its ranks (they were blocked in a collective with the cut peer):
# it serves the next run at once.
t0=$(date +%s.%N)
"$kvactor" run --nodes 10.231.0.2:7401 --tensor-parallel-size 2 --no-progress "${drv_tls[@]}" \
  >"$dir/again.out" 2>"$dir/again.err" || { cat "$dir/again.err"; fail "node a is still held"; }
t1=$(date +%s.%N)
echo "cluster_netns: the surviving node served the next run ($(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s)"
echo "cluster_netns: ok"
