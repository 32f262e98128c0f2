#include "actors/metadata/ubatch_inputs.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "actors/metadata/slot_mapping.hpp"

namespace kvactor {

expected<attention_inputs> slice_inputs(const step_batch& b, const ubatch_work& w,
                                        const std::vector<group_geometry>& groups,
                                        std::vector<std::vector<int64_t>>& slot_buffers) {
  if (w.req_start < 0 || w.req_end < w.req_start || w.req_end > b.num_reqs() || w.token_start < 0
      || w.token_end < w.token_start || w.token_end > b.num_tokens())
    return make_error(errc::invalid_argument,
                      fmt::format("ubatch_work: slice tokens [{}, {}) requests [{}, {}) is outside "
                                  "the step's {} tokens and {} requests",
                                  w.token_start, w.token_end, w.req_start, w.req_end,
                                  b.num_tokens(), b.num_reqs()));
  if (b.block_rows.size() != groups.size())
    return make_error(errc::invalid_argument,
                      fmt::format("groups: {} given for a batch of {} KV cache groups",
                                  groups.size(), b.block_rows.size()));
  attention_inputs in;
  in.num_reqs = w.req_end - w.req_start;
  in.num_tokens = w.token_end - w.token_start;
  in.ubatch_idx = w.ubatch;
  const bool whole = w.req_start == 0 && w.req_end == b.num_reqs() && w.token_start == 0
                     && w.token_end == b.num_tokens();
  if (whole) {
    // One microbatch (the common case): the batch's per-request arrays as they are.
    in.query_start_loc = b.query_start_loc;
    in.seq_lens = b.seq_lens;
    in.is_prefilling = b.is_prefilling;
    in.max_query_len = b.max_query_len;
    in.max_seq_len = b.max_seq_len;
  } else {
    in.query_start_loc.reserve(static_cast<size_t>(in.num_reqs) + 1);
    in.query_start_loc.assign(1, 0);
    in.seq_lens.reserve(static_cast<size_t>(in.num_reqs));
    in.is_prefilling.reserve(static_cast<size_t>(in.num_reqs));
  }
  for (int32_t r = whole ? w.req_end : w.req_start; r < w.req_end; ++r) {
    const auto ri = static_cast<size_t>(r);
    const int32_t begin = std::max(b.query_start_loc[ri], w.token_start);
    const int32_t end = std::min(b.query_start_loc[ri + 1], w.token_end);
    const int32_t n = std::max(0, end - begin);
    // A request continued by the next slice sees only the tokens up to the slice's end.
    const int32_t seq_len = b.seq_lens[ri] - (b.query_start_loc[ri + 1] - std::max(end, begin));
    in.query_start_loc.push_back(in.query_start_loc.back() + n);
    in.seq_lens.push_back(seq_len);
    in.is_prefilling.push_back(b.is_prefilling[ri]);
    in.max_query_len = std::max(in.max_query_len, n);
    in.max_seq_len = std::max(in.max_seq_len, seq_len);
  }
  in.positions = std::span<const int64_t>{b.positions}.subspan(static_cast<size_t>(w.token_start),
                                                               static_cast<size_t>(in.num_tokens));
  in.groups.resize(groups.size());
  slot_buffers.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    auto& out = in.groups[g];
    const int32_t width = b.widths[g];
    out.width = width;
    const auto row0 = static_cast<size_t>(w.req_start) * static_cast<size_t>(width);
    const auto rows = static_cast<size_t>(in.num_reqs) * static_cast<size_t>(width);
    out.block_table = std::span<const int32_t>{b.block_rows[g]}.subspan(row0, rows);
    auto& slots = slot_buffers[g];
    slots.assign(static_cast<size_t>(in.num_tokens), -1);
    out.slot_mapping = slots;
    if (!groups[g].positional || in.num_tokens == 0) continue;
    slot_mapping_params params;
    params.kernel_block_size = groups[g].kernel_block_size;
    if (auto ok = compute_slot_mapping(out.block_table, width, in.query_start_loc, in.positions,
                                       params, slots);
        !ok)
      return ok.err();
  }
  return in;
}

} // namespace kvactor
