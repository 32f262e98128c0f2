// The driver's gathering of one step's replies (pure: no CAF): every rank answers a step_plan
// with step_done or an error, and once all have answered (or one collective failed) the gathered
// replies say what the driver does next. A step re-sent to a rank that had not answered may be
// answered twice: the first answer of each rank counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "messages/errc.hpp"
#include "messages/step.hpp"

namespace kvactor {

/// What the driver does with a step once every rank has answered.
struct step_verdict {
  enum class action : uint8_t {
    apply,    // every rank executed it: apply `done` (failing `failed` first, if any)
    resend,   // rejected naming requests: fail them, re-send the plan without them (same seq)
    reject,   // rejected as a whole, nothing changed on the ranks: fail `failed`, next seq unused
    consumed, // a rank failed after applying it: fail `failed`, the seq is used up
  };
  action what = action::apply;
  std::set<uint64_t> failed; // requests to fail with `why`
  std::string why;
  std::optional<step_done> done; // action::apply: the reply to apply (rank 0's)
};

class step_replies {
public:
  explicit step_replies(size_t num_ranks) : pending_(num_ranks), answered_(num_ranks, false) {}

  /// Rank `rank` executed the step. Returns true when this was the last reply awaited. A second
  /// answer from the same rank (a re-sent step answered twice), an unknown rank or any answer
  /// once closed() changes nothing and returns false.
  bool on_done(int32_t rank, step_done done);
  /// A rank answered with an error (request_ids: the requests it names, maybe none). Returns true
  /// when this was the last reply awaited. Duplicates are ignored as for on_done. Once closed, a
  /// rank's first error is still kept in failures() (for the diagnosis of a failed collective,
  /// which reads them later) and changes nothing else.
  bool on_error(int32_t rank, error err, std::vector<uint64_t> request_ids);

  bool answered(int32_t rank) const;
  /// The ranks that have not answered yet, in rank order.
  std::vector<int32_t> silent() const;
  bool complete() const { return pending_ == 0; }
  /// The step is over without them (the run ended, or the driver gave up on a silent rank).
  void close() { closed_ = true; }
  bool closed() const { return closed_; }

  /// True once the first collective failure arrived: the run ends, later replies change nothing.
  /// Returns true only for the reply that made it so.
  bool collective_failed_now() const { return collective_failed_now_; }
  bool collective_failed() const { return collective_failed_; }

  /// Every error a rank answered with, as (rank, message), in arrival order (those after close()
  /// included).
  const std::vector<std::pair<int32_t, std::string>>& failures() const { return failures_; }

  /// What to do with `plan` once every rank answered.
  /// REQUIRES: no reply is awaited any more.
  step_verdict verdict(const step_plan& plan) const;

private:
  bool first_answer(int32_t rank);
  void keep_late_failure(int32_t rank, const std::string& message);

  size_t pending_;
  std::vector<bool> answered_;
  bool closed_ = false;
  std::vector<step_done> done_;
  std::optional<error> first_error_;
  std::vector<uint64_t> first_error_ids_;
  std::vector<std::pair<int32_t, std::string>> failures_;
  bool collective_failed_ = false;
  bool collective_failed_now_ = false;
};

/// `plan` without `ids` (their new requests, block updates and scheduled tokens dropped, the ids
/// listed as finished), so that it can be re-sent under the same seq.
step_plan without(step_plan plan, const std::set<uint64_t>& ids);

} // namespace kvactor
