#include "bench_gpu.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "attention_bench_kernels.hpp"

namespace kvactor::bench {

void check_cuda(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  throw std::runtime_error(what + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

graph_exec::graph_exec(cudaStream_t stream, const std::function<void()>& enqueue) {
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial != nullptr)
      (void)cudaGraphDestroy(partial);
    (void)cudaGetLastError();
    throw;
  }
  check_cuda(cudaStreamEndCapture(stream, &graph_), "cudaStreamEndCapture");
  const cudaError_t e = cudaGraphInstantiate(&exec_, graph_, 0);
  if (e != cudaSuccess) {
    (void)cudaGraphDestroy(graph_);
    check_cuda(e, "cudaGraphInstantiate");
  }
}

graph_exec::~graph_exec() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
}

l2_flusher::l2_flusher(size_t bytes, flush_mode mode)
    : mode_(mode), written_(bytes), read_(mode == flush_mode::read ? bytes : 0), sink_(1) {
  if (mode_ == flush_mode::read)
    check_cuda(cudaMemset(read_.get(), 0x5a, read_.bytes()), "cudaMemset of the L2 read buffer");
}

void l2_flusher::enqueue(cudaStream_t stream) {
  // A different value each time, so that no layer can skip the writes as redundant.
  value_ = (value_ + 1) & 0xff;
  check_cuda(cudaMemsetAsync(written_.get(), value_, written_.bytes(), stream),
             "cudaMemsetAsync (L2 flush)");
  if (mode_ == flush_mode::read)
    check_cuda(read_sweep(read_.get(), read_.bytes(), sink_.get(), stream),
               "read_sweep (L2 flush)");
}

std::string l2_flusher::describe() const {
  const std::string mib = std::to_string(written_.bytes() >> 20) + " MiB";
  return mode_ == flush_mode::read ? mib + " memset + " + mib + " read" : mib + " memset";
}

timing summarize(std::vector<double> us) {
  timing t;
  if (us.empty()) return t;
  std::sort(us.begin(), us.end());
  const auto at = [&](double q) {
    const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(us.size())));
    return us[std::clamp<size_t>(rank, 1, us.size()) - 1];
  };
  const size_t n = us.size();
  t.median_us = n % 2 == 1 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  t.p10_us = at(0.10);
  t.p90_us = at(0.90);
  t.min_us = us.front();
  t.replays = static_cast<int32_t>(n);
  return t;
}

namespace {

class event_pairs {
public:
  explicit event_pairs(int32_t n) {
    events_.reserve(2 * static_cast<size_t>(n));
    for (int32_t i = 0; i < 2 * n; ++i) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreate(&e), "cudaEventCreate");
      events_.push_back(e);
    }
  }
  event_pairs(const event_pairs&) = delete;
  event_pairs& operator=(const event_pairs&) = delete;
  ~event_pairs() {
    for (cudaEvent_t e : events_)
      (void)cudaEventDestroy(e);
  }
  cudaEvent_t start(int32_t i) const { return events_[2 * static_cast<size_t>(i)]; }
  cudaEvent_t stop(int32_t i) const { return events_[2 * static_cast<size_t>(i) + 1]; }

private:
  std::vector<cudaEvent_t> events_;
};

} // namespace

std::vector<double> time_replays(cudaStream_t stream, l2_flusher& flush, int32_t warmup,
                                 int32_t replays, const std::function<void()>& launch) {
  for (int32_t i = 0; i < warmup; ++i) {
    flush.enqueue(stream);
    launch();
  }
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (warmup)");
  // Everything is enqueued ahead and read once at the end: the host never stalls the GPU between
  // replays, and the events time the GPU's work alone.
  event_pairs events(replays);
  for (int32_t i = 0; i < replays; ++i) {
    flush.enqueue(stream);
    check_cuda(cudaEventRecord(events.start(i), stream), "cudaEventRecord");
    launch();
    check_cuda(cudaEventRecord(events.stop(i), stream), "cudaEventRecord");
  }
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (timed replays)");
  std::vector<double> us;
  us.reserve(static_cast<size_t>(replays));
  for (int32_t i = 0; i < replays; ++i) {
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, events.start(i), events.stop(i)), "cudaEventElapsedTime");
    us.push_back(1e3 * static_cast<double>(ms));
  }
  return us;
}

std::vector<double> time_graph_replays(cudaGraphExec_t exec, cudaStream_t stream, l2_flusher& flush,
                                       int32_t warmup, int32_t replays) {
  return time_replays(stream, flush, warmup, replays,
                      [&] { check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); });
}

copy_ceiling measure_copy_ceiling(size_t bytes, cudaStream_t stream, l2_flusher& flush,
                                  int32_t warmup, int32_t replays) {
  device_buffer<uint16_t> src(bytes / 2), dst(bytes / 2);
  check_cuda(fill_uniform_bf16(src.get(), src.size(), 1.0f, 0xc0ffee, stream), "fill (copy src)");
  check_cuda(cudaMemsetAsync(dst.get(), 0, dst.bytes(), stream), "cudaMemsetAsync (copy dst)");
  copy_ceiling c;
  c.bytes = src.bytes();
  c.time = summarize(time_replays(stream, flush, warmup, replays, [&] {
    check_cuda(cudaMemcpyAsync(dst.get(), src.get(), src.bytes(), cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync (copy ceiling)");
  }));
  const double moved = 2.0 * static_cast<double>(c.bytes);
  c.tbs = moved / (c.time.median_us * 1e-6) * 1e-12;
  c.best_tbs = moved / (c.time.min_us * 1e-6) * 1e-12;
  return c;
}

} // namespace kvactor::bench
