#!/usr/bin/env bash
# Builds CAF 0.17.6 from Debian's source package with ThreadSanitizer into PREFIX, so that TSan
# sees the happens-before edges inside CAF's mailboxes and scheduler. Debian's
# libcaf is not instrumented: with it, every object handed from one actor to another through a
# mailbox reads to TSan as a race.
#   usage: tests/sanitize/build_caf.sh PREFIX [SOURCE_TARBALL]
# SOURCE_TARBALL defaults to the upstream tarball that `apt-get source actor-framework` fetches
# (it needs a deb-src line for Debian bookworm; the script adds none itself).
# CAF_NO_MEM_MANAGEMENT is set: CAF's per-thread caches recycle mailbox elements across threads,
# which TSan cannot tell from a race. Headers and libraries are installed together, so kvactor is
# compiled against the same configuration.
set -euo pipefail
prefix=${1:?usage: build_caf.sh PREFIX [SOURCE_TARBALL]}
tarball=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -z $tarball ]]; then
  (cd "$work" && apt-get source --download-only -q actor-framework >/dev/null 2>&1) || true
  tarball=$(ls "$work"/actor-framework_0.17.*.orig.tar.gz 2>/dev/null | head -1)
  [[ -n $tarball ]] || {
    echo "build_caf.sh: could not fetch CAF's source (apt-get source actor-framework needs deb-src);" \
      "pass the tarball as the second argument" >&2
    exit 1
  }
fi
tar xzf "$tarball" -C "$work"
src=$(ls -d "$work"/actor-framework-0.17.*)
# Debian's one patch to the headers: receive_buffer.hpp uses std::numeric_limits unincluded.
sed -i 's|^#include <memory>$|#include <limits>\n#include <memory>|' \
  "$src/libcaf_io/caf/io/network/receive_buffer.hpp"
flags="-O1 -g -fsanitize=thread -fno-omit-frame-pointer"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_TOOLS=yes -DCAF_NO_PYTHON=yes \
  -DCAF_NO_OPENCL=yes -DCAF_NO_MEM_MANAGEMENT=yes -DCAF_NO_COMPILER_CHECK=yes >"$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j"${KVACTOR_SANITIZE_JOBS:-2}"
cmake --install "$work/build" >/dev/null
echo "build_caf.sh: CAF with ThreadSanitizer installed in $prefix"
