#!/usr/bin/env bash
# cmake --install into a temporary prefix, then builds the examples against the installed package
# with find_package(kvactor) and runs them: the installed `kvactor` finds the shipped model
# configs beside itself, the examples through KVACTOR_MODELS_PATH; none uses the source tree.
#   usage: install_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=deploy/wait_for.sh
source "$(dirname "$0")/deploy/wait_for.sh"
src=$1
build=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "install_test: FAIL: $*"
  exit 1
}
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
  { tail -20 "$work/install.log"; fail "cmake --install"; }
for f in bin/kvactor share/kvactor/models/llama-3.1-8b.json lib/cmake/kvactor/kvactorConfig.cmake \
  include/kvactor/actors/driver/deployment_plan.hpp include/kvactor/kernels/decoder.h; do
  [[ -e $work/prefix/$f ]] || fail "$f is not installed"
done
# The installed command resolves a shipped name beside itself, even with the source tree gone
# from its view.
(cd "$work" && env -u KVACTOR_MODELS_PATH "$work/prefix/bin/kvactor" plan --model llama-3.1-8b \
  --kv-cache-memory 20GiB >"$work/plan.out" 2>&1) || { cat "$work/plan.out"; fail "installed kvactor plan"; }
grep -q "$work/prefix/share/kvactor/models/llama-3.1-8b.json" "$work/plan.out" ||
  { cat "$work/plan.out"; fail "the installed kvactor did not use the installed configs"; }
# The examples take the build's own flags and prefixes: a package built with sanitizers
# (tests/sanitize.sh) links only into code built with the same ones.
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
prefixes=$(cached CMAKE_PREFIX_PATH)
for example in plan_deployment custom_executor inject_request; do
  cmake -S "$src/examples/$example" -B "$work/$example" -G Ninja \
    -DCMAKE_PREFIX_PATH="$work/prefix${prefixes:+;$prefixes}" -DCMAKE_CXX_FLAGS="$(cached CMAKE_CXX_FLAGS)" \
    -DCMAKE_EXE_LINKER_FLAGS="$(cached CMAKE_EXE_LINKER_FLAGS)" >"$work/${example}_configure.log" 2>&1 ||
    { tail -30 "$work/${example}_configure.log"; fail "$example: find_package(kvactor)"; }
  cmake --build "$work/$example" >"$work/${example}_build.log" 2>&1 ||
    { tail -30 "$work/${example}_build.log"; fail "$example: building against the package"; }
done
# The example's executable is not beside the configs and this prefix is not the configured one:
# KVACTOR_MODELS_PATH points it there, as a user of a relocated install would.
out=$(KVACTOR_MODELS_PATH="$work/prefix/share/kvactor/models" "$work/plan_deployment/plan_deployment" \
  llama-3.1-8b 20 2) || fail "plan_deployment: $out"
echo "$out"
grep -q "^ranks     2$" <<<"$out" || fail "two ranks expected"
grep -q "^blocks    [0-9]* of 16 tokens" <<<"$out" || fail "no block count"
# A rank group embedded with the example's own executor, on one rank and on two.
for tp in 1 2; do
  out=$(KVACTOR_MODELS_PATH="$work/prefix/share/kvactor/models" "$work/custom_executor/custom_executor" \
    "$tp") || fail "custom_executor $tp: $out"
  echo "$out" | tail -n 1
  grep -q "every count right" <<<"$out" || fail "custom_executor $tp: $out"
done
# A live run of the installed kvactor takes a request the inject_request example builds and sends
# (the arrivals keep the run open: its last request arrives about 20 s in, see inject_live.sh;
# 12 requests, 3.9 s, were once too few on a machine busy with other work).
"$work/prefix/bin/kvactor" run --inject-port 0 --requests 40 --arrival-rate 2 --prompt-len 8:24 \
  --output-len 4:8 --no-progress --summary-json "$work/live.json" >"$work/live.out" 2>"$work/live.err" &
live=$!
trap 'kill $live 2>/dev/null || true' EXIT
wait_for 60 in_file 'injection listens on 127\.0\.0\.1:[0-9]+' "$work/live.err" ||
  { cat "$work/live.err"; fail "the live run announced no injection port within 60 s"; }
port=$(grep -oE '127\.0\.0\.1:[0-9]+' "$work/live.err" | head -1)
out=$("$work/inject_request/inject_request" "$port" 4242 5 6 7 8 2>&1) || fail "inject_request: $out"
echo "$out"
grep -q "driver accepted request 4242" <<<"$out" || fail "the driver did not accept the request"
wait $live || { cat "$work/live.err"; fail "the live run failed"; }
grep -q "41 finished, 0 failed" "$work/live.out" ||
  { cat "$work/live.out"; fail "the injected request was not served with the workload"; }
echo "install_test: ok"
