// Step metadata on the device: slot mappings from block tables, block-table row updates, and
// the fast-prefill logits-indices gather. The host computes the same (actors/metadata/
// slot_mapping.hpp, step_state, fast_prefill.hpp); these let a GPU rank keep its tables and
// slots on the device and write into persistent buffers that CUDA graphs replay.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvactor/kernels/cuda/cuda_check.h"

namespace kvactor::kernels {

/// out[t] = block_table[r * width + p / kbs] * kbs + p % kbs for every token t of request r
/// (t in [query_start_loc[r], query_start_loc[r + 1]), p = positions[t]), and -1 for every
/// t in [query_start_loc[num_reqs], out_len): padding never keeps a stale slot.
///   query_start_loc // [num_reqs + 1] device
///   positions       // [>= query_start_loc[num_reqs]] device
///   block_table     // [num_reqs, width] device kernel block ids
///   out             // [out_len] device
/// Host-checked (before any CUDA call): sizes >= 0, kernel_block_size >= 1, non-null pointers
/// when used. REQUIRES: the device arrays are consistent (positions within their row).
cuda_status slot_mapping_cuda(const int32_t* query_start_loc, const int64_t* positions,
                              const int32_t* block_table, int32_t width, int32_t num_reqs,
                              int32_t kernel_block_size, int64_t* out, int32_t out_len,
                              cudaStream_t stream);

/// Applies num_updates block-table updates: update u writes ids[offsets[u] .. offsets[u + 1])
/// into row rows[u] from column starts[u] on (the driver's block_table_update, on the device).
///   block_table       // [num_rows, width] device
///   rows, starts      // [num_updates] device
///   offsets           // [num_updates + 1] device indptr into ids
///   ids               // [offsets[num_updates]] device
/// Host-checked: counts >= 0, width >= 1, non-null pointers when used. REQUIRES: every write
/// lies inside its row (the step validation has checked the plan on the host).
cuda_status update_block_table_cuda(int32_t* block_table, int32_t width, int32_t num_rows,
                                    const int32_t* rows, const int32_t* starts,
                                    const int32_t* offsets, const int32_t* ids, int32_t num_updates,
                                    cudaStream_t stream);

/// out[i, :] = hidden[indices[i], :] for i < count: the rows that produce logits (fast prefill
/// gathers them before the layers that skip prefill tokens).
///   hidden  // [*, hidden_size] device float
///   indices // [count] device
///   out     // [count, hidden_size] device float
cuda_status gather_rows_cuda(const float* hidden, int32_t hidden_size, const int32_t* indices,
                             int32_t count, float* out, cudaStream_t stream);

} // namespace kvactor::kernels
