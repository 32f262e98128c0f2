#!/usr/bin/env bash
# The CPU configuration built with sanitizers, and its suites run under them.
#   usage: tests/sanitize.sh asan|tsan [BUILD_DIR] [-- CTEST_ARGS...]
#   asan   AddressSanitizer + UndefinedBehaviorSanitizer (leaks checked at exit; any UB report
#          stops the test that hit it)
#   tsan   ThreadSanitizer
# BUILD_DIR defaults to build-asan or build-tsan. KVACTOR_SANITIZE_SUITES="messages node ..." builds
# and runs only those test binaries (kvactor_<suite>_tests), each in full: CI's ASan+UBSan run of the
# unit suites (.ci/run), which the whole suite's build would not fit beside. CUDA is off (these are the CPU paths; the GPU
# kernels are checked by compute-sanitizer on a GPU machine: bench/device/sanitize.sh).
# Debian's CAF is not instrumented. ASan and UBSan still check kvactor's side of every call. TSan
# must see CAF's mailboxes and scheduler to know that a message's sender happened before its
# receiver, so the tsan build links a CAF built with -fsanitize=thread from Debian's source
# (tests/sanitize/build_caf.sh, into BUILD_DIR/caf once; KVACTOR_CAF_TARBALL names the source
# tarball when apt-get source cannot fetch it). What remains suppressed is in tests/sanitize/tsan.supp.
set -euo pipefail
kind=${1:?usage: sanitize.sh asan|tsan [BUILD_DIR] [-- CTEST_ARGS...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-$kind
if [[ $# -gt 0 && $1 != -- ]]; then
  build=$1
  shift
fi
[[ ${1:-} == -- ]] && shift
case $kind in
asan)
  flags="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export KVACTOR_TEST_SLOWDOWN=3 # as tests/support/sanitizer_slowdown.hpp
  # Both runtimes linked in: with g++ 12's shared libasan and libubsan in one process, only one
  # honours log_path, and UBSan's reports went to stderr alone, unseen where
  # nobody reads a process's stderr.
  link_flags="$flags -static-libasan -static-libubsan"
  ;;
tsan)
  flags="-O1 -g -fsanitize=thread -fno-omit-frame-pointer"
  export TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1:suppressions=$root/tests/sanitize/tsan.supp}
  export KVACTOR_TEST_SLOWDOWN=10 # as tests/support/sanitizer_slowdown.hpp
  link_flags=$flags
  ;;
*)
  echo "sanitize.sh: unknown kind '$kind' (expected asan or tsan)" >&2
  exit 2
  ;;
esac
start=$SECONDS
mkdir -p "$build"
# Every process writes its reports into a file of its own here, so that a report of a process no
# test waits on (a node a script stops) is seen too; any file at the end fails the run.
reports=$build/sanitizer-reports
rm -rf "$reports" && mkdir -p "$reports"
for var in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
  tool=$(tr '[:upper:]' '[:lower:]' <<<"${var%_OPTIONS}")
  if [[ -n ${!var:-} ]]; then export "$var=${!var}:log_path=$reports/$tool"; fi
done
prefix_path=()
if [[ $kind == tsan ]]; then
  [[ -f $build/caf/include/caf/config.hpp ]] ||
    bash "$root/tests/sanitize/build_caf.sh" "$build/caf" "${KVACTOR_CAF_TARBALL:-}"
  prefix_path=(-DCMAKE_PREFIX_PATH="$build/caf")
  # The installed kvactor (the install test) has no build RPATH: point it at this CAF too.
  export LD_LIBRARY_PATH="$build/caf/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKVACTOR_WITH_CUDA=OFF \
  -DKVACTOR_BUILD_BENCH=OFF -DKVACTOR_TEST_SLOWDOWN="$KVACTOR_TEST_SLOWDOWN" "${prefix_path[@]}" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$link_flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  >"$build/configure.log" 2>&1 ||
  { tail -20 "$build/configure.log"; exit 1; }
# Prints the reports the processes wrote (the first lines of each); false when there are any.
check_reports() {
  local files=("$reports"/*)
  [[ -e ${files[0]} ]] || { echo "sanitize.sh: no sanitizer report in $reports"; return 0; }
  echo "sanitize.sh: ${#files[@]} sanitizer report(s) in $reports:"
  for f in "${files[@]}"; do
    echo "== $f"
    head -n 30 "$f"
  done
  return 1
}
if [[ -n ${KVACTOR_SANITIZE_SUITES:-} ]]; then
  read -r -a suites <<<"$KVACTOR_SANITIZE_SUITES"
  targets=()
  for s in "${suites[@]}"; do targets+=("kvactor_${s}_tests"); done
  cmake --build "$build" -j"${KVACTOR_SANITIZE_JOBS:-2}" --target "${targets[@]}"
  echo "sanitize.sh: $kind build of ${#suites[@]} suites took $((SECONDS - start)) s"
  start=$SECONDS
  rc=0
  for s in "${suites[@]}"; do
    "$build/bin/kvactor_${s}_tests" --gtest_brief=1 || { rc=$?; echo "sanitize.sh: $s failed (exit $rc)"; }
  done
  echo "sanitize.sh: $kind suites took $((SECONDS - start)) s (exit $rc)"
  check_reports || rc=1
  exit "$rc"
fi
cmake --build "$build" -j"${KVACTOR_SANITIZE_JOBS:-2}"
echo "sanitize.sh: $kind build took $((SECONDS - start)) s"
start=$SECONDS
rc=0
ctest --test-dir "$build" -j2 --output-on-failure --timeout 900 "$@" || rc=$?
echo "sanitize.sh: $kind tests took $((SECONDS - start)) s (ctest exit $rc)"
check_reports || rc=1
exit "$rc"
