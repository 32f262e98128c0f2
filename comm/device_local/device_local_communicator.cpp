// The device-local communicator (device_local_communicator.h): eager collectives meet on the
// host, collectives captured into CUDA graphs on the device (collective_kernels.h).
#include "kvactor/comm/device_local_communicator.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <utility>

#include "../device_communicator_base.h"
#include "../timeouts.h"
#include "collective_kernels.h"
#include "kvactor/comm/collective_ledger.h"
#include "kvactor/comm/host_communicator.h"

namespace kvactor::comm {

namespace {

// Ranks sharing the GPU wait for each other inside kernels. With more streams than hardware
// queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default) a waiting kernel could hold up, in a queue
// it shares, the work of the very rank it waits for (until the timeout ends the wait). So 32
// queues, the most, set before any CUDA context exists; a value the user set is kept.
[[maybe_unused]] const bool enough_hardware_queues = [] {
  return setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0) == 0;
}();

// What one rank entered, as it travels through the host all_gather: the collective's shape, then
// its buffers and the event recorded on its stream when it entered.
struct entry {
  int64_t kind, op, dtype, count, root, in, out, event;
};
constexpr size_t entry_words = sizeof(entry) / sizeof(int64_t);

bool same_collective(const entry& a, const entry& b) {
  return a.kind == b.kind && a.op == b.op && a.dtype == b.dtype && a.count == b.count
         && a.root == b.root;
}

collective_record record_of(const entry& e, uint64_t seq) {
  return make_record(static_cast<collective_kind>(e.kind), static_cast<reduce_op>(e.op),
                     static_cast<collective_dtype>(e.dtype), static_cast<size_t>(e.count),
                     static_cast<int>(e.root), seq);
}

template <class T>
int64_t word(T* p) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(p));
}

template <class T>
T pointer(int64_t w) {
  return reinterpret_cast<T>(static_cast<intptr_t>(w));
}

collective_record record_of(uint64_t signature, uint64_t seq) {
  collective_kind kind{};
  reduce_op op{};
  collective_dtype dtype{};
  size_t count = 0;
  int root = -1;
  detail::unpack_signature(signature, kind, op, dtype, count, root);
  return make_record(kind, op, dtype, count, root, seq);
}

std::string ranks_in(uint64_t mask) {
  std::string out;
  for (int r = 0; r < 64; ++r)
    if ((mask >> r) & 1) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// What the ranks of one group share: the device; the event rank 0 records after each eager
// kernel; where graphs meet (device memory: arrivals, signatures, rounds, failures and the slots;
// mapped host memory: the abort flag and the reports); and why the group was aborted.
struct group_state {
  int device = 0;
  cudaEvent_t done = nullptr;
  detail::group_sync sync{};
  void* device_block = nullptr;
  void* host_block = nullptr;
  std::mutex mu;
  std::string abort_reason;

  ~group_state() {
    if (done != nullptr) cudaEventDestroy(done);
    if (device_block != nullptr) cudaFree(device_block);
    if (host_block != nullptr) cudaFreeHost(host_block);
  }

  // Every wait on the device ends; the first reason is kept.
  void abort(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (abort_reason.empty()) abort_reason = why;
    }
    *const_cast<volatile int32_t*>(host_abort()) = 1;
  }
  std::string why() {
    std::lock_guard<std::mutex> lock(mu);
    return abort_reason;
  }
  int32_t* host_abort() const { return static_cast<int32_t*>(host_block); }
  const detail::meet_report& report(int rank) const {
    return static_cast<const detail::meet_report*>(
        static_cast<const void*>(static_cast<const char*>(host_block) + 64))[rank];
  }
};

class device_local_communicator final : public detail::device_communicator_base {
public:
  device_local_communicator(std::shared_ptr<group_state> group,
                            std::shared_ptr<host_communicator> host, cudaStream_t stream,
                            cudaEvent_t entered, std::chrono::milliseconds timeout)
      : device_communicator_base(timeout), group_(std::move(group)), host_(std::move(host)),
        stream_(stream), entered_(entered) {}

  ~device_local_communicator() override {
    cudaSetDevice(group_->device);
    cudaStreamSynchronize(stream_); // nothing of ours may still run on the shared buffers
    cudaEventDestroy(entered_);
    cudaStreamDestroy(stream_);
  }

  using communicator::all_reduce;

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }

  void all_reduce(void* buffer, size_t count, collective_dtype dtype, reduce_op op,
                  void* stream) override {
    run(collective_kind::all_reduce, op, dtype, count, -1, buffer, buffer, stream);
  }
  void all_gather(const void* send, void* recv, size_t count, collective_dtype dtype,
                  void* stream) override {
    run(collective_kind::all_gather, reduce_op::sum, dtype, count, -1, send, recv, stream);
  }
  void broadcast(void* buffer, size_t count, collective_dtype dtype, int root,
                 void* stream) override {
    if (root < 0 || root >= world_size())
      throw collective_error(collective_failure::invalid_argument,
                             "broadcast: root " + std::to_string(root) + " is outside [0, "
                                 + std::to_string(world_size()) + ")");
    run(collective_kind::broadcast, reduce_op::sum, dtype, count, root, buffer, buffer, stream);
  }

  void barrier() override {
    open("barrier");
    const uint64_t seq =
        ledger_.enter(collective_kind::barrier, reduce_op::sum, collective_dtype::int64, 0);
    meet([&] { host_->barrier(); }, seq);
    ledger_.finish(seq, collective_status::completed);
    synchronize();
  }

  int64_t agree(int64_t value, reduce_op op) override {
    open("agree");
    const uint64_t seq = ledger_.enter(collective_kind::all_reduce, op, collective_dtype::int64, 1);
    int64_t out = 0;
    meet([&] { out = host_->agree(value, op); }, seq);
    ledger_.finish(seq, collective_status::completed);
    return out;
  }

  std::vector<int64_t> gather(const std::vector<int64_t>& values) override {
    open("gather");
    const uint64_t seq = ledger_.enter(collective_kind::all_gather, reduce_op::sum,
                                       collective_dtype::int64, values.size());
    std::vector<int64_t> out(values.size() * static_cast<size_t>(world_size()));
    meet(
        [&] {
          host_->all_gather(values.data(), out.data(), values.size(), collective_dtype::int64);
        },
        seq);
    ledger_.finish(seq, collective_status::completed);
    return out;
  }

  bool aborted() const override { return device_communicator_base::aborted() || host_->aborted(); }

private:
  std::string me() const override {
    return "rank " + std::to_string(rank()) + " (GPU " + std::to_string(group_->device)
           + ", shared)";
  }

  // Ends every wait of the group: on the device (the flag its meets poll) and on the host.
  void abort_transport(const std::string& why) override {
    group_->abort(why);
    host_->abort(why);
  }

  std::string why_aborted() const override {
    auto own = device_communicator_base::why_aborted();
    return own.empty() ? group_->why() : own;
  }

  // The device times a missing peer out by itself and says which one; the host waits a little
  // longer so that the device's report, not the host's guess, is what the error says.
  std::chrono::milliseconds grace() const override { return std::chrono::milliseconds{1000}; }

  std::string stall_hint() const override {
    return " (the GPU did not reach or finish it: the stream is busy or stalled)";
  }

  // Every rank sees every entry, so each one finds a mismatch by itself, the same one.
  void check_same(const std::vector<entry>& all, uint64_t seq) {
    for (size_t r = 1; r < all.size(); ++r)
      if (!same_collective(all[r], all[0]))
        fail(collective_failure::mismatch, collective_status::failed,
             "collective mismatch: rank " + std::to_string(r) + " entered "
                 + describe(record_of(all[r], seq)) + " while rank 0 entered "
                 + describe(record_of(all[0], seq)));
  }

  // Rank 0: its stream waits for every rank's inputs, runs the one kernel, records `done`.
  void launch(const std::vector<entry>& all, cudaStream_t s) {
    detail::rank_buffers b{};
    b.world = world_size();
    for (size_t r = 0; r < all.size(); ++r) {
      b.in[r] = pointer<const void*>(all[r].in);
      b.out[r] = pointer<void*>(all[r].out);
      if (r != 0)
        cuda(cudaStreamWaitEvent(s, pointer<cudaEvent_t>(all[r].event), 0),
             "cudaStreamWaitEvent (rank " + std::to_string(r) + " entered)");
    }
    const auto& e = all.front();
    cuda(static_cast<cudaError_t>(detail::launch_collective(
             static_cast<collective_kind>(e.kind), static_cast<reduce_op>(e.op),
             static_cast<collective_dtype>(e.dtype), static_cast<size_t>(e.count),
             static_cast<int>(e.root), b, s)),
         "the collective kernel");
    cuda(cudaEventRecord(group_->done, s), "cudaEventRecord (done)");
  }

  // Eagerly: the ranks meet on the host and exchange what they entered and their buffers; rank 0
  // runs the one kernel after every rank's inputs, every rank's stream waits for it. No kernel
  // waits for a peer, so a rank blocked in an allocation (which waits for the whole device)
  // cannot hold up a peer's kernel, nor the peer it.
  void run_eagerly(const entry& mine, uint64_t seq, cudaStream_t s) {
    cuda(cudaEventRecord(entered_, s), "cudaEventRecord (entered)");
    std::vector<entry> all(static_cast<size_t>(world_size()));
    meet([&] { host_->all_gather(&mine, all.data(), entry_words, collective_dtype::int64); }, seq);
    check_same(all, seq);
    if (rank() == 0) launch(all, s);
    meet([&] { host_->barrier(); }, seq); // rank 0 has recorded `done`
    if (rank() != 0) cuda(cudaStreamWaitEvent(s, group_->done, 0), "cudaStreamWaitEvent (done)");
  }

  // A failure the device reported: the collective it happened in ends with it.
  void check_transport() override {
    const auto& report = group_->report(rank());
    const auto failure = static_cast<detail::meet_failure>(
        *reinterpret_cast<const volatile int32_t*>(&report.failure));
    if (failure == detail::meet_failure::none) return;
    const uint64_t seq = seq_of_round(report.round);
    const auto entry = ledger_entry(seq);
    if (failure == detail::meet_failure::mismatch) {
      ledger_.finish(seq, collective_status::failed);
      fail(collective_failure::mismatch, collective_status::failed,
           "collective mismatch: rank " + std::to_string(report.peer) + " entered "
               + describe(record_of(report.theirs, seq)) + " while rank 0 entered "
               + describe(record_of(report.ours, seq)));
    }
    if (failure == detail::meet_failure::timeout) {
      ledger_.finish(seq, collective_status::timed_out);
      fail(collective_failure::timeout, collective_status::timed_out,
           me() + ": " + describe(entry) + ": rank(s) " + ranks_in(report.missing)
               + " did not enter it within " + detail::seconds(timeout_));
    }
    ledger_.finish(seq, collective_status::aborted);
    fail(collective_failure::aborted, collective_status::aborted,
         me() + ": " + describe(entry) + ": aborted: " + group_->why());
  }

  void entered_by_replay(uint64_t seq, const collective_record& c) override {
    note_rounds(seq, detail::rounds_of(c.count, c.dtype, group_->sync.slot_bytes));
  }

  // A host meeting: its failures (a peer that never came, an abort) become this rank's, told
  // with this rank's collective and ledger rather than the host group's.
  template <class Meeting>
  void meet(Meeting&& meeting, uint64_t seq) {
    try {
      meeting();
    } catch (const collective_error& e) {
      const auto status = e.kind() == collective_failure::timeout ? collective_status::timed_out
                                                                  : collective_status::aborted;
      ledger_.finish(seq, status);
      fail(e.kind(), status, me() + ": " + describe(ledger_entry(seq)) + ": " + e.what());
    }
  }

  collective_record ledger_entry(uint64_t seq) const {
    for (const auto& r : ledger_.entries())
      if (r.seq == seq) return r;
    return {};
  }

  // The device rounds of collective `seq` end at the host's running count of them.
  void note_rounds(uint64_t seq, uint64_t rounds) {
    round_ += rounds;
    rounds_.push_back({seq, round_});
    if (rounds_.size() > collective_ledger::default_capacity) rounds_.pop_front();
  }

  uint64_t seq_of_round(uint64_t round) const {
    for (const auto& [seq, last] : rounds_)
      if (round <= last) return seq;
    return rounds_.empty() ? 0 : rounds_.back().first;
  }

  void run(collective_kind kind, reduce_op op, collective_dtype dtype, size_t count, int root,
           const void* in, void* out, void* stream) {
    open(to_string(kind).data());
    if (count > 0 && (in == nullptr || out == nullptr))
      throw collective_error(collective_failure::invalid_argument,
                             std::string{to_string(kind)} + ": a null buffer for "
                                 + std::to_string(count) + " elements");
    cudaStream_t s = stream != nullptr ? static_cast<cudaStream_t>(stream) : stream_;
    if (!capturing(s)) {
      const uint64_t seq = ledger_.enter(kind, op, dtype, count, root);
      const entry mine{static_cast<int64_t>(kind),
                       static_cast<int64_t>(op),
                       static_cast<int64_t>(dtype),
                       static_cast<int64_t>(count),
                       root,
                       word(in),
                       word(out),
                       word(entered_)};
      run_eagerly(mine, seq, s);
      track(seq, s);
      return;
    }
    // Into the graph: the meeting happens on the device at each launch.
    const auto timeout_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout_).count();
    cuda(static_cast<cudaError_t>(detail::enqueue_collective(group_->sync, rank(), kind, op, dtype,
                                                             count, root, in, out, timeout_ns, s)),
         "the collective kernels (captured)");
    note_captured(make_record(kind, op, dtype, count, root));
  }

  std::shared_ptr<group_state> group_;
  std::shared_ptr<host_communicator> host_;
  cudaStream_t stream_; // for collectives given no stream
  cudaEvent_t entered_; // recorded on the rank's stream as it enters each eager collective
  uint64_t round_ = 0;  // the device rounds of graph launches so far, as the host counts them
  std::deque<std::pair<uint64_t, uint64_t>> rounds_; // (seq, its last round), recent ones
};

[[noreturn]] void transport_error(const std::string& what) {
  throw collective_error(collective_failure::transport, what);
}

// Carves the group's meeting places out of one device and one mapped host allocation.
void allocate_sync(group_state& group, int world_size, size_t slot_bytes,
                   const std::function<void(cudaError_t, const char*)>& cuda) {
  constexpr size_t ranks = max_device_local_ranks;
  const size_t words = ranks + 2 * ranks + ranks; // arrived, entered, round
  const size_t sync_bytes = (words * 8 + ranks * 4 + 255) / 256 * 256;
  const size_t slots = 2 * static_cast<size_t>(world_size) * slot_bytes;
  cuda(cudaMalloc(&group.device_block, sync_bytes + slots), "cudaMalloc (meeting places)");
  cuda(cudaMemset(group.device_block, 0, sync_bytes), "cudaMemset (meeting places)");
  // The ranks' streams do not wait for the legacy stream the memset ran on: finish it now, or
  // their first meetings could see it zero their rounds under them.
  cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (meeting places)");
  const size_t host_bytes = 64 + ranks * sizeof(detail::meet_report);
  cuda(cudaHostAlloc(&group.host_block, host_bytes, cudaHostAllocMapped | cudaHostAllocPortable),
       "cudaHostAlloc (abort flag and reports)");
  std::memset(group.host_block, 0, host_bytes);
  void* mapped = nullptr;
  cuda(cudaHostGetDevicePointer(&mapped, group.host_block, 0), "cudaHostGetDevicePointer");
  auto* words_at = static_cast<unsigned long long*>(group.device_block);
  auto& g = group.sync;
  g.arrived = words_at;
  g.entered = words_at + ranks;
  g.round = words_at + 3 * ranks;
  g.failed = reinterpret_cast<int32_t*>(words_at + words);
  g.abort = static_cast<const volatile int32_t*>(mapped);
  g.reports = reinterpret_cast<detail::meet_report*>(static_cast<char*>(mapped) + 64);
  g.slots = static_cast<char*>(group.device_block) + sync_bytes;
  g.slot_bytes = slot_bytes;
  g.world = world_size;
}

} // namespace

bool device_local_available(std::string*) {
  return true;
}

std::vector<std::shared_ptr<communicator>>
make_device_local_group(int world_size, int device, std::chrono::milliseconds timeout,
                        size_t slot_bytes) {
  if (world_size < 1 || world_size > max_device_local_ranks)
    throw collective_error(collective_failure::invalid_argument,
                           "world_size: " + std::to_string(world_size) + " is outside [1, "
                               + std::to_string(max_device_local_ranks)
                               + "] (the ranks one GPU may share)");
  if (timeout.count() <= 0)
    throw collective_error(collective_failure::invalid_argument,
                           "timeout: " + detail::seconds(timeout) + " is not positive");
  if (slot_bytes < 256 || slot_bytes % 256 != 0)
    throw collective_error(collective_failure::invalid_argument,
                           "slot_bytes: " + std::to_string(slot_bytes)
                               + " is not a positive multiple of 256");
  const std::string where = "device-local group on GPU " + std::to_string(device);
  auto cuda = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess) transport_error(where + ": " + what + ": " + cudaGetErrorString(e));
  };
  cuda(cudaSetDevice(device), "cudaSetDevice");
  auto group = std::make_shared<group_state>();
  group->device = device;
  cuda(cudaEventCreateWithFlags(&group->done, cudaEventDisableTiming), "cudaEventCreate");
  allocate_sync(*group, world_size, slot_bytes, cuda);
  auto hosts = host_communicator::create_group(world_size, timeout);
  std::vector<std::shared_ptr<communicator>> out;
  for (int r = 0; r < world_size; ++r) {
    cudaStream_t stream = nullptr;
    cudaEvent_t entered = nullptr;
    cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (auto e = cudaEventCreateWithFlags(&entered, cudaEventDisableTiming); e != cudaSuccess) {
      cudaStreamDestroy(stream);
      cuda(e, "cudaEventCreate");
    }
    out.push_back(std::make_shared<device_local_communicator>(group, hosts[static_cast<size_t>(r)],
                                                              stream, entered, timeout));
  }
  return out;
}

} // namespace kvactor::comm
