# shellcheck shell=bash
# Waiting on an event instead of sleeping, for the deploy test scripts (sourced, not run).
#
# wait_for SECONDS COMMAND...: runs COMMAND until it succeeds (every 50 ms) and returns 0 then;
# returns 1 once SECONDS have passed without it, so that the caller fails with a message naming
# the event that never came. The bound is wall time, not a count of tries: a loaded machine gets
# the same time, and a fast one never waits longer than the event takes. A sanitizer build
# (tests/sanitize.sh) sets KVACTOR_TEST_SLOWDOWN, the factor by which it runs slower.
wait_for() {
  local limit=$(($1 * ${KVACTOR_TEST_SLOWDOWN:-1}))
  shift
  local deadline
  deadline=$(($(date +%s%N) + limit * 1000000000))
  until "$@"; do
    (($(date +%s%N) < deadline)) || return 1
    sleep 0.05
  done
}

# in_file PATTERN FILE: FILE exists and has a line matching the extended regex PATTERN (also
# in binary files such as a trace being written).
in_file() {
  [[ -f $2 ]] && grep -aqE -- "$1" "$2"
}

# gone PID: the process has exited (or never existed).
gone() {
  ! kill -0 "$1" 2>/dev/null
}

# served_url ERR_LOG: waits for `kvactor serve` (its stderr in ERR_LOG) to say where it listens,
# and prints that URL; fails after 120 s.
served_url() {
  wait_for 120 in_file "listening on http://" "$1" || return 1
  grep -oE 'http://127\.0\.0\.1:[0-9]+' "$1" | head -n 1
}
