// What one rank of the synthetic attention stack holds, described once for both implementations:
// the slices of the global weight matrices (attention_stack materialises them in host memory,
// attention_stack_cuda generates them on the device), its attention sinks, and each layer's
// paged-attention parameters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kvactor/kernels/paged_attention.h"
#include "kvactor/kernels/stack_config.h"
#include "kvactor/kernels/synthetic_weights.h"

namespace kvactor::kernels {

/// The [outs, ins] block of a global matrix W that a rank holds, stored transposed (one output
/// per row, as linear() and the GEMMs read it):
///   w[o, i] = synthetic_uniform(seed, matrix, layer, row_begin + i, col_begin + o) * scale
struct weight_slice {
  weight_matrix matrix = weight_matrix::q;
  int32_t layer = 0;
  int64_t row_begin = 0;
  int32_t ins = 0;
  int64_t col_begin = 0;
  int32_t outs = 0;
  float scale = 0.0f; // 1 / sqrt(fan_in), fan_in the global input width
};

/// One layer's projections on this rank. k and v exist only for a layer that owns its cache
/// (not one sharing another's); for MLA, k is the latent projection and there is no v.
struct layer_weight_slices {
  weight_slice q;
  std::optional<weight_slice> k, v;
  weight_slice o;
};

/// The slices of layer `layer` (geometry `g`, from plan_stack(cfg)) on cfg.tp_rank.
layer_weight_slices layer_slices(const stack_config& cfg, const layer_geometry& g, size_t layer);

/// The vocab projection, replicated on every rank: [vocab_size, hidden].
weight_slice vocab_slice(const stack_config& cfg);

/// The attention sinks of this rank's q heads of layer `layer` ([q_heads]), or empty when the
/// layer has none.
std::vector<float> layer_sinks(const stack_config& cfg, const layer_geometry& g, size_t layer);

/// The paged_attention parameters of a layer: its heads and sizes, scale 1 / sqrt(head_size),
/// causal, its window, chunk and softcap, and `sinks` ([q_heads], in the memory the kernel reads)
/// or null.
attention_params layer_attention_params(const stack_layer& layer, const layer_geometry& g,
                                        const float* sinks);

} // namespace kvactor::kernels
