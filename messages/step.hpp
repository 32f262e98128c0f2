// Driver <-> rank: one step_plan per step to every rank, one step_done back from each.
// Plans are self-contained (they carry the tokens to feed), so a recorded stream replays exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/errc.hpp"

#include "messages/cudagraph.hpp"
#include "messages/request.hpp"

namespace kvactor {

/// A request the ranks have not seen yet.
struct new_request {
  uint64_t request_id = 0;
  int32_t prompt_len = 0;
  int32_t max_output_tokens = 0;
  sampling_params sampling = {}; // the rank samples (the driver stops on stop tokens)
  // Prefix caching: the leading tokens whose KV the cache already holds (in the blocks its table
  // starts with); its first scheduled chunk starts there. 0 without a hit.
  int32_t num_cached_tokens = 0;

  bool operator==(const new_request&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, new_request& x) {
  return f(caf::meta::type_name("kvactor::new_request"), x.request_id, x.prompt_len,
           x.max_output_tokens, x.sampling, x.num_cached_tokens);
}

/// Writes `block_ids` into a request's block table of one KV cache group, from `start` on
/// (manager block ids; 0 is the null block, written where a sliding window released a block).
struct block_table_update {
  uint64_t request_id = 0;
  int32_t group_id = 0;
  int32_t start = 0;
  std::vector<int32_t> block_ids;

  bool operator==(const block_table_update&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, block_table_update& x) {
  return f(caf::meta::type_name("kvactor::block_table_update"), x.request_id, x.group_id, x.start,
           x.block_ids);
}

/// This step's work for one request: feed `token_ids` at positions num_computed_tokens + i.
struct scheduled_request {
  uint64_t request_id = 0;
  int32_t num_computed_tokens = 0; // tokens already in the KV cache
  std::vector<int32_t> token_ids;  // [num_scheduled_tokens]
  bool sample = false;             // the chunk reaches the end of the known tokens

  bool operator==(const scheduled_request&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, scheduled_request& x) {
  return f(caf::meta::type_name("kvactor::scheduled_request"), x.request_id, x.num_computed_tokens,
           x.token_ids, x.sample);
}

/// One step for every rank. `seq` increases by one per accepted step; `epoch` changes when the
/// driver restarts its ranks, so messages of an older life are recognised as stale.
struct step_plan {
  uint64_t seq = 0;
  uint64_t epoch = 0;
  std::vector<new_request> new_requests;
  std::vector<uint64_t> finished_requests; // ranks drop their state (finished, failed, preempted)
  std::vector<block_table_update> block_updates;
  std::vector<scheduled_request> scheduled; // batch order: decodes first
  int32_t num_ubatches = 1;

  bool operator==(const step_plan&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, step_plan& x) {
  return f(caf::meta::type_name("kvactor::step_plan"), x.seq, x.epoch, x.new_requests,
           x.finished_requests, x.block_updates, x.scheduled, x.num_ubatches);
}

struct sampled_token {
  uint64_t request_id = 0;
  int32_t token = 0;
  token_logprobs logprobs; // as the request's sampling.logprobs asks; empty when it does not

  bool operator==(const sampled_token&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, sampled_token& x) {
  return f(caf::meta::type_name("kvactor::sampled_token"), x.request_id, x.token, x.logprobs);
}

/// Where a rank spent one step, in nanoseconds.
struct step_timing {
  int64_t total_ns = 0;
  int64_t metadata_ns = 0;
  int64_t compute_ns = 0;

  bool operator==(const step_timing&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, step_timing& x) {
  return f(caf::meta::type_name("kvactor::step_timing"), x.total_ns, x.metadata_ns, x.compute_ns);
}

struct step_done {
  uint64_t seq = 0;
  uint64_t epoch = 0;
  int32_t rank = 0;
  std::vector<sampled_token> sampled; // one per scheduled request with sample = true
  step_timing timing;
  batch_descriptor executed; // the graph that ran, or eager

  bool operator==(const step_done&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, step_done& x) {
  return f(caf::meta::type_name("kvactor::step_done"), x.seq, x.epoch, x.rank, x.sampled, x.timing,
           x.executed);
}

/// A rank answered a step with an error: a rejection before anything changed (the requests at
/// fault are named; the driver fails them and re-sends the step) or, with reason.code
/// errc::step_failed, a failure after the step was applied. Recorded in traces, compared by replay.
struct step_rejected {
  uint64_t seq = 0;
  int32_t rank = 0;
  error reason;
  std::vector<uint64_t> request_ids;

  bool operator==(const step_rejected&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, step_rejected& x) {
  return f(caf::meta::type_name("kvactor::step_rejected"), x.seq, x.rank, x.reason, x.request_ids);
}

} // namespace kvactor
