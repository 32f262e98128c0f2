#!/usr/bin/env bash
# Builds the Debian package of a build (cpack -G DEB), installs it with apt-get as a user would,
# and runs the installed command: --version, a plan of a shipped model, a short CPU run. Removes
# the package afterwards. Needs root (or sudo) and apt; CI runs it after the test suite.
#   usage: tests/package_check.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: package_check.sh BUILD_DIR}" && pwd)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
fail() {
  echo "package_check: FAIL: $*"
  exit 1
}
(cd "$build" && rm -f kvactor_*.deb && cpack -G DEB >cpack.log 2>&1) ||
  { tail -20 "$build/cpack.log"; fail "cpack"; }
deb=$(ls "$build"/kvactor_*_amd64.deb) || fail "no kvactor_*_amd64.deb in $build"
echo "package_check: $(basename "$deb"), $(du -h "$deb" | cut -f1)"
dpkg-deb --field "$deb" Package Version Depends | head -n 3
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$deb" >/dev/null ||
  fail "apt-get install $deb"
trap 'DEBIAN_FRONTEND=noninteractive $sudo apt-get remove -y -qq kvactor >/dev/null' EXIT
[ "$(command -v kvactor)" = /usr/bin/kvactor ] || fail "kvactor is not /usr/bin/kvactor"
work=$(mktemp -d)
cd "$work" # nowhere near the source or build tree
env -u KVACTOR_MODELS_PATH kvactor --version | head -n 1
env -u KVACTOR_MODELS_PATH kvactor plan --model llama-3.1-8b --kv-cache-memory 20GiB >plan.out ||
  { cat plan.out; fail "kvactor plan"; }
grep -q "/usr/share/kvactor/models/llama-3.1-8b.json" plan.out ||
  { cat plan.out; fail "the packaged kvactor did not use /usr/share/kvactor/models"; }
env -u KVACTOR_MODELS_PATH kvactor run --device cpu --requests 4 --no-progress >run.out ||
  { cat run.out; fail "kvactor run"; }
grep -q "4 finished, 0 failed" run.out || { cat run.out; fail "the run did not finish its requests"; }
cd /
rm -rf "$work"
echo "package_check: ok"
