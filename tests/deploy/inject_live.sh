#!/usr/bin/env bash
# Live injection into a running kvactor process: a request injected into the driver is served
# with the workload, and with --wait the injector prints what it produced; a request the run would
# refuse (a token outside the vocabulary, an empty prompt) is refused by name; a stale step
# injected into a rank is refused with a clear error; the run ends normally; --timeout bounds an
# injection into a listener that never answers. Usage: inject_live.sh KVACTOR_BINARY WORKDIR
#
# The one timing this test depends on: both injections must reach the process before its run
# ends, and kvactor has no way to hold a run open. The workload's arrivals do it: at 2 requests
# per second the last of the 40 arrives about 20 s into the run (the default seed fixes the
# schedule), and the run cannot end before serving it; on a 2-core VM busy with a build the two
# injections landed 0.35 s and 0.49 s after the process started, but a CI run beside other heavy
# work once took longer than the 3.85 s that 12 requests gave. Every other step waits on its
# event.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=wait_for.sh
source "$(dirname "$0")/wait_for.sh"
kvactor=$1
dir=$2
mkdir -p "$dir"
rm -f "$dir"/run.out "$dir"/run.err
fail() {
  echo "inject_live: FAIL: $*"
  exit 1
}
"$kvactor" run --inject-port 0 --requests 40 --arrival-rate 2 --prompt-len 8:24 --output-len 4:8 \
  --no-progress --record "$dir/live.kvtrace" >"$dir/run.out" 2>"$dir/run.err" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
late="(had the run ended? see the timing note at the top of inject_live.sh)"
wait_for 60 in_file 'injection listens on 127\.0\.0\.1:[0-9]+' "$dir/run.err" ||
  { cat "$dir/run.err"; fail "no injection port announced within 60 s"; }
port=$(grep -oE '127\.0\.0\.1:[0-9]+' "$dir/run.err" | head -1)
echo '{"type": "kvactor::request_spec", "payload": [4242, [5, 6, 7, 8], 3, 0, [0.0, 0, 1.0, 0, [], -1]]}' >"$dir/req.json"
"$kvactor" inject --to "$port" --message "$dir/req.json" >"$dir/inject.out" 2>&1 ||
  { cat "$dir/inject.out"; fail "injecting a request failed $late"; }
cat "$dir/inject.out"
grep -q "driver accepted request 4242" "$dir/inject.out" || fail "the driver did not accept it"
# --wait: a second request, and what it produced once it finished.
echo '{"type": "kvactor::request_spec", "payload": [4343, [9, 10, 11], 5, 0, [0.0, 0, 1.0, 0, [], -1]]}' >"$dir/wait.json"
"$kvactor" inject --to "$port" --message "$dir/wait.json" --wait --timeout 60 --json \
  >"$dir/wait.out" 2>"$dir/wait.err" || { cat "$dir/wait.err"; fail "inject --wait failed $late"; }
python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
r = j["result"]
assert r["type"] == "kvactor::request_result", r
assert r["payload"][0] == 4343 and r["payload"][1] is True, r
assert len(r["payload"][2]) == 5, "5 output tokens: %r" % r
' "$dir/wait.out" || { cat "$dir/wait.out"; fail "inject --wait did not print the request's 5 tokens"; }
# What the run would refuse is refused to the injector, by name, never "accepted".
echo '{"type": "kvactor::request_spec", "payload": [4444, [5, 99999], 3, 0, [0.0, 0, 1.0, 0, [], -1]]}' >"$dir/oov.json"
echo '{"type": "kvactor::request_spec", "payload": [4445, [], 3, 0, [0.0, 0, 1.0, 0, [], -1]]}' >"$dir/empty.json"
for bad in oov:"prompt\[1\] = 99999 is outside the model's vocabulary" empty:"prompt is empty"; do
  name=${bad%%:*}
  if "$kvactor" inject --to "$port" --message "$dir/$name.json" 2>"$dir/$name.err"; then
    fail "the $name request was accepted"
  fi
  grep -qE "submit: request 444[45]: ${bad#*:}" "$dir/$name.err" ||
    { cat "$dir/$name.err"; fail "the $name request was refused without its reason"; }
done
echo '{"type": "kvactor::step_plan", "payload": [0, 0, [], [], [], [], 1]}' >"$dir/stale.json"
if "$kvactor" inject --to "$port" --message "$dir/stale.json" --actor 'rank[0]' 2>"$dir/stale.err"; then
  fail "a stale step was accepted"
fi
cat "$dir/stale.err"
grep -q "epoch" "$dir/stale.err" || fail "the stale step was refused without naming its epoch $late"
wait $pid || { cat "$dir/run.err"; fail "the run failed"; }
trap - EXIT
cat "$dir/run.out"
grep -q "requests   42 finished, 0 failed" "$dir/run.out" ||
  fail "not 42 requests finished (the workload's 40 and the two injected)"
# --timeout bounds the whole exchange, the handshake with a listener that never answers included.
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
time.sleep(120)
' >"$dir/silent.port" &
silent=$!
trap 'kill $silent 2>/dev/null || true' EXIT
wait_for 10 test -s "$dir/silent.port" || fail "the silent listener did not start"
start=$(date +%s%N)
if "$kvactor" inject --to "127.0.0.1:$(cat "$dir/silent.port")" --message "$dir/req.json" \
  --timeout 2 2>"$dir/silent.err"; then
  fail "an injection into a silent listener succeeded"
fi
took=$((($(date +%s%N) - start) / 1000000))
cat "$dir/silent.err"
((took < 2000 + 2000 * ${KVACTOR_TEST_SLOWDOWN:-1})) ||
  fail "inject --timeout 2 took ${took} ms against a silent listener"
kill $silent 2>/dev/null || true
"$kvactor" trace show "$dir/live.kvtrace" >"$dir/show.txt"
grep -q "inject -> driver" "$dir/show.txt" || fail "the trace does not show the injection"
echo "live injection: ok"
