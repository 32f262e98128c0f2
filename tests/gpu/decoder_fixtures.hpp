// The GPU fixtures of tests/data/transformers_gpu (make_fixtures.py --gpu) on the GPU decoder,
// for the GPU tests.
#pragma once

#include <cmath>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "decoder_cuda_runner.hpp"

namespace kvactor::kernels::gpu_test {

/// ||got - want|| / ||want||; 1e9 when the sizes differ.
inline double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    diff += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    norm += want[i] * static_cast<double>(want[i]);
  }
  return got.size() == want.size() ? std::sqrt(diff / norm) : 1e9;
}

/// The directory of a GPU fixture (tests/data/transformers_gpu/FAMILY): under
/// $KVACTOR_SOURCE_DIR when set (a copy of the tree run elsewhere), else where it was built.
inline std::string fixture_dir(const std::string& family) {
  const char* root = std::getenv("KVACTOR_SOURCE_DIR");
  return std::string(root != nullptr ? root : KVACTOR_SOURCE_DIR) + "/tests/data/transformers_gpu/"
         + family;
}

/// A GPU fixture's checkpoint on the GPU decoder (this rank's slice); throws when it does not
/// open.
inline std::unique_ptr<loaded_decoder> fixture_decoder(const std::string& family,
                                                       int32_t max_tokens, int32_t tp = 1,
                                                       int32_t rank = 0,
                                                       bool fuse_gated_mlp = false) {
  auto src = open_hf_decoder(fixture_dir(family), tp, rank);
  if (!src) throw std::runtime_error(src.err().message);
  return std::make_unique<loaded_decoder>(*src, max_tokens, fuse_gated_mlp);
}

/// Sequence s of `run` prefilled eagerly with lengths[s] tokens ((31 s + 7 i) % 256).
inline void prefill(decoder_cuda_runner& run, const std::vector<int32_t>& lengths) {
  for (size_t s = 0; s < lengths.size(); ++s) {
    std::vector<int32_t> tokens(static_cast<size_t>(lengths[s]));
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<int32_t>((s * 31 + i * 7) % 256);
    run.step(std::vector<int32_t>(tokens.size(), static_cast<int32_t>(s)), tokens);
  }
}

} // namespace kvactor::kernels::gpu_test
