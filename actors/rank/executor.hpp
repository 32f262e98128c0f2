// Where a rank's step runs: the attention stack of one device (CPU reference, or the GPU), fed
// with the batch and the builders' metadata. Pure C++ (no CAF); the rank actor owns one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/metadata/builder.hpp"
#include "actors/metadata/step_batch.hpp"
#include "kvactor/kernels/attention_stack.h"
#include "kvactor/kernels/communicator.h"
#include "messages/errc.hpp"
#include "messages/runtime.hpp"

namespace kvactor {

/// One builder's slice of the step: tokens [token_start, token_end) and its metadata per layer.
struct executed_ubatch {
  int32_t token_start = 0;
  int32_t token_end = 0;
  const layer_metadata* layers = nullptr;
};

class step_executor {
public:
  virtual ~step_executor() = default;

  /// Binds the KV cache: one kernel view per stack layer (over this executor's device memory),
  /// the layer names the builders key metadata by, and the most tokens one step carries.
  virtual status bind(std::vector<kernels::kv_view> views, std::vector<std::string> layer_names,
                      int32_t max_tokens) = 0;

  /// Runs the stack over every ubatch of the batch, then samples b.sample_rows greedily.
  /// Errors name the step; a kernel argument error means a bug between metadata and kernels.
  virtual expected<std::vector<int32_t>> run(const step_batch& b,
                                             const std::vector<executed_ubatch>& ubatches) = 0;

  /// What this executor holds in memory (weights, activations, staging), for the ledger.
  virtual std::vector<memory_entry> ledger() const = 0;

  /// "cpu" or "cuda".
  virtual const char* device() const = 0;
};

// Both executors all-reduce the output projections through a communicator (communicator.h) when
// it spans more than one rank. A collective that fails (timeout, mismatch, abort) makes run()
// return errc::collective_failed with the communicator's message, which names this rank's last
// ledger entries; any other failure aborts the communicator, so that peers waiting in a
// collective for this rank fail at once instead of waiting out their timeout.

/// The CPU reference stack; `comm` (host memory; null or world 1 for one rank) all-reduces the
/// output projections.
std::unique_ptr<step_executor> make_cpu_executor(std::unique_ptr<kernels::attention_stack> stack,
                                                 std::shared_ptr<kernels::communicator> comm);

/// The GPU stack on CUDA device `device` (made current on the calling thread): weights generated
/// on the device, cuBLAS projections, the CUDA paged-attention kernels; `comm` (device memory,
/// e.g. NCCL; null for one rank) all-reduces on the stack's stream. An error (never a crash)
/// when this build has no CUDA, the GPU is not usable, `comm` holds host memory or spans another
/// world than the model's split, or the model needs a kernel the GPU path lacks.
expected<std::unique_ptr<step_executor>>
make_cuda_executor(const kernels::stack_config& config, int32_t max_tokens,
                   std::shared_ptr<kernels::communicator> comm = nullptr, int32_t device = 0);

} // namespace kvactor
