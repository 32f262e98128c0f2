// CUDA graphs of a GPU rank: persistent input buffers at fixed addresses, the graphs
// captured over them (FULL: the whole forward of a uniform decode batch; PIECEWISE: the forward
// between its attention ops, attention eager), and the staging of each step's batch into those
// buffers. Padded tokens get token 0, position 0 and slot -1 (no KV write); padded requests (FULL
// only) one padded token each, seq_len 0 (attention skipped) and a null-block row. Real rows then
// compute what an eager forward of the padded step computes, bit for bit. With tensor
// parallelism the all-reduces of the forward go through the rank's communicator, captured into
// the graphs with everything else; after each launch the runner hands the communicator the
// collectives that launch holds, so its ledger and timeout cover them as eager ones. CUDA build;
// no CAF.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "actors/metadata/builder.hpp"
#include "actors/metadata/step_batch.hpp"
#include "kvactor/comm/communicator.h"
#include "kvactor/kernels/cuda/cuda_stack.h"
#include "kvactor/kernels/cuda/stack_graph.h"
#include "messages/cudagraph.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// The shapes the persistent buffers hold.
struct graph_runner_limits {
  int32_t max_reqs = 0;   // requests of one step (max_num_seqs)
  int32_t max_tokens = 0; // tokens of the largest graph (the largest capture size)
  int32_t max_width = 0;  // block-table entries of the longest request
};

class graph_runner {
public:
  /// Buffers for `num_groups` metadata groups (layers sharing one metadata object share a
  /// group; layer_group[l] names layer l's). `hidden` receives the step's rows. `comm`: the
  /// tensor-parallel communicator (null or world 1: none); every rank of the group must create
  /// its runner at the same time (the warm-up step all-reduces).
  static expected<std::unique_ptr<graph_runner>>
  create(kernels::cuda_stack& stack, std::vector<kernels::kv_view> views,
         std::vector<int32_t> layer_group, int32_t num_groups, graph_runner_limits limits,
         float* hidden, std::shared_ptr<comm::communicator> comm = nullptr);
  ~graph_runner();

  /// Writes the batch (group g's metadata in groups[g]) into the persistent buffers on the
  /// stack's stream, padded to `tokens` tokens and `reqs` requests (reqs == b.num_reqs() for
  /// PIECEWISE; FULL pads requests too, one token each).
  status stage(const step_batch& b, const std::vector<const backend_metadata*>& groups,
               int32_t tokens, int32_t reqs);
  /// Captures the graph of `graph` (mode full: graph.num_reqs one-token requests; piecewise:
  /// graph.num_tokens tokens), once; its device bytes are measured.
  status capture(const batch_descriptor& graph);
  bool captured(const batch_descriptor& graph) const;
  /// Forgets the graph of `graph` (a peer could not capture it: the group runs it eagerly).
  void drop(const batch_descriptor& graph);
  /// Replays the graph of `graph` over what stage() wrote; `reqs` is the staged request count
  /// (the eager attention of PIECEWISE reads it).
  status replay(const batch_descriptor& graph, int32_t reqs);
  /// What the replay computes, eagerly: the same forward over the same staged buffers (the
  /// reference of tests and benchmarks).
  status forward_eager(const batch_descriptor& graph, int32_t reqs);

  /// Device bytes of the persistent buffers, of one graph, and of every graph.
  int64_t buffer_bytes() const { return buffer_bytes_; }
  int64_t graph_bytes(const batch_descriptor& graph) const;
  int64_t graph_bytes() const;
  size_t num_graphs() const { return full_.size() + piecewise_.size(); }
  const graph_runner_limits& limits() const { return limits_; }

private:
  graph_runner() = default;
  /// create() up to the warm-up: the checks, the buffers and their first contents.
  static expected<std::unique_ptr<graph_runner>>
  allocate(kernels::cuda_stack& stack, std::vector<kernels::kv_view> views,
           std::vector<int32_t> layer_group, int32_t num_groups, graph_runner_limits limits,
           float* hidden);
  /// decodes_only: one token per request (FULL graphs), so attention skips its prefill launch.
  kernels::device_step step_for(int32_t tokens, int32_t reqs, bool decodes_only = false) const;
  /// The forward's all-reduce through comm_ (empty without tensor parallelism).
  std::function<kernels::cuda_status(float*, size_t)> reducer();
  /// After a launch: the collectives it holds join the communicator's ledger.
  status launched(const std::vector<comm::collective_record>& collectives);

  kernels::cuda_stack* stack_ = nullptr;
  std::vector<kernels::kv_view> views_;
  std::vector<int32_t> layer_group_;
  graph_runner_limits limits_;
  float* hidden_ = nullptr;
  // One device allocation holds every persistent array, with a pinned host mirror: the small
  // arrays lie together (one copy per step), each group's block table apart (a 2-D copy of the
  // rows and columns in use).
  void* device_ = nullptr;
  void* host_ = nullptr;
  int64_t buffer_bytes_ = 0;
  size_t small_bytes_ = 0; // ids, positions and every group's qsl, seq_lens, slots
  int32_t* ids_ = nullptr;
  int32_t* positions_ = nullptr;
  struct group_buffers {
    int32_t* qsl = nullptr;
    int32_t* seq_lens = nullptr;
    int64_t* slots = nullptr;
    int32_t* table = nullptr;
  };
  std::vector<group_buffers> groups_;
  std::shared_ptr<comm::communicator> comm_; // null: no tensor parallelism
  template <class G>
  struct held {
    std::unique_ptr<G> graph;
    std::vector<comm::collective_record> collectives; // what one launch all-reduces
  };
  std::map<int32_t, held<kernels::stack_graph>> full_;          // by num_reqs
  std::map<int32_t, held<kernels::piecewise_graph>> piecewise_; // by num_tokens
};

} // namespace kvactor
