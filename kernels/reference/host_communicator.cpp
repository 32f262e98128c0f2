#include "kvactor/kernels/host_communicator.h"

#include <algorithm>
#include <stdexcept>

namespace kvactor::kernels {

host_communicator::host_communicator(int world_size, std::chrono::milliseconds timeout)
    : world_(world_size), timeout_(timeout), contributions_(static_cast<size_t>(world_size)) {
  if (world_size < 1) throw std::invalid_argument("world_size: must be at least 1");
}

void host_communicator::all_reduce(int rank, float* buffer, size_t count) {
  if (rank < 0 || rank >= world_) throw std::invalid_argument("rank: outside the world");
  if (world_ == 1) return;
  std::unique_lock<std::mutex> lock(mu_);
  // A new round starts only once every rank has left the previous one.
  if (!cv_.wait_for(lock, timeout_, [&] { return departed_ == 0 || !aborted_.empty(); }))
    throw std::runtime_error("all_reduce: ranks did not leave the previous round in time");
  if (!aborted_.empty()) throw std::runtime_error("all_reduce: aborted: " + aborted_);
  const auto gen = generation_;
  contributions_[static_cast<size_t>(rank)].assign(buffer, buffer + count);
  if (++arrived_ == world_) {
    // The last rank sums in rank order: every rank reads the same bits.
    result_.assign(count, 0.0f);
    for (const auto& c : contributions_) {
      if (c.size() != count) {
        aborted_ = "ranks passed different element counts";
        cv_.notify_all();
        throw std::runtime_error("all_reduce: " + aborted_);
      }
      for (size_t i = 0; i < count; ++i)
        result_[i] += c[i];
    }
    arrived_ = 0;
    departed_ = world_;
    ++generation_;
    cv_.notify_all();
  } else if (!cv_.wait_for(lock, timeout_,
                           [&] { return generation_ != gen || !aborted_.empty(); })) {
    aborted_ = "a rank did not arrive within the timeout";
    cv_.notify_all();
    throw std::runtime_error("all_reduce: " + aborted_);
  }
  if (!aborted_.empty()) throw std::runtime_error("all_reduce: aborted: " + aborted_);
  std::copy(result_.begin(), result_.end(), buffer);
  if (--departed_ == 0) cv_.notify_all();
}

void host_communicator::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.empty()) aborted_ = why;
  cv_.notify_all();
}

} // namespace kvactor::kernels
