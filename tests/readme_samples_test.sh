#!/usr/bin/env bash
# The documentation's sample outputs are what the commands print: each deterministic sample is run
# again and its lines must stand in README.md or a page of docs/ word for word (timings, which
# vary, are not compared, and the chaos line's counts only in shape; a log line's timestamp is
# written "[...]" there). Run
# from the source tree so that the samples' relative model paths resolve, on the CPU (the samples
# say "on cpu").
#   usage: tests/readme_samples_test.sh SOURCE_DIR KVACTOR_BINARY
set -uo pipefail
root=${1:?usage: readme_samples_test.sh SOURCE_DIR KVACTOR_BINARY}
kvactor=${2:?usage: readme_samples_test.sh SOURCE_DIR KVACTOR_BINARY}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The samples stand in the README and in the pages of docs/ it links to.
readme=$dir/documentation.md
cat "$root/README.md" "$root"/docs/*.md >"$readme"
export CUDA_VISIBLE_DEVICES=
cd "$root" || exit 1
failures=0

fail() {
  echo "readme_samples_test: $*" >&2
  failures=$((failures + 1))
}

# A log line as the README writes it: its timestamp "[...]".
untimed() { sed -E 's/^\[[0-9-]+ [0-9:.]+\] /[...] /'; }

# Lines of $2 (a command's output) that start with any of the prefixes after it must each be a
# whole line of the README; $1 names the sample.
expect_lines() {
  local sample=$1 output=$2 prefix line found
  shift 2
  for prefix in "$@"; do
    found=0
    while IFS= read -r line; do
      [[ $line == "$prefix"* ]] || continue
      found=1
      line=$(untimed <<<"$line")
      grep -qxF -- "$line" "$readme" || fail "$sample prints a line the documentation does not show: $line"
    done <<<"$output"
    [ "$found" = 1 ] || fail "$sample printed no line starting with \"$prefix\": $output"
  done
}

# The line of $2 that starts with $3 must have the shape of a README line: the same words, any
# numbers (counts that vary with timing).
expect_shape() {
  local sample=$1 line pattern
  line=$(grep -m1 -F -- "$3" <<<"$2" | untimed)
  [ -n "$line" ] || fail "$sample printed no line with \"$3\": $2"
  # ERE's special characters escaped (the $ too: hence single quotes), then numbers matched.
  # shellcheck disable=SC2016
  pattern=$(sed -E 's#[][\\.*^$()+?{}|]#\\&#g; s#[0-9]+#[0-9]+#g' <<<"$line")
  if [ -z "$pattern" ] || ! grep -qxE -- "$pattern" "$readme"; then
    fail "$sample prints a line of no shape in the documentation: $line"
  fi
}

# Runs kvactor with the sample's arguments; its stdout and stderr together.
sample() { "$kvactor" "$@" 2>&1; }

out=$(sample run)
expect_lines "kvactor run" "$out" "kvactor run:" "requests " "kv blocks " "graphs " "digest "

qwen3=(generate --model tests/data/transformers/qwen3 --prompt-ids "39,177,182,216,62" --max-tokens 8)
out=$(sample "${qwen3[@]}")
grep -qxF -- "$out" "$readme" || fail "generate (qwen3) prints \"$out\", not the documentation's"
out=$(sample "${qwen3[@]}" --json)
grep -qxF -- "$out" "$readme" || fail "generate --json (qwen3) prints \"$out\", not the documentation's"

mistral=(generate --model tests/data/transformers/mistral --prompt Hello --max-tokens 8)
out=$(sample "${mistral[@]}")
grep -qxF -- "$out" "$readme" || fail "generate (mistral) prints \"$out\", not the documentation's"
out=$(sample "${mistral[@]}" --json)
grep -qxF -- "$out" "$readme" || fail "generate --json (mistral) prints \"$out\", not the documentation's"

sample run --record "$dir/t.kvtrace" --no-progress >/dev/null ||
  fail "kvactor run --record failed"
out=$(sample replay "$dir/t.kvtrace" --verify)
expect_lines "kvactor replay --verify" "$out" "replayed "
out=$(sample replay "$dir/t.kvtrace" --verify --actor driver)
expect_lines "kvactor replay --verify --actor driver" "$out" "replayed "

small=(--requests 6 --prompt-len 8:40 --output-len 4:12 --no-progress)
out=$(sample run --chaos 7:0.3 "${small[@]}")
expect_lines "kvactor run --chaos 7:0.3" "$out" "kvactor run:" "requests " "digest "
expect_shape "kvactor run --chaos 7:0.3" "$out" "driver: --chaos:"
out=$(sample run --chaos-stall 0:2 --step-timeout 0.5 "${small[@]}")
expect_lines "kvactor run --chaos-stall 0:2" "$out" "[" "requests " "  request 0 failed" \
  "kvactor run: error:"
out=$(sample run --tensor-parallel-size 4 --collective-timeout 0.5 --debug-stall 1:10 \
  "${small[@]}")
expect_lines "kvactor run --debug-stall 1:10" "$out" "requests " "  request 0 failed"

[ "$failures" = 0 ] || exit 1
echo "readme_samples_test: ok"
