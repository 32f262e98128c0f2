// attention_stack_cuda: validation, allocation and weight generation on the device; accessors.
#include <algorithm>
#include <new>
#include <string>
#include <utility>

#include "attention_stack_cuda_impl.h"
#include "host_checks.h"
#include "kvactor/kernels/stack_weights.h"
#include "stack_ops.h"

namespace kvactor::kernels {
namespace cuda_detail {

cuda_status cublas_call_failed(cublasStatus_t status, const char* call, const char* file,
                               int line) {
  cudaError_t code = cudaErrorUnknown;
  switch (status) {
  case CUBLAS_STATUS_ALLOC_FAILED: code = cudaErrorMemoryAllocation; break;
  case CUBLAS_STATUS_NOT_INITIALIZED: code = cudaErrorInitializationError; break;
  case CUBLAS_STATUS_INVALID_VALUE: code = cudaErrorInvalidValue; break;
  case CUBLAS_STATUS_ARCH_MISMATCH:
  case CUBLAS_STATUS_NOT_SUPPORTED: code = cudaErrorNotSupported; break;
  default: break;
  }
  return detail::call_failed(code, call, file, line, cublasGetStatusString(status),
                             cublasGetStatusName(status));
}

cuda_status gemm(cublasHandle_t handle, element_type type, const void* w, const void* x, float* y,
                 int32_t num_tokens, int32_t in, int32_t out) {
  if (num_tokens == 0) return {};
  // Column-major view: y^T [out, T] = (w^T [in, out])^T . x^T [in, T].
  const cudaDataType_t t = type == element_type::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const float one = 1.0f, zero = 0.0f;
  KVACTOR_CUBLAS_CALL(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, num_tokens, in, &one, w,
                                   t, in, x, t, in, &zero, y, CUDA_R_32F, out, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
  return {};
}

} // namespace cuda_detail

namespace {

// cuBLAS's recommended workspace on Hopper; set explicitly so that it is counted and so that the
// GEMMs can be captured in a CUDA graph.
constexpr size_t cublas_workspace_bytes = size_t{32} << 20;

constexpr const char* create_prefix = "attention_stack_cuda::create: ";

// The geometry paged_attention_cuda runs: head_size 64/128/256 with V as wide as K, or MLA with a
// 512-wide latent and a 64-wide RoPE tail.
cuda_status check_supported(const stack_config& cfg, const std::vector<layer_geometry>& geo) {
  for (size_t l = 0; l < geo.size(); ++l) {
    const layer_geometry& g = geo[l];
    if (g.mla) {
      KVACTOR_CUDA_CHECK_ARG(g.head_size == 576 && g.v_size == 512, create_prefix,
                             "stack_config.layers[", l, "]: MLA head_size ", g.head_size,
                             " / head_size_v ", g.v_size,
                             " is not supported (576 / 512: a 512 latent and a 64 RoPE tail)");
    } else {
      KVACTOR_CUDA_CHECK_ARG(g.head_size == 64 || g.head_size == 128 || g.head_size == 256,
                             create_prefix, "stack_config.layers[", l, "].head_size: ", g.head_size,
                             " is not supported (64, 128 or 256)");
      KVACTOR_CUDA_CHECK_ARG(g.v_size == g.head_size, create_prefix, "stack_config.layers[", l,
                             "].head_size_v: ", cfg.layers[l].head_size_v,
                             " is not supported: V must be as wide as K (", g.head_size, ")");
    }
  }
  return {};
}

cuda_status check_options(const attention_stack_cuda_options& o) {
  KVACTOR_CUDA_CHECK_ARG(o.max_tokens > 0, create_prefix, "options.max_tokens: ", o.max_tokens,
                         " must be > 0");
  KVACTOR_CUDA_CHECK_ARG(o.dtype == element_type::bf16 || o.dtype == element_type::f16,
                         create_prefix, "options.dtype: ", to_string(o.dtype),
                         " is not supported (bf16 or f16)");
  KVACTOR_CUDA_CHECK_ARG(o.max_sample_rows >= 0, create_prefix,
                         "options.max_sample_rows: ", o.max_sample_rows, " is negative");
  return {};
}

// Fills dst with the slice's [outs, ins] elements in the stack's element type.
cuda_status fill_slice(const attention_stack_cuda::impl& s, void* dst, const weight_slice& w) {
  cuda_detail::weight_slice_args a{};
  a.dst = dst;
  a.bf16 = s.bf16();
  a.seed = s.cfg.seed;
  a.matrix = static_cast<uint64_t>(w.matrix);
  a.layer = w.layer;
  a.row_begin = w.row_begin;
  a.col_begin = w.col_begin;
  a.ins = w.ins;
  a.outs = w.outs;
  a.scale = w.scale;
  return cuda_detail::launch_weight_slice(a, s.opt.stream);
}

cuda_status make_weights(attention_stack_cuda::impl& s) {
  const size_t row_bytes = static_cast<size_t>(s.cfg.hidden_size) * s.esize();
  s.layers.resize(s.geo.size());
  for (size_t l = 0; l < s.geo.size(); ++l) {
    const layer_weight_slices slices = layer_slices(s.cfg, s.geo[l], l);
    attention_stack_cuda::impl::layer& w = s.layers[l];
    w.q_rows = slices.q.outs;
    w.k_rows = slices.k ? slices.k->outs : 0;
    w.v_rows = slices.v ? slices.v->outs : 0;
    if (cuda_status st = s.allocate(static_cast<size_t>(w.qkv_rows()) * row_bytes, true, &w.qkv);
        !st)
      return st;
    auto* const qkv = static_cast<unsigned char*>(w.qkv);
    if (cuda_status st = fill_slice(s, qkv, slices.q); !st) return st;
    unsigned char* const k = qkv + static_cast<size_t>(w.q_rows) * row_bytes;
    if (slices.k) {
      if (cuda_status st = fill_slice(s, k, *slices.k); !st) return st;
    }
    if (slices.v) {
      unsigned char* const v = k + static_cast<size_t>(w.k_rows) * row_bytes;
      if (cuda_status st = fill_slice(s, v, *slices.v); !st) return st;
    }
    if (cuda_status st = s.allocate(static_cast<size_t>(slices.o.ins) * row_bytes, true, &w.o); !st)
      return st;
    if (cuda_status st = fill_slice(s, w.o, slices.o); !st) return st;
    // A few floats: computed on the host and uploaded.
    const std::vector<float> sinks = layer_sinks(s.cfg, s.geo[l], l);
    if (!sinks.empty()) {
      void* p = nullptr;
      if (cuda_status st = s.allocate(sinks.size() * sizeof(float), true, &p); !st) return st;
      w.sinks = static_cast<float*>(p);
      KVACTOR_CUDA_CALL(cudaMemcpyAsync(w.sinks, sinks.data(), sinks.size() * sizeof(float),
                                        cudaMemcpyHostToDevice, s.opt.stream));
      KVACTOR_CUDA_CALL(cudaStreamSynchronize(s.opt.stream)); // before `sinks` goes away
    }
  }
  const weight_slice vocab = vocab_slice(s.cfg);
  if (cuda_status st = s.allocate(static_cast<size_t>(vocab.outs) * row_bytes, true, &s.vocab); !st)
    return st;
  return fill_slice(s, s.vocab, vocab);
}

cuda_status make_activations(attention_stack_cuda::impl& s) {
  size_t qkv = 0, q = 0, k = 0, v = 0, attn = 0;
  for (size_t l = 0; l < s.geo.size(); ++l) {
    const layer_geometry& g = s.geo[l];
    qkv = std::max(qkv, static_cast<size_t>(s.layers[l].qkv_rows()));
    q = std::max(q, static_cast<size_t>(g.q_heads * g.head_size));
    k = std::max(k, static_cast<size_t>(s.layers[l].k_rows));
    v = std::max(v, static_cast<size_t>(s.layers[l].v_rows));
    attn = std::max(attn, static_cast<size_t>(g.q_heads * g.v_size));
  }
  const auto t = static_cast<size_t>(s.opt.max_tokens);
  const auto hidden = static_cast<size_t>(s.cfg.hidden_size);
  const auto rows = static_cast<size_t>(s.sample_rows);
  const size_t e = s.esize();
  void* p = nullptr;
  const auto alloc = [&](size_t bytes) { return s.allocate(bytes, false, &p); };
  if (cuda_status st = alloc(std::max(t, rows) * hidden * e); !st) return st;
  s.xn = p;
  if (cuda_status st = alloc(t * qkv * sizeof(float)); !st) return st;
  s.qkv = static_cast<float*>(p);
  if (cuda_status st = alloc(t * q * e); !st) return st;
  s.q = p;
  if (cuda_status st = alloc(t * k * e); !st) return st;
  s.k = p;
  if (cuda_status st = alloc(t * v * e); !st) return st;
  s.v = p;
  if (cuda_status st = alloc(t * attn * e); !st) return st;
  s.attn = p;
  if (cuda_status st = alloc(t * hidden * sizeof(float)); !st) return st;
  s.o = static_cast<float*>(p);
  if (cuda_status st = alloc(rows * static_cast<size_t>(s.cfg.vocab_size) * sizeof(float)); !st)
    return st;
  s.logits = static_cast<float*>(p);
  if (cuda_status st = alloc(rows * sizeof(int32_t)); !st) return st;
  s.rows = static_cast<int32_t*>(p);
  if (cuda_status st = alloc(rows * sizeof(int32_t)); !st) return st;
  s.tokens = static_cast<int32_t*>(p);
  if (cuda_status st = alloc(s.opt.attention_workspace_bytes); !st) return st;
  s.attention_ws = {p, s.opt.attention_workspace_bytes};
  if (cuda_status st = alloc(cublas_workspace_bytes); !st) return st;
  // cublasSetStream resets the workspace: the stream first.
  KVACTOR_CUBLAS_CALL(cublasSetStream(s.blas, s.opt.stream));
  KVACTOR_CUBLAS_CALL(cublasSetWorkspace(s.blas, p, cublas_workspace_bytes));
  return {};
}

cuda_status build(attention_stack_cuda::impl& s) {
  KVACTOR_CUBLAS_CALL(cublasCreate(&s.blas));
  if (cuda_status st = make_weights(s); !st) return st;
  if (cuda_status st = make_activations(s); !st) return st;
  KVACTOR_CUDA_CALL(cudaStreamSynchronize(s.opt.stream));
  return {};
}

} // namespace

attention_stack_cuda::attention_stack_cuda(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
attention_stack_cuda::~attention_stack_cuda() = default;

attention_stack_cuda_created
attention_stack_cuda::create(stack_config cfg, const attention_stack_cuda_options& options) {
  attention_stack_cuda_created out;
  try {
    auto s = std::make_unique<impl>();
    out.status = cuda_detail::check_as_status([&] { s->geo = plan_stack(cfg); }, create_prefix);
    if (!out.status) return out;
    out.status = check_options(options);
    if (out.status.ok()) out.status = check_supported(cfg, s->geo);
    if (!out.status) return out;
    s->cfg = std::move(cfg);
    s->opt = options;
    s->sample_rows =
        options.max_sample_rows > 0 ? options.max_sample_rows : std::min(options.max_tokens, 256);
    out.status = build(*s);
    if (!out.status) return out; // `s` frees what it allocated
    out.stack.reset(new attention_stack_cuda(std::move(s)));
  } catch (const std::bad_alloc&) {
    out.stack.reset();
    out.status = cuda_status::failure(cudaErrorMemoryAllocation,
                                      std::string(create_prefix) + "host allocation failed");
  }
  return out;
}

const stack_config& attention_stack_cuda::config() const {
  return impl_->cfg;
}
const layer_geometry& attention_stack_cuda::geometry(size_t layer) const {
  return impl_->geo[layer];
}
size_t attention_stack_cuda::num_layers() const {
  return impl_->geo.size();
}
int32_t attention_stack_cuda::hidden_size() const {
  return impl_->cfg.hidden_size;
}
int32_t attention_stack_cuda::tp_size() const {
  return impl_->cfg.tp_size;
}
element_type attention_stack_cuda::dtype() const {
  return impl_->opt.dtype;
}
int32_t attention_stack_cuda::max_tokens() const {
  return impl_->opt.max_tokens;
}
cudaStream_t attention_stack_cuda::stream() const {
  return impl_->opt.stream;
}
size_t attention_stack_cuda::weights_bytes() const {
  return impl_->weights_bytes;
}
size_t attention_stack_cuda::activation_bytes() const {
  return impl_->activation_bytes;
}
const void* attention_stack_cuda::vocab_weights() const {
  return impl_->vocab;
}

layer_weights_cuda attention_stack_cuda::weights(size_t layer) const {
  const impl::layer& w = impl_->layers[layer];
  return {w.qkv, w.q_rows, w.k_rows, w.v_rows, w.o, w.sinks};
}

attention_params attention_stack_cuda::layer_attention(size_t layer) const {
  return layer_attention_params(impl_->cfg.layers[layer], impl_->geo[layer],
                                impl_->layers[layer].sinks);
}

} // namespace kvactor::kernels
