// Internal to the device communicators (NCCL, device-local): what they share. A collective is
// enqueued on a CUDA stream and completes when the stream passes an event recorded after it
// (never observed by blocking on the stream); synchronize() waits for all of them with the
// timeout; any failure ends the pending ledger entries, aborts the transport and throws with the
// ledger's tail. A collective enqueued on a stream under CUDA graph capture becomes part of the
// graph instead: no ledger entry, no event; its shape waits in take_captured() until the caller
// hands it back to replayed() after each launch of the graph. Header-only; needs the CUDA runtime.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kvactor/comm/collective_ledger.h"
#include "kvactor/comm/communicator.h"
#include "timeouts.h"

namespace kvactor::comm::detail {

class device_communicator_base : public communicator {
public:
  explicit device_communicator_base(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  ~device_communicator_base() override {
    for (auto& p : pending_)
      cudaEventDestroy(p.event);
    for (auto e : free_)
      cudaEventDestroy(e);
  }

  memory_space space() const override { return memory_space::device; }

  void synchronize() override {
    open("synchronize");
    const auto deadline = std::chrono::steady_clock::now() + timeout_ + grace();
    for (int spins = 0;; ++spins) {
      check_transport();
      refresh();
      if (pending_.empty()) {
        check_transport(); // a failure the device reported as its work ended
        return;
      }
      if (std::chrono::steady_clock::now() >= deadline)
        fail(collective_failure::timeout, collective_status::timed_out,
             me() + ": " + oldest_pending() + " did not complete within " + seconds(timeout_)
                 + stall_hint());
      if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  void abort(const std::string& why) override {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (aborted_) return;
    abort_reason_ = why.empty() ? "aborted" : why;
    aborted_ = true;
    abort_transport(abort_reason_);
    ledger_.finish_pending(collective_status::aborted);
  }

  bool aborted() const override { return aborted_; }
  const collective_ledger& ledger() const override { return ledger_; }

  std::vector<collective_record> take_captured() override { return std::exchange(captured_, {}); }

  void replayed(const std::vector<collective_record>& collectives, void* stream) override {
    open("a graph launch");
    for (const auto& c : collectives) {
      const uint64_t seq = ledger_.enter(c.kind, c.op, c.dtype, c.count, c.root);
      entered_by_replay(seq, c);
      track(seq, static_cast<cudaStream_t>(stream));
    }
  }

protected:
  /// "rank 1 (GPU 0)": how this rank's errors start.
  virtual std::string me() const = 0;
  /// Stops the transport (ncclCommAbort; the host meetings of a device-local group); called once.
  virtual void abort_transport(const std::string& why) = 0;
  /// Throws (through fail) when the transport reported an error while collectives are pending.
  virtual void check_transport() {}
  /// What a synchronize() timeout adds to its message.
  virtual std::string stall_hint() const { return {}; }
  /// How much longer than the timeout synchronize() waits (for the device to report its own).
  virtual std::chrono::milliseconds grace() const { return std::chrono::milliseconds{0}; }
  /// Why the communicator is aborted, for open()'s message.
  virtual std::string why_aborted() const { return abort_reason_; }
  /// A captured collective of a graph was entered as `seq` for one launch of it.
  virtual void entered_by_replay(uint64_t /*seq*/, const collective_record& /*c*/) {}

  /// True while `s` is being captured into a CUDA graph: what is enqueued on it runs at launch.
  static bool capturing(cudaStream_t s) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(s, &status) == cudaSuccess
           && status == cudaStreamCaptureStatusActive;
  }

  /// Keeps a captured collective's shape for take_captured().
  void note_captured(const collective_record& r) { captured_.push_back(r); }

  /// Throws `aborted` when the communicator was aborted; `what` names the call.
  void open(const char* what) {
    if (!aborted()) return;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      why = why_aborted();
    }
    throw collective_error(collective_failure::aborted,
                           me() + ": " + what + " on an aborted communicator"
                               + (why.empty() ? std::string{} : ": " + why));
  }

  /// Ends every pending entry with `status`, aborts the communicator and throws.
  [[noreturn]] void fail(collective_failure kind, collective_status status,
                         const std::string& why) {
    ledger_.finish_pending(status);
    abort(why);
    throw collective_error(kind, why + "; " + ledger_.tail());
  }

  void cuda(cudaError_t e, const std::string& what) {
    if (e != cudaSuccess)
      fail(collective_failure::transport, collective_status::failed,
           me() + ": " + what + ": " + cudaGetErrorString(e));
  }

  /// Collective `seq` completes when `stream` passes this point.
  void track(uint64_t seq, cudaStream_t stream) {
    cudaEvent_t ev = nullptr;
    if (!free_.empty()) {
      ev = free_.back();
      free_.pop_back();
    } else {
      cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    }
    pending_.push_back({seq, ev});
    cuda(cudaEventRecord(ev, stream), "cudaEventRecord");
    refresh();
  }

  /// Marks the collectives whose events have completed.
  void refresh() {
    for (size_t i = 0; i < pending_.size();) {
      const cudaError_t q = cudaEventQuery(pending_[i].event);
      if (q == cudaErrorNotReady) {
        ++i;
        continue;
      }
      if (q != cudaSuccess) cuda(q, "cudaEventQuery after " + std::to_string(pending_[i].seq));
      ledger_.finish(pending_[i].seq, collective_status::completed);
      free_.push_back(pending_[i].event);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  /// The first collective still pending, described.
  std::string oldest_pending() const {
    for (const auto& r : ledger_.entries())
      if (r.status == collective_status::pending) return describe(r);
    return "a collective";
  }

  collective_ledger ledger_;
  const std::chrono::milliseconds timeout_;

private:
  struct pending_op {
    uint64_t seq;
    cudaEvent_t event;
  };
  std::vector<pending_op> pending_; // entered, event not yet complete
  std::vector<cudaEvent_t> free_;
  std::vector<collective_record> captured_; // in graphs, not yet taken
  std::mutex abort_mu_;
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
};

} // namespace kvactor::comm::detail
