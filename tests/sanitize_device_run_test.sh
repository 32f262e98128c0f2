#!/usr/bin/env bash
# bench/sanitize_device_run.sh's per-test mode, with a stand-in for compute-sanitizer and for the
# GPU test binary (the real ones need a GPU): a verdict per kind of ending (clean, no CUDA call,
# skipped, failed with the tool clean, reports, stopped at the limit), the tally, the kernel filter
# passed to the tool, the tests that must run alone run after the others and one at a time, a
# second call with KVACTOR_SANITIZE_RESUME=1 runs only what the first left, and a tool that takes
# no kernel filter is refused before any test.
#   usage: tests/sanitize_device_run_test.sh SOURCE_DIR
set -uo pipefail
root=${1:?usage: sanitize_device_run_test.sh SOURCE_DIR}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "sanitize_device_run_test: $*"
  exit 1
}
mkdir -p "$dir/repo/bench" "$dir/repo/.devpack" "$dir/repo/deploy"
cp "$root/bench/sanitize_device_run.sh" "$root/bench/device_prelude.sh" "$dir/repo/bench/"

# The test binary: six tests, one per way a test can end; the ALONE tests log when they run.
cat >"$dir/repo/.devpack/run.sh" <<'EOF'
#!/usr/bin/env bash
shift # the binary's name
case "$*" in
*--gtest_list_tests*A.clean:A.slow*) printf 'A.\n  clean\n  slow\n' ;;
*--gtest_list_tests*) printf 'A.\n  clean\n  host_only\n  skips\n  fails\n  races\n  slow\n' ;;
*A.clean) echo "$*" >>"${ALONE_LOG:?}"; echo "[  PASSED  ] 1 test."
  echo "========= ERROR SUMMARY: 0 errors" ;;
*A.host_only) echo "[  PASSED  ] 1 test."
  echo "========= Error: Target application terminated before first instrumented API call"; exit 255 ;;
*A.skips) echo "[  SKIPPED ] A.skips"; echo "========= ERROR SUMMARY: 0 errors" ;;
*A.fails) echo "[  FAILED  ] A.fails"; echo "========= ERROR SUMMARY: 0 errors"; exit 1 ;;
*A.races) echo "[  PASSED  ] 1 test."; echo "========= ERROR SUMMARY: 2 errors"; exit 3 ;;
*A.slow) echo "$*" >>"${ALONE_LOG:?}"; exec sleep 30 ;;
esac
EOF
# compute-sanitizer: takes --kernel-name unless NO_FILTER is set; records its arguments.
cat >"$dir/tool.sh" <<'EOF'
#!/usr/bin/env bash
if [ "$1" = --help ]; then [ -n "${NO_FILTER:-}" ] || echo "  --kernel-name arg   filter"; exit 0; fi
echo "$*" >>"${TOOL_LOG:?}"
while [ $# -gt 0 ]; do
  case $1 in --tool | --print-limit | --error-exitcode | --kernel-name | --leak-check) shift 2 ;;
  *) break ;; esac
done
exec "$@"
EOF
chmod +x "$dir/tool.sh" "$dir/repo/.devpack/run.sh"
export KVACTOR_SANITIZER=$dir/tool.sh TOOL_LOG=$dir/tool.log ALONE_LOG=$dir/alone.log
export KVACTOR_SANITIZE_PER_TEST=1 KVACTOR_SANITIZE_TOOLS=racecheck KVACTOR_SANITIZE_SHARDS=3
cd "$dir/repo" || fail "no copy"

# The first call: the slow test stops at the limit, and nothing starts after the budget.
out=$(KVACTOR_SANITIZE_KERNELS=kvactor KVACTOR_SANITIZE_LIMIT=2 KVACTOR_SANITIZE_RESUME=1 \
  KVACTOR_SANITIZE_ALONE='A.clean:A.slow' bash bench/sanitize_device_run.sh "$dir/out" 'A.*')
for want in "A.clean: clean" "A.host_only: no CUDA call" "A.skips: skipped by the test" \
  "A.fails: test failed (the tool: ERROR SUMMARY: 0 errors)" "A.races: reports (exit 3)" \
  "A.slow: stopped at the limit" \
  "racecheck: 1 clean, 1 without a CUDA call, 1 skipped, 1 failed, 1 stopped at the limit, 1 with reports"; do
  grep -qF "$want" <<<"$out" || fail "no \"$want\" in: $out"
done
grep -q -- "--kernel-name kns=kvactor" "$dir/tool.log" || fail "the tool never got the kernel filter"
# The tests run alone came last, and in order: one, then the other.
[ "$(cut -d= -f2 "$dir/alone.log" | tr '\n' ' ')" = "A.clean A.slow " ] ||
  fail "the tests to run alone ran as: $(cat "$dir/alone.log")"
grep -n "A\.slow\|A\.clean" <<<"$out" | head -n 1 | grep -q "A.clean" ||
  fail "A.clean did not end before A.slow: $out"

# The second call resumes: every test has its verdict, so the tool runs no test again.
: >"$dir/tool.log"
out=$(KVACTOR_SANITIZE_RESUME=1 bash bench/sanitize_device_run.sh "$dir/out" 'A.*')
[ "$(grep -c "\[earlier run\]" <<<"$out")" -eq 6 ] || fail "the second call did not resume: $out"
[ ! -s "$dir/tool.log" ] || fail "the second call ran tests again: $(cat "$dir/tool.log")"

# A budget already spent starts nothing, and says so per test.
out=$(KVACTOR_SANITIZE_BUDGET=-1 bash bench/sanitize_device_run.sh "$dir/out2" 'A.*')
grep -q "racecheck: 6 not started" <<<"$out" || fail "a spent budget still started tests: $out"

# A tool without a kernel filter is refused before any test runs.
: >"$dir/tool.log"
if out=$(NO_FILTER=1 KVACTOR_SANITIZE_KERNELS=kvactor bash bench/sanitize_device_run.sh \
  "$dir/out3" 'A.*' 2>&1); then
  fail "a tool without --kernel-name was accepted: $out"
fi
grep -q "takes neither --kernel-name nor --filter" <<<"$out" || fail "the refusal says: $out"
[ ! -s "$dir/tool.log" ] || fail "tests ran with a tool that cannot filter kernels"
echo "sanitize_device_run_test: ok"
