#include "actors/cudagraph/dispatcher.hpp"

#include <algorithm>
#include <cassert>
#include <tuple>

namespace kvactor {

namespace {

// Candidate order within the FULL list. 0 sorts last for uniform_token_count and
// max_query_len (they are the unconstrained ones) and for num_reqs (no request padding).
auto full_order_key(const batch_descriptor& d) {
  return std::make_tuple(d.num_tokens, d.uniform_token_count == 0, d.max_query_len == 0,
                         d.num_reqs == 0, d.num_reqs);
}

} // namespace

int32_t uniform_token_count(int32_t num_reqs, int32_t num_tokens, int32_t q) {
  if (num_reqs <= 0) return 0;
  return int64_t{q} * num_reqs == num_tokens ? q : 0;
}

bool compatible(const batch_descriptor& d, int32_t num_reqs, int32_t num_tokens,
                int32_t uniform_token_count, int32_t lora_case, int32_t max_query_len,
                int32_t num_ubatches) {
  return (!d.exact_num_tokens || num_tokens == d.num_tokens)
         && (d.uniform_token_count == 0 || d.uniform_token_count == uniform_token_count)
         && (d.max_query_len == 0 || (max_query_len > 0 && max_query_len <= d.max_query_len))
         && (d.num_reqs == 0 || d.num_reqs >= num_reqs) && d.num_tokens >= num_tokens
         && d.num_active_loras == lora_case && d.num_ubatches == num_ubatches;
}

graph_dispatcher::graph_dispatcher(const cudagraph_plan& plan, int32_t max_num_seqs)
    : max_num_seqs_(max_num_seqs), full_(plan.full_graphs), piecewise_(plan.piecewise_graphs) {
  assert(max_num_seqs > 0);
  std::stable_sort(full_.begin(), full_.end(), [](const auto& a, const auto& b) {
    return full_order_key(a) < full_order_key(b);
  });
  std::stable_sort(piecewise_.begin(), piecewise_.end(),
                   [](const auto& a, const auto& b) { return a.num_tokens < b.num_tokens; });
  int32_t max_tokens = 0;
  for (const auto* xs : {&full_, &piecewise_})
    for (const auto& d : *xs) {
      max_tokens = std::max(max_tokens, d.num_tokens);
      lora_cases_.push_back(d.num_active_loras);
    }
  std::sort(lora_cases_.begin(), lora_cases_.end());
  lora_cases_.erase(std::unique(lora_cases_.begin(), lora_cases_.end()), lora_cases_.end());
  // Walk n upwards; each start index only moves forward, so this is linear.
  first_.resize(static_cast<size_t>(max_tokens) + 1);
  size_t f = 0;
  size_t p = 0;
  for (int32_t n = 0; n <= max_tokens; ++n) {
    while (f < full_.size() && full_[f].num_tokens < n)
      ++f;
    while (p < piecewise_.size() && piecewise_[p].num_tokens < n)
      ++p;
    first_[static_cast<size_t>(n)] = {f, p};
  }
}

int32_t graph_dispatcher::lora_case(int32_t num_active_loras) const {
  // The smallest captured case >= the count, clamped to the largest (docs/vllm-semantics.md §7.6).
  auto i = std::lower_bound(lora_cases_.begin(), lora_cases_.end(), num_active_loras);
  if (i == lora_cases_.end()) return lora_cases_.back();
  return *i;
}

batch_descriptor graph_dispatcher::dispatch(int32_t num_reqs, int32_t num_tokens,
                                            int32_t uniform_token_count, int32_t num_active_loras,
                                            int32_t max_query_len, int32_t num_ubatches) const {
  assert(num_reqs <= max_num_seqs_);
  if (num_tokens > 0 && num_tokens <= max_num_tokens()) {
    auto lora = lora_case(num_active_loras);
    auto [f, p] = first_[static_cast<size_t>(num_tokens)];
    auto fits = [&](const batch_descriptor& d) {
      return compatible(d, num_reqs, num_tokens, uniform_token_count, lora, max_query_len,
                        num_ubatches);
    };
    for (; f < full_.size(); ++f)
      if (fits(full_[f])) return full_[f];
    for (; p < piecewise_.size(); ++p)
      if (fits(piecewise_[p])) return piecewise_[p];
  }
  batch_descriptor eager;
  eager.mode = cudagraph_mode::none;
  eager.num_tokens = num_tokens;
  eager.num_reqs = num_reqs;
  eager.num_active_loras = num_active_loras;
  eager.num_ubatches = num_ubatches;
  return eager;
}

} // namespace kvactor
