// The communicator of a tensor-parallel rank: the collectives its ranks run together. One
// interface, two transports: host_communicator (CPU ranks in one process, host memory, blocking)
// and the NCCL communicator (one rank per GPU, device memory, ordered on a CUDA stream). No CAF
// and no CUDA headers here: a CUDA stream travels as an opaque `void*` (a cudaStream_t).
//
// Errors are exceptions: a collective that cannot complete throws collective_error, and nothing
// else escapes a collective. The executors call collectives from inside the attention stack's
// all_reduce callback, which returns nothing (CPU) or a cuda_status (GPU); they catch
// collective_error there and answer the step with an errc::collective_failed error.
//
// Every collective a rank enters is written into its collective_ledger before it starts
// (sequence number, operation, element count, bytes, dtype) and finished with its outcome, so a
// timeout can say where each rank stands. A call on an aborted communicator throws at once and
// leaves no ledger entry (it never took part in anything).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kvactor::comm {

enum class collective_kind : uint8_t { all_reduce, all_gather, broadcast, barrier };
enum class reduce_op : uint8_t { sum, min, max };
enum class collective_dtype : uint8_t { float32, int64 };
/// Where a communicator's buffers live: host memory, or device memory of the rank's GPU.
enum class memory_space : uint8_t { host, device };

std::string_view to_string(collective_kind x);
std::string_view to_string(reduce_op x);
std::string_view to_string(collective_dtype x);
size_t size_of(collective_dtype x);

/// Why a collective failed.
enum class collective_failure : uint8_t {
  timeout,          // this rank waited longer than the communicator's timeout
  aborted,          // the communicator was aborted (by this rank, a peer, or a failed peer)
  mismatch,         // ranks entered different collectives at the same sequence number
  invalid_argument, // a bad argument (count, root, null buffer), checked before anything runs
  transport,        // the transport (NCCL, CUDA) reported an error
};

std::string_view to_string(collective_failure x);

class collective_error : public std::runtime_error {
public:
  collective_error(collective_failure kind, const std::string& what)
      : std::runtime_error(what), kind_(kind) {}
  collective_failure kind() const noexcept { return kind_; }

private:
  collective_failure kind_;
};

class collective_ledger;
struct collective_record;

class communicator {
public:
  virtual ~communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual memory_space space() const = 0;

  // The collectives. `stream` is the cudaStream_t a device communicator enqueues on (null: its
  // own stream); host communicators ignore it and return once the collective has completed on
  // every rank. A device communicator returns once the collective is enqueued: its results are
  // ready in stream order, and synchronize() waits for them. All ranks must enter the same
  // collectives, with the same dtype, count, op and root, in the same order.

  /// buffer [count], in place: `op` over every rank's buffer. The host communicator reduces in
  /// rank order (((r0 op r1) op r2) ...), so every rank receives the same bits.
  virtual void all_reduce(void* buffer, size_t count, collective_dtype dtype, reduce_op op,
                          void* stream = nullptr) = 0;
  /// send [count] of this rank -> recv [world_size * count]: rank r's elements at r * count.
  virtual void all_gather(const void* send, void* recv, size_t count, collective_dtype dtype,
                          void* stream = nullptr) = 0;
  /// buffer [count], in place: rank `root`'s elements on every rank.
  virtual void broadcast(void* buffer, size_t count, collective_dtype dtype, int root,
                         void* stream = nullptr) = 0;
  /// Returns once every rank has entered the barrier (blocking on both transports).
  virtual void barrier() = 0;
  /// One value of this rank, in host memory, in and out: `op` over the ranks' values. Blocking on
  /// both transports; for start-up agreements such as the KV cache block count.
  virtual int64_t agree(int64_t value, reduce_op op) = 0;

  /// This rank's `values` (host memory) gathered from every rank, rank r's at r * values.size().
  /// Blocking on every transport, like agree(); for per-step agreements (graph padding). Host
  /// communicators all_gather them; device communicators override.
  virtual std::vector<int64_t> gather(const std::vector<int64_t>& values);

  // CUDA graphs (device communicators). A collective enqueued on a stream that is being captured
  // becomes part of the graph: it runs at each launch, not now, and enters no ledger entry.
  // take_captured() hands over the shapes captured since its last call; after each launch of
  // that graph the caller gives them to replayed(), which enters them into the ledger, complete
  // when `stream` passes the launch (synchronize() waits for them with the timeout). Host
  // communicators capture nothing: they return nothing and ignore replays.
  virtual std::vector<collective_record> take_captured();
  virtual void replayed(const std::vector<collective_record>& collectives, void* stream);
  /// Called before a graph holding `collectives` is launched (a no-op but for fault injection:
  /// a rank that stalls there never launches the graph, as a stuck rank would not).
  virtual void before_replay(const std::vector<collective_record>& collectives);

  /// Waits until every collective this rank entered has completed, at most the timeout (host
  /// communicators: returns at once). A timeout aborts the communicator and throws.
  virtual void synchronize() = 0;

  /// Aborts the communicator: every collective waiting or entered later, on this rank and (for
  /// the host transport) on its peers, throws collective_failure::aborted naming `why`. Final:
  /// an aborted communicator cannot be revived. Safe to call more than once, from any thread.
  virtual void abort(const std::string& why) = 0;
  virtual bool aborted() const = 0;

  /// This rank's collective ledger (thread-safe to read while collectives run).
  virtual const collective_ledger& ledger() const = 0;

  // Typed conveniences over the collectives above.
  void all_reduce(float* buffer, size_t count, reduce_op op = reduce_op::sum,
                  void* stream = nullptr) {
    all_reduce(static_cast<void*>(buffer), count, collective_dtype::float32, op, stream);
  }
  void all_reduce(int64_t* buffer, size_t count, reduce_op op = reduce_op::sum,
                  void* stream = nullptr) {
    all_reduce(static_cast<void*>(buffer), count, collective_dtype::int64, op, stream);
  }
};

} // namespace kvactor::comm
