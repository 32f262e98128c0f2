// Shape of the synthetic attention stack a rank executes (docs/design.md, "The workload a rank
// executes"), and the per-rank geometry derived from it.
#pragma once

#include <cstdint>
#include <vector>

namespace kvactor::kernels {

enum class stack_layer_kind { full, sliding_window, chunked_local, mla };

const char* to_string(stack_layer_kind kind);

struct stack_layer {
  stack_layer_kind kind = stack_layer_kind::full;
  int32_t num_q_heads = 0;  // this rank: total_q_heads / tp_size
  int32_t num_kv_heads = 0; // this rank: max(1, total_kv_heads / tp_size); MLA: 1 (the latent)
  int32_t head_size = 0;    // score dims; MLA: the latent's size
  // V dims per head; 0 = head_size. MLA (a simplification of the real absorbed MLA): V is the
  // first head_size_v elements of the latent, 0 = head_size / 2, and RoPE (when on) rotates the
  // remaining tail [head_size_v, head_size), as DeepSeek's rope part.
  int32_t head_size_v = 0;
  int32_t sliding_window = 0; // > 0 exactly for sliding_window layers
  int32_t chunk_size = 0;     // > 0 exactly for chunked_local layers
  float softcap = 0.0f;
  bool has_sinks = false;
  bool use_rope = true;
  int32_t shares_kv_with = -1; // -1, or an earlier non-sharing layer whose cache this one reads
};

struct stack_config {
  int32_t hidden_size = 0;
  int32_t vocab_size = 0; // width of the greedy projection; the caller caps the model's vocab
  uint64_t seed = 0;
  int32_t tp_rank = 0, tp_size = 1;
  // Model totals, for weight slicing. total_kv_heads applies to non-MLA layers; either
  // tp_size divides it (heads split) or it divides tp_size (each head replicated on
  // tp_size / total_kv_heads ranks), as in vLLM.
  int32_t total_q_heads = 0, total_kv_heads = 0;
  std::vector<stack_layer> layers;
};

/// Where one layer's heads sit on this rank, in global head indices, and its derived sizes.
struct layer_geometry {
  int32_t q_heads = 0, kv_heads = 0;           // on this rank
  int32_t q_head_begin = 0, kv_head_begin = 0; // global index of this rank's first head
  int32_t head_size = 0, v_size = 0;
  int32_t v_offset = 0;  // where V starts in a cache entry (MLA: 0)
  int32_t content = 0;   // cache elements per (head, token): head_size + v_size; MLA: head_size
  int32_t kv_source = 0; // the layer whose cache this layer reads (itself unless sharing)
  int32_t rope_offset = 0, rope_dim = 0; // rotated dims of q and k; rope_dim 0 = no RoPE
  bool mla = false;
};

/// Validates `cfg` and derives each layer's geometry on cfg.tp_rank. Throws
/// std::invalid_argument naming the field and value at fault (heads not divisible by tp_size,
/// a kind with the wrong window/chunk, shares_kv_with not an earlier compatible layer, ...).
std::vector<layer_geometry> plan_stack(const stack_config& cfg);

} // namespace kvactor::kernels
