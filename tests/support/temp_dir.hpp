// Test support: a fresh private directory under the system's temporary directory (mkdtemp),
// removed with everything in it when the test is done.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace kvactor::test {

struct temp_dir {
  /// `prefix` names the directory ("kvactor-ckpt" gives /tmp/kvactor-ckpt-XXXXXX).
  explicit temp_dir(const std::string& prefix) {
    std::string p = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(p.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + p);
    path = p;
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  std::string file(const std::string& name) const { return (path / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name)) << text;
  }

  std::filesystem::path path;
};

} // namespace kvactor::test
