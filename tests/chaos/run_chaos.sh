#!/usr/bin/env bash
# Chaos in the message stream over many seeds (CI runs 4 of each test; this runs as many as asked).
# Each seed serves kvactor-tiny's 6-request workload with TP 1 and TP 2 while the links between
# the driver and its ranks lose, repeat and delay messages, and once more with TP 2 while one rank
# is also killed or stalled at a step the seed picks. Invariants checked for every run: nothing
# hangs past its timeouts, every request finishes or is failed with a reason, finished requests
# carry the calm run's tokens, no KV cache block is left held (tests/actors/chaos_test.cpp).
#   usage: tests/chaos/run_chaos.sh [SEEDS=1000] [RATE=0.3] [FIRST_SEED=1]
#   BUILD=dir picks the build directory (default build); it must hold bin/kvactor_chaos_tests.
# Prints progress per batch of 100 seeds and each batch's totals; exits non-zero at the first
# seed that breaks an invariant, naming it.
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds=${1:-1000}
rate=${2:-0.3}
first=${3:-1}
bin=${BUILD:-build}/bin/kvactor_chaos_tests
[[ -x $bin ]] || { echo "run_chaos.sh: $bin is missing: build kvactor_chaos_tests first" >&2; exit 2; }
export KVACTOR_CHAOS_RATE=$rate
export KVACTOR_MODELS_PATH=${KVACTOR_MODELS_PATH:-$PWD/deploy/models}
start=$(date +%s)
batch=100
for ((s = first; s < first + seeds; s += batch)); do
  n=$((first + seeds - s < batch ? first + seeds - s : batch))
  log=$(mktemp)
  if ! KVACTOR_CHAOS_FIRST_SEED=$s KVACTOR_CHAOS_SEEDS=$n "$bin" \
    --gtest_filter='Chaos.Every*' >"$log" 2>&1; then
    grep -E 'seed [0-9]+|Failure|FAILED' "$log" | head -40
    echo "run_chaos.sh: an invariant broke in seeds $s..$((s + n - 1)) (log: $log)" >&2
    exit 1
  fi
  grep '^chaos' "$log" | sed "s/^/seeds $s..$((s + n - 1)): /"
  rm -f "$log"
done
echo "run_chaos.sh: $seeds seeds from $first at rate $rate: every invariant held ($(($(date +%s) - start)) s)"
