// Where a rank's step runs: the decoder of one device (the CPU reference, or the GPU), fed with
// the batch and the builders' metadata. Pure C++ (no CAF); the rank actor owns one.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "actors/metadata/builder.hpp"
#include "actors/metadata/step_batch.hpp"
#include "actors/rank/upload_progress.hpp"
#include "kvactor/comm/communicator.h"
#include "kvactor/kernels/decoder.h"
#include "kvactor/kernels/layer_batch.h"
#include "kvactor/kernels/sampler.h"
#include "messages/cudagraph.hpp"
#include "messages/errc.hpp"
#include "messages/runtime.hpp"
#include "model/hf_decoder.hpp"

namespace kvactor {

/// One builder's slice of the step: tokens [token_start, token_end) and its metadata per layer.
struct executed_ubatch {
  int32_t token_start = 0;
  int32_t token_end = 0;
  const layer_metadata* layers = nullptr;
};

/// A ubatch's metadata as the CPU kernels read it: one layer_batch per decoder layer (named as the
/// builders key them), pointing into the builders' metadata. Fails naming a layer without any.
struct host_layer_batches {
  std::vector<kernels::layer_batch> batches;
  std::vector<const kernels::layer_batch*> pointers;
};
expected<host_layer_batches> host_layer_batches_of(const executed_ubatch& u,
                                                   const std::vector<std::string>& names);

/// What a GPU executor needs before it captures CUDA graphs.
struct graph_setup {
  std::vector<int32_t> layer_group; // [stack layers] metadata group of each layer (0, 1, ...)
  int32_t max_reqs = 0;             // requests of one step (max_num_seqs)
  int32_t max_tokens = 0;           // tokens of the largest graph
  int32_t max_width = 0;            // block-table entries of the longest request
  uint64_t fail_capture = 0;        // testing: this rank's capture number N fails; 0: none
};

/// One finished capture.
struct graph_capture {
  int64_t bytes = 0; // device memory the graph holds
  int64_t duration_ns = 0;
};

class step_executor {
public:
  virtual ~step_executor() = default;

  /// Binds the KV cache: one kernel view per stack layer (over this executor's device memory),
  /// the layer names the builders key metadata by, and the most tokens one step carries.
  virtual status bind(std::vector<kernels::kv_view> views, std::vector<std::string> layer_names,
                      int32_t max_tokens) = 0;

  /// Runs the stack over every ubatch of the batch, then samples b.sample_rows as their
  /// requests' sampling parameters say (with logprobs where asked).
  /// Errors name the step; a kernel argument error means a bug between metadata and kernels.
  virtual expected<kernels::sampled_rows> run(const step_batch& b,
                                              const std::vector<executed_ubatch>& ubatches) = 0;

  /// Runs the step as `wanted` says (a graph the dispatcher chose, or eager) when it can, else
  /// eagerly; `executed` receives what ran: the graph, or {none, tokens, reqs} of the batch.
  /// An executor without graphs runs every step eagerly.
  virtual expected<kernels::sampled_rows>
  run_dispatched(const step_batch& b, const std::vector<executed_ubatch>& ubatches,
                 const batch_descriptor& wanted, batch_descriptor& executed) {
    (void)wanted;
    executed = eager_descriptor(b, ubatches);
    return run(b, ubatches);
  }

  /// Sets up the persistent buffers graphs replay from. Executors without graphs refuse.
  virtual status prepare_graphs(const graph_setup& setup) {
    (void)setup;
    return make_error(
        errc::unsupported,
        fmt::format("CUDA graphs: the {} executor runs every step eagerly", device()));
  }
  /// Captures one graph of the plan (prepare_graphs first); errors leave the step eager.
  virtual expected<graph_capture> capture(const batch_descriptor& graph) {
    (void)graph;
    return make_error(errc::unsupported,
                      fmt::format("CUDA graphs: the {} executor captures none", device()));
  }

  static batch_descriptor eager_descriptor(const step_batch& b,
                                           const std::vector<executed_ubatch>& ubatches) {
    batch_descriptor d;
    d.num_tokens = b.num_tokens();
    d.num_reqs = b.num_reqs();
    d.num_ubatches = static_cast<int32_t>(std::max<size_t>(ubatches.size(), 1));
    return d;
  }

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

/// The CPU decoder (float, the reference; `weight_bytes` of weights for the ledger); `comm` (host
/// memory; null or world 1 for one rank) all-reduces its row-parallel projections.
std::unique_ptr<step_executor> make_cpu_decoder_executor(std::unique_ptr<kernels::decoder> d,
                                                         std::shared_ptr<comm::communicator> comm,
                                                         int64_t weight_bytes);

/// The decoder on CUDA device `device` (made current on the calling thread): this rank's slice
/// of the weights, uploaded from a checkpoint or generated on the device (checked against
/// `cfg`), cuBLAS projections and kvactor's kernels; `comm` (device memory, e.g. NCCL; null for
/// one rank) all-reduces on the decoder's stream. An error (never a crash) when this build has no
/// CUDA, the GPU is not usable, `comm` holds host memory or spans another world than the
/// model's split, or the model needs a kernel the GPU path lacks.
expected<std::unique_ptr<step_executor>>
make_cuda_decoder_executor(const hf_decoder_config& cfg, const gpu_weight_source& weights,
                           int32_t max_tokens, std::shared_ptr<comm::communicator> comm,
                           int32_t device);

} // namespace kvactor
