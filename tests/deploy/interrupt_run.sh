#!/usr/bin/env bash
# SIGINT and SIGTERM during `kvactor run`: the run stops admitting work, fails every unfinished
# request with the reason, prints its summary and writes --summary-json, and exits 128 + the
# signal (130, 143); nothing is lost (finished + failed = the workload). Under SIGTERM one rank has
# stopped answering (--chaos-stall): the summary does not wait for the step it holds.
# Every step waits on its event (the header line, the process gone), never on a fixed sleep.
#   usage: interrupt_run.sh KVACTOR_BINARY WORKDIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=wait_for.sh
source "$(dirname "$0")/wait_for.sh"
kvactor=$1
dir=$2
mkdir -p "$dir"
fail() {
  echo "interrupt_run: FAIL: $*"
  exit 1
}

interrupt() {
  local sig=$1 code=$2
  shift 2
  rm -f "$dir/$sig".*
  # 40 requests at 2 per second: the run lasts 20 s unless stopped.
  "$kvactor" run --requests 40 --arrival-rate 2 --prompt-len 8:24 --output-len 4:8 \
    --no-progress --summary-json "$dir/$sig.json" "$@" >"$dir/$sig.out" 2>"$dir/$sig.err" &
  local pid=$!
  wait_for 60 in_file '^kvactor run: kvactor-tiny' "$dir/$sig.out" ||
    { kill -9 $pid; cat "$dir/$sig.err"; fail "SIG$sig: no header line within 60 s"; }
  kill -"$sig" $pid
  local got=0
  wait $pid || got=$?
  cat "$dir/$sig.out" "$dir/$sig.err"
  ((got == code)) || fail "SIG$sig: exit $got, not $code"
  grep -qE 'requests +[0-9]+ finished, [1-9][0-9]* failed' "$dir/$sig.out" ||
    fail "SIG$sig: no summary, or no request failed"
  grep -q "failed: interrupted (SIG$sig) before it finished" "$dir/$sig.out" ||
    fail "SIG$sig: the failed requests do not say why"
  grep -q "kvactor run: error: interrupted by SIG$sig" "$dir/$sig.err" ||
    fail "SIG$sig: the error line does not name the signal"
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
r = j["requests"]
assert r["finished"] + r["failed"] == 40, r
assert len(j["outputs"]) == 40, len(j["outputs"])
' "$dir/$sig.json" || fail "SIG$sig: the summary JSON does not hold all 40 requests"
}

interrupt INT 130
interrupt TERM 143 --chaos-stall 0:3 --step-timeout 0
echo "interrupt_run: ok"
