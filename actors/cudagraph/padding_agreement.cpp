#include "actors/cudagraph/padding_agreement.hpp"

#include <algorithm>

namespace kvactor {

namespace {
constexpr size_t row_width = 7;
} // namespace

std::vector<int64_t> encode_row(const padding_row& r) {
  return {r.num_tokens,
          static_cast<int64_t>(r.mode),
          r.uniform_token_count,
          r.max_query_len,
          r.allow_ubatching,
          r.num_reqs,
          r.alive};
}

std::vector<padding_row> decode_rows(const std::vector<int64_t>& table) {
  std::vector<padding_row> rows;
  for (size_t at = 0; at + row_width <= table.size(); at += row_width) {
    padding_row r;
    r.num_tokens = static_cast<int32_t>(table[at]);
    r.mode = static_cast<cudagraph_mode>(table[at + 1]);
    r.uniform_token_count = static_cast<int32_t>(table[at + 2]);
    r.max_query_len = static_cast<int32_t>(table[at + 3]);
    r.allow_ubatching = table[at + 4] != 0;
    r.num_reqs = static_cast<int32_t>(table[at + 5]);
    r.alive = table[at + 6] != 0;
    rows.push_back(r);
  }
  return rows;
}

padding_agreement agree_padding(const std::vector<padding_row>& rows, int32_t self,
                                const graph_dispatcher& dispatcher, int32_t ubatch_threshold) {
  auto a = agree_padding_rows(rows, self, ubatch_threshold);
  if (!a.redispatch) return a;
  const auto& me = rows[static_cast<size_t>(self)];
  a.own = dispatcher.dispatch(me.num_reqs, a.synced_tokens, a.uniform_token_count, 0,
                              a.max_query_len < 0 ? 0 : a.max_query_len);
  a.padded_tokens = a.own.mode == cudagraph_mode::none ? a.synced_tokens : a.own.num_tokens;
  return a;
}

padding_agreement agree_padding_rows(const std::vector<padding_row>& rows, int32_t self,
                                     int32_t ubatch_threshold) {
  padding_agreement a;
  const auto& me = rows[static_cast<size_t>(self)];
  const bool all_zero = std::all_of(
      rows.begin(), rows.end(), [](const padding_row& r) { return !r.alive || r.num_tokens == 0; });
  if (all_zero) {
    a.skip = true;
    return a;
  }
  int32_t max_tokens = 0, min_tokens = INT32_MAX;
  for (const auto& r : rows)
    if (r.alive) {
      max_tokens = std::max(max_tokens, r.num_tokens);
      min_tokens = std::min(min_tokens, r.num_tokens);
    }
  const bool all_ubatch = std::all_of(
      rows.begin(), rows.end(), [](const padding_row& r) { return !r.alive || r.allow_ubatching; });
  if (all_ubatch && min_tokens >= ubatch_threshold) {
    a.microbatch = true;
    a.synced_tokens = max_tokens;
    a.padded_tokens = max_tokens;
    return a;
  }
  // Dead ranks count as the max mode and agree with any uniform count.
  int32_t uniform = -1;
  bool uniform_agrees = true;
  auto mode = cudagraph_mode::full;
  bool all_bound = true;
  int32_t bound = -1;
  for (const auto& r : rows) {
    if (!r.alive) continue;
    if (uniform == -1)
      uniform = r.uniform_token_count;
    else if (uniform != r.uniform_token_count)
      uniform_agrees = false;
    mode = static_cast<cudagraph_mode>(
        std::min(static_cast<uint8_t>(mode), static_cast<uint8_t>(r.mode)));
    if (r.max_query_len < 0)
      all_bound = false;
    else
      bound = std::max(bound, r.max_query_len);
  }
  a.uniform_token_count = uniform_agrees && uniform > 0 ? uniform : 0;
  if (mode == cudagraph_mode::none) {
    a.eager = true;
    a.padded_tokens = me.num_tokens;
    return a;
  }
  a.synced_tokens = max_tokens;
  a.max_query_len = all_bound ? bound : -1;
  a.redispatch = true;
  a.padded_tokens = max_tokens;
  return a;
}

} // namespace kvactor
