// Where the GPU decoder's weights come from and how their upload reports (weight_upload.hpp);
// CUDA-free, for callers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "model/safetensors.hpp"

namespace kvactor {

struct upload_progress {
  uint64_t done_bytes = 0, total_bytes = 0; // device bytes written so far, of all
  double seconds = 0.0;                     // since the upload began
};

struct upload_options {
  size_t staging_bytes = size_t{64} << 20; // each of the two pinned buffers
  int32_t threads = 8;                     // host threads converting into staging
  std::chrono::milliseconds interval{1000};
  std::function<void(const upload_progress&)> progress; // may be empty
};

/// Where the GPU decoder's weights come from: the checkpoint's values through pinned staging
/// (upload's progress callback sees it), or, with generated_seed, values generated on the device
/// for a shapes-only checkpoint (--load-format synthetic).
struct gpu_weight_source {
  const checkpoint& ckpt;
  upload_options upload;
  std::optional<uint64_t> generated_seed;
};

} // namespace kvactor
