// FULL CUDA graphs for a GPU rank's uniform decode steps (issue 6): persistent input buffers at
// fixed addresses, one captured forward per padded batch size, and the staging of each step's
// batch into those buffers. Padded requests get token 0, position 0, seq_len 0 (their attention
// is skipped), slot -1 (no KV write) and null-block rows; real rows compute what an eager step of
// the padded batch computes, bit for bit. CUDA build only; no CAF.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/metadata/builder.hpp"
#include "actors/metadata/step_batch.hpp"
#include "kvactor/kernels/cuda/attention_stack_cuda.h"
#include "kvactor/kernels/cuda/stack_graph.h"
#include "messages/errc.hpp"

namespace kvactor {

class graph_runner {
public:
  /// Persistent buffers for up to max_reqs one-token requests whose block-table rows hold up to
  /// max_width entries, for `num_groups` metadata groups (layers sharing one metadata object
  /// share a group; layer_group[l] names layer l's). `hidden` receives the step's rows.
  static expected<std::unique_ptr<graph_runner>> create(kernels::attention_stack_cuda& stack,
                                                        std::vector<kernels::kv_view> views,
                                                        std::vector<int32_t> layer_group,
                                                        int32_t num_groups, int32_t max_reqs,
                                                        int32_t max_width, float* hidden);
  ~graph_runner();

  /// Writes a uniform decode batch (n requests of 1 token; group g's metadata in groups[g])
  /// into the persistent buffers, padded to `padded` requests, on the stack's stream.
  status stage(const step_batch& b, const std::vector<const backend_metadata*>& groups,
               int32_t padded);
  /// Captures the graph for `padded` requests (once); its device bytes are measured.
  status capture(int32_t padded);
  bool captured(int32_t padded) const { return graphs_.count(padded) > 0; }
  status replay(int32_t padded);
  /// Device bytes of the persistent buffers and of every graph.
  int64_t buffer_bytes() const { return buffer_bytes_; }
  int64_t graph_bytes() const;
  int32_t max_reqs() const { return max_reqs_; }

private:
  graph_runner() = default;
  kernels::device_step step_for(int32_t padded) const;

  kernels::attention_stack_cuda* stack_ = nullptr;
  std::vector<kernels::kv_view> views_;
  std::vector<int32_t> layer_group_;
  int32_t max_reqs_ = 0, max_width_ = 0;
  float* hidden_ = nullptr;
  // One device allocation holds every persistent array; pinned host staging mirrors it.
  void* device_ = nullptr;
  void* host_ = nullptr;
  int64_t buffer_bytes_ = 0;
  int32_t* ids_ = nullptr;
  int32_t* positions_ = nullptr;
  struct group_buffers {
    int32_t* qsl = nullptr;
    int32_t* seq_lens = nullptr;
    int32_t* table = nullptr;
    int64_t* slots = nullptr;
  };
  std::vector<group_buffers> groups_;
  std::map<int32_t, std::unique_ptr<kernels::stack_graph>> graphs_;
};

} // namespace kvactor
