#!/usr/bin/env bash
# bench/device.sh, the device harness, with stand-in suites: every suite name is checked before
# any suite runs; each suite runs with OUT/SUITE and its =ARG; the table names each suite's exit
# status; the harness fails when one suite failed, after running the others.
#   usage: device_harness_test.sh REPO_ROOT
set -uo pipefail
root=${1:?usage: device_harness_test.sh REPO_ROOT}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "device_harness_test: FAIL: $*"
  exit 1
}
mkdir -p "$dir/bench/device"
cp "$root/bench/device.sh" "$dir/bench/"
printf '%s\n' '#!/usr/bin/env bash' 'mkdir -p "$1"; echo "passes ${2:-}" >"$1/ran"' \
  >"$dir/bench/device/passes.sh"
printf '%s\n' '#!/usr/bin/env bash' 'mkdir -p "$1"; echo ran >"$1/ran"; exit 3' \
  >"$dir/bench/device/fails.sh"
cd "$dir" || exit 1

out=$(bash bench/device.sh "$dir/o1" passes nosuch 2>&1)
[ $? = 2 ] || fail "an unknown suite must exit 2"
grep -q "no suite 'nosuch'" <<<"$out" || fail "the unknown suite is not named: $out"
grep -q "suites: fails passes" <<<"$out" || fail "the suites are not listed: $out"
[ ! -e "$dir/o1/passes/ran" ] || fail "a suite ran although another name was unknown"

out=$(bash bench/device.sh "$dir/o2" fails 'passes=A.*:B' 2>&1)
[ $? = 1 ] || fail "a failed suite must fail the harness"
[ "$(cat "$dir/o2/passes/ran")" = "passes A.*:B" ] || fail "the suite did not get its argument"
[ -e "$dir/o2/fails/ran" ] || fail "the failing suite did not run"
grep -qE "^fails +exit 3 " <<<"$out" || fail "the table misses the failure: $out"
grep -qE "^passes +exit 0 " <<<"$out" || fail "the table misses the pass: $out"

bash bench/device.sh "$dir/o3" passes >/dev/null 2>&1 || fail "a passing suite must pass"
echo "device_harness_test: ok"
