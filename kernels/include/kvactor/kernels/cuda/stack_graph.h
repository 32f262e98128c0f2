// A CUDA graph of one cuda_stack::forward (a FULL graph: every layer, attention
// included). The step's device pointers and host sizes are baked in at capture: a replay reads
// whatever those persistent buffers hold then, so the caller writes each step's inputs into the
// same addresses (padding requests with slot -1, seq_len 0 and null-block rows) and replays.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kvactor/kernels/cuda/cuda_check.h"
#include "kvactor/kernels/cuda/cuda_stack.h"

namespace kvactor::kernels {

class stack_graph;

struct stack_graph_created {
  std::unique_ptr<stack_graph> graph; // null exactly when !status.ok()
  cuda_status status;
};

class stack_graph {
public:
  /// Captures stack.forward(step, kv, all_reduce, hidden) on stack.stream(). With tensor
  /// parallelism `all_reduce` must enqueue graph-capturable collectives on that stream (NCCL's,
  /// the device-local communicator's). Nothing runs during capture; the graph is instantiated
  /// and uploaded, and its device memory measured with cudaMemGetInfo.
  static stack_graph_created
  capture(cuda_stack& stack, const device_step& step, const std::vector<kv_view>& kv, float* hidden,
          const std::function<cuda_status(float*, size_t)>& all_reduce = {});

  ~stack_graph();
  stack_graph(const stack_graph&) = delete;
  stack_graph& operator=(const stack_graph&) = delete;

  /// Launches the graph on the stack's stream.
  cuda_status replay();

  /// Device bytes the graph took when instantiated (cudaMemGetInfo before and after; the
  /// driver allocates in 2 MiB pages, so small graphs may show 0).
  int64_t bytes() const { return bytes_; }
  /// Kernel and memset nodes in the graph.
  size_t nodes() const { return nodes_; }

private:
  friend class piecewise_graph;
  // Captures what `enqueue` puts on `stream` into an instantiated, uploaded graph.
  static stack_graph_created capture_on(cudaStream_t stream,
                                        const std::function<cuda_status()>& enqueue);
  stack_graph(cudaGraph_t g, cudaGraphExec_t e, cudaStream_t s) : graph_(g), exec_(e), stream_(s) {}
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int64_t bytes_ = 0;
  size_t nodes_ = 0;
};

class piecewise_graph;

struct piecewise_graph_created {
  std::unique_ptr<piecewise_graph> graph; // null exactly when !status.ok()
  cuda_status status;
};

/// PIECEWISE graphs of one step size: the num_layers + 1 pieces of the stack between its
/// attention ops (cuda_stack::forward_piece), each captured as a graph; the attention
/// ops (KV write and paged attention) run eagerly between the replays, so they see each step's
/// request count and metadata. Token ids, positions, num_tokens and hidden are baked in.
class piecewise_graph {
public:
  /// Captures every piece of `step` on stack.stream(), their all-reduces through `all_reduce`
  /// (as stack_graph::capture); nothing runs.
  static piecewise_graph_created
  capture(cuda_stack& stack, const device_step& step, float* hidden,
          const std::function<cuda_status(float*, size_t)>& all_reduce = {});

  /// Replays the pieces with the eager attention of `step` between them. `step` must carry the
  /// captured token_ids, positions and num_tokens (checked), its layers the step's metadata.
  cuda_status replay(const device_step& step, const std::vector<kv_view>& kv);

  /// Device bytes of all pieces (cudaMemGetInfo around the capture).
  int64_t bytes() const { return bytes_; }
  size_t nodes() const;
  size_t pieces() const { return pieces_.size(); }

private:
  explicit piecewise_graph(cuda_stack& stack) : stack_(&stack) {}
  cuda_stack* stack_;
  const int32_t* token_ids_ = nullptr;
  const int32_t* positions_ = nullptr;
  int32_t num_tokens_ = 0;
  float* hidden_ = nullptr;
  std::vector<std::unique_ptr<stack_graph>> pieces_;
  int64_t bytes_ = 0;
};

} // namespace kvactor::kernels
