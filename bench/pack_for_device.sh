#!/usr/bin/env bash
# Bundles executables built here with the shared libraries a bare GPU machine lacks (CAF, spdlog,
# fmt, GoogleTest, Google Benchmark, ...), so that they run there without installing anything.
#
#   usage: bash bench/pack_for_device.sh [-o DIR] [-z] BINARY [BINARY ...]
#
# DIR defaults to .devpack/ at the repository root (ignored by git). It receives bin/ (the
# executables), lib/ (their libraries) and run.sh; copy DIR to the GPU machine (with the device
# tool: carry [".devpack"]) and run there:
#   bash .devpack/run.sh BINARY_NAME [ARGS...]
# The target is assumed to have glibc, libstdc++, the NVIDIA driver, the CUDA toolkit (runtime,
# cuBLAS) and NCCL of its own, newer than or equal to ours: those are not packed.
set -euo pipefail

usage() {
  echo "usage: $0 [-o DIR] [-z] BINARY [BINARY ...]" >&2
  exit 2
}

out=""
compress=0
while getopts "o:zh" opt; do
  case $opt in
  o) out=$OPTARG ;;
  z) compress=1 ;;
  *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage

if [ -z "$out" ]; then
  root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
  out=$root/.devpack
fi

# Libraries the target provides: the C runtime and loader, the C++ runtime, and the NVIDIA stack.
provided='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so'
provided+='|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcublasLt'
provided+='|libnccl|libnvidia|libnvJitLink|libnvrtc|libcufft|libcurand|libcusparse|libcusolver)'

for b in "$@"; do
  if [ ! -f "$b" ] || [ ! -x "$b" ]; then
    echo "$0: not an executable: $b" >&2
    exit 2
  fi
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"

missing=0
for b in "$@"; do
  cp "$b" "$out/bin/"
  # ldd prints "name => /path (address)" for each resolved library, "name => not found" otherwise.
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $name =~ $provided ]] && continue
    if [ "$path" = "not" ]; then
      echo "$0: $b needs $name, which is not found here" >&2
      missing=1
      continue
    fi
    # -L: pack the file a versioned symlink points to, under the name the binary asks for.
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done < <(ldd "$b")
done
[ "$missing" -eq 0 ] || exit 1

cat >"$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# Runs a packed executable with the packed libraries ahead of the system's.
# usage: bash run.sh BINARY_NAME [ARGS...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BINARY_NAME [ARGS...]" >&2; exit 2; }
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NVLink multicast (NVLS) stays off on the lent multi-GPU machines.
export NCCL_NVLS_ENABLE=0
name=$1
shift
exec "$here/bin/$name" "$@"
EOF
chmod +x "$out/run.sh"

# The copies are stripped: symbols are no use on the device and cost a third of the carry.
strip "$out/bin/"* 2>/dev/null || true

# The device tool carries at most 64 MiB. -z: also DIR.tar.xz (a third of the size or less;
# carry it and run `tar xJf .devpack.tar.xz` there first).
if [ "$compress" -eq 1 ]; then
  tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
  echo "compressed into $out.tar.xz, $(($(du -sk "$out.tar.xz" | cut -f1) / 1024)) MiB"
fi
kib=$(du -sk "$out" | cut -f1)
nbin=$(find "$out/bin" -type f | wc -l)
nlib=$(find "$out/lib" -type f | wc -l)
echo "packed $nbin executable(s) and $nlib libraries, $((kib / 1024)) MiB, into $out"
if [ "$kib" -gt $((64 * 1024)) ]; then
  echo "$0: warning: more than 64 MiB; pack fewer, or carry $out.tar.xz (-z)" >&2
fi
