// The batch of one step as the rank lays it out for its builders (host memory; the builders read
// it while the rank waits, then the rank reads their metadata).
#pragma once

#include <cstdint>
#include <vector>

#include "messages/request.hpp"

namespace kvactor {

/// What the rank knows about one KV cache group.
struct group_geometry {
  int32_t block_size = 16;        // manager block (tokens)
  int32_t kernel_block_size = 16; // entries of the kernel block table
  bool positional = true;         // false for state groups (one block for the whole request)
};

/// The batch of the current step, in batch order. Written by the rank, read by the builders.
struct step_batch {
  uint64_t seq = 0;
  std::vector<uint64_t> request_ids;            // [num_reqs]
  std::vector<int32_t> token_ids;               // [num_tokens]
  std::vector<int64_t> positions;               // [num_tokens]
  std::vector<int32_t> query_start_loc;         // [num_reqs + 1]
  std::vector<int32_t> seq_lens;                // [num_reqs]
  std::vector<bool> is_prefilling;              // [num_reqs]
  std::vector<std::vector<int32_t>> block_rows; // [num_groups][num_reqs x width] kernel ids
  std::vector<int32_t> widths;                  // [num_groups]
  std::vector<int32_t> sample_rows;             // token index of each sampled request's last token
  std::vector<uint64_t> sample_ids;             // the requests those rows belong to
  std::vector<sampling_params> sample_params;   // how each of those requests samples
  std::vector<int64_t> sample_positions;        // the position the sampled token will take
  int32_t max_query_len = 0;
  int32_t max_seq_len = 0;

  int32_t num_reqs() const { return static_cast<int32_t>(request_ids.size()); }
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
};

} // namespace kvactor
