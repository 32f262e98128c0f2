# Sourced first by the bench/*_device_run.sh scripts (run on the GPU machine from the repository
# root): takes OUT_DIR from the script's first argument, logs into OUT_DIR/logs and tars them into
# OUT_DIR/logs.tar on exit (the device returns only a few files), unpacks the binaries carried as
# .devpack.tar.xz, and points kvactor at the shipped models and the source tree.
#   usage (in a script): source "$(dirname "$0")/device_prelude.sh" "$@"
set -uo pipefail
dest=${1:?usage: $(basename "$0") OUT_DIR}
out=$dest/logs
mkdir -p "$out"
trap 'tar cf "$dest/logs.tar" -C "$dest" logs && rm -rf "$out"' EXIT
[ -d .devpack ] || tar xJf .devpack.tar.xz
export KVACTOR_MODELS_PATH=$PWD/deploy/models KVACTOR_SOURCE_DIR=$PWD
