// The dense decoder (decoder.h) on one GPU, in bf16: weights and the activations the tensor
// cores read are bf16, the residual stream, every GEMM output and every norm are float. Per layer
//   residual_norm -> fused q/k/v projection (cuBLAS) -> bias, q/k norm, RoPE (one kernel)
//   -> kv_write_cuda -> paged_attention_cuda -> output projection -> all_reduce
//   -> [sandwich norm] + residual, norm -> fused gate/up projection -> gated activation
//   -> down projection -> all_reduce -> [sandwich norm] + residual
// then the final norm and the LM head over the whole vocabulary for the sampled rows only.
// The CPU decoder is its oracle within bf16 rounding; transformers in bf16 is its peer.
//
// NOTE(determinism): a step is deterministic, but a request's logits may depend on the batch it
// runs in: single-token steps use kvactor's skinny GEMM, larger ones cuBLAS, whose kernel and
// split-K choice depend on the token count (the CPU decoder, which pads to fixed tiles, is the
// batch-invariant one).
//
// The weights are allocated by create() and filled by the caller (a checkpoint loader, or a
// generator) through tensor(): it knows the layout (fused q/k/v rows, then gate/up rows).
// Everything runs on the stream given at creation and on the current device; not thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kvactor/kernels/cuda/cuda_stack.h"
#include "kvactor/kernels/decoder.h"

namespace kvactor::kernels {

struct decoder_cuda_options {
  int32_t max_tokens = 0; // tokens of the largest step; activations sized for it
  cudaStream_t stream = nullptr;
  int32_t max_sample_rows = 0; // rows one LM-head pass projects at once; 0 = min(max_tokens, 256)
  size_t attention_workspace_bytes = size_t{64} << 20; // split-KV scratch, shared by the layers
  int32_t tp_size = 1;       // ranks the spec is one share of (each forward all-reduces when > 1)
  bool tied_lm_head = false; // the LM head is the embedding (no lm_head tensor)
  // Single-token steps: the gate/up projection and the activation in one kernel (the same bits;
  // off until the decode bench has measured it on the device).
  bool fuse_gated_mlp = false;
};

/// Where one tensor lives: data == nullptr when the spec has none.
struct device_tensor {
  void* data = nullptr;
  element_type type = element_type::bf16; // bf16 matrices, f32 vectors
  int64_t rows = 0, cols = 0;             // vectors: rows 1
  size_t bytes() const { return static_cast<size_t>(rows * cols) * element_size(type); }
};

/// A block of a generated tensor (--load-format synthetic) written on the device: rows
/// [row_begin, +rows) x columns [col_begin, +cols) of a tensor `width` wide, element i of the
/// whole tensor being, in float, centre + scale * float(2 * keyed_uniform(key, i) - 1) (sampler.h),
/// bit for bit what the CPU generates; written row-major at element `target_offset` of `target`
/// (rounded to bf16 when the target is).
struct generated_block {
  int64_t target_offset = 0;
  int64_t rows = 0, cols = 0, row_begin = 0, col_begin = 0, width = 0;
  uint64_t key = 0;
  float scale = 0.0f, centre = 0.0f;
};
cuda_status fill_generated_cuda(const device_tensor& target, const generated_block& block,
                                cudaStream_t stream);

class decoder_cuda;

struct decoder_cuda_created {
  std::unique_ptr<decoder_cuda> decoder; // null exactly when !status.ok()
  cuda_status status;
};

class decoder_cuda final : public cuda_stack {
public:
  /// Checks the spec (head_dim 64, 96, 128 or 256; sizes positive; heads dividing evenly) and the
  /// options, then allocates the weights (zeroed) and the activations for options.max_tokens.
  /// cudaErrorInvalidValue naming the field before any CUDA call, else the call that failed.
  static decoder_cuda_created create(decoder_spec spec, const decoder_cuda_options& options);

  ~decoder_cuda() override;
  decoder_cuda(const decoder_cuda&) = delete;
  decoder_cuda& operator=(const decoder_cuda&) = delete;

  /// REQUIRES: layer < num_layers() for the per-layer tensors.
  device_tensor tensor(decoder_tensor which, size_t layer = 0) const;

  cuda_status forward(const device_step& step, const std::vector<kv_view>& kv,
                      const std::function<cuda_status(float*, size_t)>& all_reduce,
                      float* hidden) override;
  cuda_status check_forward(const device_step& step, const std::vector<kv_view>& kv,
                            const float* hidden) const override;
  cuda_status forward_piece(const device_step& step, size_t piece,
                            const std::function<cuda_status(float*, size_t)>& all_reduce,
                            float* hidden) override;
  cuda_status forward_attention(const device_step& step, const std::vector<kv_view>& kv,
                                size_t layer) override;

  /// Greedy rows take the argmax on the device (lowest id on ties); when any row samples or asks
  /// for logprobs, the rows' logits come to the host and sample_host_rows draws each row.
  cuda_status sample(const float* hidden, const sample_rows& what, sampled_rows& out) override;
  /// Enqueues the greedy tokens of `n` rows of hidden (rows and tokens in device memory, n at
  /// most the sample rows of one pass) with no host synchronisation: capturable into a graph
  /// after forward().
  cuda_status greedy_async(const float* hidden, const int32_t* rows, int32_t n, int32_t* tokens);
  /// The final-norm + LM-head logits of `rows` of hidden (soft-capped as the spec says), on the
  /// host: [rows.size(), vocab_size]. Waits for them.
  cuda_status logits(const float* hidden, const std::vector<int32_t>& rows,
                     std::vector<float>& out);

  const decoder_spec& spec() const;
  size_t num_layers() const override;
  int32_t hidden_size() const override;
  int32_t tp_size() const override;
  element_type dtype() const override { return element_type::bf16; }
  int32_t max_tokens() const override;
  cudaStream_t stream() const override;
  size_t weights_bytes() const override;
  size_t activation_bytes() const override;

  struct impl; // opaque: the weights, activations and cuBLAS handle (kernels/cuda/)

private:
  explicit decoder_cuda(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace kvactor::kernels
