#!/usr/bin/env bash
# Installs everything kvactor needs to build and test on Debian 12 (bookworm).
# CUDA is optional: without nvcc kvactor builds its CPU-only configuration.
set -euo pipefail
packages=(
  build-essential cmake ninja-build git
  libcaf-dev libmsgpack-cxx-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
  libssl-dev libopenblas-dev libpcre2-dev libicu-dev libsentencepiece-dev
  openssl shellcheck python3-yaml libcpp-httplib-dev pkg-config python3-matplotlib python3-jinja2
  libboost-dev curl nodejs
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The OpenAI SDK test installs the SDK with npm: Debian's nodejs comes without it (NodeSource's
# has it built in).
if ! command -v npm >/dev/null && ! dpkg-query -W -f='${Status}' npm 2>/dev/null | grep -q "ok installed"; then
  missing+=(npm)
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
