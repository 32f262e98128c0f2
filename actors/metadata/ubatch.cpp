#include "actors/metadata/ubatch.hpp"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace kvactor {

namespace {

error invalid(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

template <class T>
std::vector<T> slice_of(const std::vector<T>& xs, size_t begin, size_t end) {
  return std::vector<T>(xs.begin() + static_cast<std::ptrdiff_t>(begin),
                        xs.begin() + static_cast<std::ptrdiff_t>(end));
}

status check_slice(size_t u, const ubatch_slice& s, const common_attention_metadata& m) {
  auto name = fmt::format("slices[{}]", u);
  if (s.token_start < 0 || s.token_end <= s.token_start || s.token_end > m.num_actual_tokens)
    return invalid(fmt::format("{}: tokens [{}, {}) not a non-empty range within [0, {})", name,
                               s.token_start, s.token_end, m.num_actual_tokens));
  if (s.req_start < 0 || s.req_end <= s.req_start || s.req_end > m.num_reqs)
    return invalid(fmt::format("{}: requests [{}, {}) not a non-empty range within [0, {})", name,
                               s.req_start, s.req_end, m.num_reqs));
  const auto& qsl = m.query_start_loc;
  if (qsl[static_cast<size_t>(s.req_start)] > s.token_start)
    return invalid(fmt::format("{}: token {} lies before request {}, which starts at {}", name,
                               s.token_start, s.req_start, qsl[static_cast<size_t>(s.req_start)]));
  return ok();
}

common_attention_metadata slice_metadata(const ubatch_slice& s,
                                         const common_attention_metadata& m) {
  auto r0 = static_cast<size_t>(s.req_start);
  auto r1 = static_cast<size_t>(s.req_end);
  auto t0 = static_cast<size_t>(s.token_start);
  auto t1 = static_cast<size_t>(s.token_end);
  common_attention_metadata out;
  out.num_reqs = s.num_reqs();
  out.num_actual_tokens = s.num_tokens();
  // Clamping to the token range skips the head of a split first request and cuts the tail of a
  // split last request; requests wholly inside the slice just shift by token_start.
  out.query_start_loc.reserve(r1 - r0 + 1);
  for (auto r = r0; r <= r1; ++r)
    out.query_start_loc.push_back(std::clamp(m.query_start_loc[r], s.token_start, s.token_end)
                                  - s.token_start);
  out.seq_lens = slice_of(m.seq_lens, r0, r1);
  // The last request's seq_len counts the tokens it leaves to the next slice; those are not
  // in the KV cache when this slice's attention runs.
  if (auto left = m.query_start_loc[r1] - s.token_end; left > 0) out.seq_lens.back() -= left;
  out.max_query_len = 0;
  for (int32_t i = 0; i < out.num_reqs; ++i)
    out.max_query_len = std::max(out.max_query_len, out.query_len(i));
  if (out.max_query_len == 0) out.max_query_len = m.max_query_len;
  out.max_seq_len =
      std::max(*std::max_element(out.seq_lens.begin(), out.seq_lens.end()), m.max_seq_len);
  auto w = static_cast<size_t>(m.block_table_width);
  out.block_table = m.block_table.subspan(r0 * w, (r1 - r0) * w);
  out.block_table_width = m.block_table_width;
  out.slot_mapping = m.slot_mapping.subspan(t0, t1 - t0);
  if (!m.positions.empty()) out.positions = m.positions.subspan(t0, t1 - t0);
  out.causal = m.causal;
  if (!m.is_prefilling.empty()) out.is_prefilling = slice_of(m.is_prefilling, r0, r1);
  return out;
}

} // namespace

expected<ubatch_slices> make_ubatch_slices(const std::vector<int32_t>& num_scheduled_tokens,
                                           int32_t num_tokens_padded, int32_t num_reqs_padded,
                                           int32_t k, int32_t split_point) {
  if (k < 1) return invalid(fmt::format("k: {} ubatches, expected at least 1", k));
  if (split_point < 0) return invalid(fmt::format("split_point: {} is negative", split_point));
  // [num_reqs + 1] cumulative token counts; int64_t so absurd counts cannot overflow.
  std::vector<int64_t> cu{0};
  for (size_t i = 0; i < num_scheduled_tokens.size(); ++i) {
    if (num_scheduled_tokens[i] < 0)
      return invalid(
          fmt::format("num_scheduled_tokens[{}]: {} is negative", i, num_scheduled_tokens[i]));
    cu.push_back(cu.back() + num_scheduled_tokens[i]);
  }
  auto total = cu.back();
  auto num_reqs = static_cast<int64_t>(num_scheduled_tokens.size());
  if (num_tokens_padded < total)
    return invalid(fmt::format("num_tokens_padded: {} is below the {} scheduled tokens",
                               num_tokens_padded, total));
  if (num_reqs_padded < num_reqs)
    return invalid(
        fmt::format("num_reqs_padded: {} is below the {} requests", num_reqs_padded, num_reqs));
  int64_t split = split_point > 0 ? split_point : num_tokens_padded / k;
  if (split == 0 || split * (k - 1) >= total)
    return invalid(fmt::format("k: {} ubatches of {} tokens leave the last ubatch without any of "
                               "the {} scheduled tokens (is_last_ubatch_empty)",
                               k, split, total));
  ubatch_slices out;
  int64_t start = 0;
  for (int32_t i = 1; i <= k; ++i) {
    auto end = i < k ? split * i : total;
    // The request holding token `start`, and the first request starting at or after `end`.
    auto req_start = std::upper_bound(cu.begin(), cu.end(), start) - cu.begin() - 1;
    auto req_end = std::lower_bound(cu.begin(), cu.end(), end) - cu.begin();
    out.slices.push_back({static_cast<int32_t>(start), static_cast<int32_t>(end),
                          static_cast<int32_t>(req_start), static_cast<int32_t>(req_end)});
    start = end;
  }
  out.padded = out.slices;
  out.padded.back().token_end = num_tokens_padded;
  out.padded.back().req_end = num_reqs_padded;
  return out;
}

bool is_last_ubatch_empty(int32_t orig_num_tokens, int32_t num_tokens_padded, int32_t k) {
  assert(k >= 1);
  return int64_t{num_tokens_padded / k} * (k - 1) >= orig_num_tokens;
}

expected<std::vector<common_attention_metadata>>
split_metadata(const std::vector<ubatch_slice>& slices, const common_attention_metadata& common) {
  if (auto s = validate(common); !s) return s.err();
  if (common.has_fast_prefill())
    return invalid(fmt::format("num_logits_indices: {}, but fast prefill is never armed for "
                               "microbatched steps",
                               common.num_logits_indices));
  std::vector<common_attention_metadata> out;
  out.reserve(slices.size());
  for (size_t u = 0; u < slices.size(); ++u) {
    if (auto s = check_slice(u, slices[u], common); !s) return s.err();
    out.push_back(slice_metadata(slices[u], common));
  }
  return out;
}

} // namespace kvactor
