#!/usr/bin/env bash
# `kvactor serve` driven by OpenAI's official Node SDK (tests/deploy/openai_sdk/sdk_test.mjs):
# models, completions and chat, whole and streamed, logprobs, n, the SDK's error classes, and a
# client that aborts mid-stream leaving no stream, request or KV block behind. The SDK's version is
# pinned (package-lock.json) and installed from the npm registry into WORKDIR once.
# Without node (>= 20) or npm, or when the registry cannot be reached, it says SKIPPED and why.
#   usage: openai_sdk.sh KVACTOR_BINARY SOURCE_DIR WORKDIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=wait_for.sh
source "$(dirname "$0")/wait_for.sh"
kvactor=$1
src=$2
dir=$3
here=$src/tests/deploy/openai_sdk
mkdir -p "$dir"
fail() {
  echo "openai_sdk: FAIL: $*"
  [[ -f $dir/serve.err ]] && tail -n 20 "$dir/serve.err"
  exit 1
}
skip() {
  echo "openai_sdk: SKIPPED: $*"
  exit 0
}
command -v node >/dev/null || skip "node is not installed (deploy/setup.sh installs nodejs)"
# The SDK supports Node.js 20 and later (its README); Debian 12's own nodejs is 18.
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
  skip "node $(node --version) is older than 20, the oldest the openai SDK supports"
command -v npm >/dev/null || skip "npm is not installed (deploy/setup.sh installs it)"
cp "$here/package.json" "$here/package-lock.json" "$here/sdk_test.mjs" "$dir/"
if ! cmp -s "$here/package-lock.json" "$dir/node_modules/.package-lock.json.kvactor" 2>/dev/null; then
  (cd "$dir" && timeout 300 npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1) ||
    skip "cannot install the openai package from the npm registry: $(tail -n 3 "$dir/npm.log")"
  cp "$here/package-lock.json" "$dir/node_modules/.package-lock.json.kvactor"
fi

"$kvactor" serve --model "$src/tests/data/transformers/qwen2" --port 0 --api-key sesame \
  --served-model-name tiny \
  --chat-template "$src/tests/data/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja" \
  >"$dir/serve.out" 2>"$dir/serve.err" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
url=$(served_url "$dir/serve.err") || fail "the server never listened"
(cd "$dir" && node sdk_test.mjs "$url") || fail "the SDK's checks above failed"
kill -TERM $pid
wait_for 60 gone $pid || fail "the server did not stop on SIGTERM"
rc=0
wait $pid || rc=$?
[[ $rc == 0 ]] || fail "exit $rc after SIGTERM"
trap - EXIT
echo "openai_sdk: ok"
