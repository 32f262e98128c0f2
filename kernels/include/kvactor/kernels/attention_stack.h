// The synthetic attention stack: the workload one rank executes per step (docs/design.md, "The
// workload a rank executes"). CPU reference, and the oracle for the device implementation.
//
// Per layer l, over the step's T tokens (x is the residual stream, [T, hidden]):
//   xn = rms_norm(x)                         no weight, eps 1e-6
//   q  = xn . Wq                             column-parallel: this rank's q heads
//   k, v = xn . Wk, xn . Wv                  this rank's kv heads (MLA: latent = xn . Wkv)
//   RoPE(q, k) at `positions`                theta 10000, rotate halves (MLA: the latent's tail)
//   write_kv(k, v) at the slot mapping       not for a layer sharing another's cache
//   a  = paged_attention(q, cache)           scale 1 / sqrt(head_size)
//   o  = a . Wo                              row-parallel: this rank's rows, a partial sum
//   all_reduce(o); x += o
// The embedding is a pseudo-random vector per token id; every weight is
// synthetic_uniform(seed, matrix, layer, global row, global col) / sqrt(fan_in).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kvactor/kernels/kv_cache_view.h"
#include "kvactor/kernels/paged_attention.h"
#include "kvactor/kernels/stack_config.h"

namespace kvactor::kernels {

/// One layer's attention metadata for a step (the layer's KV cache group).
struct layer_batch {
  const int32_t* query_start_loc = nullptr; // [num_reqs + 1]; tokens past the last are padding
  const int32_t* seq_lens = nullptr;        // [num_reqs] tokens in the cache incl. this step's
  const int32_t* block_table = nullptr;     // [num_reqs, width] kernel block ids
  int32_t width = 0;
  int32_t num_reqs = 0;
  const int64_t* slot_mapping = nullptr; // [num_tokens]; -1 = padding (not written)
};

class attention_stack {
public:
  /// Validates `cfg` (see plan_stack) and materialises this rank's weights from cfg.seed.
  explicit attention_stack(stack_config cfg);

  /// One forward step over num_tokens tokens.
  ///   token_ids, positions // [num_tokens]
  ///   kv                   // [num_layers] layer views (ignored for layers sharing another's)
  ///   batch                // [num_layers] metadata per layer
  ///   hidden               // [num_tokens, hidden_size] out: the residual stream after all layers
  /// all_reduce(buffer, count) is called once per layer on the output projection's partial sums
  /// ([num_tokens, hidden_size]); an empty function is the identity (tp_size 1 only).
  /// Positions must agree with each layer's batch (query i of request r at seq_len - query_len
  /// + i). Every argument of every layer is checked before anything is written; throws
  /// std::invalid_argument naming the layer, argument and value.
  void forward(const int32_t* token_ids, const int32_t* positions, int32_t num_tokens,
               const std::vector<kv_view>& kv, const std::vector<const layer_batch*>& batch,
               const std::function<void(float*, size_t)>& all_reduce, float* hidden) const;

  /// Greedy next token for each of `rows` of hidden ([*, hidden_size]): argmax over the vocab
  /// projection of rms_norm(row), the lowest index winning ties. Replicated on every rank.
  std::vector<int32_t> sample(const float* hidden, const std::vector<int32_t>& rows) const;

  const stack_config& config() const { return cfg_; }
  /// REQUIRES: layer < config().layers.size().
  const layer_geometry& geometry(size_t layer) const { return geo_[layer]; }
  /// The paged_attention parameters of `layer` (sinks point into this stack).
  attention_params layer_attention(size_t layer) const;

private:
  struct layer_weights {
    std::vector<float> q;     // [q_heads * head_size, hidden]
    std::vector<float> k;     // [kv_heads * head_size, hidden]; MLA: the latent [head_size, hidden]
    std::vector<float> v;     // [kv_heads * v_size, hidden]; MLA: empty
    std::vector<float> o;     // [hidden, q_heads * v_size]
    std::vector<float> sinks; // [q_heads] or empty
  };

  stack_config cfg_;
  std::vector<layer_geometry> geo_;
  std::vector<layer_weights> weights_;
  std::vector<float> vocab_; // [vocab_size, hidden]
};

} // namespace kvactor::kernels
