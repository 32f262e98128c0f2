// `kvactor --version`: what this build is (fixed when CMake configured it).
#pragma once

#include <string>

namespace kvactor {

/// Two lines: "kvactor VERSION (commit C)" and the versions of CAF, CUDA, NCCL and the compiler
/// it was built with ("not built in" for CUDA and NCCL in a CPU-only build).
std::string version_text();

} // namespace kvactor
