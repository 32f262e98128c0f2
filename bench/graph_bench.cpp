// CUDA graphs of the GPU decoder of the shipped llama-3.1-8b config with weights generated on the
// device (32 layers, hidden 4096, 32 q / 8 KV heads of 128, intermediate 14336, vocabulary 128256,
// TP 1, bf16): one decode step (forward, without the LM head) eager vs replayed as a FULL graph and
// as PIECEWISE graphs (attention eager) for batch 1, 2, 4, 8, 16, 64 and 256 at context 512, and
// the capture of the default ladder (kvactor's capture sizes for max_num_seqs 256) as the default
// mode full_and_piecewise captures it: time and device memory. The goals: replay >= 2x faster
// than eager for batch <= 8; the ladder in <= 3 s using <= 0.5 GiB. Exits 0 with a message without
// a GPU.
//   usage: kvactor_graph_bench [--quick]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/cudagraph/capture_sizes.hpp"
#include "actors/rank/weight_upload.hpp"
#include "kvactor/kernels/cuda/stack_graph.h"
#include "model/hf_decoder.hpp"
#include "model/loader.hpp"

using namespace kvactor;
using namespace kvactor::kernels;

namespace {

#define CHECK_CUDA(call)                                                                           \
  do {                                                                                             \
    if (cudaError_t e_ = (call); e_ != cudaSuccess) {                                              \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));                      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

void check(const cuda_status& s, const char* what) {
  if (!s) {
    std::fprintf(stderr, "%s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}

template <class T>
T* device_alloc(size_t n) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(T)));
  return static_cast<T*>(p);
}

template <class T>
void upload(T* dst, const std::vector<T>& src) {
  CHECK_CUDA(cudaMemcpy(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// The llama-3.1-8b decoder with weights generated on the device from seed 1.
std::unique_ptr<decoder_cuda> llama_8b(int32_t max_tokens, cudaStream_t stream) {
  auto path = resolve_model_path("llama-3.1-8b");
  auto config = path ? read_config_json(*path) : expected<nlohmann::json>(path.err());
  auto src =
      config ? synthetic_hf_shapes(*config, 1, 0) : expected<hf_decoder_source>(config.err());
  if (!src) {
    std::fprintf(stderr, "llama-3.1-8b: %s\n", src.err().message.c_str());
    std::exit(1);
  }
  decoder_cuda_options opt;
  opt.max_tokens = max_tokens;
  opt.stream = stream;
  auto made = load_decoder_cuda(src->config, {src->ckpt, {}, uint64_t{1}}, opt);
  if (!made) {
    std::fprintf(stderr, "llama-3.1-8b on the GPU: %s\n", made.err().message.c_str());
    std::exit(1);
  }
  return std::move(*made);
}

int64_t free_bytes() {
  size_t f = 0, t = 0;
  CHECK_CUDA(cudaMemGetInfo(&f, &t));
  return static_cast<int64_t>(f);
}

} // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: kvactor_graph_bench skipped\n");
    return 0;
  }
  constexpr int32_t layers = 32, hidden = 4096, hkv = 8, head = 128, block = 16;
  constexpr int32_t context = 512, width = context / block;
  const auto ladder = default_capture_sizes(256, 8192, 1); // decode batches, 1 token each
  const int32_t max_batch = ladder.empty() ? 256 : ladder.back();
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto decoder = llama_8b(max_batch, stream);
  auto& stack = *decoder;

  // One KV cache per layer, every request at `context` tokens, shuffled blocks.
  const int64_t num_blocks = int64_t{max_batch} * width + 1;
  const int64_t per_block = int64_t{hkv} * block * 2 * head;
  auto* cache = device_alloc<uint16_t>(static_cast<size_t>(num_blocks * per_block * layers));
  CHECK_CUDA(cudaMemset(cache, 0x3c, static_cast<size_t>(num_blocks * per_block * layers) * 2));
  std::vector<kv_view> views;
  for (int32_t i = 0; i < layers; ++i)
    views.push_back({cache + i * num_blocks * per_block, element_type::bf16, num_blocks, hkv, block,
                     2 * head, per_block, int64_t{block} * 2 * head, 2 * head});
  std::vector<int32_t> table(static_cast<size_t>(max_batch) * width);
  std::iota(table.begin(), table.end(), 1);
  std::shuffle(table.begin(), table.end(), std::mt19937(3));
  std::vector<int32_t> qsl(static_cast<size_t>(max_batch) + 1), seq(max_batch, context),
      pos(max_batch, context - 1), ids(max_batch);
  std::vector<int64_t> slots(max_batch);
  for (int32_t r = 0; r < max_batch; ++r) {
    qsl[r + 1] = r + 1;
    ids[r] = (r * 37) % 128256;
    slots[r] = int64_t{table[static_cast<size_t>(r) * width + width - 1]} * block + block - 1;
  }
  auto* d_table = device_alloc<int32_t>(table.size());
  auto* d_qsl = device_alloc<int32_t>(qsl.size());
  auto* d_seq = device_alloc<int32_t>(seq.size());
  auto* d_pos = device_alloc<int32_t>(pos.size());
  auto* d_ids = device_alloc<int32_t>(ids.size());
  auto* d_slots = device_alloc<int64_t>(slots.size());
  upload(d_table, table);
  upload(d_qsl, qsl);
  upload(d_seq, seq);
  upload(d_pos, pos);
  upload(d_ids, ids);
  upload(d_slots, slots);
  auto* d_hidden = device_alloc<float>(static_cast<size_t>(max_batch) * hidden);
  auto step_for = [&](int32_t b) {
    device_step s;
    s.token_ids = d_ids;
    s.positions = d_pos;
    s.num_tokens = b;
    s.max_query_len = 1; // decodes only: no prefill launch
    s.layers.assign(layers, device_layer_batch{d_qsl, d_seq, d_table, d_slots, width, b});
    return s;
  };
  cudaEvent_t t0, t1;
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));
  auto time_us = [&](auto&& f, int iters) {
    for (int i = 0; i < 3; ++i)
      f();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaEventRecord(t0, stream));
    for (int i = 0; i < iters; ++i)
      f();
    CHECK_CUDA(cudaEventRecord(t1, stream));
    CHECK_CUDA(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
    return 1000.0 * ms / iters;
  };
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s: the llama-3.1-8b decoder (generated weights, bf16, TP 1), decode at context "
              "%d; time per step from CUDA events over back-to-back steps "
              "(host launch cost included, as in serving)\n",
              prop.name, context);
  std::printf("%8s %12s %12s %8s %10s %14s %8s\n", "batch", "eager us", "full us", "speedup",
              "graph MiB", "piecewise us", "speedup");
  const int iters = quick ? 10 : 50;
  double min_small_speedup = 1e9;
  for (int32_t b : {1, 2, 4, 8, 16, 64, 256}) {
    if (b > max_batch) continue;
    auto s = step_for(b);
    const double eager =
        time_us([&] { check(stack.forward(s, views, {}, d_hidden), "forward"); }, iters);
    auto g = stack_graph::capture(stack, s, views, d_hidden);
    check(g.status, "capture");
    const double replay = time_us([&] { check(g.graph->replay(), "replay"); }, iters);
    auto pg = piecewise_graph::capture(stack, s, d_hidden);
    check(pg.status, "piecewise capture");
    const double pw =
        time_us([&] { check(pg.graph->replay(s, views), "piecewise replay"); }, iters);
    if (b <= 8) min_small_speedup = std::min(min_small_speedup, eager / replay);
    std::printf("%8d %12.1f %12.1f %7.2fx %10.1f %14.1f %7.2fx\n", b, eager, replay, eager / replay,
                static_cast<double>(g.graph->bytes()) / (1 << 20), pw, eager / pw);
  }
  // The default ladder, captured back to back as start-up does in full_and_piecewise mode:
  // FULL graphs of the decode sizes up to max_num_seqs, PIECEWISE graphs of every size.
  std::vector<std::unique_ptr<stack_graph>> graphs;
  std::vector<std::unique_ptr<piecewise_graph>> pieces;
  const int64_t before = free_bytes();
  const auto c0 = std::chrono::steady_clock::now();
  size_t full_count = 0;
  for (int32_t b : ladder) {
    if (b > 256) continue;
    auto g = stack_graph::capture(stack, step_for(b), views, d_hidden);
    check(g.status, "ladder capture");
    graphs.push_back(std::move(g.graph));
    ++full_count;
  }
  const double full_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  const double full_gib = static_cast<double>(before - free_bytes()) / (1 << 30);
  for (int32_t b : ladder) {
    auto g = piecewise_graph::capture(stack, step_for(b), d_hidden);
    check(g.status, "ladder piecewise capture");
    pieces.push_back(std::move(g.graph));
  }
  const double capture_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  const double gib = static_cast<double>(before - free_bytes()) / (1 << 30);
  std::printf("ladder: %zu FULL graphs in %.2f s, %.3f GiB; with %zu PIECEWISE sizes (%zu graphs "
              "of pieces) %.2f s, %.3f GiB in all (goal <= 3 s, <= 0.5 GiB)\n",
              full_count, full_s, full_gib, ladder.size(), ladder.size() * (layers + 1), capture_s,
              gib);
  std::printf("graphs: replay/eager speedup at batch <= 8 at least %.2fx (goal >= 2x); ladder "
              "%.2f s, %.3f GiB\n",
              min_small_speedup, capture_s, gib);
  return 0;
}
