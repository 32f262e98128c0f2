#!/usr/bin/env bash
# Work that outlasts one device command (the 10-minute GPU soak; a command may run 600 s): start
# it detached in one call, then look at it from later calls issued while the machine is still
# held (each call is answered within seconds, so the gaps stay under the machine's idle release).
#   bash bench/detached.sh start DIR -- COMMAND [ARGS...]   # returns at once
#   bash bench/detached.sh status DIR [OUT]                 # running or finished, the log's tail;
#                                                           # once finished, DIR is copied to OUT
#   bash bench/detached.sh wait SECONDS DIR [OUT]           # status once finished, or after
#                                                           # SECONDS (a call's share of its 600 s)
# DIR (outside the repository copy, e.g. /tmp/soak) receives pid, log and, when the command ends,
# exit (its status). status exits 0 when finished, 3 while running, 4 when the process is gone
# without having written its status (killed with the call that started it, or the machine is a
# fresh one).
set -uo pipefail

usage() {
  echo "usage: $0 start DIR -- COMMAND [ARGS...] | status DIR [OUT] | wait SECONDS DIR [OUT]" >&2
  exit 2
}

start() {
  local dir=$1
  shift
  [ "${1:-}" = -- ] || usage
  shift
  [ $# -ge 1 ] || usage
  if [ -f "$dir/pid" ] && [ ! -f "$dir/exit" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    echo "$0: $dir already runs pid $(cat "$dir/pid")" >&2
    exit 2
  fi
  mkdir -p "$dir"
  rm -f "$dir/exit"
  # A session of its own, so that the end of the starting call's process group spares it; the
  # exit status is written last, so that a status call never sees a half-written result.
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid nohup bash -c '"$@" >"$0/log" 2>&1; echo $? >"$0/exit.tmp" && mv "$0/exit.tmp" "$0/exit"' \
    "$dir" "$@" </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/pid"
  echo "started pid $(cat "$dir/pid"): $*"
}

status() {
  local dir=$1 out=${2:-}
  [ -f "$dir/pid" ] || {
    echo "$0: nothing was started in $dir" >&2
    exit 4
  }
  if [ -f "$dir/exit" ]; then
    echo "finished with status $(cat "$dir/exit")"
    tail -n 20 "$dir/log"
    if [ -n "$out" ]; then mkdir -p "$out" && cp -r "$dir/." "$out/"; fi
    exit 0
  fi
  if kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    echo "running (pid $(cat "$dir/pid")), log of $(wc -l <"$dir/log" 2>/dev/null || echo 0) lines"
    tail -n 5 "$dir/log" 2>/dev/null
    exit 3
  fi
  echo "gone: pid $(cat "$dir/pid") ended without writing its status"
  tail -n 20 "$dir/log" 2>/dev/null
  exit 4
}

# status DIR [OUT] once the command has finished or gone, or after $1 seconds, whichever is first.
wait_then_status() {
  local seconds=$1 dir=$2 t0=$SECONDS
  [[ $seconds =~ ^(0|[1-9][0-9]*)$ ]] || usage
  while ((SECONDS - t0 < seconds)) && [ ! -f "$dir/exit" ] && [ -f "$dir/pid" ] &&
    kill -0 "$(cat "$dir/pid")" 2>/dev/null; do
    sleep 1
  done
  shift
  status "$@"
}

case ${1:-} in
start)
  [ $# -ge 2 ] || usage
  shift
  start "$@"
  ;;
status)
  [ $# -ge 2 ] || usage
  shift
  status "$@"
  ;;
wait)
  [ $# -ge 3 ] || usage
  shift
  wait_then_status "$@"
  ;;
*) usage ;;
esac
