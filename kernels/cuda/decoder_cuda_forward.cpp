// decoder_cuda's forward step and sampling: the host checks, then the launches.
#include <algorithm>
#include <exception>
#include <string>

#include "decoder_cuda_impl.h"
#include "decoder_ops.h"
#include "kvactor/kernels/cuda/kv_write_cuda.h"

namespace kvactor::kernels {
namespace {

constexpr const char* forward_prefix = "decoder_cuda::forward: ";
constexpr const char* sample_prefix = "decoder_cuda::sample: ";
using T = decoder_tensor;

cuda_status in_layer(size_t layer, const cuda_status& s) {
  return detail::invalid_cuda_argument(forward_prefix, "layer ", layer, ": ", s.message());
}

cuda_status check_step(const decoder_cuda::impl& s, const device_step& step,
                       const std::vector<kv_view>& kv, bool reduces, const float* hidden) {
  const size_t num_layers = s.layers.size();
  const int32_t t = step.num_tokens;
  KVACTOR_CUDA_CHECK_ARG(t >= 0 && t <= s.opt.max_tokens, forward_prefix, "step.num_tokens: ", t,
                         " outside [0, ", s.opt.max_tokens, "]");
  KVACTOR_CUDA_CHECK_ARG(step.layers.size() == num_layers && kv.size() == num_layers,
                         forward_prefix, "step.layers: ", step.layers.size(),
                         " and kv: ", kv.size(), " entries for ", num_layers, " layers");
  KVACTOR_CUDA_CHECK_ARG(reduces || s.opt.tp_size == 1, forward_prefix,
                         "all_reduce: empty with tp_size ", s.opt.tp_size);
  if (t == 0) return {};
  KVACTOR_CUDA_CHECK_ARG(step.token_ids != nullptr && step.positions != nullptr
                             && hidden != nullptr,
                         forward_prefix, "token_ids, positions and hidden must not be null");
  const int32_t d = s.spec.head_dim;
  for (size_t l = 0; l < num_layers; ++l) {
    const device_layer_batch& b = step.layers[l];
    KVACTOR_CUDA_CHECK_ARG(kv[l].type == element_type::bf16 || kv[l].type == element_type::fp8_e4m3,
                           forward_prefix, "kv[", l, "].type: ", to_string(kv[l].type),
                           " (the GPU decoder computes in bf16: a bf16 or fp8_e4m3 cache)");
    if (auto w = check_kv_write_cuda(kv[l], s.k, s.v, element_type::bf16, d, d, b.slot_mapping, t);
        !w)
      return in_layer(l, w);
    if (auto a = check_paged_attention_cuda(s.attention(l), kv[l], s.q, b.query_start_loc,
                                            b.seq_lens, b.block_table, b.width, b.num_reqs, t,
                                            s.attn, s.attention_ws);
        !a)
      return in_layer(l, a);
  }
  return {};
}

using reducer = std::function<cuda_status(float*, size_t)>;

// One token streams the weights through the skinny kernel (memory-bound, no split-K reduction);
// more go to cuBLAS's tensor-core GEMM. Measured on the H200 (Llama-3.1-8B shapes, decode step
// in a graph): batch 1 5.67 ms skinny against 6.01 ms cuBLAS; at batch 4 the skinny kernel's
// activation reloads cost more (7.18 ms) than cuBLAS at batch 8 (6.35 ms).
constexpr int32_t skinny_dispatch_tokens = 1;

cuda_status gemm(decoder_cuda::impl& s, const device_tensor& w, const void* x, float* y,
                 int32_t n) {
  const auto in = static_cast<int32_t>(w.cols), out = static_cast<int32_t>(w.rows);
  if (n >= 1 && n <= skinny_dispatch_tokens && in % 8 == 0)
    return cuda_detail::launch_skinny_gemm(w.data, x, y, n, in, out, s.opt.stream);
  return cuda_detail::gemm(s.blas, element_type::bf16, w.data, x, y, n, in, out);
}

cuda_status reduce(const reducer& all_reduce, float* buf, int32_t n, int32_t hidden) {
  if (!all_reduce) return {};
  return all_reduce(buf, static_cast<size_t>(n) * static_cast<size_t>(hidden));
}

// Layer l's attention inputs from the normed stream in s.xn: projection, then q/k/v prepared;
// with `kv` (the layer's cache), K and V are also written into it (the KV write fused).
cuda_status attention_inputs(decoder_cuda::impl& s, const device_step& step, size_t l,
                             const kv_view* kv) {
  const int32_t n = step.num_tokens;
  if (auto st = gemm(s, s.at(l, T::qkv), s.xn, s.qkv, n); !st) return st;
  cuda_detail::qkv_prepare_args a{};
  a.qkv = s.qkv;
  a.bias = s.vec(l, T::qkv_bias);
  a.q_norm = s.vec(l, T::q_norm);
  a.k_norm = s.vec(l, T::k_norm);
  a.inv_freq = s.inv_freq + l * static_cast<size_t>(s.spec.head_dim / 2);
  a.positions = step.positions;
  a.q = s.q;
  a.k = s.k;
  a.v = s.v;
  a.num_tokens = n;
  a.q_heads = s.spec.num_q_heads;
  a.kv_heads = s.spec.num_kv_heads;
  a.head_dim = s.spec.head_dim;
  a.rot_dim = s.rot_dim[l];
  a.eps = s.spec.rms_eps;
  a.one_plus = s.spec.norm_one_plus_weight;
  if (kv != nullptr) {
    a.store.cache = kv->base;
    a.store.fp8 = kv->type == element_type::fp8_e4m3;
    a.store.k_scale = key_scale(*kv);
    a.store.v_scale = value_scale(*kv);
    a.store.stride_block = kv->stride_block;
    a.store.stride_head = kv->stride_head;
    a.store.stride_token = kv->stride_token;
    a.store.capacity = kv->capacity_tokens();
    a.store.block_size = kv->block_size;
    a.store.slot_mapping = step.layers[l].slot_mapping;
  }
  return cuda_detail::launch_qkv_prepare(a, s.opt.stream);
}

// act = the gated activation of xn's gate/up projection: one kernel for a single token when the
// options ask, else the projection (float) and then the activation.
cuda_status gated_mlp(decoder_cuda::impl& s, size_t l, int32_t n) {
  const auto& w = s.at(l, T::gate_up);
  const bool gelu = s.spec.activation == mlp_activation::gelu_tanh;
  const auto in = static_cast<int32_t>(w.cols);
  if (s.opt.fuse_gated_mlp && n >= 1 && n <= skinny_dispatch_tokens && in % 8 == 0)
    return cuda_detail::launch_skinny_gated_mlp(w.data, s.xn, s.act, n, in,
                                                s.spec.intermediate_size, gelu, s.opt.stream);
  if (auto st = gemm(s, w, s.xn, s.gate_up, n); !st) return st;
  return cuda_detail::launch_gated_activation(s.gate_up, n, s.spec.intermediate_size, gelu, s.act,
                                              s.opt.stream);
}

// x += [norm_add](add); xn = norm(x, weight) when weight is given (else the residual add alone).
cuda_status residual(decoder_cuda::impl& s, float* x, int32_t n, const float* add,
                     const float* add_weight, const float* weight) {
  const cuda_detail::residual_norm_args a{x,
                                          add,
                                          add_weight,
                                          weight,
                                          nullptr,
                                          weight != nullptr ? s.xn : nullptr,
                                          n,
                                          s.spec.hidden_size,
                                          s.spec.rms_eps,
                                          s.spec.norm_one_plus_weight};
  return cuda_detail::launch_residual_norm(a, s.opt.stream);
}

// Layer l after its attention: output projection, residual, MLP, residual; leaves xn normed
// with `next_norm` (the next layer's input norm), or nullptr after the last layer.
cuda_status finish_layer(decoder_cuda::impl& s, size_t l, int32_t n, const reducer& all_reduce,
                         float* x, const float* next_norm) {
  const int32_t h = s.spec.hidden_size;
  const bool sandwich = s.spec.sandwich_norms;
  if (auto st = gemm(s, s.at(l, T::o), s.attn, s.o, n); !st) return st;
  if (auto st = reduce(all_reduce, s.o, n, h); !st) return st;
  const float* mlp_norm = s.vec(l, sandwich ? T::pre_ffn_norm : T::post_attn_norm);
  if (auto st = residual(s, x, n, s.o, sandwich ? s.vec(l, T::post_attn_norm) : nullptr, mlp_norm);
      !st)
    return st;
  if (auto st = gated_mlp(s, l, n); !st) return st;
  if (auto st = gemm(s, s.at(l, T::down), s.act, s.o, n); !st) return st;
  if (auto st = reduce(all_reduce, s.o, n, h); !st) return st;
  return residual(s, x, n, s.o, sandwich ? s.vec(l, T::post_ffn_norm) : nullptr, next_norm);
}

// Piece k of the step (k in [0, L]): the dense work between two attention ops. With `kv` (the
// whole forward), layer k's q/k/v preparation also writes its KV cache; pieces captured on their
// own leave that to the attention op.
cuda_status run_piece(decoder_cuda::impl& s, const device_step& step, size_t k,
                      const reducer& all_reduce, float* hidden, const std::vector<kv_view>* kv) {
  const int32_t n = step.num_tokens;
  const size_t num_layers = s.layers.size();
  const float* next_norm = k < num_layers ? s.vec(k, T::input_norm) : nullptr;
  if (k == 0) {
    const auto& e = s.global[static_cast<size_t>(T::embed)];
    if (auto st = cuda_detail::launch_embed(e.data, s.spec.vocab_size, step.token_ids, n,
                                            s.spec.hidden_size, s.spec.embedding_scale, hidden,
                                            s.opt.stream);
        !st)
      return st;
    if (auto st = residual(s, hidden, n, nullptr, nullptr, next_norm); !st) return st;
    // Padding rows are never written by the attention: zeroed once per step, they stay zero
    // (and deterministic) through every layer.
    KVACTOR_CUDA_CALL(
        cudaMemsetAsync(s.attn, 0,
                        static_cast<size_t>(n) * static_cast<size_t>(s.spec.num_q_heads)
                            * static_cast<size_t>(s.spec.head_dim) * 2,
                        s.opt.stream));
  } else if (auto st = finish_layer(s, k - 1, n, all_reduce, hidden, next_norm); !st) {
    return st;
  }
  return k < num_layers ? attention_inputs(s, step, k, kv != nullptr ? &(*kv)[k] : nullptr)
                        : cuda_status{};
}

// Layer l's attention; its KV write first unless the q/k/v preparation did it (kv_written).
cuda_status run_attention(decoder_cuda::impl& s, const device_step& step,
                          const std::vector<kv_view>& kv, size_t l, bool kv_written) {
  const int32_t n = step.num_tokens, d = s.spec.head_dim;
  const device_layer_batch& b = step.layers[l];
  if (!kv_written) {
    if (auto st = kv_write_cuda(kv[l], s.k, s.v, element_type::bf16, d, d, b.slot_mapping, n,
                                s.opt.stream);
        !st)
      return st;
  }
  return paged_attention_cuda(s.attention(l), kv[l], s.q, b.query_start_loc, b.seq_lens,
                              b.block_table, b.width, b.num_reqs, n, s.attn, s.attention_ws,
                              s.opt.stream, step.max_query_len);
}

cuda_status run_layers(decoder_cuda::impl& s, const device_step& step,
                       const std::vector<kv_view>& kv, const reducer& all_reduce, float* hidden) {
  for (size_t l = 0; l < s.layers.size(); ++l) {
    if (auto st = run_piece(s, step, l, all_reduce, hidden, &kv); !st) return st;
    if (auto st = run_attention(s, step, kv, l, true); !st) return st;
  }
  return run_piece(s, step, s.layers.size(), all_reduce, hidden, &kv);
}

// The logits of the n device `rows` of hidden into s.logits (soft-capped).
cuda_status project_device_rows(decoder_cuda::impl& s, const float* hidden, const int32_t* rows,
                                int32_t n) {
  const cudaStream_t stream = s.opt.stream;
  // Only read: the kernel writes x only when it adds.
  const cuda_detail::residual_norm_args a{
      const_cast<float*>(hidden),
      nullptr,
      nullptr,
      static_cast<const float*>(s.global[static_cast<size_t>(T::final_norm)].data),
      rows,
      s.xn,
      n,
      s.spec.hidden_size,
      s.spec.rms_eps,
      s.spec.norm_one_plus_weight};
  if (auto st = cuda_detail::launch_residual_norm(a, stream); !st) return st;
  const auto& head = s.global[static_cast<size_t>(T::lm_head)].data != nullptr
                         ? s.global[static_cast<size_t>(T::lm_head)]
                         : s.global[static_cast<size_t>(T::embed)];
  if (auto st = gemm(s, head, s.xn, s.logits, n); !st) return st;
  if (s.spec.final_softcap > 0.0f)
    return cuda_detail::launch_softcap(s.logits, int64_t{n} * s.spec.vocab_size,
                                       s.spec.final_softcap, stream);
  return {};
}

// The logits of n host `rows` of hidden into s.logits.
cuda_status project_rows(decoder_cuda::impl& s, const float* hidden, const int32_t* rows,
                         int32_t n) {
  KVACTOR_CUDA_CALL(cudaMemcpyAsync(s.rows, rows, static_cast<size_t>(n) * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, s.opt.stream));
  return project_device_rows(s, hidden, s.rows, n);
}

// Rows of a hidden buffer sized for max_tokens.
cuda_status check_rows(const float* hidden, const std::vector<int32_t>& rows, int32_t max_tokens) {
  KVACTOR_CUDA_CHECK_ARG(rows.empty() || hidden != nullptr, sample_prefix, "hidden: is null");
  for (size_t i = 0; i < rows.size(); ++i)
    KVACTOR_CUDA_CHECK_ARG(rows[i] >= 0 && rows[i] < max_tokens, sample_prefix, "rows[", i,
                           "]: ", rows[i], " outside [0, ", max_tokens, ")");
  return {};
}

// Greedy rows without logprobs take their argmax on the device; any other row needs the logits
// on the host.
bool all_on_device(const sample_rows& what) {
  return std::all_of(what.params.begin(), what.params.end(), [](const sampling_config& c) {
    return c.temperature == 0.0f && c.logprobs < 0;
  });
}

} // namespace

cuda_status decoder_cuda::forward(const device_step& step, const std::vector<kv_view>& kv,
                                  const reducer& all_reduce, float* hidden) {
  try {
    if (auto st = check_step(*impl_, step, kv, static_cast<bool>(all_reduce), hidden); !st)
      return st;
    if (step.num_tokens == 0) return {};
    return run_layers(*impl_, step, kv, all_reduce, hidden);
  } catch (const std::exception& e) {
    return cuda_status::failure(cudaErrorUnknown, std::string(forward_prefix) + e.what());
  }
}

cuda_status decoder_cuda::check_forward(const device_step& step, const std::vector<kv_view>& kv,
                                        const float* hidden) const {
  try {
    // The all-reduce is not forward()'s to check here: pieces take it one by one.
    return check_step(*impl_, step, kv, true, hidden);
  } catch (const std::exception& e) {
    return cuda_status::failure(cudaErrorUnknown, std::string(forward_prefix) + e.what());
  }
}

cuda_status decoder_cuda::forward_piece(const device_step& step, size_t piece,
                                        const reducer& all_reduce, float* hidden) {
  KVACTOR_CUDA_CHECK_ARG(piece <= impl_->layers.size(), forward_prefix, "piece: ", piece,
                         " outside [0, ", impl_->layers.size(), "]");
  KVACTOR_CUDA_CHECK_ARG(all_reduce || impl_->opt.tp_size == 1, forward_prefix,
                         "forward_piece: all_reduce: empty with tp_size ", impl_->opt.tp_size);
  if (step.num_tokens == 0) return {};
  return run_piece(*impl_, step, piece, all_reduce, hidden, nullptr);
}

cuda_status decoder_cuda::forward_attention(const device_step& step, const std::vector<kv_view>& kv,
                                            size_t layer) {
  KVACTOR_CUDA_CHECK_ARG(layer < impl_->layers.size(), forward_prefix, "layer: ", layer,
                         " outside [0, ", impl_->layers.size(), ")");
  if (step.num_tokens == 0) return {};
  return run_attention(*impl_, step, kv, layer, false);
}

cuda_status decoder_cuda::greedy_async(const float* hidden, const int32_t* rows, int32_t n,
                                       int32_t* tokens) {
  KVACTOR_CUDA_CHECK_ARG(n >= 0 && n <= impl_->sample_rows, sample_prefix, "n: ", n,
                         " outside [0, ", impl_->sample_rows, "]");
  if (n == 0) return {};
  if (auto st = project_device_rows(*impl_, hidden, rows, n); !st) return st;
  return cuda_detail::launch_argmax(impl_->logits, n, impl_->spec.vocab_size, tokens,
                                    impl_->opt.stream);
}

cuda_status decoder_cuda::logits(const float* hidden, const std::vector<int32_t>& rows,
                                 std::vector<float>& out) {
  try {
    if (auto st = check_rows(hidden, rows, impl_->opt.max_tokens); !st) return st;
    impl& s = *impl_;
    const auto vocab = static_cast<size_t>(s.spec.vocab_size);
    out.assign(rows.size() * vocab, 0.0f);
    for (size_t begin = 0; begin < rows.size(); begin += static_cast<size_t>(s.sample_rows)) {
      const auto n =
          static_cast<int32_t>(std::min(rows.size() - begin, static_cast<size_t>(s.sample_rows)));
      if (auto st = project_rows(s, hidden, rows.data() + begin, n); !st) return st;
      KVACTOR_CUDA_CALL(cudaMemcpyAsync(out.data() + begin * vocab, s.logits,
                                        static_cast<size_t>(n) * vocab * sizeof(float),
                                        cudaMemcpyDeviceToHost, s.opt.stream));
      KVACTOR_CUDA_CALL(cudaStreamSynchronize(s.opt.stream)); // s.rows is reused
    }
    return {};
  } catch (const std::exception& e) {
    return cuda_status::failure(cudaErrorUnknown, std::string(sample_prefix) + e.what());
  }
}

cuda_status decoder_cuda::sample(const float* hidden, const sample_rows& what, sampled_rows& out) {
  try {
    if (auto st = check_rows(hidden, what.rows, impl_->opt.max_tokens); !st) return st;
    impl& s = *impl_;
    out = {};
    if (!all_on_device(what)) {
      std::vector<float> host;
      if (auto st = logits(hidden, what.rows, host); !st) return st;
      out = sample_host_rows(host.data(), s.spec.vocab_size, what.params, what.keys,
                             what.rows.size());
      return {};
    }
    auto& tokens = out.tokens;
    tokens.assign(what.rows.size(), 0);
    for (size_t begin = 0; begin < what.rows.size(); begin += static_cast<size_t>(s.sample_rows)) {
      const auto n = static_cast<int32_t>(
          std::min(what.rows.size() - begin, static_cast<size_t>(s.sample_rows)));
      if (auto st = project_rows(s, hidden, what.rows.data() + begin, n); !st) return st;
      if (auto st =
              cuda_detail::launch_argmax(s.logits, n, s.spec.vocab_size, s.tokens, s.opt.stream);
          !st)
        return st;
      KVACTOR_CUDA_CALL(cudaMemcpyAsync(tokens.data() + begin, s.tokens,
                                        static_cast<size_t>(n) * sizeof(int32_t),
                                        cudaMemcpyDeviceToHost, s.opt.stream));
      KVACTOR_CUDA_CALL(cudaStreamSynchronize(s.opt.stream));
    }
    return {};
  } catch (const std::exception& e) {
    return cuda_status::failure(cudaErrorUnknown, std::string(sample_prefix) + e.what());
  }
}

} // namespace kvactor::kernels
