#include "actors/cudagraph/capture_sizes.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kvactor {

namespace {

// vLLM's default cap on the ladder; batches above the largest size run eager.
constexpr int64_t default_max_capture_size = 512;

} // namespace

std::vector<int32_t> default_capture_sizes(int32_t max_num_seqs, int32_t max_num_batched_tokens,
                                           int32_t uniform_decode_query_len) {
  // int64_t: max_num_seqs * 2 * q may overflow int32_t for absurd flag values.
  auto max = std::min<int64_t>(int64_t{max_num_seqs} * 2 * uniform_decode_query_len,
                               default_max_capture_size);
  max = std::min<int64_t>(max, max_num_batched_tokens);
  std::vector<int32_t> sizes;
  for (int32_t s : {1, 2, 4})
    if (s <= max) sizes.push_back(s);
  for (int32_t s = 8; s < 256 && s <= max; s += 8)
    sizes.push_back(s);
  for (int32_t s = 256; s <= max; s += 16)
    sizes.push_back(s);
  return sizes;
}

expected<std::vector<int32_t>> normalize_capture_sizes(std::vector<int32_t> sizes,
                                                       int32_t max_num_batched_tokens) {
  for (auto s : sizes)
    if (s <= 0)
      return make_error(errc::invalid_argument,
                        fmt::format("--cudagraph-capture-sizes: size {} is not positive", s));
  std::erase_if(sizes, [&](int32_t s) { return s > max_num_batched_tokens; });
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

} // namespace kvactor
