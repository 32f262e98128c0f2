// The host communicator: tensor-parallel CPU ranks of one process, the role NCCL plays between
// GPUs. Buffers are host memory; every collective blocks until all ranks have entered it, so
// each rank must run on its own thread. Reductions run in rank order on one rank and every rank
// copies the same result, so results are bit-identical across ranks and a run is reproducible.
//
// Ranks meet in rounds: the first rank to enter fixes the round's collective (sequence number,
// kind, op, dtype, count, root); a rank that enters anything else aborts the group with a
// mismatch error that names both collectives, at once rather than after a timeout. A rank that
// waits longer than the timeout aborts the group naming the ranks that never arrived; its peers
// then fail as aborted. Nothing waits forever.
//
// NOTE(cluster): across processes the same contract holds with a transport in place of the
// shared memory below. The driver's communicator_id message carries rank 0's address instead of
// an NCCL id; every rank connects to rank 0, sends its contribution tagged with (sequence number,
// collective), and rank 0 checks the tags (the mismatch error), reduces in rank order exactly as
// here and sends the one result back: a star, so results stay bit-identical and identical to the
// in-process group. Large messages would move to a ring (reduce-scatter + all-gather), each chunk
// reduced by its owner in a fixed order: still identical on every rank, no longer bitwise equal
// to rank order. Deadlines stay per collective, the ledger is unchanged, and abort closes the
// sockets so that peers fail at once instead of waiting out their timeout.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kvactor/comm/collective_ledger.h"
#include "kvactor/comm/communicator.h"

namespace kvactor::comm {

class host_group; // the shared rendezvous of one group (host_communicator.cpp)

class host_communicator final : public communicator {
public:
  static constexpr std::chrono::milliseconds default_timeout{120'000};

  /// One communicator per rank of a new group of `world_size` ranks; a collective that waits
  /// longer than `timeout` for its peers fails. Throws std::invalid_argument unless
  /// world_size >= 1 and timeout > 0.
  static std::vector<std::shared_ptr<host_communicator>>
  create_group(int world_size, std::chrono::milliseconds timeout = default_timeout);

  using communicator::all_reduce;

  int rank() const override { return rank_; }
  int world_size() const override;
  memory_space space() const override { return memory_space::host; }
  void all_reduce(void* buffer, size_t count, collective_dtype dtype, reduce_op op,
                  void* stream = nullptr) override;
  void all_gather(const void* send, void* recv, size_t count, collective_dtype dtype,
                  void* stream = nullptr) override;
  void broadcast(void* buffer, size_t count, collective_dtype dtype, int root,
                 void* stream = nullptr) override;
  void barrier() override;
  int64_t agree(int64_t value, reduce_op op) override;
  void synchronize() override {}
  /// Aborts the whole group: peers waiting in a collective wake with `why`.
  void abort(const std::string& why) override;
  bool aborted() const override;
  const collective_ledger& ledger() const override { return ledger_; }

  host_communicator(std::shared_ptr<host_group> group, int rank); // use create_group

private:
  struct call;
  void run(const call& c);
  static void complete_round(host_group& g, const call& c);

  std::shared_ptr<host_group> group_;
  int rank_;
  collective_ledger ledger_;
};

} // namespace kvactor::comm
