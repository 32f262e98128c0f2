// Fault injection for tests and `kvactor run --debug-stall RANK:N`: a communicator that forwards
// to another, except that before its collective number `at` (the ledger's next sequence number)
// it stops answering, as a rank stuck in a kernel or a lost thread would. It waits until the
// communicator is aborted (a peer timed out waiting for it) or `max_stall` passed, then goes on;
// the collective then fails as aborted and leaves no ledger entry. So the group's ledgers show
// this rank one collective behind its peers, and nothing waits forever.
#pragma once

#include <chrono>
#include <memory>

#include "kvactor/comm/communicator.h"

namespace kvactor::comm {

/// A communicator that forwards to `inner` but stalls before its collective number `at` for at
/// most `max_stall` (less when `inner` is aborted meanwhile). Throws std::invalid_argument unless
/// inner != nullptr and at >= 1.
std::shared_ptr<communicator> make_stalling_communicator(std::shared_ptr<communicator> inner,
                                                         uint64_t at,
                                                         std::chrono::milliseconds max_stall);

} // namespace kvactor::comm
