#!/usr/bin/env bash
# Installs the parts of the CUDA toolkit kvactor needs from NVIDIA's Debian 12 repository, for the
# image's two stages (Dockerfile):
#   build    nvcc, the CUDA runtime, cuBLAS, CCCL and NCCL with their headers
#   runtime  the shared libraries the kvactor command loads: CUDA runtime, cuBLAS(Lt), NCCL
# The GPU driver (libcuda) is not installed: the NVIDIA container toolkit mounts the host's.
#   usage: install_cuda_packages.sh build|runtime CUDA_VERSION   (CUDA_VERSION like 13-0)
set -euo pipefail
stage=${1:?usage: install_cuda_packages.sh build|runtime CUDA_VERSION}
version=${2:?usage: install_cuda_packages.sh build|runtime CUDA_VERSION (like 13-0)}
case $stage in
build)
  packages=("cuda-nvcc-$version" "cuda-cudart-dev-$version" "libcublas-dev-$version"
    "cuda-cccl-$version" libnccl2 libnccl-dev)
  ;;
runtime) packages=("cuda-cudart-$version" "libcublas-$version" libnccl2) ;;
*)
  echo "install_cuda_packages.sh: unknown stage '$stage' (expected build or runtime)" >&2
  exit 2
  ;;
esac
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends ca-certificates curl
keyring=/tmp/cuda-keyring.deb
curl -fsSL -o "$keyring" \
  https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb
dpkg -i "$keyring"
rm -f "$keyring"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}"
# NCCL's packages follow the newest CUDA: keep the one built for this toolkit's major version.
major=${version%%-*}
nccl=$(dpkg-query -W -f='${Version}' libnccl2)
[[ $nccl == *"+cuda$major."* ]] || {
  echo "install_cuda_packages.sh: libnccl2 $nccl is not built for CUDA $major" >&2
  exit 1
}
# The toolkit's usual path, which the build finds nvcc under and the package's run path names.
[[ -e /usr/local/cuda ]] || ln -s "/usr/local/cuda-${version/-/.}" /usr/local/cuda
apt-get purge -y -qq curl >/dev/null
rm -rf /var/lib/apt/lists/*
echo "install_cuda_packages.sh: $stage packages for CUDA ${version/-/.} installed (NCCL $nccl)"
