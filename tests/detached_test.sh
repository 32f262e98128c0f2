#!/usr/bin/env bash
# bench/detached.sh, which the device runs use for work longer than one command: a finished
# command's status, log and copy; a second start refused while the first runs; a process killed
# without writing its status reported gone; wait returning when the command ends, or after its
# seconds while it runs.
#   usage: tests/detached_test.sh SOURCE_DIR
set -uo pipefail
root=${1:?usage: detached_test.sh SOURCE_DIR}
# shellcheck source=tests/deploy/wait_for.sh
source "$root/tests/deploy/wait_for.sh"
detached="$root/bench/detached.sh"
dir=$(mktemp -d)
# The started commands run in sessions of their own: whatever is left of them goes with the test.
cleanup() {
  local d
  for d in b d; do
    [ -f "$dir/$d/pid" ] && pkill -9 -s "$(cat "$dir/$d/pid")" 2>/dev/null
  done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "detached_test: $*"
  exit 1
}

bash "$detached" start "$dir/a" -- bash -c 'echo from the command; exit 7' >/dev/null ||
  fail "start refused"
wait_for 20 test -f "$dir/a/exit" || fail "the command's status never came"
out=$(bash "$detached" status "$dir/a" "$dir/copy") || fail "status of a finished command did not exit 0"
grep -q "finished with status 7" <<<"$out" || fail "status says: $out"
grep -q "from the command" "$dir/copy/log" || fail "the log was not copied to OUT"

bash "$detached" start "$dir/b" -- sleep 60 >/dev/null || fail "second directory refused"
rc=0
bash "$detached" status "$dir/b" >/dev/null || rc=$?
[ $rc -eq 3 ] || fail "a running command's status exited $rc, not 3"
bash "$detached" start "$dir/b" -- sleep 60 2>/dev/null && fail "a second start while running"
pid=$(cat "$dir/b/pid")
kill -9 "$pid"
wait_for 20 gone "$pid" || fail "pid $pid survived kill -9"
rc=0
out=$(bash "$detached" status "$dir/b") || rc=$?
[ $rc -eq 4 ] || fail "a killed command's status exited $rc, not 4: $out"
grep -q "^gone" <<<"$out" || fail "status says: $out"

# wait: returns as soon as the command ends (well before its SECONDS), with its status; or after
# SECONDS while it still runs.
bash "$detached" start "$dir/c" -- bash -c 'sleep 1; echo done waiting' >/dev/null
t0=$SECONDS
out=$(bash "$detached" wait 60 "$dir/c" "$dir/copy_c") || fail "wait on a finished command: $out"
((SECONDS - t0 < 30)) || fail "wait did not return when the command ended"
grep -q "finished with status 0" <<<"$out" || fail "wait says: $out"
grep -q "done waiting" "$dir/copy_c/log" || fail "wait did not copy the log to OUT"
bash "$detached" start "$dir/d" -- sleep 60 >/dev/null
rc=0
bash "$detached" wait 2 "$dir/d" >/dev/null || rc=$?
[ $rc -eq 3 ] || fail "wait on a command still running exited $rc, not 3"
for bad in soon 08; do
  bash "$detached" wait "$bad" "$dir/d" 2>/dev/null && fail "wait took $bad seconds"
done
echo "detached_test: ok"
