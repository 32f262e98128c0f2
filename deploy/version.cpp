#include "deploy/version.hpp"

#include <caf/config.hpp>
#include <fmt/format.h>

// commit.h: written at every build by cmake/write_commit.cmake (KVACTOR_COMMIT); the rest set by
// deploy/CMakeLists.txt on this file alone.
#include "commit.h"

#ifndef KVACTOR_VERSION
#define KVACTOR_VERSION "unknown"
#endif
#ifndef KVACTOR_COMMIT
#define KVACTOR_COMMIT "unknown"
#endif
#ifndef KVACTOR_CUDA_VERSION
#define KVACTOR_CUDA_VERSION "not built in"
#endif
#ifndef KVACTOR_NCCL_VERSION
#define KVACTOR_NCCL_VERSION "not built in"
#endif

namespace kvactor {

namespace {

std::string compiler() {
#if defined(__clang__)
  return fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  return fmt::format("g++ {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  return "unknown compiler";
#endif
}

} // namespace

std::string version_text() {
  return fmt::format("kvactor {} (commit {})\nCAF {}.{}.{}, CUDA {}, NCCL {}, {}\n",
                     KVACTOR_VERSION, KVACTOR_COMMIT, CAF_MAJOR_VERSION, CAF_MINOR_VERSION,
                     CAF_PATCH_VERSION, KVACTOR_CUDA_VERSION, KVACTOR_NCCL_VERSION, compiler());
}

} // namespace kvactor
