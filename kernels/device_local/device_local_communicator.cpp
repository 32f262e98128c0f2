// The device-local communicator (device_local_communicator.h): host meetings, one kernel.
#include "kvactor/kernels/device_local_communicator.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>

#include "../comm/device_communicator_base.h"
#include "../comm/timeouts.h"
#include "collective_kernels.h"
#include "kvactor/kernels/collective_ledger.h"
#include "kvactor/kernels/host_communicator.h"

namespace kvactor::kernels {

namespace {

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
  collective_record r;
  r.seq = seq;
  r.kind = static_cast<collective_kind>(e.kind);
  r.op = static_cast<reduce_op>(e.op);
  r.dtype = static_cast<collective_dtype>(e.dtype);
  r.count = static_cast<size_t>(e.count);
  r.bytes = r.count * size_of(r.dtype);
  r.root = static_cast<int>(e.root);
  return r;
}

template <class T>
int64_t word(T* p) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(p));
}

template <class T>
T pointer(int64_t w) {
  return reinterpret_cast<T>(static_cast<intptr_t>(w));
}

// What the ranks of one group share: the device, and the event rank 0 records after each kernel.
struct group_state {
  int device = 0;
  cudaEvent_t done = nullptr;
  ~group_state() {
    if (done != nullptr) cudaEventDestroy(done);
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

  bool aborted() const override { return device_communicator_base::aborted() || host_->aborted(); }

private:
  std::string me() const override {
    return "rank " + std::to_string(rank()) + " (GPU " + std::to_string(group_->device)
           + ", shared)";
  }

  // Wakes the peers waiting to meet.
  void abort_transport(const std::string& why) override { host_->abort(why); }

  // GPU work never waits for a peer here: only the device itself can be late.
  std::string stall_hint() const override { return " (the GPU did not finish it)"; }

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

  void run(collective_kind kind, reduce_op op, collective_dtype dtype, size_t count, int root,
           const void* in, void* out, void* stream) {
    open(to_string(kind).data());
    if (count > 0 && (in == nullptr || out == nullptr))
      throw collective_error(collective_failure::invalid_argument,
                             std::string{to_string(kind)} + ": a null buffer for "
                                 + std::to_string(count) + " elements");
    cudaStream_t s = stream != nullptr ? static_cast<cudaStream_t>(stream) : stream_;
    const uint64_t seq = ledger_.enter(kind, op, dtype, count, root);
    cuda(cudaEventRecord(entered_, s), "cudaEventRecord (entered)");
    const entry mine{static_cast<int64_t>(kind),
                     static_cast<int64_t>(op),
                     static_cast<int64_t>(dtype),
                     static_cast<int64_t>(count),
                     root,
                     word(in),
                     word(out),
                     word(entered_)};
    std::vector<entry> all(static_cast<size_t>(world_size()));
    meet([&] { host_->all_gather(&mine, all.data(), entry_words, collective_dtype::int64); }, seq);
    check_same(all, seq);
    if (rank() == 0) launch(all, s);
    meet([&] { host_->barrier(); }, seq); // rank 0 has recorded `done`
    if (rank() != 0) cuda(cudaStreamWaitEvent(s, group_->done, 0), "cudaStreamWaitEvent (done)");
    track(seq, s);
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

  std::shared_ptr<group_state> group_;
  std::shared_ptr<host_communicator> host_;
  cudaStream_t stream_; // for collectives given no stream
  cudaEvent_t entered_; // recorded on the rank's stream as it enters each collective
};

[[noreturn]] void transport_error(const std::string& what) {
  throw collective_error(collective_failure::transport, what);
}

} // namespace

bool device_local_available(std::string*) {
  return true;
}

std::vector<std::shared_ptr<communicator>>
make_device_local_group(int world_size, int device, std::chrono::milliseconds timeout) {
  if (world_size < 1 || world_size > max_device_local_ranks)
    throw collective_error(collective_failure::invalid_argument,
                           "world_size: " + std::to_string(world_size) + " is outside [1, "
                               + std::to_string(max_device_local_ranks)
                               + "] (the ranks one GPU may share)");
  if (timeout.count() <= 0)
    throw collective_error(collective_failure::invalid_argument,
                           "timeout: " + detail::seconds(timeout) + " is not positive");
  const std::string where = "device-local group on GPU " + std::to_string(device);
  auto cuda = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess) transport_error(where + ": " + what + ": " + cudaGetErrorString(e));
  };
  cuda(cudaSetDevice(device), "cudaSetDevice");
  auto group = std::make_shared<group_state>();
  group->device = device;
  cuda(cudaEventCreateWithFlags(&group->done, cudaEventDisableTiming), "cudaEventCreate");
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

} // namespace kvactor::kernels
