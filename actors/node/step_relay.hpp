// A node's gathering of one relayed step (pure: no CAF). The driver sends one node_step per node;
// the node hands the plan to each of its ranks named by the step and answers the driver once,
// with every rank's answer in one node_step_done. A collective failure is answered at once with
// what has arrived (the failed rank's peers may be stuck waiting for it, and the driver starts
// its diagnosis on the first such failure); a rank that has not answered when the step's time is
// up is reported silent.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "messages/errc.hpp"
#include "messages/node.hpp"

namespace kvactor {

class step_relay {
public:
  /// Awaits one answer from each of `ranks` (rank indices) for step `seq`.
  step_relay(uint64_t seq, std::vector<int32_t> ranks);

  /// Rank `rank` executed the step. True when the gathered answer is now due (take it).
  bool on_done(int32_t rank, step_done done);
  /// Rank `rank` refused or failed the step. True when the answer is now due.
  bool on_error(int32_t rank, error err, std::vector<uint64_t> request_ids);
  /// Rank `rank` did not answer in time. True when the answer is now due.
  bool on_silent(int32_t rank);
  /// The step's time is up: every rank that has not answered is silent. True when the answer is
  /// now due.
  bool silence_the_rest();

  /// The gathered answer; once taken, later answers change nothing and return false.
  node_step_done take();
  bool taken() const { return taken_; }

private:
  /// Marks `rank` answered; false for an unknown rank, a second answer, or after take().
  bool first_answer(int32_t rank);
  bool due() const { return !taken_ && (pending_ == 0 || collective_failed_); }

  std::vector<int32_t> ranks_;
  std::vector<bool> answered_;
  size_t pending_;
  bool collective_failed_ = false;
  bool taken_ = false;
  node_step_done out_;
};

} // namespace kvactor
