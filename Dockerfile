# The kvactor image: `docker build -t kvactor:latest .` at the repository root.
#
# Two stages. `build` compiles kvactor with the scripts CI runs (deploy/setup.sh, CMake) and
# packs the Debian package (cpack); the runtime stage installs only that package, whose declared
# dependencies are the Debian libraries the command loads, plus the CUDA runtime libraries.
# The deployment recipes use this image as built here (deploy/k8s: the image `kvactor`, the
# command /usr/bin/kvactor, user 10001, ports 7400 and 9400); tests/deploy/recipes_check.sh
# (part `image`) checks that they agree with this file.
#
# Build arguments:
#   KVACTOR_CUDA=ON|OFF        OFF: a CPU-only image (no CUDA packages, CPU ranks only)
#   CUDA_VERSION=13-0          the toolkit from NVIDIA's Debian 12 repository
#   CUDA_ARCHITECTURES=90a     GPU code to compile (deploy/CLUSTER.md: why sm_90a alone)
# GPUs at run time come from the NVIDIA container toolkit (`docker run --gpus all`, or the
# Kubernetes device plugin), which mounts the host's driver.
ARG KVACTOR_CUDA=ON
ARG CUDA_VERSION=13-0
ARG CUDA_ARCHITECTURES=90a

FROM debian:12 AS build
ARG KVACTOR_CUDA
ARG CUDA_VERSION
ARG CUDA_ARCHITECTURES
COPY deploy/docker/install_cuda_packages.sh /tmp/
RUN if [ "$KVACTOR_CUDA" = ON ]; then bash /tmp/install_cuda_packages.sh build "$CUDA_VERSION"; fi
ENV PATH=/usr/local/cuda/bin:$PATH
WORKDIR /src
COPY . .
RUN bash deploy/setup.sh
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVACTOR_BUILD_TESTS=OFF \
      -DKVACTOR_WITH_CUDA="$KVACTOR_CUDA" -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHITECTURES" \
 && cmake --build build \
 && cd build && cpack -G DEB

FROM debian:12-slim AS runtime
ARG KVACTOR_CUDA
ARG CUDA_VERSION
COPY deploy/docker/install_cuda_packages.sh /tmp/
RUN if [ "$KVACTOR_CUDA" = ON ]; then bash /tmp/install_cuda_packages.sh runtime "$CUDA_VERSION"; fi \
 && rm /tmp/install_cuda_packages.sh
COPY --from=build /src/build/kvactor_*_amd64.deb /tmp/
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/kvactor_*_amd64.deb \
 && rm -rf /var/lib/apt/lists/* /tmp/kvactor_*_amd64.deb \
 && useradd --system --uid 10001 --user-group --no-create-home kvactor \
 && kvactor --version
ENV KVACTOR_MODELS_PATH=/usr/share/kvactor/models \
    CUDA_CACHE_PATH=/tmp/cuda-cache \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 10001:10001
# 7400: `kvactor node --listen` (cluster mode); 9400: /metrics and /health (--metrics-port).
EXPOSE 7400 9400
ENTRYPOINT ["/usr/bin/kvactor"]
CMD ["run", "--device", "auto"]
