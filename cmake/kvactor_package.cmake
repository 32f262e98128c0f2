# cpack -G DEB (in the build dir): kvactor_<version>_amd64.deb of what `cmake --install` installs,
# under /usr. Its dependencies are the Debian 12 runtime libraries the command links; a CUDA build
# also needs the CUDA runtime, cuBLAS and NCCL of the NVIDIA toolkit (not Debian packages: found
# through the toolkit's ld.so.conf entry, or the run path kept at install). Building against the
# package (find_package(kvactor)) needs the -dev packages it recommends.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kvactor)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "kvactor maintainers <maintainers@kvactor.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "attention and KV cache layer of an LLM inference worker, as actors")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "kvactor runs the attention and KV-cache layer of an LLM inference worker as a system of\n\
CAF actors: the kvactor command (plan, run, node, replay, inject, generate), its libraries\n\
with headers and a CMake package (find_package(kvactor)), and the shipped model configs.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libcaf-core0.17, libcaf-io0.17, libcaf-openssl0.17, libspdlog1.10, libfmt9, libssl3, \
libcpp-httplib0.11, libpcre2-8-0, libsentencepiece0, libicu72, libopenblas0, libstdc++6")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
    "libcaf-dev, libspdlog-dev, libfmt-dev, nlohmann-json3-dev, libcli11-dev, libssl-dev, \
libcpp-httplib-dev, libpcre2-dev, libicu-dev, libsentencepiece-dev, libmsgpack-cxx-dev, \
libopenblas-dev, libboost-dev, pkg-config")
include(CPack)
