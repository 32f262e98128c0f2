#!/usr/bin/env bash
# compute-sanitizer over the GPU tests on the device (an H200 or an H100):
# memcheck (out-of-bounds and misaligned accesses, leaks of device memory), racecheck
# (shared-memory hazards) and initcheck (reads of uninitialised device memory), each over the
# kernel suites and the rank and decoder suites, with a time limit each (the sanitizers slow
# kernels 10-100x). Each tool's summary line ("ERROR SUMMARY: N errors") and its first reports
# are printed; logs come back in logs.tar.
#   here:   cmake --build build --target kvactor_gpu_tests
#           bash bench/pack_for_device.sh -z build/bin/kvactor_gpu_tests
#   device: bash bench/device.sh "$OUT" sanitize[=FILTER]   (carry: [".devpack.tar.xz"])
# KVACTOR_SANITIZE_TOOLS picks the tools (default: all three), KVACTOR_SANITIZE_LIMIT the seconds
# each may run (170), KVACTOR_SANITIZE_SHARDS how many processes split the tests (1); racecheck
# reports its peak host memory (it can exhaust the machine). KVACTOR_SANITIZE_PER_TEST=1 runs
# each test as a process of its own instead (SHARDS at a time, LIMIT seconds each, none started
# after KVACTOR_SANITIZE_BUDGET seconds, by default 570 - LIMIT) and prints one line per test:
# clean, with reports, with the tool's own error only (no report on the program), failed,
# crashed, or stopped at the limit; for suites too slow to finish as a whole, it says which tests
# are checked and which are too slow for the tool.
# KVACTOR_SANITIZE_KERNELS=SUBSTRING instruments only the kernels whose names contain it
# ("kvactor": ours, not cuBLAS's or NCCL's), for tests that run no cuBLAS GEMM: under racecheck an
# uninstrumented cuBLAS kernel (nvjet_sm90_*) draws "Internal Sanitizer Error: The Sanitizer
# failed to handle a hardware exception." and an illegal-address error that fails the test, even
# when the filter matches no kernel at all (on an H100 with compute-sanitizer 2025.3.1, with or
# without --check-warpgroup-mma, --check-bulk-copy or --racecheck-memcpy-async), so tests with
# GEMMs run either with every kernel instrumented or with KVACTOR_GEMM=plain (read by kvactor: its
# own plain GEMM kernel instead of cuBLAS's; with it, the 20 GEMM tests ran under racecheck
# without the fault on an H100: 18 clean, 2 with the tool's own "failure to track a kernel
# launch" and no report, both running eight decoder ranks on the one GPU).
# KVACTOR_SANITIZE_WINDOWS=N:K checks each test in K + 1 processes, each instrumenting one window
# of its launches (see windows() below; racecheck needs KVACTOR_GEMM=plain there too).
# KVACTOR_PDL=0 (read by kvactor) turns off programmatic dependent launches. The tests' bounds
# on how long a diagnosis may take and the collective timeouts they set scale by
# KVACTOR_TEST_SLOWDOWN (4 unless set; racecheck needs 40 or more for the shared-GPU tests that
# time collectives out), and above 1 the slowest tests do
# less work (tests/support/sanitizer_slowdown.hpp). Known to fail under the tools whatever the code:
# tests that compare the device's free memory before and after, beside other processes (name them in
# KVACTOR_SANITIZE_ALONE), and under initcheck even alone (the device's free memory falls by 96-128
# MiB with each run in the process).
# KVACTOR_SANITIZE_OPTIONS: more options for the tool, words split at spaces. Per test, each
# verdict gives the peak host memory of the test's largest process (GNU time,
# KVACTOR_SANITIZE_TIME, /usr/bin/time by default) and, for a process that died, an OOM kill the
# kernel logged meanwhile (when dmesg is readable).
# KVACTOR_SANITIZE_RESUME=1 (OUT_DIR outside the call's own folder, e.g. /tmp/sanitize, then
# copy OUT_DIR/logs.tar back) skips the tests with a verdict from an earlier call on the same
# machine, so that several calls cover a suite one is too short for; a test stopped at a limit
# smaller than this run's runs again. KVACTOR_SANITIZE_ALONE=FILTER: the tests it selects run
# after the others, one at a time.
[ "${KVACTOR_SANITIZE_RESUME:-0}" = 1 ] && export KVACTOR_DEVICE_KEEP_LOGS=1
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
filter=${2:-"KvWriteCuda*:PagedAttentionCuda*:AllSupported/*:EveryKernel/*:PrefillKernelChoice*:MetadataCuda*:DeviceLocal*:GpuRank.*:DenseFamilies/DecoderCudaFixtures.PromptLogits*"}
sanitizer=${KVACTOR_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
# The tests' bounds and timeouts, scaled for the tool (tests/support/sanitizer_slowdown.hpp).
export KVACTOR_TEST_SLOWDOWN=${KVACTOR_TEST_SLOWDOWN:-4}
# A whole number of seconds: a resumed run compares it with the limit a stopped test had.
if ! [[ ${KVACTOR_SANITIZE_LIMIT:-170} =~ ^[0-9]+$ ]]; then
  echo "KVACTOR_SANITIZE_LIMIT=${KVACTOR_SANITIZE_LIMIT}: not a whole number of seconds" >&2
  exit 2
fi
shards=${KVACTOR_SANITIZE_SHARDS:-1}
# No test starts after `budget` seconds; by default one started last still ends within a device
# command's 600 s, with time left to pack the logs.
budget=${KVACTOR_SANITIZE_BUDGET:-$((570 - ${KVACTOR_SANITIZE_LIMIT:-170}))}
# GNU time measures each process's peak host memory; without it nothing is measured.
time_binary=${KVACTOR_SANITIZE_TIME:-/usr/bin/time}
start=$SECONDS

# The option that limits the tool to some kernels: --kernel-name in current releases, --filter in
# older ones; refused at once when neither is understood, rather than checking everything.
kernel_filter=()
if [ -n "${KVACTOR_SANITIZE_KERNELS:-}" ]; then
  help=$("$sanitizer" --help 2>/dev/null)
  for option in --kernel-name --filter; do
    # The whole help first: grep -q would stop reading, and the tool's SIGPIPE fail the pipe.
    if grep -- "^ *$option " <<<"$help" >/dev/null; then
      kernel_filter=("$option" "kns=$KVACTOR_SANITIZE_KERNELS")
      break
    fi
  done
  [ ${#kernel_filter[@]} -gt 0 ] || {
    echo "sanitize: $sanitizer takes neither --kernel-name nor --filter kns=..." >&2
    exit 2
  }
  echo "sanitize: only kernels named *$KVACTOR_SANITIZE_KERNELS* (${kernel_filter[*]})"
fi

# Windows: N launches (N >= 1, the tool takes a count of 0 for "every launch"), K windows before
# the last; per test only; not with initcheck, which would report reads of what the launches
# outside a window wrote.
if [ -n "${KVACTOR_SANITIZE_WINDOWS:-}" ]; then
  [[ $KVACTOR_SANITIZE_WINDOWS =~ ^[1-9][0-9]*:[0-9]+$ ]] || {
    echo "sanitize: KVACTOR_SANITIZE_WINDOWS=$KVACTOR_SANITIZE_WINDOWS: expected N:K (N >= 1" \
      "launches a window, K windows before the last)" >&2
    exit 2
  }
  [ "${KVACTOR_SANITIZE_PER_TEST:-0}" = 1 ] || {
    echo "sanitize: KVACTOR_SANITIZE_WINDOWS needs KVACTOR_SANITIZE_PER_TEST=1" >&2
    exit 2
  }
  [[ " ${KVACTOR_SANITIZE_TOOLS:-memcheck racecheck initcheck} " != *" initcheck "* ]] || {
    echo "sanitize: no windows with initcheck: it would report reads of what uninstrumented" \
      "launches wrote; leave initcheck out of KVACTOR_SANITIZE_TOOLS" >&2
    exit 2
  }
fi

# Tool $1 over the GPU tests that GoogleTest filter $3 selects, within the time limit, into log
# $2, with the tool options that follow; its peak host memory into $2's .rss when PEAK_RSS is set.
# Returns the sanitizer's status.
run_tool() {
  local tool=$1 log=$2 tests=$3 extra=() measure=()
  shift 3
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  extra+=("$@")
  [ -n "${KVACTOR_SANITIZE_KERNELS:-}" ] && extra+=("${kernel_filter[@]}")
  local options=()
  read -ra options <<<"${KVACTOR_SANITIZE_OPTIONS:-}"
  extra+=("${options[@]}")
  [ -n "${PEAK_RSS:-}" ] && [ -x "$time_binary" ] &&
    measure=("$time_binary" -f "peak RSS %M kB" -o "${log%.log}.rss")
  "${measure[@]}" \
    timeout "${KVACTOR_SANITIZE_LIMIT:-170}" "$sanitizer" --tool "$tool" "${extra[@]}" \
    --print-limit 20 --error-exitcode 3 \
    bash .devpack/run.sh kvactor_gpu_tests --gtest_filter="$tests" >"$log" 2>&1
}

# One tool over shard $2 of $shards (GoogleTest's own sharding) into $out/$1[.$2].log.
sanitize_shard() {
  local tool=$1 shard=$2 name=$1
  [ "$shards" -gt 1 ] && name=$tool.$shard
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard PEAK_RSS=1 \
    run_tool "$tool" "$out/$name.log" "$filter"
  local rc=$?
  echo "$name: rc=$rc ($((SECONDS - start)) s, $(tail -n 1 "$out/$name.rss" 2>/dev/null))"
  # Each test's own lines (not --gtest_brief): a shard stopped by its time limit still shows
  # which tests finished under the tool, and which one it was in.
  echo "  $(grep -c '^\[       OK \]' "$out/$name.log") tests finished"
  [ "$rc" -eq 124 ] && echo "  stopped in: $(grep '^\[ RUN      \]' "$out/$name.log" | tail -n 1)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|\[  PASSED|\[  FAILED|tests ran" "$out/$name.log" | head -n 6
  grep -E "^========= (Invalid|Uninitialized|Error|Race|Warning|Leaked)" "$out/$name.log" | sort | uniq -c | head -n 12
}

# The tests GoogleTest filter $1 selects, one "Suite.Test" per line.
list_tests() {
  bash .devpack/run.sh kvactor_gpu_tests --gtest_list_tests --gtest_filter="$1" |
    awk '/^[^ ]/ { suite = $1 } /^  [^ ]/ { print suite $1 }'
}

# One tool over test $2 alone, into $out/$1/TEST.log, and one line saying how it went, with the
# peak host memory of its largest process; with a window number $3 (KVACTOR_SANITIZE_WINDOWS),
# over that window's launches only, into TEST.wN.log, and the line is indented (the test's own
# line comes from window_verdict).
sanitize_test() {
  local tool=$1 test=$2 window=${3:-} log t0=$SECONDS ooms
  log=$out/$tool/${test//\//_}${window:+.w$window}.log
  local window_options=()
  read -ra window_options <<<"$(window_options "$window")"
  ooms=$(oom_lines | wc -l)
  PEAK_RSS=1 run_tool "$tool" "$log" "$test" "${window_options[@]}"
  local rc=$? verdict
  verdict=$(verdict_of "$rc" "$log" "$ooms")
  local who="$tool $test" memory=
  [ -n "$window" ] && who="  $test, window $window ($(window_range "$window"))"
  # A process stopped at the limit leaves the test unreaped: GNU time never sees its memory.
  [ "$rc" -eq 124 ] || memory=$(memory_note "${log%.log}.rss")
  echo "$who: $verdict ($((SECONDS - t0)) s$memory)" |
    tee "${log%.log}.verdict"
}

# How a test's run under the tool ended, from the tool's status $1 and its log $2; $3 is how many
# OOM kills the kernel's log held before the test.
verdict_of() {
  local rc=$1 log=$2
  if [ "$rc" -eq 124 ]; then
    echo "stopped at the limit of ${KVACTOR_SANITIZE_LIMIT:-170} s"
  elif grep -q '^\[  FAILED' "$log"; then
    echo "test failed (the tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | head -n 1 |
      sed 's/^========= //'))"
  elif grep -q '^\[  SKIPPED' "$log"; then
    echo "skipped by the test"
  elif grep -q '^\[  PASSED' "$log" &&
    grep -q "terminated before first instrumented API call" "$log"; then
    echo "no CUDA call (a host check: nothing for the tool)"
  elif [ "$rc" -eq 0 ] &&
    grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards" "$log"; then
    echo clean
  elif [ "$rc" -eq 3 ] && grep -q '^\[  PASSED' "$log" && only_the_tools_errors "$log"; then
    echo "the tool's own error, no report on the program (exit $rc):" \
      "$(grep -m 1 "^========= Internal" "$log" | sed 's/^========= //')"
  elif [ "$rc" -eq 3 ]; then # --error-exitcode: the tool found something
    echo "reports (exit $rc): $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | head -n 1)"
  else # no test result and no report: the process died (a signal, the tool's own error)
    echo "crashed (exit $rc): $(grep -E "^========= (Error|Internal)" "$log" |
      head -n 1)$(oom_note "$3")"
  fi
}

# Whether every error the tool counted in log $1 is its own loss of a kernel launch ("Internal
# Sanitizer Error: Detected a failure to track a kernel launch", which racecheck counts as a
# hazard), with no report on the program beside it (a race, an invalid access, a leak, an API
# error): such a run found nothing, though the tool says its later records may be incomplete.
only_the_tools_errors() {
  local counted own
  counted=$(sed -nE 's/^========= (ERROR|RACECHECK) SUMMARY: ([0-9]+) .*/\2/p' "$1" | head -n 1)
  own=$(grep -c "^========= Internal Sanitizer Error: Detected a failure to track a kernel launch" \
    "$1")
  ! grep -qE "^========= (Error|Warning|Invalid|Uninitialized|Race|Leaked|Program hit|Barrier)" \
    "$1" && [ -n "$counted" ] && ((own > 0 && counted == own))
}

# ", peak RSS N.N GiB" from /usr/bin/time's file $1, when there is one.
memory_note() {
  [ -s "$1" ] || return 0
  awk '/^peak RSS [0-9]+ kB/ { printf ", peak RSS %.1f GiB", $3 / 1048576 }' "$1"
}

# The kernel log's OOM kills, one per line (none when the log cannot be read here).
oom_lines() {
  dmesg 2>/dev/null | grep -iE "out of memory|oom-kill|killed process"
}

# For a process that died: the last OOM kill logged since the kernel's log held $1 of them (without
# it, kills go unexplained). Tests run side by side, so the kill may
# be another's: the note says what the log says, nothing more.
oom_note() {
  local line
  line=$(oom_lines | tail -n +"$(($1 + 1))" | tail -n 1)
  [ -z "$line" ] || echo "; an OOM kill during the test (its own or another's): ${line:0:160}"
}

# KVACTOR_SANITIZE_WINDOWS=N:K splits each test's launches into K windows of N (launches that
# match the kernel filter, counted by the tool) and a last window of every launch after them:
# K + 1 processes per test, each instrumenting its window only, so that a test too slow for the
# tool as a whole is checked in parallel pieces, every launch in one of them (tests whose ranks
# launch from several threads may order their launches differently from one run to the next, so
# a launch near a window's edge may fall outside both windows there). Launches outside the window
# run uninstrumented, so under racecheck set KVACTOR_GEMM=plain: cuBLAS's GEMM makes the tool
# fault when it runs uninstrumented. The windows of a test, one per line; none without the
# variable.
windows() {
  [ -n "${KVACTOR_SANITIZE_WINDOWS:-}" ] || return 0
  seq 0 "${KVACTOR_SANITIZE_WINDOWS#*:}"
}
# The launches of window $1, e.g. "launches 200-299" or "launches 300-".
window_range() {
  local n=${KVACTOR_SANITIZE_WINDOWS%%:*} k=${KVACTOR_SANITIZE_WINDOWS#*:}
  if (($1 < k)); then echo "launches $(($1 * n))-$((($1 + 1) * n - 1))"; else
    echo "launches $((k * n))-"; fi
}
# The tool options of window $1 on one line (none for no window).
window_options() {
  [ -n "$1" ] || return 0
  local n=${KVACTOR_SANITIZE_WINDOWS%%:*} k=${KVACTOR_SANITIZE_WINDOWS#*:}
  if (($1 < k)); then echo "--launch-skip $(($1 * n)) --launch-count $n"; else
    echo "--launch-skip $((k * n))"; fi
}

# How bad window verdict $1 is: 0 for reports, then crashed, failed, stopped, the tool's own
# error, not started, skipped, no CUDA call; clean is not asked.
severity() {
  case $1 in
  reports*) echo 0 ;; crashed*) echo 1 ;; "test failed"*) echo 2 ;; stopped*) echo 3 ;;
  "the tool's own"*) echo 4 ;; "not started"*) echo 5 ;; skipped*) echo 6 ;; *) echo 7 ;;
  esac
}

# Test $2's verdict under tool $1 from its windows' verdicts: clean when every window is, else
# the worst window's verdict, naming it, and the other windows that are not clean; kept in
# TEST.verdict (which a resumed run trusts) only when every window has a verdict of its own.
window_verdict() {
  local tool=$1 test=$2 base w line judged=1 bad=() worst others=""
  base=$out/$tool/${test//\//_}
  for w in $(windows); do
    line="not started (budget)"
    if [ -f "$base.w$w.verdict" ]; then line=$(cat "$base.w$w.verdict"); else judged=0; fi
    line=${line#*: }
    [[ $line == clean* ]] || bad+=("$(severity "$line")|$w|${line% (*}")
  done
  if [ ${#bad[@]} -eq 0 ]; then
    line="clean (every one of $(windows | wc -l) windows)"
  else
    mapfile -t bad < <(printf '%s\n' "${bad[@]}" | sort -t'|' -k1,1n -k2,2n)
    worst=${bad[0]#*|}
    line="${worst#*|} in window ${worst%%|*} ($(window_range "${worst%%|*}"))"
    for w in "${bad[@]:1}"; do
      w=${w#*|}
      others+="${others:+, }window ${w%%|*} (${w#*|})"
    done
    line+="${others:+; also not clean: $others}"
  fi
  echo "$tool $test: $line" | if ((judged)); then tee "$base.verdict"; else cat; fi
}

# Whether verdict file $1 says its run was stopped at a limit below this run's: a resumed run
# with a larger limit checks that test again rather than trusting the stop.
limit_grew() {
  local was
  was=$(sed -n 's/^[^:]*: stopped at the limit of \([0-9]*\) s.*/\1/p' "$1")
  [ -n "$was" ] && ((was < ${KVACTOR_SANITIZE_LIMIT:-170}))
}

# The tests listed on stdin under tool $1, $2 at a time; none started past the budget, and with
# KVACTOR_SANITIZE_RESUME=1 none with a verdict from an earlier run into the same OUT_DIR.
run_tests() {
  local tool=$1 at_once=$2 test verdict
  while read -r test window; do
    [ -n "$test" ] || continue
    verdict=$out/$tool/${test//\//_}${window:+.w$window}.verdict
    if [ "${KVACTOR_SANITIZE_RESUME:-0}" = 1 ] && [ -f "$verdict" ] && ! limit_grew "$verdict"; then
      echo "$(cat "$verdict") [earlier run]"
      continue
    fi
    # A free slot first, then the budget: a test that waited for its slot may find it spent.
    while (($(jobs -rp | wc -l) >= at_once)); do wait -n; done
    if ((SECONDS - start > budget)); then
      [ -z "$window" ] && echo "$tool $test: not started (budget)"
      continue
    fi
    sanitize_test "$tool" "$test" "$window" &
  done
  wait
}

# Tests on stdin, each followed by its windows' numbers when there are windows.
with_windows() {
  local test w
  while read -r test; do
    [ -n "$test" ] || continue
    [ -n "${KVACTOR_SANITIZE_WINDOWS:-}" ] || { echo "$test"; continue; }
    for w in $(windows); do echo "$test $w"; done
  done
}

# Every selected test under the tool: `shards` at a time, then those KVACTOR_SANITIZE_ALONE
# selects one at a time (tests that compare the device's free memory before and after).
sanitize_per_test() {
  local tool=$1 all alone=""
  mkdir -p "$out/$tool"
  all=$(list_tests "$filter")
  [ -n "${KVACTOR_SANITIZE_ALONE:-}" ] &&
    alone=$(grep -Fx -f <(list_tests "$KVACTOR_SANITIZE_ALONE") <<<"$all")
  grep -Fxv -f <(printf '%s\n' "$alone") <<<"$all" | with_windows | run_tests "$tool" "$shards"
  [ -z "$alone" ] || with_windows <<<"$alone" | run_tests "$tool" 1
  if [ -n "${KVACTOR_SANITIZE_WINDOWS:-}" ]; then
    while read -r test; do
      [ -z "$test" ] || window_verdict "$tool" "$test"
    done <<<"$all"
  fi
}

# How many tests of a per-test run ended each way, e.g. "40 clean, 2 without a CUDA call".
tally() {
  local parts=() n pattern label
  while IFS='|' read -r pattern label; do
    n=$(grep -v '^ ' "$1" | grep -c -- "$pattern")
    [ "$n" -gt 0 ] && parts+=("$n $label")
  done <<'KINDS'
: clean (|clean
: no CUDA call|without a CUDA call
: skipped by|skipped
: test failed|failed
: stopped at|stopped at the limit
: reports|with reports
: the tool's own error|with the tool's own error only
: crashed|crashed
: not started|not started
KINDS
  printf '%s, ' "${parts[@]}" | sed 's/, $/\n/'
}

if [ "${KVACTOR_SANITIZE_PER_TEST:-0}" = 1 ]; then
  for tool in ${KVACTOR_SANITIZE_TOOLS:-memcheck racecheck initcheck}; do
    sanitize_per_test "$tool" | tee "$out/$tool.tests"
    echo "$tool: $(tally "$out/$tool.tests")"
  done
  echo "---- sanitize device run: $((SECONDS - start)) s"
  exit 0
fi

# KVACTOR_SANITIZE_SHARDS=N runs N processes of each tool at once on the one GPU, each over 1/N of
# the tests, so that their host-side work runs on cores of its own (how much that saves is not
# measured yet).
for tool in ${KVACTOR_SANITIZE_TOOLS:-memcheck racecheck initcheck}; do
  for ((shard = 0; shard < shards; ++shard)); do
    sanitize_shard "$tool" "$shard" >"$out/$tool.$shard.summary" &
  done
  wait
  cat "$out/$tool".*.summary
done
echo "---- sanitize device run: $((SECONDS - start)) s"
