// decoder_cuda: validation, the device layout of the weights, allocation; accessors.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "decoder_cuda_impl.h"
#include "decoder_ops.h"
#include "pdl_scope.h"

namespace kvactor::kernels {
namespace {

// cuBLAS's recommended workspace on Hopper; set explicitly so that it is counted and so that the
// GEMMs can be captured in a CUDA graph.
constexpr size_t cublas_workspace_bytes = size_t{32} << 20;
constexpr size_t weight_alignment = 256;
constexpr const char* create_prefix = "decoder_cuda::create: ";

cuda_status check_spec(const decoder_spec& s, const decoder_cuda_options& o) {
  KVACTOR_CUDA_CHECK_ARG(s.vocab_size > 0 && s.hidden_size > 0 && s.intermediate_size > 0,
                         create_prefix, "spec: vocab_size ", s.vocab_size, ", hidden_size ",
                         s.hidden_size, ", intermediate_size ", s.intermediate_size,
                         " must be positive");
  KVACTOR_CUDA_CHECK_ARG(s.num_q_heads > 0 && s.num_kv_heads > 0
                             && s.num_q_heads % s.num_kv_heads == 0,
                         create_prefix, "spec: num_q_heads ", s.num_q_heads,
                         " is not a positive multiple of num_kv_heads ", s.num_kv_heads);
  KVACTOR_CUDA_CHECK_ARG(
      s.head_dim == 64 || s.head_dim == 96 || s.head_dim == 128 || s.head_dim == 256, create_prefix,
      "spec.head_dim: ", s.head_dim, " is not supported on the GPU (64, 96, 128 or 256)");
  KVACTOR_CUDA_CHECK_ARG(!s.layers.empty(), create_prefix, "spec.layers: empty");
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const auto& rope = s.layers[l].rope;
    const auto rot = static_cast<int32_t>(s.head_dim * rope.partial_rotary_factor);
    KVACTOR_CUDA_CHECK_ARG(rope.theta > 0.0 && rot >= 2 && rot <= s.head_dim, create_prefix,
                           "spec.layers[", l, "].rope: theta ", rope.theta,
                           " and partial_rotary_factor ", rope.partial_rotary_factor,
                           " leave no rotary dims in [2, head_dim]");
  }
  KVACTOR_CUDA_CHECK_ARG(o.max_tokens > 0, create_prefix, "options.max_tokens: ", o.max_tokens,
                         " must be positive");
  KVACTOR_CUDA_CHECK_ARG(o.tp_size > 0, create_prefix, "options.tp_size: ", o.tp_size,
                         " must be positive");
  return {};
}

device_tensor matrix(int64_t rows, int64_t cols) {
  return {nullptr, element_type::bf16, rows, cols};
}
device_tensor vector(int64_t n) {
  return {nullptr, element_type::f32, 1, n};
}

// Every tensor's shape; absent ones keep zero rows.
void lay_out(decoder_cuda::impl& s) {
  const auto& p = s.spec;
  const int64_t h = p.hidden_size, d = p.head_dim, inter = p.intermediate_size;
  auto& g = s.global;
  g[static_cast<size_t>(decoder_tensor::embed)] = matrix(p.vocab_size, h);
  g[static_cast<size_t>(decoder_tensor::lm_head)] = matrix(p.vocab_size, h);
  g[static_cast<size_t>(decoder_tensor::final_norm)] = vector(h);
  s.layers.assign(p.layers.size(), {});
  for (auto& L : s.layers) {
    auto set = [&](decoder_tensor t, device_tensor v) { L[static_cast<size_t>(t)] = v; };
    set(decoder_tensor::qkv, matrix(s.qkv_rows(), h));
    if (p.qkv_bias) set(decoder_tensor::qkv_bias, vector(s.qkv_rows()));
    set(decoder_tensor::o, matrix(h, int64_t{p.num_q_heads} * d));
    set(decoder_tensor::gate_up, matrix(2 * inter, h));
    set(decoder_tensor::down, matrix(h, inter));
    set(decoder_tensor::input_norm, vector(h));
    set(decoder_tensor::post_attn_norm, vector(h));
    if (p.sandwich_norms) {
      set(decoder_tensor::pre_ffn_norm, vector(h));
      set(decoder_tensor::post_ffn_norm, vector(h));
    }
    if (p.qk_norm) {
      set(decoder_tensor::q_norm, vector(d));
      set(decoder_tensor::k_norm, vector(d));
    }
  }
}

// One allocation holds every weight (so that the upload streams into one range), zeroed.
cuda_status make_weights(decoder_cuda::impl& s, bool tied) {
  lay_out(s);
  if (tied) s.global[static_cast<size_t>(decoder_tensor::lm_head)] = {};
  std::vector<device_tensor*> all;
  for (auto& t : s.global)
    all.push_back(&t);
  for (auto& L : s.layers)
    for (auto& t : L)
      all.push_back(&t);
  size_t total = 0;
  for (auto* t : all)
    total += (t->bytes() + weight_alignment - 1) / weight_alignment * weight_alignment;
  void* base = nullptr;
  if (cuda_status st = s.allocate(total, true, &base); !st) return st;
  size_t at = 0;
  for (auto* t : all) {
    if (t->rows == 0) continue;
    t->data = static_cast<std::byte*>(base) + at;
    at += (t->bytes() + weight_alignment - 1) / weight_alignment * weight_alignment;
  }
  KVACTOR_CUDA_CALL(cudaMemsetAsync(base, 0, total, s.opt.stream));
  return {};
}

// Each layer's RoPE frequencies, computed on the host in double as the CPU decoder's.
cuda_status make_frequencies(decoder_cuda::impl& s) {
  const auto half = static_cast<size_t>(s.spec.head_dim / 2);
  std::vector<float> table(s.spec.layers.size() * half, 0.0f);
  for (size_t l = 0; l < s.spec.layers.size(); ++l) {
    const auto& L = s.spec.layers[l];
    auto rot = static_cast<int32_t>(s.spec.head_dim * L.rope.partial_rotary_factor);
    rot -= rot % 2;
    s.rot_dim.push_back(rot);
    const auto inv = rope_inverse_frequencies(L.rope, rot);
    std::transform(inv.begin(), inv.end(), table.begin() + static_cast<ptrdiff_t>(l * half),
                   [](double f) { return static_cast<float>(f); });
  }
  void* p = nullptr;
  if (cuda_status st = s.allocate(table.size() * sizeof(float), true, &p); !st) return st;
  s.inv_freq = static_cast<float*>(p);
  KVACTOR_CUDA_CALL(
      cudaMemcpy(p, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice));
  return {};
}

cuda_status make_activations(decoder_cuda::impl& s) {
  const auto& p = s.spec;
  const auto t = static_cast<size_t>(s.opt.max_tokens);
  const auto hidden = static_cast<size_t>(p.hidden_size);
  const auto rows = static_cast<size_t>(s.sample_rows);
  const auto qw = static_cast<size_t>(p.num_q_heads) * static_cast<size_t>(p.head_dim);
  const auto kw = static_cast<size_t>(p.num_kv_heads) * static_cast<size_t>(p.head_dim);
  const auto inter = static_cast<size_t>(p.intermediate_size);
  constexpr size_t bf = 2, f = sizeof(float);
  void* ptr = nullptr;
  auto alloc = [&](size_t bytes) { return s.allocate(bytes, false, &ptr); };
  auto take = [&](size_t bytes, auto*& into) -> cuda_status {
    if (cuda_status st = alloc(bytes); !st) return st;
    into = static_cast<std::remove_reference_t<decltype(into)>>(ptr);
    return {};
  };
  for (auto st :
       {take(std::max(t, rows) * hidden * bf, s.xn),
        take(t * static_cast<size_t>(s.qkv_rows()) * f, s.qkv), take(t * qw * bf, s.q),
        take(t * kw * bf, s.k), take(t * kw * bf, s.v), take(t * qw * bf, s.attn),
        take(t * hidden * f, s.o), take(t * 2 * inter * f, s.gate_up), take(t * inter * bf, s.act),
        take(rows * static_cast<size_t>(p.vocab_size) * f, s.logits),
        take(rows * sizeof(int32_t), s.rows), take(rows * sizeof(int32_t), s.tokens)})
    if (!st) return st;
  if (cuda_status st = alloc(s.opt.attention_workspace_bytes); !st) return st;
  // Zeroed once: the split counters at its start stay zero between calls.
  KVACTOR_CUDA_CALL(cudaMemset(ptr, 0, s.opt.attention_workspace_bytes));
  s.attention_ws = {ptr, s.opt.attention_workspace_bytes};
  if (cuda_status st = alloc(cublas_workspace_bytes); !st) return st;
  // cublasSetStream resets the workspace: the stream first.
  KVACTOR_CUBLAS_CALL(cublasSetStream(s.blas, s.opt.stream));
  KVACTOR_CUBLAS_CALL(cublasSetWorkspace(s.blas, ptr, cublas_workspace_bytes));
  return {};
}

// KVACTOR_GEMM and KVACTOR_PDL as they are now (the launches read them once per process): a typo
// is refused when a decoder is made, before any device work, rather than taken for the default.
cuda_status check_environment() {
  cuda_detail::projection_gemm projections{};
  if (auto st = cuda_detail::parse_projection_gemm(std::getenv("KVACTOR_GEMM"), &projections); !st)
    return st;
  // And the value the projections took when they first read it, if it has changed since.
  if (auto st = cuda_detail::selected_projection_gemm(&projections); !st) return st;
  cuda_detail::pdl_scope pdl{};
  return cuda_detail::parse_pdl_scope(std::getenv("KVACTOR_PDL"), &pdl);
}

} // namespace

attention_params decoder_cuda::impl::attention(size_t layer) const {
  attention_params p;
  p.num_q_heads = spec.num_q_heads;
  p.num_kv_heads = spec.num_kv_heads;
  p.head_size = spec.head_dim;
  p.v_offset = spec.head_dim;
  p.v_size = spec.head_dim;
  p.scale = spec.attn_scale > 0.0f ? spec.attn_scale
                                   : 1.0f / std::sqrt(static_cast<float>(spec.head_dim));
  p.sliding_window = spec.layers[layer].sliding_window;
  p.softcap = spec.attn_softcap;
  return p;
}

decoder_cuda::decoder_cuda(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
decoder_cuda::~decoder_cuda() = default;

decoder_cuda_created decoder_cuda::create(decoder_spec spec, const decoder_cuda_options& options) {
  decoder_cuda_created out;
  try {
    out.status = check_spec(spec, options);
    if (!out.status) return out;
    out.status = check_environment();
    if (!out.status) return out;
    auto s = std::make_unique<impl>();
    s->spec = std::move(spec);
    s->opt = options;
    s->sample_rows =
        options.max_sample_rows > 0 ? options.max_sample_rows : std::min(options.max_tokens, 256);
    auto build = [&]() -> cuda_status {
      KVACTOR_CUBLAS_CALL(cublasCreate(&s->blas));
      if (cuda_status st = make_weights(*s, s->opt.tied_lm_head); !st) return st;
      if (cuda_status st = make_frequencies(*s); !st) return st;
      if (cuda_status st = make_activations(*s); !st) return st;
      KVACTOR_CUDA_CALL(cudaStreamSynchronize(s->opt.stream));
      return {};
    };
    out.status = build();
    if (!out.status) return out; // `s` frees what it allocated
    out.decoder.reset(new decoder_cuda(std::move(s)));
  } catch (const std::bad_alloc&) {
    out.decoder.reset();
    out.status = cuda_status::failure(cudaErrorMemoryAllocation,
                                      std::string(create_prefix) + "host allocation failed");
  } catch (const std::exception& e) { // a spec the host-side RoPE refuses: an argument error
    out.decoder.reset();
    out.status = cuda_status::failure(cudaErrorInvalidValue, std::string(create_prefix) + e.what());
  }
  return out;
}

cuda_status fill_generated_cuda(const device_tensor& target, const generated_block& b,
                                cudaStream_t stream) {
  KVACTOR_CUDA_CHECK_ARG(target.data != nullptr, "fill_generated_cuda: target: no such tensor");
  KVACTOR_CUDA_CHECK_ARG(b.target_offset >= 0 && b.rows >= 0 && b.cols >= 0
                             && b.target_offset + b.rows * b.cols <= target.rows * target.cols,
                         "fill_generated_cuda: elements [", b.target_offset, ", ",
                         b.target_offset + b.rows * b.cols, ") outside the target's ", target.rows,
                         " x ", target.cols);
  const bool bf16 = target.type == element_type::bf16;
  auto* dst =
      static_cast<std::byte*>(target.data) + static_cast<size_t>(b.target_offset) * (bf16 ? 2 : 4);
  return cuda_detail::launch_fill_generated(dst, bf16, b.rows, b.cols, b.row_begin, b.col_begin,
                                            b.width, b.key, b.scale, b.centre, stream);
}

device_tensor decoder_cuda::tensor(decoder_tensor which, size_t layer) const {
  const auto i = static_cast<size_t>(which);
  const bool global = which == decoder_tensor::embed || which == decoder_tensor::lm_head
                      || which == decoder_tensor::final_norm;
  return global ? impl_->global[i] : impl_->layers[layer][i];
}

const decoder_spec& decoder_cuda::spec() const {
  return impl_->spec;
}
size_t decoder_cuda::num_layers() const {
  return impl_->layers.size();
}
int32_t decoder_cuda::hidden_size() const {
  return impl_->spec.hidden_size;
}
int32_t decoder_cuda::tp_size() const {
  return impl_->opt.tp_size;
}
int32_t decoder_cuda::max_tokens() const {
  return impl_->opt.max_tokens;
}
cudaStream_t decoder_cuda::stream() const {
  return impl_->opt.stream;
}
size_t decoder_cuda::weights_bytes() const {
  return impl_->weights_bytes;
}
size_t decoder_cuda::activation_bytes() const {
  return impl_->activation_bytes;
}

} // namespace kvactor::kernels
