// The projections of a single-token step at Llama-3.1-8B's shapes: kvactor's
// skinny kernel (a warp per output row) and cuBLAS (cublasGemmEx; for gate/up followed by the
// activation kernel, the same work) in the same run, against the device-to-device copy ceiling.
// Two timings per kernel and shape:
//  - cold: one launch after an L2 flush (CUDA events around the launch alone);
//  - chained: a CUDA graph of `--chain` launches over as many distinct weight copies, as a decode
//    step runs them one after another (programmatic dependent launches where the kernel has
//    them), reported per launch.
// Prints one table; the last line sums one step's projections (32 layers and the LM head) from
// the chained figures.
//   usage: kvactor_skinny_bench [--tokens N] [--chain K] [--replays R]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attention_bench_kernels.hpp"
#include "bench_gpu.hpp"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/decoder_ops.h"

namespace kvactor::bench {
namespace {

using kernels::element_type;

struct shape {
  const char* name;
  int32_t in, rows; // rows: out, or inter for the gated form
  bool gated;
  int32_t per_step; // launches in one decode step of the 8B model
};

const std::vector<shape> llama8b_shapes{
    {"qkv", 4096, 6144, false, 32},           {"o", 4096, 4096, false, 32},
    {"gate_up + act", 4096, 14336, true, 32}, {"down", 14336, 4096, false, 32},
    {"lm_head", 4096, 128256, false, 1},
};

enum class variant { skinny, cublas };

void check_status(const kernels::cuda_status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(std::string(what) + ": " + s.message());
}

// One shape's buffers: `copies` weight matrices, x, and the outputs.
struct projection_buffers {
  projection_buffers(const shape& s, int32_t tokens, int32_t copies, cudaStream_t stream)
      : x(static_cast<size_t>(tokens) * s.in),
        y(static_cast<size_t>(tokens) * s.rows * (s.gated ? 2 : 1)),
        act(static_cast<size_t>(tokens) * s.rows) {
    const size_t elems = static_cast<size_t>(s.rows) * (s.gated ? 2 : 1) * s.in;
    for (int32_t c = 0; c < copies; ++c) {
      w.emplace_back(elems);
      check_cuda(fill_uniform_bf16(w.back().get(), elems, 0.05f, 17 + c, stream), "fill w");
    }
    check_cuda(fill_uniform_bf16(x.get(), x.size(), 1.0f, 5, stream), "fill x");
    weight_bytes = elems * 2;
  }
  std::vector<device_buffer<uint16_t>> w;
  device_buffer<uint16_t> x;
  device_buffer<float> y;
  device_buffer<uint16_t> act;
  size_t weight_bytes = 0;
};

void enqueue(variant v, const shape& s, projection_buffers& b, int32_t copy, int32_t tokens,
             cublasHandle_t blas, cudaStream_t stream) {
  namespace cd = kernels::cuda_detail;
  const void* w = b.w[static_cast<size_t>(copy)].get();
  if (v == variant::cublas) {
    const int32_t out = s.rows * (s.gated ? 2 : 1);
    check_status(cd::gemm(blas, element_type::bf16, w, b.x.get(), b.y.get(), tokens, s.in, out),
                 "cuBLAS gemm");
    if (s.gated)
      check_status(
          cd::launch_gated_activation(b.y.get(), tokens, s.rows, false, b.act.get(), stream),
          "gated activation");
    return;
  }
  if (s.gated)
    check_status(
        cd::launch_skinny_gated_mlp(w, b.x.get(), b.act.get(), tokens, s.in, s.rows, false, stream),
        "skinny gated");
  else
    check_status(cd::launch_skinny_gemm(w, b.x.get(), b.y.get(), tokens, s.in, s.rows, stream),
                 "skinny gemm");
}

struct figures {
  double cold_us = 0.0, chained_us = 0.0;
};

figures time_variant(variant v, const shape& s, projection_buffers& b, int32_t tokens,
                     int32_t chain, int32_t replays, cublasHandle_t blas, cudaStream_t stream,
                     l2_flusher& flush) {
  figures f;
  f.cold_us = summarize(time_replays(stream, flush, 3, replays, [&] {
                enqueue(v, s, b, 0, tokens, blas, stream);
              })).median_us;
  graph_exec graph(stream, [&] {
    for (int32_t c = 0; c < chain; ++c)
      enqueue(v, s, b, c, tokens, blas, stream);
  });
  f.chained_us =
      summarize(time_graph_replays(graph.get(), stream, flush, 2, replays)).median_us / chain;
  return f;
}

int run(int32_t tokens, int32_t chain, int32_t replays) {
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cublasHandle_t blas = nullptr;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate");
  cublasSetStream(blas, stream);
  l2_flusher flush(size_t{256} << 20, flush_mode::write);
  const copy_ceiling ceiling = measure_copy_ceiling(size_t{2} << 30, stream, flush, 3, 10);
  std::printf("copy ceiling: %.2f TB/s (2 GiB device-to-device, read + write); L2 flush: %s; "
              "%d token(s), chains of %d, medians of %d replays\n",
              ceiling.tbs, flush.describe().c_str(), tokens, chain, replays);
  std::printf("%-14s %8s | %-28s | %-28s\n", "shape", "MB", "kvactor: cold, chained",
              "cuBLAS: cold, chained");
  const variant variants[] = {variant::skinny, variant::cublas};
  double step_us[2] = {0, 0};
  double step_bytes = 0;
  for (const shape& s : llama8b_shapes) {
    const int32_t copies = s.per_step > 1 ? chain : 1;
    projection_buffers b(s, tokens, copies, stream);
    std::printf("%-14s %8.1f", s.name, static_cast<double>(b.weight_bytes) / 1e6);
    for (int v = 0; v < 2; ++v) {
      const figures f =
          time_variant(variants[v], s, b, tokens, copies, replays, blas, stream, flush);
      const double tbs = static_cast<double>(b.weight_bytes) / (f.chained_us * 1e-6) * 1e-12;
      std::printf(" | %7.1f %7.1f us %5.2f TB/s", f.cold_us, f.chained_us, tbs);
      step_us[v] += f.chained_us * s.per_step;
    }
    step_bytes += static_cast<double>(b.weight_bytes) * s.per_step;
    std::printf("\n");
  }
  std::printf("one step's projections (%.2f GB): kvactor %.0f us (%.2f TB/s), cuBLAS %.0f us "
              "(%.2f TB/s); cuBLAS / kvactor %.3fx\n",
              step_bytes / 1e9, step_us[0], step_bytes / (step_us[0] * 1e-6) * 1e-12, step_us[1],
              step_bytes / (step_us[1] * 1e-6) * 1e-12, step_us[1] / step_us[0]);
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
  return 0;
}

} // namespace
} // namespace kvactor::bench

int main(int argc, char** argv) {
  CLI::App app{"The skinny projections of a decode step at Llama-3.1-8B's shapes"};
  int32_t tokens = 1, chain = 8, replays = 30;
  app.add_option("--tokens", tokens, "tokens per projection (1-4)")->check(CLI::Range(1, 4));
  app.add_option("--chain", chain, "launches per timed graph (distinct weights)")
      ->check(CLI::Range(1, 32));
  app.add_option("--replays", replays, "timed replays per figure")->check(CLI::Range(3, 1000));
  CLI11_PARSE(app, argc, argv);
  // Its baseline is cuBLAS: under KVACTOR_GEMM=plain that column would time the plain kernel.
  kvactor::kernels::cuda_detail::projection_gemm gemm{};
  if (!kvactor::kernels::cuda_detail::selected_projection_gemm(&gemm).ok()
      || gemm != kvactor::kernels::cuda_detail::projection_gemm::cublas) {
    std::fprintf(stderr, "kvactor_skinny_bench: unset KVACTOR_GEMM (its baseline is cuBLAS)\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("kvactor_skinny_bench: no CUDA device; nothing measured\n");
    return 0;
  }
  try {
    return kvactor::bench::run(tokens, chain, replays);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvactor_skinny_bench: %s\n", e.what());
    return 1;
  }
}
