// Fault injection for tests and `kvactor run --debug-stall RANK:N`: a communicator that forwards
// to another, except that before its collective number `at` (the ledger's next sequence number)
// it stops answering, as a rank stuck in a kernel or a lost thread would. It waits until the
// communicator is aborted (a peer timed out waiting for it) or `max_stall` passed, then goes on;
// the collective then fails as aborted and leaves no ledger entry. So the group's ledgers show
// this rank one collective behind its peers, and nothing waits forever.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "kvactor/kernels/communicator.h"

namespace kvactor::kernels {

class stalling_communicator final : public communicator {
public:
  /// REQUIRES: inner != nullptr, at >= 1.
  stalling_communicator(std::shared_ptr<communicator> inner, uint64_t at,
                        std::chrono::milliseconds max_stall);

  using communicator::all_reduce;

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  memory_space space() const override { return inner_->space(); }
  void all_reduce(void* buffer, size_t count, collective_dtype dtype, reduce_op op,
                  void* stream = nullptr) override;
  void all_gather(const void* send, void* recv, size_t count, collective_dtype dtype,
                  void* stream = nullptr) override;
  void broadcast(void* buffer, size_t count, collective_dtype dtype, int root,
                 void* stream = nullptr) override;
  void barrier() override;
  int64_t agree(int64_t value, reduce_op op) override;
  void synchronize() override { inner_->synchronize(); }
  void abort(const std::string& why) override { inner_->abort(why); }
  bool aborted() const override { return inner_->aborted(); }
  const collective_ledger& ledger() const override;

  /// Whether the stall happened (the rank reached collective `at`).
  bool stalled() const { return stalled_; }

private:
  void maybe_stall();

  std::shared_ptr<communicator> inner_;
  uint64_t at_;
  std::chrono::milliseconds max_stall_;
  bool stalled_ = false;
};

} // namespace kvactor::kernels
