// A dense decoder-only transformer on the CPU, in float: the reference kvactor's real models run
// on, checked against Hugging Face transformers (tests/model/transformers_fixtures_test.cpp).
// One spec covers the dense families kvactor serves (llama, mistral, qwen2, qwen3, gemma2,
// gemma3 text, phi3); the family's quirks are fields, filled from config.json by the model loader
// (model/hf_decoder.hpp).
//
// Per layer l, over the step's T tokens (x is the residual stream, [T, hidden]):
//   h  = norm_in(x)
//   q, k, v = h . Wq (+ bq), h . Wk (+ bk), h . Wv (+ bv)   this rank's heads
//   q, k = qk_norm(q), qk_norm(k)                            per head, when the family has it
//   RoPE(q, k) at the token positions                        the layer's frequencies
//   write_kv(k, v); a = paged_attention(q, cache)            scale, window and soft-cap of the
//   layer o  = a . Wo                                              row-parallel: all_reduce x +=
//   sandwich ? norm_post_attn(o) : o h  = sandwich ? norm_pre_ffn(x) : norm_post_attn(x) m  =
//   (act(h . Wgate) * (h . Wup)) . Wdown                row-parallel: all_reduce x += sandwich ?
//   norm_post_ffn(m) : m
// then logits = softcap(norm_final(x) . Wlm) over the whole vocabulary.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kvactor/kernels/kv_cache_view.h"
#include "kvactor/kernels/layer_batch.h"

namespace kvactor::kernels {

enum class mlp_activation { silu, gelu_tanh };

/// RoPE as a config asks for it: the base, and Llama 3's frequency scaling when `llama3`.
struct rope_spec {
  double theta = 10000.0;
  bool llama3 = false;
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
  double linear_factor = 1.0;         // "linear" scaling: every frequency divided by it
  double partial_rotary_factor = 1.0; // the share of each head's dims that rotate
};

/// The rot_dim / 2 inverse frequencies of `rope` (Llama 3 scaling applied as transformers does).
std::vector<double> rope_inverse_frequencies(const rope_spec& rope, int32_t rot_dim);

/// The decoder's tensors as the GPU decoder lays them out (decoder_cuda.h): the checkpoint's
/// projections fused per layer, matrices bf16 and vectors float there.
enum class decoder_tensor : uint8_t {
  embed,          // [vocab, hidden] bf16
  lm_head,        // [vocab, hidden] bf16; absent when tied to embed
  final_norm,     // [hidden] float
  qkv,            // [(q_heads + 2 kv_heads) * head_dim, hidden] bf16: q rows, k rows, v rows
  qkv_bias,       // [(q_heads + 2 kv_heads) * head_dim] float; absent without qkv_bias
  o,              // [hidden, q_heads * head_dim] bf16
  gate_up,        // [2 * intermediate, hidden] bf16: gate rows, then up rows
  down,           // [hidden, intermediate] bf16
  input_norm,     // [hidden] float
  post_attn_norm, // [hidden] float
  pre_ffn_norm,   // [hidden] float; absent without sandwich norms
  post_ffn_norm,  // [hidden] float; absent without sandwich norms
  q_norm,         // [head_dim] float; absent without qk_norm
  k_norm,         // [head_dim] float; absent without qk_norm
};
const char* to_string(decoder_tensor t);

struct decoder_layer_spec {
  int32_t sliding_window = 0; // 0: full attention
  rope_spec rope;
};

struct decoder_spec {
  int32_t vocab_size = 0, hidden_size = 0, intermediate_size = 0;
  int32_t num_q_heads = 0, num_kv_heads = 0; // this rank's
  int32_t head_dim = 0;
  float rms_eps = 1e-6f;
  bool norm_one_plus_weight = false; // Gemma: x * (1 + w)
  bool qkv_bias = false;
  bool qk_norm = false;        // per-head RMS norm of q and k before RoPE (qwen3, gemma3)
  bool sandwich_norms = false; // norms after attention and around the MLP (gemma2, gemma3)
  float attn_scale = 0.0f;     // 0: 1 / sqrt(head_dim)
  float attn_softcap = 0.0f, final_softcap = 0.0f;
  float embedding_scale = 1.0f; // Gemma: sqrt(hidden_size)
  mlp_activation activation = mlp_activation::silu;
  std::vector<decoder_layer_spec> layers;
};

/// One layer's weights on this rank, [out, in] row-major as the checkpoint stores them. Empty
/// vectors for what the family lacks (biases, q/k norms, sandwich norms).
struct decoder_layer_weights {
  std::vector<float> q, k, v, o;                 // [q_heads*d, hidden] ... [hidden, q_heads*d]
  std::vector<float> q_bias, k_bias, v_bias;     // [q_heads*d], [kv_heads*d], [kv_heads*d]
  std::vector<float> q_norm, k_norm;             // [head_dim]
  std::vector<float> input_norm, post_attn_norm; // [hidden]
  std::vector<float> pre_ffn_norm, post_ffn_norm;
  std::vector<float> gate, up, down; // [inter, hidden], [inter, hidden], [hidden, inter]
};

struct decoder_weights {
  std::vector<float> embed; // [vocab, hidden]
  std::vector<decoder_layer_weights> layers;
  std::vector<float> final_norm; // [hidden]
  std::vector<float> lm_head;    // [vocab, hidden]; empty: tied to embed
};

class decoder {
public:
  /// Checks that the weights have the sizes the spec implies (std::invalid_argument naming the
  /// layer, the tensor, the expected and the found size).
  decoder(decoder_spec spec, decoder_weights weights);

  /// One forward step over num_tokens tokens; writes this step's K and V into the caches.
  ///   token_ids, positions // [num_tokens]
  ///   kv, batch            // [num_layers] each layer's cache view and attention metadata
  ///   hidden               // [num_tokens, hidden_size] out: the residual stream
  /// all_reduce(buffer, count) sums the row-parallel partials across tensor-parallel ranks
  /// (twice per layer); an empty function is the identity.
  void forward(const int32_t* token_ids, const int32_t* positions, int32_t num_tokens,
               const std::vector<kv_view>& kv, const std::vector<const layer_batch*>& batch,
               const std::function<void(float*, size_t)>& all_reduce, float* hidden) const;

  /// Logits of the given rows of `hidden` over the whole vocabulary: [rows.size(), vocab_size].
  std::vector<float> logits(const float* hidden, const std::vector<int32_t>& rows) const;

  const decoder_spec& spec() const { return spec_; }

private:
  struct scratch;
  void attention_block(size_t l, const int32_t* positions, int32_t n, const kv_view& kv,
                       const layer_batch& b, scratch& s) const;
  void mlp_block(size_t l, int32_t n, scratch& s) const;

  decoder_spec spec_;
  decoder_weights w_;
  std::vector<std::vector<double>> inv_freq_; // [layers]
};

} // namespace kvactor::kernels
