#!/usr/bin/env bash
# Hostile peers against real processes: a `kvactor node` (its middleman port and its step channel)
# and a run's --inject-port take every crafted frame (the ones that crash CAF 0.17 unguarded, and
# malformed step frames), garbage and oversized frames, from a
# stranger (refused at the cookie greeting) and from a peer that holds the cookie (refused by the
# frame guard), a malformed caf::config_value from a peer past the BASP handshake (refused by the
# guard's payload check; unguarded, CAF 0.17 terminates on it), half-open connections and a
# standing flood of connections, and still serve the
# legitimate driver and injector; an injected message above the run's --max-message-bytes is
# refused with a clear error.
# Usage: hostile_peers.sh KVACTOR_BINARY WORKDIR. Exits 77 (skipped) without python3.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=wait_for.sh
source "$(dirname "$0")/wait_for.sh"
kvactor=$1
dir=$2
peer="$(dirname "$0")/hostile_peer.py"
command -v python3 >/dev/null || {
  echo "hostile_peers: python3 is missing: skipped"
  exit 77
}
mkdir -p "$dir"
rm -f "$dir"/*.out "$dir"/*.err "$dir"/*.log "$dir/cookie"
# The kvactor processes of this test share a cookie of their own (created on first use).
export KVACTOR_COOKIE_FILE="$dir/cookie"
pids=()
stop_all() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap stop_all EXIT
fail() {
  echo "hostile_peers: FAIL: $*"
  exit 1
}
port_in() { grep -oE '127\.0\.0\.1:[0-9]+' "$1" | head -1 | cut -d: -f2; }

# 1. A node under attack serves a cluster run.
"$kvactor" node --listen 127.0.0.1:0 --cpu-ranks 2 >"$dir/node.out" 2>"$dir/node.err" &
node=$!
pids+=("$node")
wait_for 30 in_file 'listening on 127\.0\.0\.1:[0-9]+' "$dir/node.out" || fail "no node came up"
node_port=$(port_in "$dir/node.out")
python3 "$peer" "$node_port" burst || fail "the node kept a stranger's connection open"
python3 "$peer" "$node_port" burst "$KVACTOR_COOKIE_FILE" ||
  fail "the node kept a hostile connection open behind a valid cookie proof"
python3 "$peer" "$node_port" typed "$KVACTOR_COOKIE_FILE" ||
  fail "the node did not cut a malformed config_value from a peer past the handshake"
step_port=$(grep -oE 'steps on port [0-9]+' "$dir/node.out" | awk '{print $4}')
[[ -n $step_port ]] || fail "the node announced no step channel"
python3 "$peer" "$step_port" stepburst || fail "the step channel kept a stranger's connection open"
python3 "$peer" "$step_port" stepburst "$KVACTOR_COOKIE_FILE" ||
  fail "the step channel kept a hostile connection open behind a valid cookie proof"
python3 "$peer" "$node_port" flood 200 >"$dir/flood_node.out" &
pids+=($!)
python3 "$peer" "$step_port" flood 200 >"$dir/flood_steps.out" &
pids+=($!)
wait_for 90 in_file flooding "$dir/flood_node.out" || fail "the flood did not start"
wait_for 90 in_file flooding "$dir/flood_steps.out" || fail "the step channel's flood did not start"
"$kvactor" run --nodes "127.0.0.1:$node_port" --tensor-parallel-size 2 --requests 6 \
  --no-progress >"$dir/cluster.out" 2>"$dir/cluster.err" ||
  { cat "$dir/cluster.err"; fail "the cluster run failed under the flood"; }
grep -q "requests   6 finished, 0 failed" "$dir/cluster.out" || fail "not 6 requests finished"
kill -0 "$node" || fail "the node died"
grep -q "larger than the bound of 67108864 bytes" "$dir/node.err" ||
  fail "the node did not say why it refused the oversized frame"
grep -q "a message carries a @config_value, a type kvactor never sends" "$dir/node.err" ||
  fail "the node did not say why it refused the config_value"
grep -q "step channel: closed a connection: step channel: a frame of 73400320 bytes" "$dir/node.err" ||
  fail "the node did not say why it refused the oversized step frame"
echo "hostile_peers: node survived $(grep -c 'transport: ' "$dir/node.err") logged refusals and cuts, served the driver"

# 2. A run's injection port under attack takes a legitimate injection; an oversized one is refused.
# 60 arrivals at 1 per second keep the run open for a minute: room for the attacks when the rest of
# the suite loads the machine (15 s was once not enough: the run had ended before the injection).
"$kvactor" run --inject-port 0 --requests 60 --arrival-rate 1 --prompt-len 8:24 --output-len 4:8 \
  --max-message-bytes 64KiB --no-progress >"$dir/run.out" 2>"$dir/run.err" &
run=$!
pids+=("$run")
wait_for 60 in_file 'injection listens on 127\.0\.0\.1:[0-9]+' "$dir/run.err" ||
  fail "no injection port announced"
inject_port=$(port_in "$dir/run.err")
python3 "$peer" "$inject_port" burst || fail "the run kept a stranger's connection open"
python3 "$peer" "$inject_port" burst "$KVACTOR_COOKIE_FILE" ||
  fail "the run kept a hostile connection open behind a valid cookie proof"
python3 "$peer" "$inject_port" typed "$KVACTOR_COOKIE_FILE" ||
  fail "the run did not cut a malformed config_value from a peer past the handshake"
grep -q "a message carries a @config_value, a type kvactor never sends" "$dir/run.err" ||
  fail "the run did not say why it refused the config_value"
python3 "$peer" "$inject_port" flood 100 >"$dir/flood_run.out" &
pids+=($!)
wait_for 90 in_file flooding "$dir/flood_run.out" || fail "the flood did not start"
echo '{"type": "kvactor::request_spec", "payload": [4242, [5, 6, 7, 8], 3, 0, [0.0, 0, 1.0, 0, [], -1]]}' >"$dir/req.json"
"$kvactor" inject --to "127.0.0.1:$inject_port" --message "$dir/req.json" >"$dir/inject.out" 2>&1 ||
  { cat "$dir/inject.out"; fail "a legitimate injection failed under the flood"; }
grep -q "driver accepted request 4242" "$dir/inject.out" || fail "the driver did not accept it"
python3 -c "import json; print(json.dumps({'type': 'kvactor::request_spec', \
  'payload': [4343, list(range(100000, 120000)), 3, 0, [0.0, 0, 1.0, 0, [], -1]]}))" >"$dir/big.json"
if "$kvactor" inject --to "127.0.0.1:$inject_port" --message "$dir/big.json" 2>"$dir/big.err"; then
  fail "a message above --max-message-bytes was delivered"
fi
cat "$dir/big.err"
grep -q "larger than its --max-message-bytes" "$dir/big.err" || fail "the injector was not told why"
wait "$run" || { cat "$dir/run.err"; fail "the run failed"; }
grep -q "requests   61 finished, 0 failed" "$dir/run.out" ||
  { cat "$dir/run.out"; fail "not 61 requests finished (60 and the injected one)"; }
grep -qE "after [1-9][0-9]* good frame\(s\): direct_message frame refused: payload_len [0-9]+ bytes is larger than the bound of 65536 bytes" "$dir/run.err" ||
  fail "the run did not say why it refused the injector's oversized message"
echo "hostile_peers: ok"
