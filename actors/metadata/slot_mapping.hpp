// Block-table width, kernel block expansion and slot mappings (docs/vllm-semantics.md
// §6.1-§6.3). Pure C++, no CAF.
//
// A KV cache group allocates manager blocks of block_size tokens; a backend may address them
// as smaller kernel blocks (kernel_block_size divides block_size). Block tables hold kernel
// block ids; a token's slot is kernel_block_id * kernel_block_size + offset, which equals
// manager_block_id * block_size + (position mod block_size) whatever the kernel block size.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

/// §6.1: the number of kernel-block entries in one block-table row. kernel_block_size 0 means
/// block_size. Unless token_alignment is 0, max_blocks is first rounded up to a multiple of
/// token_alignment / gcd(token_alignment, block_size) blocks, i.e. the row covers a multiple of
/// token_alignment tokens. Fails with errc::invalid_argument when a size is out of range (negative
/// counts, block sizes < 1), kernel_block_size does not divide block_size, or the width overflows.
expected<int32_t> block_table_width(int32_t max_blocks, int32_t block_size,
                                    int32_t kernel_block_size = 0, int32_t token_alignment = 128);

/// §6.2: every manager block b becomes the kernel blocks b * bpk + k for k = 0..bpk-1, with
/// bpk = block_size / kernel_block_size (kernel_block_size 0 means block_size), in order.
/// Fails with errc::invalid_argument on block sizes < 1, kernel_block_size not dividing
/// block_size, or a negative block id.
expected<std::vector<int32_t>> expand_block_ids(std::span<const int32_t> block_ids,
                                                int32_t block_size, int32_t kernel_block_size = 0);

/// The slot of the token at `position`, or -1 when this context-parallel rank does not hold it.
/// cp_size 1 (no context parallelism): table[p / kbs] * kbs + p % kbs. cp_size C, rank c,
/// interleave I: one table entry covers kbs * C tokens dealt out to the ranks I at a time;
/// with o = p % (kbs * C) the token is local iff (o / I) % C == c, at local offset
/// (o / (I * C)) * I + o % I.
/// REQUIRES: position >= 0, kernel_block_size >= 1, cp_size >= 1, 0 <= cp_rank < cp_size,
/// interleave >= 1, and the row has an entry for the position's block.
int64_t slot_for_position(std::span<const int32_t> block_table_row, int64_t position,
                          int32_t kernel_block_size, int32_t cp_size = 1, int32_t cp_rank = 0,
                          int32_t interleave = 1);

struct slot_mapping_params {
  int32_t kernel_block_size = 16;
  int32_t cp_size = 1;       // decode context parallel world size C
  int32_t cp_rank = 0;       // this rank c
  int32_t cp_interleave = 1; // I: consecutive tokens a rank holds before the next rank's turn
};

/// §6.3 for one KV cache group: writes the slot of every scheduled token (request r's tokens
/// are [query_start_loc[r], query_start_loc[r + 1]), row r of the block table, positions from
/// `positions`) into `out`, and -1 into EVERY entry from query_start_loc[num_reqs] to the end of
/// `out`, so stale slots of an earlier, longer step never survive. `out` is the persistent buffer
/// ([max_num_batched_tokens]); callers view its first num_tokens_padded entries.
/// Fails with errc::invalid_argument naming the field and value on: invalid params; a
/// query_start_loc that is empty, does not start at 0 or decreases; a block table shorter than
/// num_reqs rows of `width`; positions or `out` shorter than the token count; a negative
/// position; or a position whose block lies beyond the row. `out` is untouched on failure.
status compute_slot_mapping(std::span<const int32_t> block_table, // [>= num_reqs x width]
                            int32_t width,
                            std::span<const int32_t> query_start_loc, // [num_reqs + 1]
                            std::span<const int64_t> positions,       // [>= num_tokens]
                            const slot_mapping_params& params,
                            std::span<int64_t> out); // [max_num_batched_tokens]

} // namespace kvactor
