// The rank's tensor-parallel handlers (actor.cpp keeps the protocol, these the collectives):
// creating and joining an NCCL communicator, agreeing on the KV cache block count, and reading
// the collective ledger. Each runs on the rank's own thread and may block in a collective, at
// most the communicator's timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <caf/error.hpp>
#include <caf/make_message.hpp> // before result.hpp: caf::result<T> needs it declared
#include <caf/result.hpp>

#include "actors/rank/actor.hpp"
#include "messages/collective.hpp"

namespace kvactor {

/// The longest a --debug-stall rank stops answering when nobody aborts its communicator.
std::chrono::milliseconds max_stall(std::chrono::milliseconds collective_timeout);

/// Wraps `comm` so that it stops answering before collective number `at` (0: `comm` itself).
std::shared_ptr<comm::communicator> with_stall(std::shared_ptr<comm::communicator> comm,
                                               uint64_t at,
                                               std::chrono::milliseconds collective_timeout);

/// Rank 0 of an NCCL or socket group: a new communicator id for `world` ranks of the driver's
/// `epoch` (NCCL: its unique id; socket: the address rank 0 now listens on).
caf::result<communicator_id> create_communicator_id(rank_state& st, int32_t world, uint64_t epoch);

/// Joins the NCCL (on GPU `rank`) or socket communicator `id` as rank `rank`; replies the rank once
/// the communicator is ready (every rank must join concurrently), or the error that says why not.
caf::result<int32_t> join_communicator(rank_state& st, const communicator_id& id, int32_t rank);

/// The block count the ranks agree on (all_reduce(min) over their planned counts) against the
/// driver's `num_blocks`: an empty error when they match, else an error naming both values.
caf::error agree_on_blocks(rank_state& st, int64_t num_blocks);

/// This rank's collective ledger (empty before it has a communicator).
std::vector<collective_entry> collectives_of(const rank_state& st);

} // namespace kvactor
