// The rank's pure core for steps: which requests it holds, their block tables, and the batch of
// the current step. A plan is validated as a whole before anything changes, so a rejected step
// leaves the rank exactly as it was.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/metadata/step_batch.hpp"
#include "messages/errc.hpp"
#include "messages/kv.hpp"
#include "messages/step.hpp"

namespace kvactor {

/// Why a step was rejected, and the requests the rejection is about (empty: the whole step).
struct step_rejection {
  error err;
  std::vector<uint64_t> request_ids;
};

class step_state {
public:
  step_state() = default;
  step_state(std::vector<group_geometry> groups, int64_t num_blocks, int64_t max_model_len,
             int32_t max_num_batched_tokens, int32_t max_num_seqs);

  /// Checks sequence, epoch, requests, block ids and coverage of every scheduled position.
  std::optional<step_rejection> validate(const step_plan& plan) const;
  /// The sequence and epoch part of validate: whether the plan is stale or leaves a gap. Judged
  /// before anything else, so that a stale step is refused as stale even while a step is in
  /// flight.
  std::optional<step_rejection> check_sequence(const step_plan& plan) const;

  /// Applies a validated plan and lays the step's batch out in `out` (whose buffers are reused
  /// step after step, so their addresses stay put and nothing is copied).
  /// REQUIRES: validate(plan) returned nothing.
  void apply(const step_plan& plan, step_batch& out);

  uint64_t next_seq() const { return next_seq_; }
  uint64_t epoch() const { return epoch_; }
  size_t num_active() const { return requests_.size(); }
  bool has_request(uint64_t id) const { return requests_.count(id) > 0; }

  /// Kernel block-table entries per request, per group (the rows the builders see).
  const std::vector<int32_t>& widths() const { return widths_; }

private:
  struct request {
    int32_t prompt_len = 0;
    int32_t max_output_tokens = 0;
    sampling_params sampling;
    int32_t num_computed = 0;
    std::vector<std::vector<int32_t>> tables; // [num_groups] manager block ids
  };

  std::vector<group_geometry> groups_;
  int64_t num_blocks_ = 0;
  int64_t max_model_len_ = 0;
  int32_t max_num_batched_tokens_ = 0;
  int32_t max_num_seqs_ = 0;
  std::map<uint64_t, request> requests_;
  uint64_t next_seq_ = 0;
  uint64_t epoch_ = 0;
  bool started_ = false;
  std::vector<int32_t> widths_;        // [num_groups] kernel block-table entries per request
  mutable std::vector<uint64_t> seen_; // validate()'s scratch

  // validate()'s steps, in the order it takes them; each returns the first rejection it finds.
  // `plan_view` is what the plan changes, seen before anything is applied (defined in the .cpp).
  struct plan_view;
  // The first plan, or one of a newer epoch: the ranks' new life, which holds no requests yet.
  bool starts_new_life(const step_plan& plan) const { return !started_ || plan.epoch > epoch_; }
  std::optional<step_rejection> check_new_requests(const step_plan& plan, plan_view& view) const;
  std::optional<step_rejection> check_block_updates(const step_plan& plan, plan_view& view) const;
  std::optional<step_rejection> check_duplicates(const step_plan& plan) const;
  std::optional<step_rejection> check_scheduled(const scheduled_request& s,
                                                const plan_view& view) const;
  std::optional<step_rejection> check_coverage(uint64_t id, int32_t computed, int64_t end,
                                               const plan_view& view) const;
  std::optional<step_rejection> check_limits(const step_plan& plan, int64_t total) const;
};

} // namespace kvactor
