// The NCCL communicator (nccl_communicator.h): non-blocking NCCL, polled, with a ledger.
#include "kvactor/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "../device_communicator_base.h"
#include "../timeouts.h"
#include "kvactor/comm/collective_ledger.h"

namespace kvactor::comm {

namespace {

using clock_type = std::chrono::steady_clock;

ncclDataType_t nccl_type(collective_dtype d) {
  return d == collective_dtype::int64 ? ncclInt64 : ncclFloat32;
}

ncclRedOp_t nccl_op(reduce_op op) {
  switch (op) {
  case reduce_op::min: return ncclMin;
  case reduce_op::max: return ncclMax;
  case reduce_op::sum: break;
  }
  return ncclSum;
}

std::string nccl_error(ncclComm_t comm, ncclResult_t r) {
  std::string out = ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') {
    out += " (";
    out += last;
    out += ')';
  }
  return out;
}

// Polls the communicator's asynchronous state until it leaves ncclInProgress or `deadline`
// passes (then ncclInProgress is returned).
ncclResult_t poll_until(ncclComm_t comm, clock_type::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  for (int spins = 0;; ++spins) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state != ncclInProgress || clock_type::now() >= deadline) return state;
    if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class nccl_communicator final : public detail::device_communicator_base {
public:
  nccl_communicator(ncclComm_t comm, int world, int rank, int device, cudaStream_t stream,
                    int64_t* scratch, std::chrono::milliseconds timeout)
      : device_communicator_base(timeout), comm_(comm), world_(world), rank_(rank), device_(device),
        stream_(stream), scratch_(scratch) {}

  ~nccl_communicator() override {
    cudaSetDevice(device_);
    if (!aborted()) {
      // Finalize flushes outstanding work; non-blocking, so it is polled like everything else.
      // Bounded: peers that are gone must not keep a process from exiting.
      ncclResult_t r = ncclCommFinalize(comm_);
      if (r == ncclInProgress)
        r = poll_until(
            comm_, clock_type::now()
                       + std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(10)));
      if (r == ncclSuccess)
        ncclCommDestroy(comm_);
      else
        ncclCommAbort(comm_);
    }
    cudaFree(scratch_);
    if (gathered_ != nullptr) cudaFree(gathered_);
    cudaStreamDestroy(stream_);
  }

  using communicator::all_reduce;

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void all_reduce(void* buffer, size_t count, collective_dtype dtype, reduce_op op,
                  void* stream) override {
    enqueue(collective_kind::all_reduce, op, dtype, count, -1, stream, [&](cudaStream_t s) {
      return ncclAllReduce(buffer, buffer, count, nccl_type(dtype), nccl_op(op), comm_, s);
    });
  }

  void all_gather(const void* send, void* recv, size_t count, collective_dtype dtype,
                  void* stream) override {
    enqueue(collective_kind::all_gather, reduce_op::sum, dtype, count, -1, stream,
            [&](cudaStream_t s) {
              return ncclAllGather(send, recv, count, nccl_type(dtype), comm_, s);
            });
  }

  void broadcast(void* buffer, size_t count, collective_dtype dtype, int root,
                 void* stream) override {
    if (root < 0 || root >= world_)
      throw collective_error(collective_failure::invalid_argument,
                             "broadcast: root " + std::to_string(root) + " is outside [0, "
                                 + std::to_string(world_) + ")");
    enqueue(collective_kind::broadcast, reduce_op::sum, dtype, count, root, stream,
            [&](cudaStream_t s) {
              return ncclBroadcast(buffer, buffer, count, nccl_type(dtype), root, comm_, s);
            });
  }

  void barrier() override {
    enqueue(collective_kind::barrier, reduce_op::sum, collective_dtype::int64, 0, -1, nullptr,
            [&](cudaStream_t s) {
              return ncclAllReduce(scratch_, scratch_, 1, ncclInt64, ncclSum, comm_, s);
            });
    synchronize();
  }

  std::vector<int64_t> gather(const std::vector<int64_t>& values) override {
    open("gather");
    const size_t n = values.size(), total = n * static_cast<size_t>(world_);
    if (n == 0) return {};
    if (gather_capacity_ < n + total) {
      if (gathered_ != nullptr) cudaFree(gathered_);
      gathered_ = nullptr;
      gather_capacity_ = 0;
      cuda(cudaMalloc(reinterpret_cast<void**>(&gathered_), (n + total) * sizeof(int64_t)),
           "gather: cudaMalloc");
      gather_capacity_ = n + total;
    }
    cuda(cudaMemcpyAsync(gathered_, values.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice,
                         stream_),
         "gather: cudaMemcpyAsync to the device");
    all_gather(gathered_, gathered_ + n, n, collective_dtype::int64, nullptr);
    synchronize(); // the collective is done: the copy back below cannot wait on a peer
    std::vector<int64_t> out(total);
    cuda(cudaMemcpyAsync(out.data(), gathered_ + n, total * sizeof(int64_t), cudaMemcpyDeviceToHost,
                         stream_),
         "gather: cudaMemcpyAsync to the host");
    cuda(cudaStreamSynchronize(stream_), "gather: cudaStreamSynchronize");
    return out;
  }

  int64_t agree(int64_t value, reduce_op op) override {
    open("agree");
    cuda(cudaMemcpyAsync(scratch_, &value, sizeof value, cudaMemcpyHostToDevice, stream_),
         "agree: cudaMemcpyAsync to the device");
    all_reduce(scratch_, 1, collective_dtype::int64, op, nullptr);
    synchronize(); // the collective is done: the copy back below cannot wait on a peer
    int64_t out = 0;
    cuda(cudaMemcpyAsync(&out, scratch_, sizeof out, cudaMemcpyDeviceToHost, stream_),
         "agree: cudaMemcpyAsync to the host");
    cuda(cudaStreamSynchronize(stream_), "agree: cudaStreamSynchronize");
    return out;
  }

private:
  std::string me() const override {
    return "rank " + std::to_string(rank_) + " (GPU " + std::to_string(device_) + ")";
  }

  // Also ends the NCCL kernels still waiting on the device.
  void abort_transport(const std::string&) override { ncclCommAbort(comm_); }

  void check_transport() override {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress)
      fail(collective_failure::transport, collective_status::failed,
           me() + ": NCCL reported an asynchronous error: " + nccl_error(comm_, state));
  }

  std::string stall_hint() const override {
    return " (a peer did not enter it, or the transport stalled)";
  }

  template <class Call>
  void enqueue(collective_kind kind, reduce_op op, collective_dtype dtype, size_t count, int root,
               void* stream, Call&& call) {
    open(to_string(kind).data());
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress)
      fail(collective_failure::transport, collective_status::failed,
           me() + ": NCCL reported an asynchronous error before " + std::string{to_string(kind)}
               + ": " + nccl_error(comm_, state));
    cudaStream_t s = stream != nullptr ? static_cast<cudaStream_t>(stream) : stream_;
    // Under graph capture the collective joins the graph: no ledger entry, no event.
    const bool captured = capturing(s);
    auto entered = make_record(kind, op, dtype, count, root);
    if (!captured) entered.seq = ledger_.enter(kind, op, dtype, count, root);
    ncclResult_t r = call(s);
    if (r == ncclInProgress) r = poll_until(comm_, clock_type::now() + timeout_);
    if (r == ncclInProgress)
      fail(collective_failure::timeout, collective_status::timed_out,
           me() + ": enqueueing " + describe(entered) + " took longer than "
               + detail::seconds(timeout_));
    if (r != ncclSuccess)
      fail(collective_failure::transport, collective_status::failed,
           me() + ": " + describe(entered) + ": " + nccl_error(comm_, r));
    if (captured)
      note_captured(entered);
    else
      track(entered.seq, s);
  }

  ncclComm_t comm_;
  int world_, rank_, device_;
  cudaStream_t stream_;         // for collectives given no stream, and for agree()
  int64_t* scratch_;            // [1] device: agree() and barrier()
  int64_t* gathered_ = nullptr; // gather(): this rank's values, then every rank's
  size_t gather_capacity_ = 0;
};

[[noreturn]] void transport_error(const std::string& what) {
  throw collective_error(collective_failure::transport, what);
}

} // namespace

bool nccl_available(std::string*) {
  return true;
}

std::vector<char> nccl_unique_id() {
  ncclUniqueId id;
  if (auto r = ncclGetUniqueId(&id); r != ncclSuccess)
    transport_error(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  return {id.internal, id.internal + NCCL_UNIQUE_ID_BYTES};
}

std::shared_ptr<communicator> make_nccl_communicator(const std::vector<char>& unique_id,
                                                     int world_size, int rank,
                                                     const nccl_options& options) {
  auto invalid = [](const std::string& what) {
    throw collective_error(collective_failure::invalid_argument, what);
  };
  if (unique_id.size() != NCCL_UNIQUE_ID_BYTES)
    invalid("unique_id: " + std::to_string(unique_id.size()) + " bytes, an NCCL id has "
            + std::to_string(NCCL_UNIQUE_ID_BYTES));
  if (world_size < 1) invalid("world_size: " + std::to_string(world_size) + " is not positive");
  if (rank < 0 || rank >= world_size)
    invalid("rank: " + std::to_string(rank) + " is outside [0, " + std::to_string(world_size)
            + ")");
  if (options.timeout.count() <= 0) invalid("timeout: " + detail::seconds(options.timeout));
  const std::string me =
      "rank " + std::to_string(rank) + " (GPU " + std::to_string(options.device) + ")";
  auto cuda = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess) transport_error(me + ": " + what + ": " + cudaGetErrorString(e));
  };
  cuda(cudaSetDevice(options.device), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  int64_t* scratch = nullptr;
  if (auto e = cudaMalloc(reinterpret_cast<void**>(&scratch), sizeof(int64_t)); e != cudaSuccess) {
    cudaStreamDestroy(stream);
    cuda(e, "cudaMalloc");
  }
  auto cleanup = [&] {
    cudaFree(scratch);
    cudaStreamDestroy(stream);
  };
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), NCCL_UNIQUE_ID_BYTES);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; // returns at once; readiness is polled below
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, world_size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    const std::string why = nccl_error(comm, r);
    if (comm != nullptr) ncclCommAbort(comm);
    cleanup();
    transport_error(me + ": ncclCommInitRankConfig: " + why);
  }
  const ncclResult_t state = poll_until(comm, clock_type::now() + options.timeout);
  if (state != ncclSuccess) {
    const std::string why = state == ncclInProgress
                                ? "did not complete within " + detail::seconds(options.timeout)
                                      + " (not every rank of " + std::to_string(world_size)
                                      + " joined)"
                                : nccl_error(comm, state);
    ncclCommAbort(comm);
    cleanup();
    throw collective_error(state == ncclInProgress ? collective_failure::timeout
                                                   : collective_failure::transport,
                           me + ": NCCL initialization " + why);
  }
  return std::make_shared<nccl_communicator>(comm, world_size, rank, options.device, stream,
                                             scratch, options.timeout);
}

} // namespace kvactor::comm
