// What the GPU executor, its CUDA graphs and the graph runner need of a model on one GPU: a
// forward step over the paged KV cache (whole, or in pieces split at the attention ops for
// piecewise graphs) and the next tokens of some rows. The decoder (decoder_cuda.h) is one; test
// doubles can be others.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kvactor/kernels/cuda/cuda_check.h"
#include "kvactor/kernels/kv_cache_view.h"
#include "kvactor/kernels/sampler.h"

namespace kvactor::kernels {

/// One layer's attention metadata for a step (layer_batch.h's), in device
/// memory, with the host copies of the sizes the launches need.
struct device_layer_batch {
  const int32_t* query_start_loc = nullptr; // [num_reqs + 1] device; tokens past the last: padding
  const int32_t* seq_lens = nullptr;        // [num_reqs] device
  const int32_t* block_table = nullptr;     // [num_reqs, width] device kernel block ids
  const int64_t* slot_mapping = nullptr;    // [num_tokens] device; -1 = padding (not written)
  int32_t width = 0;                        // host
  int32_t num_reqs = 0;                     // host
};

/// One forward step: device token ids and positions, and the metadata of every layer.
struct device_step {
  const int32_t* token_ids = nullptr;     // [num_tokens] device
  const int32_t* positions = nullptr;     // [num_tokens] device
  int32_t num_tokens = 0;                 // host
  std::vector<device_layer_batch> layers; // [num_layers]
  // host: the most query tokens of one request, or 0 when unknown. When every request is a
  // decode (1, or few enough tokens for the decode kernel) attention skips its prefill launch.
  int32_t max_query_len = 0;
};

/// The rows to sample and how: params[i] and keys[i] (the position the draw is keyed by) for
/// rows[i]; params empty: every row greedy.
struct sample_rows {
  std::vector<int32_t> rows;
  std::vector<sampling_config> params;
  std::vector<uint64_t> keys;
};

class cuda_stack {
public:
  virtual ~cuda_stack() = default;

  /// One forward step over `kv` ([num_layers] device views); hidden [num_tokens, hidden_size]
  /// device float receives the residual stream. all_reduce(buffer, count) sums each row-parallel
  /// partial in stream order (empty: tp_size 1). Arguments are checked before anything runs.
  virtual cuda_status forward(const device_step& step, const std::vector<kv_view>& kv,
                              const std::function<cuda_status(float*, size_t)>& all_reduce,
                              float* hidden) = 0;
  /// The argument checks of forward() alone (no all-reduce).
  virtual cuda_status check_forward(const device_step& step, const std::vector<kv_view>& kv,
                                    const float* hidden) const = 0;
  /// forward() split at its attention ops: piece 0, attention 0, piece 1, ..., attention L-1,
  /// piece L; the pieces' all-reduces go through `all_reduce` as forward()'s do. Only `piece` /
  /// `layer` is checked: check_forward() first.
  virtual cuda_status forward_piece(const device_step& step, size_t piece,
                                    const std::function<cuda_status(float*, size_t)>& all_reduce,
                                    float* hidden) = 0;
  virtual cuda_status forward_attention(const device_step& step, const std::vector<kv_view>& kv,
                                        size_t layer) = 0;
  /// The next token of each row of `hidden` (device float) as `what` asks, with the logprobs
  /// of the rows that ask for them; waits for them.
  virtual cuda_status sample(const float* hidden, const sample_rows& what, sampled_rows& out) = 0;

  virtual size_t num_layers() const = 0;
  virtual int32_t hidden_size() const = 0;
  virtual int32_t tp_size() const = 0;
  virtual element_type dtype() const = 0; // of the KV cache it reads and writes
  virtual int32_t max_tokens() const = 0;
  virtual cudaStream_t stream() const = 0;
  virtual size_t weights_bytes() const = 0;
  virtual size_t activation_bytes() const = 0;
};

} // namespace kvactor::kernels
