// The driver's diagnosis of a failed collective: given every rank's collective ledger (or why a
// rank did not answer), one sentence that says which rank diverged and where, e.g.
//   "rank 1 is at all_reduce(sum) #37 (8192 float32, completed) and has not entered #38;
//    ranks 0, 2, 3 wait in all_reduce(sum) #38 (8192 float32)"
// Pure C++ (no CAF): the driver actor gathers the ledgers, this core reads them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "messages/collective.hpp"

namespace kvactor {

/// What one rank answered when the driver asked for its collective ledger.
struct rank_ledger {
  int32_t rank = 0;
  bool answered = false;
  std::vector<collective_entry> entries; // oldest first
  std::string no_answer;                 // why not, when !answered
};

/// Groups the ranks by their last ledger entry (the collective they wait in, or the last one
/// they completed). The largest group (on a tie, the most advanced) is where the group stands;
/// every other group diverged and is named first, then the silent ranks.
std::string diagnose_collectives(const std::vector<rank_ledger>& ledgers);

/// The failing rank's own error to quote beside the diagnosis: among `failures` (rank, message, in
/// arrival order), the first of a rank whose last collective timed out or failed (its peers only
/// saw the abort), else the first; empty when there is none.
std::string root_failure(const std::vector<std::pair<int32_t, std::string>>& failures,
                         const std::vector<rank_ledger>& ledgers);

/// How the ranks' last collectives ended: ranks that waited longer than the collective timeout
/// for their peers, and ranks whose collective failed otherwise (those that only saw the abort
/// count in neither). For the run's metrics.
struct collective_outcomes {
  int64_t timed_out = 0;
  int64_t failed = 0;
};
collective_outcomes count_collective_outcomes(const std::vector<rank_ledger>& ledgers);

} // namespace kvactor
