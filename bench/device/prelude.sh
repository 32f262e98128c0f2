# shellcheck shell=bash
# Sourced first by the bench/device/*.sh suites (run on the GPU machine from the repository
# root): takes OUT_DIR from the script's first argument, logs into OUT_DIR/logs and tars them into
# OUT_DIR/logs.tar on exit (the device returns only a few files), unpacks the binaries carried as
# .devpack.tar.xz, and points kvactor at the shipped models and the source tree.
#   usage (in a script): source "$(dirname "$0")/prelude.sh" "$@"
set -uo pipefail
dest=${1:?usage: $(basename "$0") OUT_DIR}
out=$dest/logs
mkdir -p "$out"
# KVACTOR_DEVICE_KEEP_LOGS=1 keeps OUT_DIR/logs too (a later call on the same machine resumes).
trap 'tar cf "$dest/logs.tar" -C "$dest" logs && { [ "${KVACTOR_DEVICE_KEEP_LOGS:-0}" = 1 ] || rm -rf "$out"; }' EXIT
[ -d .devpack ] || tar xJf .devpack.tar.xz
export KVACTOR_MODELS_PATH=$PWD/deploy/models KVACTOR_SOURCE_DIR=$PWD

# The SM clock, the power draw and the clock-event reasons every 100 ms into FILE (CSV), from
# start_clock_sampler FILE until stop_clock_sampler FILE, which prints how many samples saw each
# clock and each reason mask: long tensor-core runs can reach the power limit, and the clock then
# drops for a while, which shows as bimodal times.
start_clock_sampler() {
  local reasons=clocks_event_reasons.active
  nvidia-smi --query-gpu=$reasons --format=csv >/dev/null 2>&1 ||
    reasons=clocks_throttle_reasons.active
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,$reasons --format=csv,noheader -lms 100 \
    >"$1" 2>&1 &
  clock_sampler=$!
}
stop_clock_sampler() {
  kill "$clock_sampler" 2>/dev/null
  wait "$clock_sampler" 2>/dev/null
  awk -F', ' '{ split($2, c, " "); n[c[1]]++; r[$4]++ } END {
    for (k in n) printf "clock %s MHz: %d samples\n", k, n[k]
    for (k in r) printf "reasons %s: %d samples\n", k, r[k] }' "$1" | sort -t: -k2 -n -r | head -n 12
}
