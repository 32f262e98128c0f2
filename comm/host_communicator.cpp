#include "kvactor/comm/host_communicator.h"

#include "rank_order_reduce.h"
#include "timeouts.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>

namespace kvactor::comm {

namespace {

using clock_type = std::chrono::steady_clock;

// What a rank entered: "all_reduce(sum) #5 of 4 float32" (a barrier: "barrier #5").
std::string shape(const collective_record& r) {
  std::string out = operation_name(r) + " #" + std::to_string(r.seq);
  if (r.kind != collective_kind::barrier)
    out += " of " + std::to_string(r.count) + " " + std::string{to_string(r.dtype)};
  return out;
}

bool same_collective(const collective_record& a, const collective_record& b) {
  return a.seq == b.seq && a.kind == b.kind && a.op == b.op && a.dtype == b.dtype
         && a.count == b.count && a.root == b.root;
}

} // namespace

// The rendezvous of one group. Every field is guarded by mu.
class host_group {
public:
  host_group(int world, std::chrono::milliseconds timeout)
      : world(world), timeout(timeout), inputs(static_cast<size_t>(world)),
        present(static_cast<size_t>(world), false) {}

  const int world;
  const std::chrono::milliseconds timeout;
  std::mutex mu;
  std::condition_variable cv;
  // The current round: entered by `arrived` ranks; `departed` ranks still copy the last result.
  int arrived = 0;
  int departed = 0;
  uint64_t generation = 0;
  collective_record round; // what the first rank of the round entered
  int round_rank = -1;
  std::vector<const void*>
      inputs;                // [world] each waiting rank's contribution (valid while it waits)
  std::vector<bool> present; // [world] entered the current round
  std::vector<std::byte> result;
  std::string aborted; // non-empty: the group is aborted, and why
  // Bumped (under mu) with every notify: waiters spin on it briefly before they sleep.
  std::atomic<uint64_t> changes{0};

  void notify() {
    changes.fetch_add(1, std::memory_order_release);
    cv.notify_all();
  }

  // Waits, holding `lock` on entry and exit, until pred() or `deadline`: first a spin of at most
  // 50 us that yields the core (a peer arriving within microseconds then wakes no sleeping
  // thread), then the condition variable. Returns pred().
  template <class Pred>
  bool wait(std::unique_lock<std::mutex>& lock, clock_type::time_point deadline, Pred pred) {
    if (pred()) return true;
    const auto seen = changes.load(std::memory_order_acquire);
    lock.unlock();
    const auto spin_until = std::min(deadline, clock_type::now() + std::chrono::microseconds(50));
    while (changes.load(std::memory_order_acquire) == seen && clock_type::now() < spin_until)
      std::this_thread::yield();
    lock.lock();
    return cv.wait_until(lock, deadline, pred);
  }
};

struct host_communicator::call {
  collective_kind kind;
  reduce_op op;
  collective_dtype dtype;
  size_t count;
  int root;
  const void* send; // [count]
  void* recv;       // [count], all_gather: [world * count]; null for a barrier
};

std::vector<std::shared_ptr<host_communicator>>
host_communicator::create_group(int world_size, std::chrono::milliseconds timeout) {
  if (world_size < 1)
    throw std::invalid_argument("world_size: " + std::to_string(world_size)
                                + " is not a positive rank count");
  if (timeout.count() <= 0)
    throw std::invalid_argument("timeout: " + detail::seconds(timeout) + " is not positive");
  auto group = std::make_shared<host_group>(world_size, timeout);
  std::vector<std::shared_ptr<host_communicator>> out;
  for (int r = 0; r < world_size; ++r)
    out.push_back(std::make_shared<host_communicator>(group, r));
  return out;
}

host_communicator::host_communicator(std::shared_ptr<host_group> group, int rank)
    : group_(std::move(group)), rank_(rank) {}

int host_communicator::world_size() const {
  return group_->world;
}

void host_communicator::all_reduce(void* buffer, size_t count, collective_dtype dtype, reduce_op op,
                                   void*) {
  run({collective_kind::all_reduce, op, dtype, count, -1, buffer, buffer});
}

void host_communicator::all_gather(const void* send, void* recv, size_t count,
                                   collective_dtype dtype, void*) {
  run({collective_kind::all_gather, reduce_op::sum, dtype, count, -1, send, recv});
}

void host_communicator::broadcast(void* buffer, size_t count, collective_dtype dtype, int root,
                                  void*) {
  if (root < 0 || root >= world_size())
    throw collective_error(collective_failure::invalid_argument,
                           "broadcast: root " + std::to_string(root) + " is outside [0, "
                               + std::to_string(world_size()) + ")");
  run({collective_kind::broadcast, reduce_op::sum, dtype, count, root, buffer, buffer});
}

void host_communicator::barrier() {
  run({collective_kind::barrier, reduce_op::sum, collective_dtype::int64, 0, -1, nullptr, nullptr});
}

int64_t host_communicator::agree(int64_t value, reduce_op op) {
  all_reduce(&value, 1, op);
  return value;
}

void host_communicator::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(group_->mu);
  if (group_->aborted.empty()) group_->aborted = why.empty() ? "aborted" : why;
  group_->notify();
}

bool host_communicator::aborted() const {
  std::lock_guard<std::mutex> lock(group_->mu);
  return !group_->aborted.empty();
}

// The last rank to arrive computes the one result every rank copies, and opens the departure.
void host_communicator::complete_round(host_group& g, const call& c) {
  const size_t esize = size_of(c.dtype);
  if (c.kind == collective_kind::all_reduce) {
    g.result.resize(c.count * esize);
    if (c.dtype == collective_dtype::float32)
      detail::reduce_in_rank_order<float>(g.inputs, c.count, c.op, g.result.data());
    else
      detail::reduce_in_rank_order<int64_t>(g.inputs, c.count, c.op, g.result.data());
  } else if (c.kind == collective_kind::all_gather) {
    g.result.resize(static_cast<size_t>(g.world) * c.count * esize);
    for (size_t r = 0; r < g.inputs.size(); ++r)
      if (c.count > 0)
        std::memcpy(g.result.data() + r * c.count * esize, g.inputs[r], c.count * esize);
  } else if (c.kind == collective_kind::broadcast) {
    const auto* root = static_cast<const std::byte*>(g.inputs[static_cast<size_t>(c.root)]);
    g.result.assign(root, root + c.count * esize);
  }
  g.arrived = 0;
  g.departed = g.world;
  ++g.generation;
  std::fill(g.present.begin(), g.present.end(), false);
}

void host_communicator::run(const call& c) {
  if (c.count > 0 && (c.send == nullptr || c.recv == nullptr))
    throw collective_error(collective_failure::invalid_argument,
                           std::string{to_string(c.kind)} + ": a null buffer for "
                               + std::to_string(c.count) + " elements");
  auto& g = *group_;
  const auto me = "rank " + std::to_string(rank_);
  std::unique_lock<std::mutex> lock(g.mu);
  if (!g.aborted.empty())
    throw collective_error(collective_failure::aborted,
                           me + ": " + std::string{to_string(c.kind)}
                               + " on an aborted communicator: " + g.aborted);
  const uint64_t seq = ledger_.enter(c.kind, c.op, c.dtype, c.count, c.root);
  const collective_record entered = ledger_.last(1).front();
  auto fail = [&](collective_failure kind, collective_status status, const std::string& why) {
    ledger_.finish(seq, status);
    if (g.aborted.empty()) g.aborted = why;
    g.notify();
    throw collective_error(kind, why + "; " + ledger_.tail());
  };
  const auto deadline = clock_type::now() + g.timeout;
  // A round starts once every rank has left the previous one (they copy its result).
  if (!g.wait(lock, deadline, [&] { return g.departed == 0 || !g.aborted.empty(); }))
    fail(collective_failure::timeout, collective_status::timed_out,
         me + ": " + shape(entered) + " timed out after " + detail::seconds(g.timeout)
             + ": peers did not leave the previous collective");
  if (!g.aborted.empty())
    fail(collective_failure::aborted, collective_status::aborted,
         me + ": " + shape(entered) + " aborted: " + g.aborted);
  if (g.arrived == 0) {
    g.round = entered;
    g.round_rank = rank_;
  } else if (!same_collective(entered, g.round)) {
    fail(collective_failure::mismatch, collective_status::failed,
         "collective mismatch: " + me + " entered " + shape(entered) + " while rank "
             + std::to_string(g.round_rank) + " entered " + shape(g.round));
  }
  g.inputs[static_cast<size_t>(rank_)] = c.send;
  g.present[static_cast<size_t>(rank_)] = true;
  const auto generation = g.generation;
  if (++g.arrived == g.world) {
    complete_round(g, c);
    g.notify();
  } else if (!g.wait(lock, deadline,
                     [&] { return g.generation != generation || !g.aborted.empty(); })) {
    std::string missing;
    for (size_t r = 0; r < g.present.size(); ++r)
      if (!g.present[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    fail(collective_failure::timeout, collective_status::timed_out,
         me + ": " + shape(entered) + " timed out after " + detail::seconds(g.timeout)
             + ": rank(s) " + missing + " did not enter it");
  }
  if (g.generation == generation) // woken by an abort before the round completed
    fail(collective_failure::aborted, collective_status::aborted,
         me + ": " + shape(entered) + " aborted: " + g.aborted);
  // Copy the result outside the lock: no round starts before every rank has departed.
  lock.unlock();
  const size_t bytes = c.kind == collective_kind::all_gather
                           ? static_cast<size_t>(g.world) * c.count * size_of(c.dtype)
                           : c.count * size_of(c.dtype);
  if (c.kind != collective_kind::barrier && bytes > 0) std::memcpy(c.recv, g.result.data(), bytes);
  ledger_.finish(seq, collective_status::completed);
  lock.lock();
  if (--g.departed == 0) g.notify();
}

} // namespace kvactor::comm
