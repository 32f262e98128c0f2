#include "actors/metadata/slot_mapping.hpp"

#include <cassert>
#include <limits>
#include <numeric>

#include <bit>

#include <fmt/format.h>

namespace kvactor {

namespace {

status invalid(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

// Blocks per manager block, after checking both sizes; kernel_block_size 0 means block_size.
expected<int32_t> blocks_per_kv_block(int32_t block_size, int32_t kernel_block_size) {
  if (block_size < 1)
    return make_error(errc::invalid_argument,
                      fmt::format("block_size: {} is not positive", block_size));
  if (kernel_block_size == 0) return 1;
  if (kernel_block_size < 0 || block_size % kernel_block_size != 0)
    return make_error(errc::invalid_argument,
                      fmt::format("kernel_block_size: {} does not divide block_size {}",
                                  kernel_block_size, block_size));
  return block_size / kernel_block_size;
}

status validate(const slot_mapping_params& p) {
  if (p.kernel_block_size < 1)
    return invalid(fmt::format("kernel_block_size: {} is not positive", p.kernel_block_size));
  if (p.cp_size < 1) return invalid(fmt::format("cp_size: {} is not positive", p.cp_size));
  if (p.cp_rank < 0 || p.cp_rank >= p.cp_size)
    return invalid(fmt::format("cp_rank: {} outside [0, cp_size {})", p.cp_rank, p.cp_size));
  if (p.cp_interleave < 1)
    return invalid(fmt::format("cp_interleave: {} is not positive", p.cp_interleave));
  return ok();
}

} // namespace

expected<int32_t> block_table_width(int32_t max_blocks, int32_t block_size,
                                    int32_t kernel_block_size, int32_t token_alignment) {
  auto bpk = blocks_per_kv_block(block_size, kernel_block_size);
  if (!bpk) return bpk.err();
  if (max_blocks < 0)
    return make_error(errc::invalid_argument,
                      fmt::format("max_blocks: {} is negative", max_blocks));
  if (token_alignment < 0)
    return make_error(errc::invalid_argument,
                      fmt::format("token_alignment: {} is negative", token_alignment));
  int64_t blocks = max_blocks;
  if (token_alignment > 0) {
    // The smallest block count whose tokens are a multiple of token_alignment.
    int64_t align = token_alignment / std::gcd(token_alignment, block_size);
    blocks = (blocks + align - 1) / align * align;
  }
  auto width = blocks * *bpk;
  if (width > std::numeric_limits<int32_t>::max())
    return make_error(errc::invalid_argument,
                      fmt::format("max_blocks: {} gives a block-table width of {} entries, "
                                  "beyond int32",
                                  max_blocks, width));
  return static_cast<int32_t>(width);
}

expected<std::vector<int32_t>> expand_block_ids(std::span<const int32_t> block_ids,
                                                int32_t block_size, int32_t kernel_block_size) {
  auto bpk = blocks_per_kv_block(block_size, kernel_block_size);
  if (!bpk) return bpk.err();
  std::vector<int32_t> out;
  out.reserve(block_ids.size() * static_cast<size_t>(*bpk));
  for (size_t i = 0; i < block_ids.size(); ++i) {
    auto b = int64_t{block_ids[i]};
    if (b < 0 || (b + 1) * *bpk - 1 > std::numeric_limits<int32_t>::max())
      return make_error(errc::invalid_argument,
                        fmt::format("block_ids[{}]: {} is not a valid block id for {} kernel "
                                    "blocks per block",
                                    i, b, *bpk));
    for (int32_t k = 0; k < *bpk; ++k)
      out.push_back(static_cast<int32_t>(b * *bpk + k));
  }
  return out;
}

int64_t slot_for_position(std::span<const int32_t> block_table_row, int64_t position,
                          int32_t kernel_block_size, int32_t cp_size, int32_t cp_rank,
                          int32_t interleave) {
  assert(position >= 0 && kernel_block_size >= 1 && cp_size >= 1);
  assert(cp_rank >= 0 && cp_rank < cp_size && interleave >= 1);
  int64_t kbs = kernel_block_size;
  int64_t span = kbs * cp_size; // tokens one table entry covers over all ranks
  auto blk = static_cast<size_t>(position / span);
  assert(blk < block_table_row.size());
  auto o = position % span;
  if ((o / interleave) % cp_size != cp_rank) return -1;
  auto local = (o / (int64_t{interleave} * cp_size)) * interleave + o % interleave;
  return int64_t{block_table_row[blk]} * kbs + local;
}

status compute_slot_mapping(std::span<const int32_t> block_table, int32_t width,
                            std::span<const int32_t> query_start_loc,
                            std::span<const int64_t> positions, const slot_mapping_params& params,
                            std::span<int64_t> out) {
  if (auto s = validate(params); !s) return s;
  if (width < 0) return invalid(fmt::format("width: {} is negative", width));
  if (query_start_loc.empty()) return invalid("query_start_loc: empty, expected num_reqs + 1");
  if (query_start_loc[0] != 0)
    return invalid(fmt::format("query_start_loc[0]: {} is not 0", query_start_loc[0]));
  auto num_reqs = query_start_loc.size() - 1;
  for (size_t r = 1; r <= num_reqs; ++r)
    if (query_start_loc[r] < query_start_loc[r - 1])
      return invalid(fmt::format("query_start_loc[{}]: {} is below query_start_loc[{}] = {}", r,
                                 query_start_loc[r], r - 1, query_start_loc[r - 1]));
  auto w = static_cast<size_t>(width);
  if (block_table.size() < num_reqs * w)
    return invalid(fmt::format("block_table: {} entries, fewer than num_reqs x width = {} x {}",
                               block_table.size(), num_reqs, width));
  auto num_tokens = static_cast<size_t>(query_start_loc[num_reqs]);
  if (positions.size() < num_tokens)
    return invalid(fmt::format("positions: {} entries, fewer than the {} scheduled tokens",
                               positions.size(), num_tokens));
  if (out.size() < num_tokens)
    return invalid(fmt::format("slot_mapping buffer: {} entries, fewer than the {} scheduled "
                               "tokens",
                               out.size(), num_tokens));
  // Validate every position before writing, so a failure leaves the buffer as it was.
  int64_t span = int64_t{params.kernel_block_size} * params.cp_size;
  for (size_t r = 0; r < num_reqs; ++r)
    for (auto t = static_cast<size_t>(query_start_loc[r]);
         t < static_cast<size_t>(query_start_loc[r + 1]); ++t) {
      if (positions[t] < 0)
        return invalid(fmt::format("positions[{}]: {} is negative", t, positions[t]));
      if (positions[t] >= span * width)
        return invalid(fmt::format("positions[{}]: {} of request {} needs block-table entry {}, "
                                   "beyond width {}",
                                   t, positions[t], r, positions[t] / span, width));
    }
  const int32_t kbs = params.kernel_block_size;
  if (params.cp_size == 1 && (kbs & (kbs - 1)) == 0) {
    // The common case, once per token per step: shifts instead of 64-bit divisions.
    const int shift = std::countr_zero(static_cast<uint32_t>(kbs));
    const int64_t mask = kbs - 1;
    for (size_t r = 0; r < num_reqs; ++r) {
      const int32_t* row = block_table.data() + r * w;
      for (auto t = static_cast<size_t>(query_start_loc[r]);
           t < static_cast<size_t>(query_start_loc[r + 1]); ++t)
        out[t] = (int64_t{row[positions[t] >> shift]} << shift) + (positions[t] & mask);
    }
  } else {
    for (size_t r = 0; r < num_reqs; ++r) {
      auto row = block_table.subspan(r * w, w);
      for (auto t = static_cast<size_t>(query_start_loc[r]);
           t < static_cast<size_t>(query_start_loc[r + 1]); ++t)
        out[t] = slot_for_position(row, positions[t], kbs, params.cp_size, params.cp_rank,
                                   params.cp_interleave);
    }
  }
  for (auto t = num_tokens; t < out.size(); ++t)
    out[t] = -1;
  return ok();
}

} // namespace kvactor
