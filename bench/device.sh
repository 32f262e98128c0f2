#!/usr/bin/env bash
# The device harness: the GPU checks and benchmarks as named suites, run on the lent GPU machine
# from the repository root, in one device call. Each suite is bench/device/SUITE.sh and writes
# under OUT/SUITE (most tar their logs into OUT/SUITE/logs.tar: the device returns few files);
# a table of each suite's exit status and time comes last. Exit 0 when every suite passed.
#   here:   build what the suites run, then pack it (each suite's header names its binaries):
#           bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_gpu_tests ...
#   device: bash bench/device.sh OUT SUITE[=ARG] [SUITE[=ARG] ...]   (carry: [".devpack.tar.xz"])
#           e.g. bash bench/device.sh "$OUT" tests attention serve
#                bash bench/device.sh "$OUT" 'sanitize=DeviceLocalCommunicator.*'
# ARG goes to the suite as its second argument (a test filter, a repeat count; see its header).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
suites() { for f in "$here"/device/*.sh; do
  n=$(basename "$f" .sh)
  [ "$n" = prelude ] || printf '%s ' "$n"
done; }
usage() {
  echo "usage: bench/device.sh OUT SUITE[=ARG] [SUITE[=ARG] ...]" >&2
  echo "suites: $(suites)" >&2
  exit 2
}
[ $# -ge 2 ] || usage
out=$1
shift
for spec in "$@"; do # every name checked before any suite runs
  [ -f "$here/device/${spec%%=*}.sh" ] || { echo "bench/device.sh: no suite '${spec%%=*}'" >&2; usage; }
done
mkdir -p "$out"
[ -d .devpack ] || [ ! -f .devpack.tar.xz ] || tar xJf .devpack.tar.xz
declare -a rows
failed=0
for spec in "$@"; do
  name=${spec%%=*}
  args=()
  [ "$spec" = "$name" ] || args=("${spec#*=}")
  echo "==== $name ${args[*]}"
  t0=$SECONDS
  bash "$here/device/$name.sh" "$out/$name" "${args[@]}"
  rc=$?
  [ $rc = 0 ] || failed=1
  rows+=("$(printf '%-16s exit %-4s %5d s' "$name" "$rc" $((SECONDS - t0)))")
done
echo "==== bench/device.sh: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
printf '%s\n' "${rows[@]}"
exit $failed
