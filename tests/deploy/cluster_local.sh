#!/usr/bin/env bash
# Cluster mode on loopback, as CI can run it: two `kvactor node` processes with two CPU ranks each
# serve a tensor-parallel run of 4 ranks with the digest of local mode; a node of another build,
# too few slots, an unreachable node and a non-loopback address without TLS are clear errors; a
# node killed with -9 and a node that stops answering (SIGSTOP: a cut link) mid-run are detected
# within 5 s, and every request is reported (finished or failed), none lost; with mutual TLS a
# driver without the CA's certificate is refused; with --restart-policy rebuild a killed node that
# returns gets the run finished with the digest of an uninterrupted one.
# Every step waits on the event it needs (a log line, a step in the run's trace, a process gone),
# never on a fixed sleep; the only timings checked are the detection bounds under test.
#   usage: cluster_local.sh KVACTOR_BINARY WORKDIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=wait_for.sh
source "$(dirname "$0")/wait_for.sh"
kvactor=$1
dir=$2
mkdir -p "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

fail() {
  echo "cluster_local: FAIL: $*"
  exit 1
}

# Starts a node; sets $node_pid and $node_addr.
start_node() {
  local log=$1
  shift
  "$kvactor" node --listen 127.0.0.1:0 "$@" >"$log" 2>&1 &
  node_pid=$!
  pids+=("$node_pid")
  wait_for 30 in_file 'listening on 127\.0\.0\.1:[0-9]+' "$log" ||
    { cat "$log"; fail "node ($log) did not announce its address within 30 s"; }
  node_addr=$(grep -oE 'listening on 127\.0\.0\.1:[0-9]+' "$log" | awk '{print $3}')
}

# Waits until the run recording into TRACE has finished a step (so it is serving, not starting);
# the trace is written as the driver goes, so a step_done in it is one that happened.
wait_serving() {
  local name=$1 trace=$2 err=$3
  wait_for 60 in_file 'kvactor::step_done' "$trace" ||
    { cat "$err"; fail "$name: the run finished no step within 60 s"; }
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

start_node "$dir/a.log" --cpu-ranks 2
a=$node_addr
start_node "$dir/b.log" --cpu-ranks 2
b=$node_addr
pid_b=$node_pid

# 1. Same workload, same seed: the digest of local mode.
"$kvactor" run --nodes "$a,$b" --tensor-parallel-size 4 --seed 3 --no-progress \
  --summary-json "$dir/cluster.json" >"$dir/cluster.out" 2>"$dir/cluster.err" ||
  { cat "$dir/cluster.err"; fail "the cluster run failed"; }
"$kvactor" run --tensor-parallel-size 4 --seed 3 --no-progress >"$dir/local.out" 2>&1
cluster_digest=$(awk '/^digest/ {print $2}' "$dir/cluster.out")
local_digest=$(awk '/^digest/ {print $2}' "$dir/local.out")
[[ -n $cluster_digest && $cluster_digest == "$local_digest" ]] ||
  fail "digest $cluster_digest on 2 nodes, $local_digest locally"
echo "cluster_local: 2 nodes x 2 CPU ranks: digest $cluster_digest, as local mode"

# 2. Clear errors, exit status 2.
expect_error() {
  local what=$1 pattern=$2
  shift 2
  if "$kvactor" "$@" >"$dir/err.out" 2>"$dir/err.err"; then fail "$what: accepted"; fi
  grep -q -- "$pattern" "$dir/err.err" || { cat "$dir/err.err"; fail "$what: no '$pattern'"; }
  echo "cluster_local: $what: $(tail -1 "$dir/err.err")"
}
start_node "$dir/other.log" --cpu-ranks 2 --debug-build-id 9.9.9+gother
other=$node_addr
expect_error "another build" "build" run --nodes "$other" --tensor-parallel-size 1 --no-progress
expect_error "too few slots" "offer 4 slot" run --nodes "$a,$b" --tensor-parallel-size 6 --no-progress
expect_error "unreachable node" "unreachable" run --nodes 127.0.0.1:1 --no-progress
expect_error "no TLS off loopback" "tls" node --listen 0.0.0.0:0 --cpu-ranks 1
# A setup a rank cannot serve is refused by the driver before it reaches a node (the rank also
# refuses a bad rank_config by name: tests/actors/node_relay_test.cpp), and the nodes serve the
# next driver.
expect_error "a block of no tokens" "--block-size: 0 is outside" \
  run --nodes "$a,$b" --tensor-parallel-size 4 --block-size 0 --requests 2 --no-progress
expect_error "the same node twice" "the same node twice" \
  run --nodes "$a,$a" --tensor-parallel-size 2 --requests 2 --no-progress
"$kvactor" run --nodes "$a,$b" --tensor-parallel-size 4 --seed 3 --no-progress \
  >"$dir/after_bad.out" 2>"$dir/after_bad.err" ||
  { cat "$dir/after_bad.err"; fail "the nodes did not serve the driver after a bad setup"; }
[[ $(awk '/^digest/ {print $2}' "$dir/after_bad.out") == "$cluster_digest" ]] ||
  fail "after a bad setup the nodes served another digest"

# 3. Mutual TLS: a driver with a certificate of the nodes' CA is served (the same digest); one
# without a certificate, or with a certificate of another CA, is refused; off loopback a node
# starts only with TLS.
certs="$dir/certs"
bash "$(dirname "$0")/../../deploy/tls/make-test-certs.sh" "$certs" >"$dir/certs.log" 2>&1 ||
  { cat "$dir/certs.log"; fail "test certificates"; }
node_tls=(--tls-cert "$certs/node.crt" --tls-key "$certs/node.key" --tls-ca "$certs/ca.crt")
start_node "$dir/tls.log" --cpu-ranks 2 "${node_tls[@]}"
tls_node=$node_addr
"$kvactor" run --nodes "$tls_node" --tensor-parallel-size 2 --seed 3 --no-progress   --tls-cert "$certs/driver.crt" --tls-key "$certs/driver.key" --tls-ca "$certs/ca.crt"   >"$dir/tls.out" 2>"$dir/tls.err" || { cat "$dir/tls.err"; fail "TLS run failed"; }
tls_digest=$(awk '/^digest/ {print $2}' "$dir/tls.out")
[[ $tls_digest == "$local_digest" ]] || fail "digest $tls_digest over TLS, $local_digest locally"
! grep -q "steps go through the middleman" "$dir/tls.err" ||
  { cat "$dir/tls.err"; fail "the TLS run's steps did not take the node's step channel"; }
tls_steps=$(grep -oE 'steps on port [0-9]+' "$dir/tls.log" | awk '{print $4}')
[[ -n $tls_steps ]] || fail "the TLS node announced no step channel"
if command -v python3 >/dev/null; then
  python3 "$(dirname "$0")/hostile_peer.py" "$tls_steps" stepburst ||
    fail "the TLS step channel kept a connection without a TLS handshake open"
fi
echo "cluster_local: mutual TLS: served on the step channel, digest $tls_digest"
expect_error "no certificate" "unreachable" run --nodes "$tls_node" --no-progress
expect_error "a certificate of another CA" "refused this driver's certificate" \
  run --nodes "$tls_node" --no-progress --tls-cert "$certs/rogue.crt" \
  --tls-key "$certs/rogue.key" --tls-ca "$certs/ca.crt"
expect_error "half the TLS flags" "go together" node --listen 127.0.0.1:0 --tls-cert "$certs/node.crt"
"$kvactor" node --listen 0.0.0.0:0 --cpu-ranks 1 "${node_tls[@]}" >"$dir/wide.log" 2>&1 &
wide=$!
pids+=("$wide")
wait_for 30 in_file "listening on 0\.0\.0\.0" "$dir/wide.log" ||
  { cat "$dir/wide.log"; fail "the node off loopback did not announce its address within 30 s"; }
grep -q "mutual TLS" "$dir/wide.log" || { cat "$dir/wide.log"; fail "no TLS node off loopback"; }
echo "cluster_local: off loopback with TLS: $(head -1 "$dir/wide.log")"
kill "$wide"

# 4. A node killed mid-run, then a node that stops answering (its link is as good as cut).
fault_run() {
  local name=$1 signal=$2 victim_log=$3
  start_node "$dir/$name-a.log" --cpu-ranks 2
  local fa=$node_addr
  start_node "$victim_log" --cpu-ranks 2
  local victim=$node_pid fb=$node_addr
  # --record: the trace shows when the run has finished its first step (remove the last run's
  # trace first: kvactor creates the file only once it starts, and a stale step must not count).
  rm -f "$dir/$name.kvtrace"
  "$kvactor" run --nodes "$fa,$fb" --tensor-parallel-size 4 --requests 48 --output-len 200:300 \
    --no-progress --log-level info --summary-json "$dir/$name.json" --record "$dir/$name.kvtrace" \
    >"$dir/$name.out" 2>"$dir/$name.err" &
  local run=$!
  pids+=("$run")
  # Strike once the run is serving. 48 requests of 200-300 tokens take hundreds of steps, so the
  # fault lands mid-run however fast the machine is.
  wait_serving "$name" "$dir/$name.kvtrace" "$dir/$name.err"
  local struck
  struck=$(now)
  kill "-$signal" "$victim"
  local status=0
  wait "$run" || status=$?
  local ended
  ended=$(now)
  [[ $status -ne 0 ]] || fail "$name: the run did not report the failure"
  grep -q "unreachable" "$dir/$name.err" || { cat "$dir/$name.err"; fail "$name: not reported"; }
  python3 - "$dir/$name.json" <<'PY' || fail "$name: requests lost"
import json, sys
s = json.load(open(sys.argv[1]))
r = s["requests"]
assert r["finished"] + r["failed"] == 48, r
assert len(s["failures"]) == r["failed"], s["failures"][:2]
assert "unreachable" in s["error"], s["error"]
print(f"cluster_local: {r['finished']} finished + {r['failed']} failed = 48 requests: none lost")
PY
  local took
  took=$(elapsed "$struck" "$ended")
  awk -v t="$took" 'BEGIN { exit !(t < 5.0) }' || fail "$name: took $took s to end the run"
  echo "cluster_local: $name: detected and the run ended $took s after the fault"
  kill -9 "$victim" 2>/dev/null || true
}
fault_run kill9 KILL "$dir/kill9-b.log"
fault_run stopped STOP "$dir/stopped-b.log"

# 5. --restart-policy rebuild: a node killed mid-run comes back at its address; the driver
# rebuilds the group and re-runs what did not finish: the digest of an uninterrupted run.
"$kvactor" run --tensor-parallel-size 4 --requests 16 --output-len 300:400 --seed 7 --no-progress \
  >"$dir/whole.out" 2>&1
whole=$(awk '/^digest/ {print $2}' "$dir/whole.out")
start_node "$dir/re-a.log" --cpu-ranks 2
ra=$node_addr
start_node "$dir/re-b.log" --cpu-ranks 2
rb=$node_addr rb_pid=$node_pid
rm -f "$dir/rebuild.kvtrace" # a stale trace would show a step this run has not made
"$kvactor" run --nodes "$ra,$rb" --tensor-parallel-size 4 --requests 16 --output-len 300:400 \
  --seed 7 --no-progress --restart-policy rebuild --restart-wait 30 --log-level info \
  --record "$dir/rebuild.kvtrace" >"$dir/rebuild.out" 2>"$dir/rebuild.err" &
run=$!
pids+=("$run")
# The loss comes mid-run (16 requests of 300-400 tokens: hundreds of steps), and the node comes
# back only once the old process is gone (its port free) and the driver has reported the loss.
wait_serving rebuild "$dir/rebuild.kvtrace" "$dir/rebuild.err"
kill -9 "$rb_pid"
wait "$rb_pid" 2>/dev/null || true
wait_for 30 in_file "waiting up to 30 s to rebuild the group" "$dir/rebuild.err" ||
  { cat "$dir/rebuild.err"; fail "the driver did not report the lost node within 30 s"; }
"$kvactor" node --listen "$rb" --cpu-ranks 2 >"$dir/re-b2.log" 2>&1 &
pids+=($!)
wait_for 30 in_file "listening on $rb" "$dir/re-b2.log" ||
  { cat "$dir/re-b2.log"; fail "node b did not come back at $rb within 30 s"; }
wait "$run" || { cat "$dir/rebuild.err"; fail "the rebuilt run failed"; }
grep -q "^restarts   1" "$dir/rebuild.out" || { cat "$dir/rebuild.out"; fail "no restart"; }
rebuilt=$(awk '/^digest/ {print $2}' "$dir/rebuild.out")
[[ $rebuilt == "$whole" ]] || fail "digest $rebuilt after a rebuild, $whole uninterrupted"
echo "cluster_local: rebuild: $(grep -o 'group rebuilt in [0-9.]* s; re-running [0-9]* request(s)' "$dir/rebuild.err"); digest $rebuilt as uninterrupted"

# 6. A node stops cleanly on SIGTERM.
kill -TERM "$pid_b"
wait_for 10 gone "$pid_b" || fail "a node ignored SIGTERM (still running 10 s later)"

# 7. --metrics-port: /health answers 200 "ready" once the node listens, /metrics its slots.
http_get() { # HOST PORT PATH: the whole response
  exec 3<>"/dev/tcp/$1/$2"
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$3" "$1" >&3
  cat <&3
  exec 3<&-
}
start_node "$dir/metrics.log" --cpu-ranks 2 --metrics-port 0 --log-level info
pid_m=$node_pid
mport=$(grep -oE 'metrics on http://127\.0\.0\.1:[0-9]+' "$dir/metrics.log" | grep -oE '[0-9]+$')
[[ -n $mport ]] || { cat "$dir/metrics.log"; fail "the node did not log its metrics address"; }
health=$(http_get 127.0.0.1 "$mport" /health)
if ! grep -q '^HTTP/1.[01] 200' <<<"$health" || ! grep -q '^ready' <<<"$health"; then
  fail "/health of a listening node: $health"
fi
metrics=$(http_get 127.0.0.1 "$mport" /metrics)
if ! grep -q '^kvactor:ready 1' <<<"$metrics" ||
  ! grep -q '^kvactor:node_rank_slots{device="cpu"} 2' <<<"$metrics"; then
  fail "/metrics of a listening node: $metrics"
fi
# A run of 2 ranks on it: they start, and stop when the run ends (their down messages come
# after the driver is gone, hence the wait).
metrics_match() { http_get 127.0.0.1 "$mport" /metrics | grep -qE "$1"; }
# The driver of a cluster run serves its own /metrics too.
"$kvactor" run --nodes "$node_addr" --tensor-parallel-size 2 --requests 3 --no-progress \
  --metrics-port 0 --log-level info >"$dir/metrics_run.out" 2>&1 ||
  { cat "$dir/metrics_run.out"; fail "a run on the metrics node"; }
grep -qE 'metrics: http://127\.0\.0\.1:[0-9]+/metrics' "$dir/metrics_run.out" ||
  { cat "$dir/metrics_run.out"; fail "the cluster driver did not serve --metrics-port"; }
metrics_match '^kvactor:node_ranks_started_total 2$' ||
  fail "/metrics did not count the 2 ranks the run started"
wait_for 10 metrics_match '^kvactor:node_ranks_stopped_total 2$' ||
  fail "/metrics did not count the 2 ranks stopping within 10 s"
metrics_match '^kvactor:node_ranks_hosted 0$' || fail "/metrics still shows ranks hosted"
kill -TERM "$pid_m"
wait_for 10 gone "$pid_m" || fail "a node with --metrics-port ignored SIGTERM"
echo "cluster_local: ok"
