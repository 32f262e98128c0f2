#!/usr/bin/env bash
# bench/device/sanitize.sh's per-test mode, with a stand-in for compute-sanitizer and for the
# GPU test binary (the real ones need a GPU): a verdict per kind of ending (clean, no CUDA call,
# skipped, failed with the tool clean, reports, the tool's own error only, crashed, stopped at the
# limit), the tally, the kernel filter and the extra options passed to the tool, never more than
# SHARDS tests at once, the tests that must run alone run after every other test has ended and one
# at a time, a second call with KVACTOR_SANITIZE_RESUME=1 runs nothing the first judged, and a third
# with a larger limit only the test stopped at the smaller one, a spent budget starts nothing,
# windows of launches (KVACTOR_SANITIZE_WINDOWS) each get their own process and make one verdict,
# each verdict but a stopped one gives the peak host memory and a crash the OOM kill logged during
# it (not one from before), a limit that is not whole seconds and a tool that takes no kernel filter
# are refused before any test.
#   usage: tests/sanitize_device_run_test.sh SOURCE_DIR
set -uo pipefail
root=${1:?usage: sanitize_device_run_test.sh SOURCE_DIR}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "sanitize_device_run_test: $*"
  exit 1
}
mkdir -p "$dir/repo/bench/device" "$dir/repo/.devpack" "$dir/repo/deploy"
cp "$root/bench/device/sanitize.sh" "$root/bench/device/prelude.sh" "$dir/repo/bench/device/"

# The test binary: seven tests, one per way a test can end. Each logs its start and its end
# (one-line appends: in the order they happened), so that the order and the number of tests
# running at once can be checked.
cat >"$dir/repo/.devpack/run.sh" <<'EOF'
#!/usr/bin/env bash
shift # the binary's name
case "$*" in
*--gtest_list_tests*A.clean:A.slow*) printf 'A.\n  clean\n  slow\n'; exit 0 ;;
*--gtest_list_tests*A.clean:A.races*) printf 'A.\n  clean\n  races\n  mixed\n'; exit 0 ;;
*--gtest_list_tests*=A.crashes) printf 'A.\n  crashes\n'; exit 0 ;;
*--gtest_list_tests*=A.untracked:A.both:A.leaks) printf 'A.\n  untracked\n  both\n  leaks\n'
  exit 0 ;;
*--gtest_list_tests*)
  printf 'A.\n  clean\n  host_only\n  skips\n  fails\n  races\n  crashes\n  slow\n'; exit 0 ;;
esac
name=${*##*=}
echo "start $name" >>"${EVENTS:?}"
[ "$name" = A.slow ] && exec sleep 30
# Under windows (WINDOW_SKIP, from the tool): A.races races in window 1 only; A.mixed outlasts
# the limit in window 0, races in window 2 and is clean in window 1.
if [ -n "${WINDOW_SKIP:-}" ]; then
  case $name:$WINDOW_SKIP in
  A.races:100 | A.mixed:200) name=A.races ;;
  A.mixed:0) exec sleep 30 ;;
  *) name=A.clean ;;
  esac
fi
sleep 0.3
echo "end $name" >>"$EVENTS"
case $name in
A.clean) echo "[  PASSED  ] 1 test."; echo "========= ERROR SUMMARY: 0 errors" ;;
A.host_only) echo "[  PASSED  ] 1 test."
  echo "========= Error: Target application terminated before first instrumented API call"
  exit 255 ;;
A.skips) echo "[  SKIPPED ] A.skips"; echo "========= ERROR SUMMARY: 0 errors" ;;
A.fails) echo "[  FAILED  ] A.fails"; echo "========= ERROR SUMMARY: 0 errors"; exit 1 ;;
A.races) echo "[  PASSED  ] 1 test."; echo "========= ERROR SUMMARY: 2 errors"; exit 3 ;;
A.untracked | A.both) # the tool loses a launch; A.both also races
  echo "========= Internal Sanitizer Error: Detected a failure to track a kernel launch."
  [ $name = A.both ] && echo "========= Error: Race reported between Write access at f+0x10"
  echo "[  PASSED  ] 1 test."
  errors=1
  [ $name = A.both ] && errors=2
  echo "========= RACECHECK SUMMARY: $errors hazards displayed ($errors errors, 0 warnings)"
  exit 3 ;;
A.leaks) # memcheck: the tool loses a launch, and the program writes out of bounds and leaks
  echo "========= Internal Sanitizer Error: Detected a failure to track a kernel launch."
  echo "========= Invalid __global__ write of size 4 bytes"
  echo "[  PASSED  ] 1 test."
  echo "========= LEAK SUMMARY: 1 bytes leaked in 1 allocations"
  echo "========= ERROR SUMMARY: 2 errors"
  exit 3 ;;
A.crashes) # killed, and the kernel logs it unless NO_OOM is set
  [ -n "${NO_OOM:-}" ] ||
    echo "[ 9.1] Out of memory: Killed process 4242 (kvactor_gpu_te)" >>"${KMSG:?}"
  echo "========= Internal Sanitizer Error: a hardware exception"; exit 139 ;;
esac
EOF
# compute-sanitizer: takes --kernel-name unless NO_FILTER is set; records its arguments.
cat >"$dir/tool.sh" <<'EOF'
#!/usr/bin/env bash
if [ "$1" = --help ]; then [ -n "${NO_FILTER:-}" ] || echo "  --kernel-name arg   filter"; exit 0; fi
echo "$*" >>"${TOOL_LOG:?}"
while [ $# -gt 0 ]; do
  [ "$1" = --launch-skip ] && export WINDOW_SKIP=$2
  case $1 in
  --tool | --print-limit | --error-exitcode | --kernel-name | --leak-check | --racecheck-report | \
    --launch-skip | --launch-count)
    shift 2 ;;
  *) break ;; esac
done
exec "$@"
EOF
# The kernel's log (dmesg), holding an OOM kill from before the tests; and GNU time, which
# reports 3 GiB for every process.
mkdir -p "$dir/bin"
export KMSG=$dir/kmsg
echo "[ 1.0] Out of memory: Killed process 1111 (an earlier one)" >"$KMSG"
# shellcheck disable=SC2016 # $KMSG is for the stand-in dmesg to read when it runs
printf '#!/bin/sh\ncat "$KMSG"\n' >"$dir/bin/dmesg"
cat >"$dir/bin/gnutime" <<'EOF'
#!/usr/bin/env bash
[ "$1" = -f ] && [ "$3" = -o ] || exit 64
file=$4
shift 4
"$@"
rc=$?
echo "peak RSS 3145728 kB" >"$file"
exit $rc
EOF
chmod +x "$dir/tool.sh" "$dir/repo/.devpack/run.sh" "$dir/bin/dmesg" "$dir/bin/gnutime"
export KVACTOR_SANITIZE_TIME=$dir/bin/gnutime
export KVACTOR_SANITIZER=$dir/tool.sh TOOL_LOG=$dir/tool.log EVENTS=$dir/events.log
export KVACTOR_SANITIZE_PER_TEST=1 KVACTOR_SANITIZE_TOOLS=racecheck KVACTOR_SANITIZE_SHARDS=3
cd "$dir/repo" || fail "no copy"
events() { cat "$dir/events.log"; }

# The first call: the slow test stops at the limit.
out=$(PATH="$dir/bin:$PATH" KVACTOR_SANITIZE_KERNELS=kvactor KVACTOR_SANITIZE_LIMIT=2 \
  KVACTOR_SANITIZE_RESUME=1 \
  KVACTOR_SANITIZE_OPTIONS="--racecheck-report hazard" KVACTOR_SANITIZE_ALONE='A.clean:A.slow' \
  bash bench/device/sanitize.sh "$dir/out" 'A.*')
for want in "A.clean: clean" "A.host_only: no CUDA call" "A.skips: skipped by the test" \
  "A.fails: test failed (the tool: ERROR SUMMARY: 0 errors)" "A.races: reports (exit 3)" \
  "A.crashes: crashed (exit 139): ========= Internal Sanitizer Error: a hardware exception; an \
OOM kill during the test (its own or another's): [ 9.1] Out of memory: Killed process 4242" \
  "A.slow: stopped at the limit of 2 s" \
  "racecheck: 1 clean, 1 without a CUDA call, 1 skipped, 1 failed, 1 stopped at the limit, 1 with reports, 1 crashed"; do
  grep -qF "$want" <<<"$out" || fail "no \"$want\" in: $out"
done
grep -q -- "--kernel-name kns=kvactor" "$dir/tool.log" || fail "the tool never got the kernel filter"
# Each test's peak host memory; the OOM kill in the crashed test's verdict only, and not the one
# logged before the tests.
[ "$(grep -cE ' s, peak RSS 3\.0 GiB\)' <<<"$out")" -eq 6 ] ||
  fail "not every verdict gives the peak RSS: $out"
# but the one stopped at the limit: its test process was never reaped, so nothing measured it.
grep -E "A\.slow: stopped at the limit of 2 s \([0-9]+ s\)" <<<"$out" >/dev/null ||
  fail "the stopped test's verdict gives a memory figure: $out"
[ "$(grep -c "OOM kill" <<<"$out")" -eq 1 ] || fail "OOM notes on other verdicts: $out"
! grep -q "an earlier one" <<<"$out" || fail "an OOM kill from before the test was reported: $out"
[ "$(grep -c -- "--racecheck-report hazard --print-limit" "$dir/tool.log")" -eq 7 ] ||
  fail "not every test's tool got KVACTOR_SANITIZE_OPTIONS: $(cat "$dir/tool.log")"
[ "$(grep -c '^start' "$dir/events.log")" -eq 7 ] || fail "not every test ran: $(events)"
awk '/^start/ { n++; if (n > max) max = n } /^end/ { n-- } END { exit max > 3 }' \
  "$dir/events.log" || fail "more than 3 tests ran at once: $(events)"
# A.clean starts once the five others have ended; A.slow once A.clean has.
awk '/^end/ { ended++ } /^start A.clean/ && ended < 5 { exit 1 }
     /^start A.slow/ && ended < 6 { exit 1 }' "$dir/events.log" ||
  fail "the tests to run alone did not run last, one at a time: $(events)"

# The second call resumes with the same limit: every test has its verdict, so the tool runs none
# again.
: >"$dir/tool.log"
out=$(KVACTOR_SANITIZE_LIMIT=2 KVACTOR_SANITIZE_RESUME=1 bash bench/device/sanitize.sh \
  "$dir/out" 'A.*')
[ "$(grep -c "\[earlier run\]" <<<"$out")" -eq 7 ] || fail "the second call did not resume: $out"
[ ! -s "$dir/tool.log" ] || fail "the second call ran tests again: $(cat "$dir/tool.log")"
# A third with a larger limit runs again the one test stopped at the smaller, and only that one.
out=$(KVACTOR_SANITIZE_LIMIT=3 KVACTOR_SANITIZE_RESUME=1 bash bench/device/sanitize.sh \
  "$dir/out" 'A.*')
[ "$(grep -c "\[earlier run\]" <<<"$out")" -eq 6 ] || fail "the third call did not resume: $out"
grep -qF "A.slow: stopped at the limit of 3 s" <<<"$out" ||
  fail "the test stopped at 2 s was not run again with 3 s: $out"
[ "$(wc -l <"$dir/tool.log")" -eq 1 ] || fail "the third call ran more: $(cat "$dir/tool.log")"

# A process that dies with no OOM kill logged meanwhile gets no OOM note.
out=$(PATH="$dir/bin:$PATH" NO_OOM=1 bash bench/device/sanitize.sh "$dir/out7" 'A.crashes')
grep -qF "A.crashes: crashed (exit 139): ========= Internal Sanitizer Error: a hardware exception (" \
  <<<"$out" || fail "a crash without an OOM kill got a note: $out"

# A run whose only error is the tool's own (it lost track of a launch) is told apart from one
# that also reports on the program, a race, or an invalid write beside a leak summary.
out=$(bash bench/device/sanitize.sh "$dir/out9" 'A.untracked:A.both:A.leaks')
for want in "A.untracked: the tool's own error, no report on the program (exit 3): Internal \
Sanitizer Error: Detected a failure to track a kernel launch." \
  "A.both: reports (exit 3): ========= RACECHECK SUMMARY: 2 hazards" \
  "A.leaks: reports (exit 3): ========= ERROR SUMMARY: 2 errors" \
  "racecheck: 2 with reports, 1 with the tool's own error only"; do
  grep -qF "$want" <<<"$out" || fail "no \"$want\" in: $out"
done

# A budget already spent starts nothing, and says so per test.
out=$(KVACTOR_SANITIZE_BUDGET=-1 bash bench/device/sanitize.sh "$dir/out2" 'A.*')
grep -q "racecheck: 7 not started" <<<"$out" || fail "a spent budget still started tests: $out"

# Windows of launches: three processes per test (two windows of 100 launches and the rest), each
# instrumenting its own; a test is clean when all are, else the worst window is named (a race
# before a window that outlasts the limit), and the others that are not clean are listed.
: >"$dir/tool.log"
out=$(KVACTOR_SANITIZE_WINDOWS=100:2 KVACTOR_SANITIZE_LIMIT=2 bash bench/device/sanitize.sh \
  "$dir/out4" 'A.clean:A.races')
for want in "racecheck A.clean: clean (every one of 3 windows)" \
  "racecheck A.races: reports (exit 3): ========= ERROR SUMMARY: 2 errors in window 1 (launches \
100-199)" \
  "racecheck A.mixed: reports (exit 3): ========= ERROR SUMMARY: 2 errors in window 2 (launches \
200-); also not clean: window 0 (stopped at the limit of 2 s)" \
  "racecheck: 1 clean, 2 with reports"; do
  grep -qF "$want" <<<"$out" || fail "no \"$want\" in: $out"
done
for want in "--launch-skip 0 --launch-count 100 --print-limit" \
  "--launch-skip 100 --launch-count 100 --print-limit" "--launch-skip 200 --print-limit"; do
  [ "$(grep -c -- "$want" "$dir/tool.log")" -eq 3 ] ||
    fail "not one \"$want\" per test: $(cat "$dir/tool.log")"
done

# Windows that never started leave the test without a verdict: a resumed run checks it.
KVACTOR_SANITIZE_WINDOWS=100:2 KVACTOR_SANITIZE_BUDGET=-1 KVACTOR_SANITIZE_RESUME=1 \
  bash bench/device/sanitize.sh "$dir/out5" 'A.clean:A.races' >/dev/null
: >"$dir/tool.log"
out=$(KVACTOR_SANITIZE_RESUME=1 bash bench/device/sanitize.sh "$dir/out5" 'A.clean:A.races')
[ "$(wc -l <"$dir/tool.log")" -eq 3 ] || fail "the resumed run did not check all three: $out"

# Windows refuse a malformed size and initcheck, before any test.
: >"$dir/tool.log"
for bad in "KVACTOR_SANITIZE_WINDOWS=100|expected N:K" "KVACTOR_SANITIZE_WINDOWS=0:2|expected N:K" \
  "KVACTOR_SANITIZE_TOOLS=initcheck|no windows with initcheck"; do
  if out=$(env KVACTOR_SANITIZE_WINDOWS=100:2 "${bad%%|*}" bash bench/device/sanitize.sh \
    "$dir/out6" 'A.*' 2>&1); then
    fail "${bad%%|*} was accepted: $out"
  fi
  grep -qF "${bad#*|}" <<<"$out" || fail "${bad%%|*}: the refusal says: $out"
done
[ ! -s "$dir/tool.log" ] || fail "tests ran with refused windows: $(cat "$dir/tool.log")"

# A limit that is not whole seconds is refused before any test (a resumed run compares limits).
: >"$dir/tool.log"
if out=$(KVACTOR_SANITIZE_LIMIT=1.5 bash bench/device/sanitize.sh "$dir/out8" 'A.*' 2>&1); then
  fail "a limit of 1.5 was accepted: $out"
fi
grep -qF "KVACTOR_SANITIZE_LIMIT=1.5: not a whole number of seconds" <<<"$out" ||
  fail "the refusal says: $out"
[ ! -s "$dir/tool.log" ] || fail "tests ran with a refused limit: $(cat "$dir/tool.log")"

# A tool without a kernel filter is refused before any test runs.
: >"$dir/tool.log"
if out=$(NO_FILTER=1 KVACTOR_SANITIZE_KERNELS=kvactor bash bench/device/sanitize.sh \
  "$dir/out3" 'A.*' 2>&1); then
  fail "a tool without --kernel-name was accepted: $out"
fi
grep -q "takes neither --kernel-name nor --filter" <<<"$out" || fail "the refusal says: $out"
[ ! -s "$dir/tool.log" ] || fail "tests ran with a tool that cannot filter kernels"
echo "sanitize_device_run_test: ok"
