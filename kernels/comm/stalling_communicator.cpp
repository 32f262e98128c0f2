#include "kvactor/kernels/stalling_communicator.h"

#include <thread>

#include "kvactor/kernels/check.h"
#include "kvactor/kernels/collective_ledger.h"

namespace kvactor::kernels {

stalling_communicator::stalling_communicator(std::shared_ptr<communicator> inner, uint64_t at,
                                             std::chrono::milliseconds max_stall)
    : inner_(std::move(inner)), at_(at), max_stall_(max_stall) {
  KVACTOR_CHECK(inner_ != nullptr, "stalling_communicator: inner: null");
  KVACTOR_CHECK(at_ >= 1, "stalling_communicator: at: ", at_, " is not a collective number");
}

const collective_ledger& stalling_communicator::ledger() const {
  return inner_->ledger();
}

void stalling_communicator::maybe_stall() {
  if (stalled_ || inner_->ledger().next_seq() != at_) return;
  stalled_ = true;
  const auto until = std::chrono::steady_clock::now() + max_stall_;
  while (!inner_->aborted() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

void stalling_communicator::all_reduce(void* buffer, size_t count, collective_dtype dtype,
                                       reduce_op op, void* stream) {
  maybe_stall();
  inner_->all_reduce(buffer, count, dtype, op, stream);
}

void stalling_communicator::all_gather(const void* send, void* recv, size_t count,
                                       collective_dtype dtype, void* stream) {
  maybe_stall();
  inner_->all_gather(send, recv, count, dtype, stream);
}

void stalling_communicator::broadcast(void* buffer, size_t count, collective_dtype dtype, int root,
                                      void* stream) {
  maybe_stall();
  inner_->broadcast(buffer, count, dtype, root, stream);
}

void stalling_communicator::barrier() {
  maybe_stall();
  inner_->barrier();
}

int64_t stalling_communicator::agree(int64_t value, reduce_op op) {
  maybe_stall();
  return inner_->agree(value, op);
}

} // namespace kvactor::kernels
