// The builder actor shell (one per microbatch): turns its slice of a step into attention
// metadata, written into buffers the rank reads once the builder replies metadata_ready.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/metadata/builder.hpp"
#include "actors/metadata/step_batch.hpp"

namespace kvactor {

/// Builder u's output for the current step (persistent: the address never changes).
struct ubatch_output {
  uint64_t seq = 0;
  int32_t token_start = 0;
  int32_t token_end = 0;
  int32_t num_reqs = 0;
  layer_metadata layers; // layer name -> metadata (one object per attention group)
};

/// What a builder needs besides messages: the rank's batch (read-only while building), its own
/// output, and the attention groups with their geometry. Builders share nothing else: no backend
/// needs scratch space yet, so there is no shared workspace to hold.
struct builder_setup {
  int32_t ubatch = 0;
  std::shared_ptr<const step_batch> batch;
  std::shared_ptr<ubatch_output> output;
  std::vector<std::vector<attention_group>> attention_groups;
  std::vector<group_geometry> groups;
  bool digest = false; // metadata_ready.digest (for recording and replay)
};

struct builder_state {
  builder_setup setup;
  builder_table builders;                  // [KV cache group][attention group][ubatch]
  std::vector<std::vector<int64_t>> slots; // [KV cache group] persistent slot mappings
  static inline const char* name = "kvactor.builder";
  builder_state() = default;
};

builder_actor::behavior_type builder(builder_actor::stateful_pointer<builder_state> self,
                                     builder_setup setup);

} // namespace kvactor
