// CUDA support of the GPU benchmarks: errors as exceptions, device buffers, graphs, the L2 flush
// and the timing of graph replays with CUDA events.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kvactor::bench {

/// Throws std::runtime_error("<what>: <cudaGetErrorString> (<cudaGetErrorName>)") unless e is
/// cudaSuccess.
void check_cuda(cudaError_t e, const std::string& what);

/// n elements of T in device memory (uninitialized); freed on destruction.
template <class T>
class device_buffer {
public:
  device_buffer() = default;
  explicit device_buffer(size_t n) : n_(n) {
    void* p = nullptr;
    if (n_ > 0)
      check_cuda(cudaMalloc(&p, bytes()), "cudaMalloc of " + std::to_string(bytes()) + " bytes");
    ptr_ = static_cast<T*>(p);
  }
  /// A copy of `host`.
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) {
    if (n_ > 0)
      check_cuda(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice),
                 "cudaMemcpy to device");
  }
  device_buffer(device_buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(n_, o.n_);
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }

  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  /// Elements [first, first + count) copied to the host. REQUIRES: first + count <= size().
  std::vector<T> download(size_t first, size_t count) const {
    std::vector<T> host(count);
    if (count > 0)
      check_cuda(cudaMemcpy(host.data(), ptr_ + first, count * sizeof(T), cudaMemcpyDeviceToHost),
                 "cudaMemcpy to host");
    return host;
  }
  std::vector<T> download() const { return download(0, n_); }

private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

/// An instantiated CUDA graph of the work one function enqueued on a stream.
class graph_exec {
public:
  /// Captures what `enqueue` puts on `stream` (global capture mode). When enqueue throws, the
  /// capture is ended and the exception passes on. Throws std::runtime_error on a CUDA failure.
  graph_exec(cudaStream_t stream, const std::function<void()>& enqueue);
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  ~graph_exec();

  cudaGraphExec_t get() const { return exec_; }

private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

/// How the L2 cache is emptied before each timed replay.
enum class flush_mode {
  write, // cudaMemsetAsync of the flush buffer (Triton's do_bench; the anchors' method)
  read,  // the memset, then a read of a second buffer: L2 then holds clean lines only, so the
         // timed work pays no write-back of the flush's dirty lines
};

/// Evicts L2: enqueue() writes (and in read mode then reads) buffers of `bytes` each.
class l2_flusher {
public:
  /// Throws std::runtime_error on a CUDA failure. REQUIRES: bytes a multiple of 16.
  l2_flusher(size_t bytes, flush_mode mode);

  void enqueue(cudaStream_t stream);
  /// "256 MiB memset" or "256 MiB memset + 256 MiB read".
  std::string describe() const;
  size_t device_bytes() const { return written_.bytes() + read_.bytes() + sink_.bytes(); }

private:
  flush_mode mode_;
  device_buffer<unsigned char> written_, read_;
  device_buffer<uint32_t> sink_;
  int value_ = 0;
};

/// Percentiles of replay times, in microseconds (nearest rank).
struct timing {
  double median_us = 0.0, p10_us = 0.0, p90_us = 0.0, min_us = 0.0;
  int32_t replays = 0;
};
timing summarize(std::vector<double> us);

/// Runs `launch` (which enqueues the work on `stream`) warmup times, then `replays` times, each
/// after flush.enqueue(); a pair of CUDA events brackets each timed launch alone. Returns each
/// timed launch's microseconds. Throws std::runtime_error on a CUDA failure.
std::vector<double> time_replays(cudaStream_t stream, l2_flusher& flush, int32_t warmup,
                                 int32_t replays, const std::function<void()>& launch);

/// time_replays of one graph launch per replay.
std::vector<double> time_graph_replays(cudaGraphExec_t exec, cudaStream_t stream, l2_flusher& flush,
                                       int32_t warmup, int32_t replays);

/// The device-to-device copy ceiling: one cudaMemcpyAsync of `bytes` between two buffers of
/// random data, enqueued on the stream as is and timed like the kernels (L2 flushed before each,
/// though the copy is far larger than L2). TB/s counts read + write bytes.
struct copy_ceiling {
  size_t bytes = 0;
  timing time;
  double tbs = 0.0;      // 2 * bytes over the median
  double best_tbs = 0.0; // 2 * bytes over the fastest replay
};
copy_ceiling measure_copy_ceiling(size_t bytes, cudaStream_t stream, l2_flusher& flush,
                                  int32_t warmup, int32_t replays);

} // namespace kvactor::bench
