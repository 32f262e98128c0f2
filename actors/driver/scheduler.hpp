// The driver's continuous-batching scheduler (vLLM v1 style, no CAF): it turns requests into one
// step_plan per step and folds each step_done back into the requests.
//
// One step (schedule):
//   1. running requests, in admission order, within the token budget: a decode feeds 1 token, a
//      request in the middle of its prompt feeds the next chunk (chunked prefill). When the pool
//      cannot give a request its blocks, the LAST running request is preempted by recompute
//      (blocks freed, back to the FRONT of the waiting queue, re-fed prompt + output later) and
//      the allocation is retried; a request may preempt itself and is then not scheduled.
//   2. if nothing was preempted: waiting requests, FIFO, while running < max_num_seqs and budget
//      is left; a prompt larger than the budget gets a chunk.
// The plan says, in the order ranks apply it: finished_requests (drop state: finished, failed,
// preempted since the last plan), new_requests, block_updates, scheduled (decodes first).
//
// Protocol: schedule(seq) -> ranks run it -> apply(step_done with the same seq) -> schedule ...
// A plan that schedules nothing needs no step_done. A plan re-sent under the same seq without
// some (failed) requests is applied with the step_done of the re-sent plan.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actors/driver/block_pool.hpp"
#include "actors/driver/kv_block_manager.hpp"
#include "actors/driver/prefix_hold.hpp"
#include "actors/driver/request.hpp"
#include "messages/engine_config.hpp"
#include "messages/errc.hpp"
#include "messages/kv.hpp"
#include "messages/step.hpp"

namespace kvactor {

/// max_model_len: prompt + output never exceeds it.
struct scheduler_config : scheduler_limits {
  int32_t num_ubatches = 1; // copied into every plan
  int32_t vocab_size = 0;   // > 0: prompt tokens must lie in [0, vocab_size)
  // Reuse the KV of cached full blocks of a shared prefix (vLLM's automatic prefix caching; see
  // kv_block_manager for what each kind of group allows).
  bool enable_prefix_caching = false;
};

class scheduler {
public:
  /// Fails (invalid_argument, naming the field) unless every limit is positive, num_blocks lies
  /// in [1, INT32_MAX] and every group has block_size > 0.
  static status validate(const scheduler_config& cfg, const std::vector<kv_cache_group>& groups,
                         int64_t num_blocks);

  /// `num_blocks` counts the null block, as kv_cache_config::num_blocks does.
  /// REQUIRES: validate(cfg, groups, num_blocks) succeeds.
  scheduler(scheduler_config cfg, std::vector<kv_cache_group> groups, int64_t num_blocks);
  scheduler(const scheduler&) = delete; // blocks_ points into pool_
  scheduler& operator=(const scheduler&) = delete;

  /// What add_request would refuse of a request, without queueing it: its sampling
  /// (check_sampling), an empty prompt, a token outside the vocabulary, max_output_tokens < 1,
  /// prompt_len >= max_model_len (invalid_argument), or a request too large for the whole pool
  /// (insufficient_memory).
  status check_request(const std::vector<int32_t>& prompt, int32_t max_output_tokens,
                       const sampling_params& sampling = {}) const;

  /// What check_request refuses of a request's sampling: a temperature not finite or below 0,
  /// top_k below 0, top_p outside (0, 1], a stop token outside the vocabulary.
  status check_sampling(const sampling_params& sampling) const;

  /// Queues a request. Fails for a duplicate id (the existing request is kept), and records the
  /// request as failed (with the reason in request_state::failure) and returns the error for an
  /// empty prompt, max_output_tokens < 1, prompt_len >= max_model_len (invalid_argument), or a
  /// request that could not fit in the whole pool even alone (insufficient_memory).
  status add_request(uint64_t id, std::vector<int32_t> prompt, int32_t max_output_tokens,
                     sampling_params sampling = {});

  /// True while a request waits or runs.
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  /// True when ids wait to be told to the ranks (an idle driver may send an empty plan for them).
  bool has_pending_finished() const { return !pending_finished_.empty(); }

  /// The next step. Its `scheduled` is empty only when nothing can run. Advances the scheduled
  /// requests' num_computed_tokens (the step will run). Fails while the previous plan is not
  /// applied and one of its requests still runs (a plan whose requests all failed since, e.g.
  /// because the ranks rejected it, is abandoned and does not block).
  expected<step_plan> schedule(uint64_t seq, uint64_t epoch);

  /// Appends the sampled tokens of the last plan; a request finishes (blocks freed, id in the
  /// next plan's finished_requests) when its output reaches max_output_tokens or prompt + output
  /// reaches max_model_len. Fails, changing nothing, when seq/epoch do not match the last plan,
  /// it was already applied, a sampled request id was not sampled in that plan (unknown), one is
  /// listed twice, or a sampled request of the plan is missing.
  status apply(const step_done& done);

  /// Frees the request's blocks and marks it failed; ranks that hold its state are told through
  /// the next plan's finished_requests. A no-op for unknown, finished or failed requests.
  void fail_request(uint64_t id, std::string reason);

  /// The ids that finished or failed since the last call, in that order (serving reports them).
  std::vector<uint64_t> take_retired();

  /// Drops a finished or failed request's state once its end was reported (serving), so that a
  /// long-lived server keeps nothing per request served; its counts stay. A no-op otherwise.
  void forget(uint64_t id);

  // ---- observation ---------------------------------------------------------------------------

  const request_state* find(uint64_t id) const;
  /// Ids in the order add_request saw them (failed ones included).
  const std::vector<uint64_t>& request_order() const { return order_; }
  /// Outputs so far, in request order.
  std::vector<std::vector<int32_t>> outputs() const;

  int64_t num_finished() const { return num_finished_; }
  int64_t num_failed() const { return num_failed_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  /// Prompt tokens admissions skipped because the prefix cache held them.
  int64_t num_prefix_hit_tokens() const { return num_prefix_hit_tokens_; }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t peak_blocks_used() const { return pool_.peak_used(); }
  const block_pool& pool() const { return pool_; }
  const kv_block_manager& blocks() const { return blocks_; }

private:
  struct pick {
    uint64_t id;
    int32_t num_tokens;
  };

  struct plan_record {
    uint64_t seq = 0;
    uint64_t epoch = 0;
    std::vector<uint64_t> sampled;   // requests with sample = true
    std::vector<uint64_t> scheduled; // every request of the plan
    bool applied = false;
  };

  // Phase 1; returns true when it preempted a request.
  bool schedule_running(int32_t& budget, std::vector<pick>& picks, step_plan& plan);
  // Phase 2: waiting requests in order, but one that shares blocks a running request is still
  // computing waits for them (prefix_hold).
  void admit_waiting(int32_t& budget, std::vector<pick>& picks, step_plan& plan);
  enum class admission { admitted, wait, failed };
  admission admit(request_state& r, int32_t& budget, std::vector<pick>& picks, step_plan& plan);
  prefix_hold computing_prefixes() const;
  const std::vector<block_hash>& prefix_chain(const request_state& r) const;
  void preempt(uint64_t id);
  // The cached prefix of a request that holds no blocks (kv_block_manager::take_cached_prefix).
  int64_t take_cached_prefix(request_state& r, std::vector<block_table_update>& updates);
  // The request if it is known and running (one of the last plan's may have failed and been
  // forgotten since), else null.
  request_state* running_request(uint64_t id);
  // Leaves the running set (if there) with status `st`; frees blocks, tells ranks if they know.
  void retire(request_state& r, request_state::status st);

  scheduler_config cfg_;
  int64_t prefix_block_size_; // of the first group: prefix_hold hashes as it does
  block_pool pool_;
  kv_block_manager blocks_;
  std::unordered_map<uint64_t, request_state> requests_;
  std::vector<uint64_t> order_;
  std::vector<uint64_t> retired_; // done since the last take_retired()
  std::deque<uint64_t> waiting_;
  std::vector<uint64_t> running_;          // admission order; the back is preempted first
  std::unordered_set<uint64_t> known_;     // ids the ranks hold state for
  std::vector<uint64_t> pending_finished_; // for the next plan's finished_requests
  std::optional<plan_record> last_;
  int64_t num_finished_ = 0;
  int64_t num_failed_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t num_prefix_hit_tokens_ = 0;
  // Prefix chains (prefix_hold) by request id, with the token count they were hashed at.
  mutable std::unordered_map<uint64_t, std::pair<int32_t, std::vector<block_hash>>> chains_;
};

} // namespace kvactor
