// The synthetic attention stack (attention_stack.h) on one GPU: the same weights (generated on
// the device from the same hash, stored in the cache's element type), the same math per layer
//   rms_norm -> q/k/v projection (cuBLAS, bf16/f16 in, float accumulate and out) -> RoPE in float
//   -> kv_write_cuda -> paged_attention_cuda -> output projection (float out) -> all_reduce
//   -> residual add in float
// and the same greedy sampling. The CPU attention_stack is its oracle: hidden states agree within
// the rounding of the bf16/f16 operands, not bit for bit.
//
// Everything runs on the stream given at creation and on the current device; a call returns once
// its work is enqueued (sample waits for its tokens). Not thread-safe: one caller at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kvactor/kernels/cuda/cuda_check.h"
#include "kvactor/kernels/cuda/cuda_stack.h"
#include "kvactor/kernels/kv_cache_view.h"
#include "kvactor/kernels/paged_attention.h"
#include "kvactor/kernels/stack_config.h"

namespace kvactor::kernels {

struct attention_stack_cuda_options {
  int32_t max_tokens = 0;                  // tokens of the largest step; activations sized for it
  element_type dtype = element_type::bf16; // weights and activations: the caches' type (bf16/f16)
  cudaStream_t stream = nullptr;
  int32_t max_sample_rows = 0; // rows one sampling pass projects at once; 0 = min(max_tokens, 256)
  // Split-KV scratch of paged_attention_cuda, shared by the layers; smaller means fewer splits.
  size_t attention_workspace_bytes = size_t{64} << 20;
};

/// Device pointers to one layer's weights, for inspection (tests). The element type is dtype().
struct layer_weights_cuda {
  const void* qkv = nullptr; // [q_rows + k_rows + v_rows, hidden]: q, then k (MLA: the latent), v
  int32_t q_rows = 0, k_rows = 0, v_rows = 0; // k_rows = v_rows = 0 for a layer sharing a cache
  const void* o = nullptr;                    // [hidden, q_heads * v_size]
  const float* sinks = nullptr;               // [q_heads] or nullptr
};

class attention_stack_cuda;

struct attention_stack_cuda_created {
  std::unique_ptr<attention_stack_cuda> stack; // null exactly when !status.ok()
  cuda_status status;
};

class attention_stack_cuda final : public cuda_stack {
public:
  /// Validates `cfg` (plan_stack) and `options`, then allocates (plain cudaMalloc) and generates
  /// this rank's weights on the device, and allocates the activations for options.max_tokens.
  /// Returns the stack, or a failed status: cudaErrorInvalidValue naming the field at fault
  /// (config, options, or a layer paged_attention_cuda does not support: head_size 64/128/256
  /// with v_size == head_size, or MLA with head_size 576 and v_size 512) before any CUDA call;
  /// else the CUDA or cuBLAS call that failed, with everything allocated so far freed.
  /// Waits for the weights to be generated before returning.
  static attention_stack_cuda_created create(stack_config cfg,
                                             const attention_stack_cuda_options& options);

  ~attention_stack_cuda() override;
  attention_stack_cuda(const attention_stack_cuda&) = delete;
  attention_stack_cuda& operator=(const attention_stack_cuda&) = delete;

  /// One forward step, as attention_stack::forward:
  ///   step   // device ids, positions and per-layer metadata; step.layers.size() == num_layers
  ///   kv     // [num_layers] device views of type dtype() (ignored for layers sharing another's)
  ///   hidden // [num_tokens, hidden_size] device float, out: the residual stream after all layers
  /// all_reduce(buffer, count) is called once per layer from this thread, after the output
  /// projection is enqueued, on its partial sums (device [num_tokens, hidden_size] float); it
  /// must reduce them in stream order (e.g. NCCL on stream()). Empty = identity (tp_size 1 only).
  /// Every host-visible argument of every layer is checked before anything is enqueued; a failed
  /// status names the argument (and layer) at fault. REQUIRES: the device arrays hold what
  /// attention_stack::forward accepts (positions agreeing with each layer's metadata).
  cuda_status forward(const device_step& step, const std::vector<kv_view>& kv,
                      const std::function<cuda_status(float*, size_t)>& all_reduce,
                      float* hidden) override;

  /// The argument checks of forward() alone (tp_size 1: no all-reduce), for callers that run
  /// the step in pieces.
  cuda_status check_forward(const device_step& step, const std::vector<kv_view>& kv,
                            const float* hidden) const override;

  /// forward() split at its attention ops, for PIECEWISE graphs (tp_size 1): forward(step) is
  /// exactly forward_piece(0), forward_attention(0), forward_piece(1), ..., forward_piece(L)
  /// for L layers. Piece k < L ends with layer k's attention inputs (q, k, v); piece k > 0
  /// begins with layer k-1's output projection and residual add. Only `piece` / `layer` is
  /// checked: call check_forward() once per step first.
  cuda_status forward_piece(const device_step& step, size_t piece, float* hidden) override;
  cuda_status forward_attention(const device_step& step, const std::vector<kv_view>& kv,
                                size_t layer) override;

  /// Greedy next token of each of `rows` of hidden (device [*, hidden_size] float): argmax over
  /// the vocab projection of rms_norm(row), the lowest index winning ties. Sets tokens to
  /// [rows.size()] and waits for them. A negative row or a null hidden is rejected by name.
  /// REQUIRES: every row lies inside hidden.
  cuda_status sample(const float* hidden, const std::vector<int32_t>& rows,
                     std::vector<int32_t>& tokens);
  /// sample() above when every row is greedy; the synthetic stack refuses other sampling.
  cuda_status sample(const float* hidden, const sample_rows& what,
                     std::vector<int32_t>& tokens) override;

  const stack_config& config() const;
  /// REQUIRES: layer < config().layers.size().
  const layer_geometry& geometry(size_t layer) const;
  /// The paged_attention_cuda parameters of `layer`; sinks point to device memory.
  attention_params layer_attention(size_t layer) const;
  layer_weights_cuda weights(size_t layer) const;
  const void* vocab_weights() const; // [vocab_size, hidden] device, dtype()

  size_t num_layers() const override;
  int32_t hidden_size() const override;
  int32_t tp_size() const override;
  element_type dtype() const override;
  int32_t max_tokens() const override;
  cudaStream_t stream() const override;
  /// Device bytes of the weights: every layer's qkv, o and sinks, and the vocab projection.
  size_t weights_bytes() const override;
  /// Device bytes of everything else it allocated: the step activations for max_tokens, the
  /// sampling buffers, and the attention and cuBLAS workspaces. (cuBLAS's handle itself may
  /// hold a little more, which it allocates on its own.)
  size_t activation_bytes() const override;

  struct impl; // opaque: the weights, activations and cuBLAS handle (kernels/cuda/)

private:
  explicit attention_stack_cuda(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace kvactor::kernels
