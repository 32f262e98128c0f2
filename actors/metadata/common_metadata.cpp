#include "actors/metadata/common_metadata.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kvactor {

bool operator==(const common_attention_metadata& a, const common_attention_metadata& b) {
  auto same = [](auto x, auto y) { return std::ranges::equal(x, y); };
  return a.query_start_loc == b.query_start_loc && a.seq_lens == b.seq_lens
         && a.num_reqs == b.num_reqs && a.num_actual_tokens == b.num_actual_tokens
         && a.max_query_len == b.max_query_len && a.max_seq_len == b.max_seq_len
         && same(a.block_table, b.block_table) && a.block_table_width == b.block_table_width
         && same(a.slot_mapping, b.slot_mapping) && same(a.positions, b.positions)
         && a.causal == b.causal && a.is_prefilling == b.is_prefilling
         && a.logits_indices_padded == b.logits_indices_padded
         && a.num_logits_indices == b.num_logits_indices
         && a.max_logits_per_req == b.max_logits_per_req;
}

namespace {

status invalid(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

} // namespace

status validate(const common_attention_metadata& m) {
  if (m.num_reqs < 0) return invalid(fmt::format("num_reqs: {} is negative", m.num_reqs));
  if (m.num_actual_tokens < 0)
    return invalid(fmt::format("num_actual_tokens: {} is negative", m.num_actual_tokens));
  auto num_reqs = static_cast<size_t>(m.num_reqs);
  if (m.query_start_loc.size() != num_reqs + 1)
    return invalid(fmt::format("query_start_loc: {} entries, expected num_reqs + 1 = {}",
                               m.query_start_loc.size(), num_reqs + 1));
  if (m.query_start_loc[0] != 0)
    return invalid(fmt::format("query_start_loc[0]: {} is not 0", m.query_start_loc[0]));
  for (size_t i = 1; i <= num_reqs; ++i)
    if (m.query_start_loc[i] < m.query_start_loc[i - 1])
      return invalid(fmt::format("query_start_loc[{}]: {} is below query_start_loc[{}] = {}", i,
                                 m.query_start_loc[i], i - 1, m.query_start_loc[i - 1]));
  if (m.query_start_loc[num_reqs] > m.num_actual_tokens)
    return invalid(fmt::format("query_start_loc[{}]: {} exceeds num_actual_tokens {}", num_reqs,
                               m.query_start_loc[num_reqs], m.num_actual_tokens));
  if (m.seq_lens.size() != num_reqs)
    return invalid(
        fmt::format("seq_lens: {} entries, expected num_reqs = {}", m.seq_lens.size(), num_reqs));
  for (size_t i = 0; i < num_reqs; ++i)
    if (m.seq_lens[i] < 0)
      return invalid(fmt::format("seq_lens[{}]: {} is negative", i, m.seq_lens[i]));
  if (m.block_table_width < 0)
    return invalid(fmt::format("block_table_width: {} is negative", m.block_table_width));
  if (m.block_table.size() != num_reqs * static_cast<size_t>(m.block_table_width))
    return invalid(fmt::format("block_table: {} entries, expected num_reqs x width = {} x {}",
                               m.block_table.size(), num_reqs, m.block_table_width));
  auto num_tokens = static_cast<size_t>(m.num_actual_tokens);
  if (m.slot_mapping.size() < num_tokens)
    return invalid(fmt::format("slot_mapping: {} entries, fewer than num_actual_tokens {}",
                               m.slot_mapping.size(), num_tokens));
  if (!m.positions.empty() && m.positions.size() < num_tokens)
    return invalid(fmt::format("positions: {} entries, fewer than num_actual_tokens {}",
                               m.positions.size(), num_tokens));
  if (!m.is_prefilling.empty() && m.is_prefilling.size() != num_reqs)
    return invalid(fmt::format("is_prefilling: {} entries, expected num_reqs = {}",
                               m.is_prefilling.size(), num_reqs));
  if (m.num_logits_indices < 0
      || static_cast<size_t>(m.num_logits_indices) > m.logits_indices_padded.size())
    return invalid(fmt::format("num_logits_indices: {} outside [0, {}] (logits_indices_padded)",
                               m.num_logits_indices, m.logits_indices_padded.size()));
  return ok();
}

expected<decode_prefill_split> split_decodes_and_prefills(const common_attention_metadata& m,
                                                          int32_t decode_threshold,
                                                          bool require_uniform) {
  if (decode_threshold < 0)
    return make_error(errc::invalid_argument,
                      fmt::format("decode_threshold: {} is negative", decode_threshold));
  if (m.num_reqs < 0 || m.query_start_loc.size() != static_cast<size_t>(m.num_reqs) + 1)
    return make_error(errc::invalid_argument,
                      fmt::format("query_start_loc: {} entries, expected num_reqs + 1 = {}",
                                  m.query_start_loc.size(), int64_t{m.num_reqs} + 1));
  auto n = m.num_reqs;
  auto all_decode = decode_prefill_split{n, 0, m.num_actual_tokens, 0};
  if (n == 0) return decode_prefill_split{};
  // NOTE: a uniform multi-token batch must be checked request by request even when every query
  // fits under the threshold, so the shortcut only holds for single-token thresholds.
  if (m.max_query_len <= decode_threshold && (!require_uniform || decode_threshold <= 1))
    return all_decode;
  auto first_len = m.query_len(0);
  if (first_len > decode_threshold) return decode_prefill_split{0, n, 0, m.num_actual_tokens};
  int32_t first_prefill = n;
  for (int32_t i = 0; i < n; ++i) {
    auto q = m.query_len(i);
    bool prefill = require_uniform ? q != first_len : (q > decode_threshold || q == 0);
    if (prefill) {
      first_prefill = i;
      break;
    }
  }
  // max_query_len may be a loose upper bound; then every request can still be a decode.
  if (first_prefill == n) return all_decode;
  auto decode_tokens = m.query_start_loc[static_cast<size_t>(first_prefill)];
  return decode_prefill_split{first_prefill, n - first_prefill, decode_tokens,
                              m.num_actual_tokens - decode_tokens};
}

} // namespace kvactor
