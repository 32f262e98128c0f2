#!/usr/bin/env bash
# Behaviour unchanged on the CPU: the same `kvactor run`s and `kvactor plan --json`s with a
# reference build and this one, digest against digest and plan JSON against plan JSON; then a
# cluster of two node processes (TP 2) per build, steps on the step channel, through the
# middleman and under --chaos. The GPU counterpart is the device harness's same-behaviour suite.
#   usage: bench/same_behaviour.sh OLD_KVACTOR NEW_KVACTOR   (exit 1 on any difference)
set -uo pipefail
old=${1:?usage: same_behaviour.sh OLD_KVACTOR NEW_KVACTOR}
new=${2:?usage: same_behaviour.sh OLD_KVACTOR NEW_KVACTOR}
export KVACTOR_MODELS_PATH=${KVACTOR_MODELS_PATH:-$(cd "$(dirname "$0")/.." && pwd)/deploy/models}
diffs=0
runs=(
  "run --no-progress"
  "run --no-progress --tensor-parallel-size 2"
  "run --no-progress --ubatches 2 --requests 24 --seed 3"
  "run --no-progress --no-enable-prefix-caching --requests 20"
  "run --no-progress --chaos 7:0.2 --requests 12"
  "run --no-progress --arrival-rate 200 --requests 16 --seed 5"
  "run --no-progress --max-num-seqs 4 --max-num-batched-tokens 64 --requests 12"
  "run --no-progress --block-size 32 --kv-cache-memory 8MiB --requests 24"
)
for r in "${runs[@]}"; do
  # shellcheck disable=SC2086 # $r is a command line
  o=$($old $r 2>/dev/null | awk '/digest/{print $2}')
  n=$($new $r 2>/dev/null | awk '/digest/{print $2}')
  same=$([ -n "$o" ] && [ "$o" = "$n" ] && echo same || echo DIFF)
  [ "$same" = same ] || diffs=$((diffs + 1))
  echo "[$r] old $o new $n $same"
done
models=(llama-3.1-8b qwen3-next-80b-a3b gemma-3-27b-it deepseek-v3 ai21-jamba-1.5-mini gpt-oss-20b
  llama-4-scout-17b-16e-instruct whisper-large-v3 kvactor-tiny)
for m in "${models[@]}"; do
  for extra in "" "--tensor-parallel-size 2 --max-num-seqs 64" "--block-size 32 --cudagraph-mode piecewise"; do
    a=$($old plan --model $m --kv-cache-memory 20GiB --json $extra 2>&1 | md5sum)
    b=$($new plan --model $m --kv-cache-memory 20GiB --json $extra 2>&1 | md5sum)
    same=$([ "$a" = "$b" ] && echo same || echo DIFF)
    [ "$same" = same ] || diffs=$((diffs + 1))
    echo "[plan $m $extra] $same"
  done
done
# cluster_digests BIN: the digests of three cluster runs on two fresh node processes of BIN.
cluster_digests() {
  local dir pids=() addrs=()
  dir=$(mktemp -d)
  for i in 1 2; do
    "$1" node --listen 127.0.0.1:0 --cpu-ranks 1 >"$dir/n$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 1 2; do
    for _ in $(seq 100); do grep -q "listening on" "$dir/n$i.log" && break; sleep 0.1; done
    addrs+=("$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$dir/n$i.log" | awk '{print $3}')")
  done
  local nodes="${addrs[0]},${addrs[1]}"
  for how in "--step-path channel --requests 16" "--step-path middleman --requests 16" \
    "--chaos 3:0.2 --requests 8"; do
    # shellcheck disable=SC2086 # $how is a list of flags
    printf '%s ' "$("$1" run --nodes "$nodes" --tensor-parallel-size 2 --no-progress $how \
      2>/dev/null | awk '/digest/{print $2}')"
  done
  kill "${pids[@]}" 2>/dev/null
  rm -rf "$dir"
}
o=$(cluster_digests "$old")
n=$(cluster_digests "$new")
same=$([ "$o" = "$n" ] && echo same || echo DIFF)
[ "$same" = same ] || diffs=$((diffs + 1))
echo "[cluster: channel, middleman, chaos] old $o new $n $same"
echo "same_behaviour: $diffs difference(s)"
[ "$diffs" = 0 ]
