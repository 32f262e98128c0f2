// Where each piece of a checkpoint goes in the GPU decoder's fused layout (decoder_tensor of
// decoder.h): q/k/v rows into one matrix per layer, gate/up rows into another, o_proj and
// down_proj columns for a tensor-parallel rank, vectors whole. A plan is pure bookkeeping, so the
// CPU checks it (every element of every device tensor written exactly once, from the element
// the CPU decoder reads) and the GPU uploader only copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvactor/kernels/decoder.h"
#include "model/hf_decoder.hpp"

namespace kvactor {

/// One copy: the block rows [row_begin, +rows) x columns [col_begin, +cols) of `source` (a 1-D
/// source is one column), written row-major and contiguous at element `target_offset` of the
/// target tensor.
struct weight_copy {
  kernels::decoder_tensor target;
  int32_t layer = -1; // -1 for embed, lm_head, final_norm
  int64_t target_offset = 0;
  const tensor_ref* source = nullptr;
  int64_t row_begin = 0, rows = 0, col_begin = 0, cols = 0;

  int64_t elements() const { return rows * cols; }
};

/// The copies that fill every device tensor of `cfg`'s rank from `ckpt`, in checkpoint order
/// within each layer. Checks the checkpoint first (check_checkpoint_tensors).
expected<std::vector<weight_copy>> plan_device_weights(const checkpoint& ckpt,
                                                       const hf_decoder_config& cfg);

/// Rows [row_from, row_from + row_count) of `copy`'s block, converted to bf16 (`to_bf16`) or
/// float, written contiguously at `out` (row_count * copy.cols elements).
void fill_block(const weight_copy& copy, int64_t row_from, int64_t row_count, bool to_bf16,
                std::byte* out);

/// The [rows, cols] shape of a device tensor for `cfg`'s rank (rows 1 for vectors; 0 x 0 when
/// the family has none).
std::pair<int64_t, int64_t> device_tensor_shape(const hf_decoder_config& cfg,
                                                kernels::decoder_tensor t);

/// Device bytes the GPU decoder of `cfg`'s rank holds for steps of max_tokens tokens: the
/// weights exactly (bf16 matrices, float vectors), plus the activations and workspaces
/// decoder_cuda allocates (an upper estimate). The KV cache budget takes it off the GPU.
int64_t decoder_gpu_bytes(const hf_decoder_config& cfg, int32_t max_tokens);

/// The bytes of one rank's weights with matrices of `matrix_bytes` per element (2 on the GPU, 4
/// for the CPU decoder's float) and norm vectors in float.
int64_t decoder_weight_bytes(const hf_decoder_config& cfg, int32_t matrix_bytes);

} // namespace kvactor
