// attention_stack_cuda's forward step and greedy sampling: the host checks, then the launches.
#include <algorithm>
#include <exception>
#include <string>

#include "attention_stack_cuda_impl.h"
#include "kvactor/kernels/cuda/kv_write_cuda.h"
#include "kvactor/kernels/cuda/paged_attention_cuda.h"
#include "stack_ops.h"

namespace kvactor::kernels {
namespace {

constexpr float rms_eps = 1e-6f;
constexpr float rope_theta = 10000.0f;
constexpr const char* forward_prefix = "attention_stack_cuda::forward: ";
constexpr const char* sample_prefix = "attention_stack_cuda::sample: ";

// A launcher's rejection, with the layer it came from.
cuda_status in_layer(size_t layer, const cuda_status& s) {
  return detail::invalid_cuda_argument(forward_prefix, "layer ", layer, ": ", s.message());
}

cuda_status check_step(const attention_stack_cuda& stack, const attention_stack_cuda::impl& s,
                       const device_step& step, const std::vector<kv_view>& kv,
                       const std::function<cuda_status(float*, size_t)>& all_reduce,
                       const float* hidden) {
  const size_t num_layers = s.geo.size();
  const int32_t t = step.num_tokens;
  KVACTOR_CUDA_CHECK_ARG(t >= 0, forward_prefix, "step.num_tokens: ", t, " is negative");
  KVACTOR_CUDA_CHECK_ARG(t <= s.opt.max_tokens, forward_prefix, "step.num_tokens: ", t,
                         " exceeds max_tokens ", s.opt.max_tokens);
  KVACTOR_CUDA_CHECK_ARG(step.layers.size() == num_layers, forward_prefix,
                         "step.layers: ", step.layers.size(), " entries for ", num_layers,
                         " layers");
  KVACTOR_CUDA_CHECK_ARG(kv.size() == num_layers, forward_prefix, "kv: ", kv.size(), " views for ",
                         num_layers, " layers");
  KVACTOR_CUDA_CHECK_ARG(all_reduce || s.cfg.tp_size == 1, forward_prefix,
                         "all_reduce: empty with tp_size ", s.cfg.tp_size);
  if (t > 0) {
    KVACTOR_CUDA_CHECK_ARG(step.token_ids != nullptr, forward_prefix, "step.token_ids: is null");
    KVACTOR_CUDA_CHECK_ARG(step.positions != nullptr, forward_prefix, "step.positions: is null");
    KVACTOR_CUDA_CHECK_ARG(hidden != nullptr, forward_prefix, "hidden: is null");
  }
  for (size_t l = 0; l < num_layers; ++l) {
    const layer_geometry& g = s.geo[l];
    const device_layer_batch& b = step.layers[l];
    const auto src = static_cast<size_t>(g.kv_source);
    const kv_view& view = kv[src];
    KVACTOR_CUDA_CHECK_ARG(view.type == s.opt.dtype, forward_prefix, "kv[", src,
                           "].type: ", to_string(view.type), " differs from the stack's ",
                           to_string(s.opt.dtype));
    if (src == l && t > 0) {
      const cuda_status w =
          check_kv_write_cuda(view, s.k, g.mla ? nullptr : s.v, s.opt.dtype, g.head_size,
                              g.mla ? 0 : g.v_size, b.slot_mapping, t);
      if (!w) return in_layer(l, w);
    }
    const cuda_status a = check_paged_attention_cuda(
        stack.layer_attention(l), view, s.q, b.query_start_loc, b.seq_lens, b.block_table, b.width,
        b.num_reqs, t, s.attn, s.attention_ws);
    if (!a) return in_layer(l, a);
  }
  return {};
}

// Piece k of the step (k in [0, num_layers]): the dense work between two attention ops.
//   k == 0:        embedding; layer 0 up to its attention input
//   0 < k < L:     layer k-1's output projection (+ all-reduce) and residual add; layer k up to
//                  its attention input
//   k == L:        the last output projection (+ all-reduce) and the last residual add
// forward() is exactly piece 0, attention 0, piece 1, ..., attention L-1, piece L.
cuda_status run_piece(attention_stack_cuda::impl& s, const device_step& step, size_t k,
                      const std::function<cuda_status(float*, size_t)>& all_reduce, float* hidden) {
  const int32_t t = step.num_tokens;
  const int32_t h = s.cfg.hidden_size;
  const cudaStream_t stream = s.opt.stream;
  const size_t num_layers = s.geo.size();
  // x += o (the previous layer's output; none before layer 0), then xn = rms_norm(x).
  cuda_detail::add_norm_args norm{hidden, nullptr, nullptr, s.xn, s.bf16(), t, h, rms_eps};
  if (k == 0) {
    if (cuda_status st =
            cuda_detail::launch_embedding(hidden, step.token_ids, t, h, s.cfg.seed, stream);
        !st)
      return st;
  } else {
    const layer_geometry& pg = s.geo[k - 1];
    const size_t attn_cols = static_cast<size_t>(pg.q_heads) * static_cast<size_t>(pg.v_size);
    if (cuda_status st = cuda_detail::gemm(s.blas, s.opt.dtype, s.layers[k - 1].o, s.attn, s.o, t,
                                           static_cast<int32_t>(attn_cols), h);
        !st)
      return st;
    if (all_reduce) {
      if (cuda_status st = all_reduce(s.o, static_cast<size_t>(t) * static_cast<size_t>(h)); !st)
        return st;
    }
    norm.add = s.o;
  }
  if (k == num_layers) {
    norm.out = nullptr; // the last residual add alone
    return cuda_detail::launch_add_norm(norm, stream);
  }
  const layer_geometry& g = s.geo[k];
  const attention_stack_cuda::impl::layer& w = s.layers[k];
  if (cuda_status st = cuda_detail::launch_add_norm(norm, stream); !st) return st;
  if (cuda_status st =
          cuda_detail::gemm(s.blas, s.opt.dtype, w.qkv, s.xn, s.qkv, t, h, w.qkv_rows());
      !st)
    return st;
  cuda_detail::rope_split_args r{};
  r.qkv = s.qkv;
  r.ld = w.qkv_rows();
  r.q = s.q;
  r.k = w.k_rows > 0 ? s.k : nullptr;
  r.v = w.v_rows > 0 ? s.v : nullptr;
  r.bf16 = s.bf16();
  r.positions = step.positions;
  r.num_tokens = t;
  r.q_heads = g.q_heads;
  r.kv_heads = w.k_rows > 0 ? g.kv_heads : 0;
  r.head_size = g.head_size;
  r.v_size = w.v_rows > 0 ? g.v_size : 0;
  r.rope_offset = g.rope_offset;
  r.rope_dim = g.rope_dim;
  r.theta = rope_theta;
  return cuda_detail::launch_rope_split(r, stream);
}

// Layer l's attention op: the KV write of its own cache, then paged attention into s.attn.
cuda_status run_attention(const attention_stack_cuda& stack, attention_stack_cuda::impl& s,
                          const device_step& step, const std::vector<kv_view>& kv, size_t l) {
  const int32_t t = step.num_tokens;
  const cudaStream_t stream = s.opt.stream;
  const layer_geometry& g = s.geo[l];
  const device_layer_batch& b = step.layers[l];
  const kv_view& view = kv[static_cast<size_t>(g.kv_source)];
  if (g.kv_source == static_cast<int32_t>(l)) {
    if (cuda_status st = kv_write_cuda(view, s.k, g.mla ? nullptr : s.v, s.opt.dtype, g.head_size,
                                       g.mla ? 0 : g.v_size, b.slot_mapping, t, stream);
        !st)
      return st;
  }
  // Padding rows are not written by the attention: zero them so that they stay deterministic.
  const size_t attn_cols = static_cast<size_t>(g.q_heads) * static_cast<size_t>(g.v_size);
  KVACTOR_CUDA_CALL(
      cudaMemsetAsync(s.attn, 0, static_cast<size_t>(t) * attn_cols * s.esize(), stream));
  return paged_attention_cuda(stack.layer_attention(l), view, s.q, b.query_start_loc, b.seq_lens,
                              b.block_table, b.width, b.num_reqs, t, s.attn, s.attention_ws,
                              stream);
}

// The layers, once the step is known to be valid.
cuda_status run_layers(const attention_stack_cuda& stack, attention_stack_cuda::impl& s,
                       const device_step& step, const std::vector<kv_view>& kv,
                       const std::function<cuda_status(float*, size_t)>& all_reduce,
                       float* hidden) {
  for (size_t l = 0; l < s.geo.size(); ++l) {
    if (cuda_status st = run_piece(s, step, l, all_reduce, hidden); !st) return st;
    if (cuda_status st = run_attention(stack, s, step, kv, l); !st) return st;
  }
  return run_piece(s, step, s.geo.size(), all_reduce, hidden);
}

} // namespace

cuda_status
attention_stack_cuda::forward(const device_step& step, const std::vector<kv_view>& kv,
                              const std::function<cuda_status(float*, size_t)>& all_reduce,
                              float* hidden) {
  try {
    if (cuda_status st = check_step(*this, *impl_, step, kv, all_reduce, hidden); !st) return st;
    if (step.num_tokens == 0) return {};
    return run_layers(*this, *impl_, step, kv, all_reduce, hidden);
  } catch (const std::exception& e) {
    return cuda_status::failure(cudaErrorUnknown, std::string(forward_prefix) + e.what());
  }
}

cuda_status attention_stack_cuda::check_forward(const device_step& step,
                                                const std::vector<kv_view>& kv,
                                                const float* hidden) const {
  try {
    return check_step(*this, *impl_, step, kv, {}, hidden);
  } catch (const std::exception& e) {
    return cuda_status::failure(cudaErrorUnknown, std::string(forward_prefix) + e.what());
  }
}

cuda_status attention_stack_cuda::forward_piece(const device_step& step, size_t piece,
                                                float* hidden) {
  KVACTOR_CUDA_CHECK_ARG(piece <= impl_->geo.size(), forward_prefix, "piece: ", piece,
                         " outside [0, ", impl_->geo.size(), "]");
  KVACTOR_CUDA_CHECK_ARG(impl_->cfg.tp_size == 1, forward_prefix,
                         "forward_piece: tp_size: ", impl_->cfg.tp_size, " (pieces run tp_size 1)");
  if (step.num_tokens == 0) return {};
  return run_piece(*impl_, step, piece, {}, hidden);
}

cuda_status attention_stack_cuda::forward_attention(const device_step& step,
                                                    const std::vector<kv_view>& kv, size_t layer) {
  KVACTOR_CUDA_CHECK_ARG(layer < impl_->geo.size(), forward_prefix, "layer: ", layer,
                         " outside [0, ", impl_->geo.size(), ")");
  if (step.num_tokens == 0) return {};
  return run_attention(*this, *impl_, step, kv, layer);
}

cuda_status attention_stack_cuda::sample(const float* hidden, const std::vector<int32_t>& rows,
                                         std::vector<int32_t>& tokens) {
  try {
    impl& s = *impl_;
    KVACTOR_CUDA_CHECK_ARG(rows.empty() || hidden != nullptr, sample_prefix, "hidden: is null");
    for (size_t i = 0; i < rows.size(); ++i)
      KVACTOR_CUDA_CHECK_ARG(rows[i] >= 0, sample_prefix, "rows[", i, "]: ", rows[i],
                             " is negative");
    tokens.assign(rows.size(), 0);
    const cudaStream_t stream = s.opt.stream;
    const int32_t h = s.cfg.hidden_size;
    for (size_t begin = 0; begin < rows.size(); begin += static_cast<size_t>(s.sample_rows)) {
      const auto n =
          static_cast<int32_t>(std::min(rows.size() - begin, static_cast<size_t>(s.sample_rows)));
      const size_t bytes = static_cast<size_t>(n) * sizeof(int32_t);
      KVACTOR_CUDA_CALL(
          cudaMemcpyAsync(s.rows, rows.data() + begin, bytes, cudaMemcpyHostToDevice, stream));
      // Only read: the kernel writes x only when it adds.
      const cuda_detail::add_norm_args norm{
          const_cast<float*>(hidden), nullptr, s.rows, s.xn, s.bf16(), n, h, rms_eps};
      if (cuda_status st = cuda_detail::launch_add_norm(norm, stream); !st) return st;
      if (cuda_status st = cuda_detail::gemm(s.blas, s.opt.dtype, s.vocab, s.xn, s.logits, n, h,
                                             s.cfg.vocab_size);
          !st)
        return st;
      if (cuda_status st =
              cuda_detail::launch_argmax(s.logits, n, s.cfg.vocab_size, s.tokens, stream);
          !st)
        return st;
      KVACTOR_CUDA_CALL(
          cudaMemcpyAsync(tokens.data() + begin, s.tokens, bytes, cudaMemcpyDeviceToHost, stream));
    }
    KVACTOR_CUDA_CALL(cudaStreamSynchronize(stream));
    return {};
  } catch (const std::exception& e) {
    return cuda_status::failure(cudaErrorUnknown, std::string(sample_prefix) + e.what());
  }
}

cuda_status attention_stack_cuda::sample(const float* hidden, const sample_rows& what,
                                         std::vector<int32_t>& tokens) {
  for (size_t i = 0; i < what.params.size(); ++i)
    KVACTOR_CUDA_CHECK_ARG(what.params[i].temperature == 0.0f, sample_prefix, "params[", i,
                           "].temperature: ", what.params[i].temperature,
                           " (the synthetic attention stack samples greedily)");
  return sample(hidden, what.rows, tokens);
}

} // namespace kvactor::kernels
