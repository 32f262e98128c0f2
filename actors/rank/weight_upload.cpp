#include "actors/rank/weight_upload.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <thread>

#include <fmt/format.h>

namespace kvactor {

namespace {

// One pinned buffer and the event that says its last copy has left it.
struct stage {
  std::byte* host = nullptr;
  cudaEvent_t done = nullptr;
};

class stager {
public:
  stager(size_t bytes, cudaStream_t stream) : bytes_(bytes), stream_(stream) {}
  ~stager() {
    // Whatever path left the upload, no copy may still read a buffer freed here.
    (void)cudaStreamSynchronize(stream_);
    for (auto& s : stages_) {
      if (s.done) cudaEventDestroy(s.done);
      if (s.host) cudaFreeHost(s.host);
    }
  }
  status open() {
    for (auto& s : stages_) {
      if (auto e = cudaMallocHost(reinterpret_cast<void**>(&s.host), bytes_); e != cudaSuccess)
        return make_error(errc::insufficient_memory,
                          fmt::format("weight staging: cudaMallocHost of {} bytes: {}", bytes_,
                                      cudaGetErrorString(e)));
      if (auto e = cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming); e != cudaSuccess)
        return make_error(errc::io_error, fmt::format("weight staging: cudaEventCreate: {}",
                                                      cudaGetErrorString(e)));
    }
    return ok();
  }
  // The next buffer, once its previous copy has left it.
  expected<stage*> next() {
    stage* s = &stages_[turn_++ % stages_.size()];
    if (auto e = cudaEventSynchronize(s->done); e != cudaSuccess)
      return make_error(errc::io_error, fmt::format("weight upload: {}", cudaGetErrorString(e)));
    return s;
  }
  size_t bytes() const { return bytes_; }

  // Copies `bytes` of `s` to `dst` on the stream; `s` is free again once the copy has left it.
  status send(stage* s, std::byte* dst, size_t bytes) {
    if (auto e = cudaMemcpyAsync(dst, s->host, bytes, cudaMemcpyHostToDevice, stream_);
        e != cudaSuccess)
      return make_error(errc::io_error, fmt::format("cudaMemcpyAsync: {}", cudaGetErrorString(e)));
    if (auto e = cudaEventRecord(s->done, stream_); e != cudaSuccess)
      return make_error(errc::io_error, fmt::format("cudaEventRecord: {}", cudaGetErrorString(e)));
    return ok();
  }

private:
  size_t bytes_;
  cudaStream_t stream_;
  std::array<stage, 2> stages_{};
  size_t turn_ = 0;
};

// Rows [from, from + n) of `c` into `out`, split across threads by rows.
void fill_parallel(const weight_copy& c, int64_t from, int64_t n, bool bf16, std::byte* out,
                   int32_t threads) {
  const size_t row_bytes = static_cast<size_t>(c.cols) * (bf16 ? 2 : 4);
  const int64_t workers = std::clamp<int64_t>(n * static_cast<int64_t>(row_bytes) >> 20, 1,
                                              threads); // a worker per MiB, at most `threads`
  if (workers == 1) return fill_block(c, from, n, bf16, out);
  std::vector<std::jthread> pool; // joined on every way out
  const int64_t per = (n + workers - 1) / workers;
  for (int64_t w = 0; w < workers; ++w) {
    const int64_t a = w * per, b = std::min(n, a + per);
    if (a >= b) break;
    pool.emplace_back([&, a, b] {
      fill_block(c, from + a, b - a, bf16, out + static_cast<size_t>(a) * row_bytes);
    });
  }
}

std::string name_of(const weight_copy& c) {
  return c.layer < 0 ? kernels::to_string(c.target)
                     : fmt::format("layer {} {}", c.layer, kernels::to_string(c.target));
}

// Every copy lands inside a tensor the decoder has, one row fits the staging: checked before
// the first byte moves. Returns the device bytes the plan writes.
expected<uint64_t> check_plan(const std::vector<weight_copy>& plan, const kernels::decoder_cuda& d,
                              size_t staging_bytes) {
  uint64_t total = 0;
  for (const auto& c : plan) {
    const auto target = d.tensor(c.target, static_cast<size_t>(std::max(c.layer, 0)));
    const size_t esize = target.type == kernels::element_type::bf16 ? 2 : 4;
    if (target.data == nullptr)
      return make_error(
          errc::invalid_argument,
          fmt::format("weight upload: {}: the decoder has no such tensor", name_of(c)));
    if (c.target_offset < 0 || c.target_offset + c.elements() > target.rows * target.cols)
      return make_error(errc::invalid_argument,
                        fmt::format("weight upload: {}: elements [{}, {}) outside its {} x {}",
                                    name_of(c), c.target_offset, c.target_offset + c.elements(),
                                    target.rows, target.cols));
    if (static_cast<size_t>(c.cols) * esize > staging_bytes)
      return make_error(errc::invalid_argument,
                        fmt::format("weight upload: {}: a row of {} bytes exceeds the {}-byte "
                                    "staging buffer",
                                    name_of(c), static_cast<size_t>(c.cols) * esize,
                                    staging_bytes));
    total += static_cast<uint64_t>(c.elements()) * esize;
  }
  return total;
}

} // namespace

expected<upload_progress> upload_weights(const std::vector<weight_copy>& plan,
                                         kernels::decoder_cuda& d, const upload_options& o) {
  const auto start = std::chrono::steady_clock::now();
  auto since = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  upload_progress p;
  auto total = check_plan(plan, d, o.staging_bytes);
  if (!total) return total.err();
  p.total_bytes = *total;
  stager staging(o.staging_bytes, d.stream());
  if (auto st = staging.open(); !st) return st.err();
  auto last_report = start;
  for (const auto& c : plan) {
    const auto target = d.tensor(c.target, static_cast<size_t>(std::max(c.layer, 0)));
    const bool bf16 = target.type == kernels::element_type::bf16;
    const size_t row_bytes = static_cast<size_t>(c.cols) * (bf16 ? 2 : 4);
    const auto rows_per = static_cast<int64_t>(o.staging_bytes / row_bytes);
    for (int64_t r = 0; r < c.rows; r += rows_per) {
      const int64_t n = std::min(rows_per, c.rows - r);
      auto s = staging.next();
      if (!s) return s.err();
      fill_parallel(c, r, n, bf16, (*s)->host, o.threads);
      auto* dst = static_cast<std::byte*>(target.data)
                  + static_cast<size_t>(c.target_offset) * (bf16 ? 2 : 4)
                  + static_cast<size_t>(r) * row_bytes;
      if (auto sent = staging.send(*s, dst, static_cast<size_t>(n) * row_bytes); !sent)
        return make_error(sent.err().code,
                          fmt::format("weight upload: {}: {}", name_of(c), sent.err().message));
      p.done_bytes += static_cast<size_t>(n) * row_bytes;
      if (o.progress && std::chrono::steady_clock::now() - last_report >= o.interval) {
        last_report = std::chrono::steady_clock::now();
        p.seconds = since();
        o.progress(p);
      }
    }
  }
  if (auto e = cudaStreamSynchronize(d.stream()); e != cudaSuccess)
    return make_error(errc::io_error, fmt::format("weight upload: {}", cudaGetErrorString(e)));
  p.seconds = since();
  if (o.progress) o.progress(p);
  return p;
}

expected<upload_progress> generate_weights(const std::vector<weight_copy>& plan,
                                           kernels::decoder_cuda& d, const hf_decoder_config& cfg,
                                           uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  upload_progress p;
  // Staging is not used; its size only bounds a row, which nothing here needs.
  if (auto total = check_plan(plan, d, SIZE_MAX); !total) return total.err();
  for (const auto& c : plan) {
    const auto target = d.tensor(c.target, static_cast<size_t>(std::max(c.layer, 0)));
    const auto g = generated_tensor_of(cfg, seed, c.source->name, c.source->shape);
    const kernels::generated_block block{
        c.target_offset, c.rows,      c.cols,
        c.row_begin,     c.col_begin, c.source->shape.size() == 2 ? c.source->shape[1] : 1,
        g.key,           g.scale,     g.centre};
    if (auto st = kernels::fill_generated_cuda(target, block, d.stream()); !st) {
      (void)cudaStreamSynchronize(d.stream()); // nothing queued outlives the failure
      return make_error(st.code() == cudaErrorInvalidValue ? errc::invalid_argument
                                                           : errc::io_error,
                        fmt::format("generated weights: {}: {}", name_of(c), st.message()));
    }
    p.done_bytes +=
        target.type == kernels::element_type::bf16 ? c.elements() * 2 : c.elements() * 4;
  }
  if (auto e = cudaStreamSynchronize(d.stream()); e != cudaSuccess)
    return make_error(errc::io_error, fmt::format("generated weights: {}", cudaGetErrorString(e)));
  p.total_bytes = p.done_bytes;
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

expected<std::unique_ptr<kernels::decoder_cuda>>
load_decoder_cuda(const hf_decoder_config& cfg, const gpu_weight_source& weights,
                  kernels::decoder_cuda_options options) {
  auto plan = plan_device_weights(weights.ckpt, cfg);
  if (!plan) return plan.err();
  options.tp_size = cfg.tp;
  options.tied_lm_head = cfg.tie_embeddings;
  auto created = kernels::decoder_cuda::create(cfg.spec, options);
  if (!created.status)
    return make_error(created.status.code() == cudaErrorInvalidValue ? errc::unsupported
                                                                     : errc::io_error,
                      fmt::format("device: cuda: {}", created.status.message()));
  auto loaded = weights.generated_seed
                    ? generate_weights(*plan, *created.decoder, cfg, *weights.generated_seed)
                    : upload_weights(*plan, *created.decoder, weights.upload);
  if (!loaded) return loaded.err();
  return std::move(created.decoder);
}

} // namespace kvactor
