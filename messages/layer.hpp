// Layer descriptions: what the model loader produces for one rank and the planner consumes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/dtype.hpp"

namespace kvactor {

/// How a layer attends, which decides its KV cache spec kind.
enum class layer_kind : uint8_t {
  full,            // causal attention over the whole sequence (also global NoPE layers)
  sliding_window,  // attends to the last `sliding_window` tokens
  chunked_local,   // attends within chunks of `attention_chunk_size` tokens
  mla,             // multi-head latent attention: one latent of head_size per token
  cross_attention, // decoder attends to encoder output (encoder-decoder models)
  encoder_only,    // bidirectional, no KV cache kept between steps
  mamba,           // recurrent state (Mamba, gated delta net / linear attention)
};

std::string_view to_string(layer_kind x);

/// One attention (or state) layer of the model as seen by one tensor-parallel rank.
struct attention_layer {
  std::string name;  // e.g. "model.layers.3.self_attn.attn"
  int32_t index = 0; // model layer index (binding order; self+cross share one)
  layer_kind kind = layer_kind::full;
  int32_t num_heads = 0;    // query heads on this rank
  int32_t num_kv_heads = 0; // KV heads on this rank (1 for the MLA latent)
  int32_t head_size = 0;    // K head size (MLA: kv_lora_rank + rope dim)
  int32_t head_size_v = 0;  // V head size (MLA: 0, the latent holds both)
  dtype kv_dtype = dtype::bfloat16;
  int32_t sliding_window = 0;       // tokens; 0 = none
  int32_t attention_chunk_size = 0; // tokens; 0 = none
  bool has_sinks = false;           // learned attention sinks (gpt-oss)
  bool use_rope = true;             // false for Llama-4 global NoPE layers
  float logit_softcap = 0.0f;       // tanh soft-capping of attention scores; 0 = off (Gemma 2)
  std::string kv_sharing_target;    // reuse this layer's cache; empty = own cache
  // Recurrent state (layer_kind::mamba), per rank.
  std::string state_type; // "mamba1", "gated_delta_net"
  std::vector<std::vector<int64_t>> state_shapes;
  std::vector<dtype> state_dtypes;

  bool operator==(const attention_layer&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, attention_layer& x) {
  return f(caf::meta::type_name("kvactor::attention_layer"), x.name, x.index, x.kind, x.num_heads,
           x.num_kv_heads, x.head_size, x.head_size_v, x.kv_dtype, x.sliding_window,
           x.attention_chunk_size, x.has_sinks, x.use_rope, x.logit_softcap, x.kv_sharing_target,
           x.state_type, x.state_shapes, x.state_dtypes);
}

/// The per-rank layers of a model plus the model-wide facts planning needs.
struct model_layout {
  std::string model_type;
  int32_t rank = 0;
  int32_t tensor_parallel_size = 1;
  int32_t num_heads = 0;    // total query heads (attention layers)
  int32_t num_kv_heads = 0; // total KV heads
  int64_t max_position_embeddings = 0;
  int64_t max_encoder_input_tokens = 0; // encoder-decoder only; 0 otherwise
  dtype model_dtype = dtype::bfloat16;
  int32_t num_attn_modules = 1; // 2 for LongCat-style dual attention per layer
  int32_t hidden_size = 0;      // residual stream width of the synthetic attention stack
  int32_t vocab_size = 0;
  std::vector<attention_layer> layers;

  bool operator==(const model_layout&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, model_layout& x) {
  return f(caf::meta::type_name("kvactor::model_layout"), x.model_type, x.rank,
           x.tensor_parallel_size, x.num_heads, x.num_kv_heads, x.max_position_embeddings,
           x.max_encoder_input_tokens, x.model_dtype, x.num_attn_modules, x.hidden_size,
           x.vocab_size, x.layers);
}

} // namespace kvactor
