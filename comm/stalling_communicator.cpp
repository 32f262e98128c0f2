#include "kvactor/comm/stalling_communicator.h"

#include <string>
#include <thread>

#include "kvactor/comm/collective_ledger.h"
#include "kvactor/kernels/check.h"

namespace kvactor::comm {

namespace {

// The decorator; its collectives stall once, then forward.
class stalling_communicator final : public communicator {
public:
  stalling_communicator(std::shared_ptr<communicator> inner, uint64_t at,
                        std::chrono::milliseconds max_stall)
      : inner_(std::move(inner)), at_(at), max_stall_(max_stall) {
    KVACTOR_CHECK(inner_ != nullptr, "stalling_communicator: inner: null");
    KVACTOR_CHECK(at_ >= 1, "stalling_communicator: at: ", at_, " is not a collective number");
  }

  using communicator::all_reduce;

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  memory_space space() const override { return inner_->space(); }
  void all_reduce(void* buffer, size_t count, collective_dtype dtype, reduce_op op,
                  void* stream) override {
    maybe_stall();
    inner_->all_reduce(buffer, count, dtype, op, stream);
  }
  void all_gather(const void* send, void* recv, size_t count, collective_dtype dtype,
                  void* stream) override {
    maybe_stall();
    inner_->all_gather(send, recv, count, dtype, stream);
  }
  void broadcast(void* buffer, size_t count, collective_dtype dtype, int root,
                 void* stream) override {
    maybe_stall();
    inner_->broadcast(buffer, count, dtype, root, stream);
  }
  void barrier() override {
    maybe_stall();
    inner_->barrier();
  }
  int64_t agree(int64_t value, reduce_op op) override {
    maybe_stall();
    return inner_->agree(value, op);
  }
  std::vector<int64_t> gather(const std::vector<int64_t>& values) override {
    maybe_stall();
    return inner_->gather(values);
  }
  std::vector<collective_record> take_captured() override { return inner_->take_captured(); }
  // A graph launch holds collectives next_seq, next_seq + 1, ...: it may hold collective `at_`;
  // then the rank stops before launching it.
  void before_replay(const std::vector<collective_record>& collectives) override {
    const uint64_t next = inner_->ledger().next_seq();
    if (!stalled_ && at_ >= next && at_ < next + collectives.size()) stall();
    inner_->before_replay(collectives);
  }
  void replayed(const std::vector<collective_record>& collectives, void* stream) override {
    inner_->replayed(collectives, stream);
  }
  void synchronize() override { inner_->synchronize(); }
  void abort(const std::string& why) override { inner_->abort(why); }
  bool aborted() const override { return inner_->aborted(); }
  const collective_ledger& ledger() const override { return inner_->ledger(); }

private:
  // Once, before collective `at_`: wait for an abort or max_stall_, as a stuck rank would.
  void maybe_stall() {
    if (stalled_ || inner_->ledger().next_seq() != at_) return;
    stall();
  }

  void stall() {
    stalled_ = true;
    const auto until = std::chrono::steady_clock::now() + max_stall_;
    while (!inner_->aborted() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  std::shared_ptr<communicator> inner_;
  uint64_t at_;
  std::chrono::milliseconds max_stall_;
  bool stalled_ = false;
};

} // namespace

std::shared_ptr<communicator> make_stalling_communicator(std::shared_ptr<communicator> inner,
                                                         uint64_t at,
                                                         std::chrono::milliseconds max_stall) {
  return std::make_shared<stalling_communicator>(std::move(inner), at, max_stall);
}

} // namespace kvactor::comm
