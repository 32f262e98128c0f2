#!/usr/bin/env bash
# Live injection into a running kvactor process: a request injected into the driver is served
# with the workload; a stale step injected into a rank is refused with a clear error; the run
# ends normally. Usage: inject_live.sh KVACTOR_BINARY WORKDIR
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
echo '{"type": "kvactor::request_spec", "payload": [4242, [5, 6, 7, 8], 3, 0, [0.0, 0, 1.0, 0, []]]}' >"$dir/req.json"
"$kvactor" inject --to "$port" --message "$dir/req.json" >"$dir/inject.out" 2>&1 ||
  { cat "$dir/inject.out"; fail "injecting a request failed $late"; }
cat "$dir/inject.out"
grep -q "driver accepted request 4242" "$dir/inject.out" || fail "the driver did not accept it"
echo '{"type": "kvactor::step_plan", "payload": [0, 0, [], [], [], [], 1]}' >"$dir/stale.json"
if "$kvactor" inject --to "$port" --message "$dir/stale.json" --actor 'rank[0]' 2>"$dir/stale.err"; then
  fail "a stale step was accepted"
fi
cat "$dir/stale.err"
grep -q "epoch" "$dir/stale.err" || fail "the stale step was refused without naming its epoch $late"
wait $pid || { cat "$dir/run.err"; fail "the run failed"; }
trap - EXIT
cat "$dir/run.out"
grep -q "requests   41 finished, 0 failed" "$dir/run.out" ||
  fail "not 41 requests finished (the workload's 40 and the injected one)"
"$kvactor" trace show "$dir/live.kvtrace" >"$dir/show.txt"
grep -q "inject -> driver" "$dir/show.txt" || fail "the trace does not show the injection"
echo "live injection: ok"
