#include "actors/metadata/fast_prefill.hpp"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace kvactor {

namespace {

error invalid(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

} // namespace

fast_prefill_helper::fast_prefill_helper(int32_t max_num_tokens)
    : buf_(static_cast<size_t>(std::max(max_num_tokens, 0)), 0) {
  assert(max_num_tokens >= 1);
}

expected<std::optional<fast_prefill_metadata>>
fast_prefill_helper::prepare(std::span<const int32_t> logits_indices, int32_t num_reqs,
                             std::span<const int32_t> cu_num_logits, bool has_prefill,
                             const batch_descriptor& desc, const graph_dispatcher& dispatcher) {
  // A FULL graph baked the full query into attention; a microbatch has no single index list.
  if (!has_prefill || desc.mode == cudagraph_mode::full || desc.num_ubatches > 1)
    return std::optional<fast_prefill_metadata>{};
  auto n = logits_indices.size();
  if (n == 0) return invalid("logits_indices: empty, but the batch has a prefill");
  if (n > buf_.size())
    return invalid(
        fmt::format("logits_indices: {} entries, more than max_num_tokens {}", n, buf_.size()));
  if (num_reqs < 1) return invalid(fmt::format("num_reqs: {} is not positive", num_reqs));
  if (cu_num_logits.size() != static_cast<size_t>(num_reqs) + 1)
    return invalid(fmt::format("cu_num_logits: {} entries, expected num_reqs + 1 = {}",
                               cu_num_logits.size(), num_reqs + 1));
  std::copy(logits_indices.begin(), logits_indices.end(), buf_.begin());
  std::fill(buf_.begin() + static_cast<std::ptrdiff_t>(n), buf_.end(), logits_indices.back());
  auto num = static_cast<int32_t>(n);
  auto d = dispatcher.dispatch(num_reqs, num, /*uniform_token_count=*/0);
  auto padded =
      static_cast<size_t>(std::clamp(d.num_tokens, num, static_cast<int32_t>(buf_.size())));
  fast_prefill_metadata out;
  out.logits_indices_padded.assign(buf_.begin(),
                                   buf_.begin() + static_cast<std::ptrdiff_t>(padded));
  out.num_logits_indices = num;
  for (size_t r = 1; r < cu_num_logits.size(); ++r)
    out.max_logits_per_req =
        std::max(out.max_logits_per_req, cu_num_logits[r] - cu_num_logits[r - 1]);
  return std::optional<fast_prefill_metadata>{std::move(out)};
}

expected<common_attention_metadata> rewrite_for_fast_prefill(common_attention_metadata common) {
  if (auto s = validate(common); !s) return s.err();
  if (!common.has_fast_prefill())
    return invalid("num_logits_indices: 0, fast prefill is not armed for this step");
  if (common.max_query_len == 1) return common; // all decode: every token produces logits
  auto num_reqs = static_cast<size_t>(common.num_reqs);
  const auto& qsl = common.query_start_loc;
  std::vector<int32_t> counts(num_reqs, 0); // [num_reqs] logits tokens per request
  for (int32_t i = 0; i < common.num_logits_indices; ++i) {
    auto x = common.logits_indices_padded[static_cast<size_t>(i)];
    if (x < 0 || x >= qsl[num_reqs])
      return invalid(fmt::format("logits_indices_padded[{}]: {} outside the {} scheduled tokens", i,
                                 x, qsl[num_reqs]));
    // Right bucketing on query_start_loc[1:]: the request whose range [qsl[r], qsl[r+1]) holds x.
    auto r = std::upper_bound(qsl.begin() + 1, qsl.end(), x) - (qsl.begin() + 1);
    ++counts[static_cast<size_t>(r)];
  }
  common.max_query_len = 0;
  for (size_t r = 0; r < num_reqs; ++r) {
    common.query_start_loc[r + 1] = common.query_start_loc[r] + counts[r];
    common.max_query_len = std::max(common.max_query_len, counts[r]);
  }
  common.num_actual_tokens = common.num_logits_indices;
  return common;
}

} // namespace kvactor
