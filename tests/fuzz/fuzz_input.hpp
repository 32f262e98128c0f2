// Shared by the fuzz targets: the input as text, and as a file for decoders that read paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

namespace kvactor::fuzz {

inline std::string_view text_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Writes the input to a file of this process named `name` (in the temporary directory) and
/// returns its path; the same path each call, so that a campaign leaves one file behind.
inline std::string as_file(const uint8_t* data, size_t size, const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/kvactor-fuzz-"
                           + std::to_string(::getpid()) + "-" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

} // namespace kvactor::fuzz
