// FULL CUDA graphs of the GPU stack: a replay equals the eager forward bit for bit for the same
// batch, reads its inputs from the persistent buffers at replay time, and is faster than eager
// for small decode batches.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>

#include "kvactor/kernels/cuda/stack_graph.h"
#include "stack_cuda_support.hpp"

namespace kvactor::kernels::gpu_test {
namespace {

double mean_us(const std::function<void()>& f, cudaStream_t s, int n) {
  f();
  cudaStreamSynchronize(s);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i)
    f();
  cudaStreamSynchronize(s);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count()
         / n;
}

TEST(StackGraph, ReplayEqualsEagerBitForBitAndReadsThePersistentInputs) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const stack_config cfg = small_config();
  stack_on_stream on(cfg, 128);
  ASSERT_TRUE(on.stack);
  auto& gpu = *on.stack;
  cudaStream_t stream = on.stream;
  const attention_stack cpu(cfg);
  constexpr int32_t block_size = 16;
  test::stack_cache host(cpu, 64, block_size, element_type::bf16);
  const device_cache dev(cpu, host);
  test::block_pool pool(64, 5);
  std::mt19937 rng(5);
  std::vector<test::sequence> seqs(4);
  for (auto& s : seqs)
    for (int i = 0; i < 30; ++i)
      s.tokens.push_back(static_cast<int32_t>(rng() % 1024));
  const std::vector<test::sequence*> all = {&seqs[0], &seqs[1], &seqs[2], &seqs[3]};
  // Prefill eagerly, then a uniform decode step of 4 requests: the graph's batch.
  const auto prefill = test::schedule(all, {30, 30, 30, 30}, pool, block_size, 0);
  const device_batch pb(prefill, cfg.layers.size());
  device_array<float> ph(static_cast<size_t>(prefill.num_tokens()) * cfg.hidden_size);
  ASSERT_CUDA_OK(gpu.forward(pb.step, dev.views, {}, ph.get()));
  for (auto* s : all)
    s->tokens.push_back(static_cast<int32_t>(rng() % 1024));
  const auto decode = test::schedule(all, {1, 1, 1, 1}, pool, block_size, 0);
  device_batch db(decode, cfg.layers.size());
  const size_t n = static_cast<size_t>(decode.num_tokens()) * cfg.hidden_size;
  device_array<float> eager(n), replayed(n);
  eager.fill_bytes(0xff);
  replayed.fill_bytes(0xff);
  ASSERT_CUDA_OK(gpu.forward(db.step, dev.views, {}, eager.get()));

  auto captured = stack_graph::capture(gpu, db.step, dev.views, replayed.get());
  ASSERT_TRUE(captured.status.ok()) << captured.status.message();
  auto& graph = *captured.graph;
  ASSERT_CUDA_OK(graph.replay());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  auto e = eager.download(), r = replayed.download();
  ASSERT_EQ(e.size(), r.size());
  EXPECT_EQ(std::memcmp(e.data(), r.data(), e.size() * sizeof(float)), 0)
      << "replay differs from eager";

  // New tokens written into the same buffers: the replay computes with them.
  std::vector<int32_t> other(decode.token_ids.size());
  for (auto& t : other)
    t = static_cast<int32_t>(rng() % 1024);
  cuda_or_throw(cudaMemcpy(db.token_ids.get(), other.data(), other.size() * sizeof(int32_t),
                           cudaMemcpyHostToDevice),
                "tokens");
  ASSERT_CUDA_OK(gpu.forward(db.step, dev.views, {}, eager.get()));
  ASSERT_CUDA_OK(graph.replay());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  auto e2 = eager.download(), r2 = replayed.download();
  EXPECT_EQ(std::memcmp(e2.data(), r2.data(), e2.size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(e.data(), e2.data(), e.size() * sizeof(float)), 0)
      << "the new tokens changed nothing";

  const double eager_us =
      mean_us([&] { (void)gpu.forward(db.step, dev.views, {}, eager.get()); }, stream, 200);
  const double replay_us = mean_us([&] { (void)graph.replay(); }, stream, 200);
  std::printf("[ graph    ] %zu nodes, %lld bytes; decode step of 4 x %zu layers: eager %.1f us, "
              "replay %.1f us (%.2fx)\n",
              graph.nodes(), static_cast<long long>(graph.bytes()), cfg.layers.size(), eager_us,
              replay_us, eager_us / replay_us);
  EXPECT_GT(graph.nodes(), cfg.layers.size());
}

TEST(PiecewiseGraph, ReplayWithEagerAttentionEqualsEagerBitForBit) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const stack_config cfg = small_config();
  stack_on_stream on(cfg, 128);
  ASSERT_TRUE(on.stack);
  auto& gpu = *on.stack;
  cudaStream_t stream = on.stream;
  const attention_stack cpu(cfg);
  constexpr int32_t block_size = 16;
  test::stack_cache host(cpu, 64, block_size, element_type::bf16);
  const device_cache dev(cpu, host);
  test::block_pool pool(64, 5);
  std::mt19937 rng(7);
  std::vector<test::sequence> seqs(3);
  for (auto& s : seqs)
    for (int i = 0; i < 40; ++i)
      s.tokens.push_back(static_cast<int32_t>(rng() % 1024));
  const std::vector<test::sequence*> all = {&seqs[0], &seqs[1], &seqs[2]};
  const auto first = test::schedule(all, {40, 30, 9}, pool, block_size, 0);
  const device_batch fb(first, cfg.layers.size());
  device_array<float> fh(static_cast<size_t>(first.num_tokens()) * cfg.hidden_size);
  ASSERT_CUDA_OK(gpu.forward(fb.step, dev.views, {}, fh.get()));
  seqs[0].tokens.push_back(5);
  // A mixed step (a decode, two chunks of prefill) with 3 padding tokens.
  const auto mixed = test::schedule(all, {1, 10, 12}, pool, block_size, 3);
  const device_batch mb(mixed, cfg.layers.size());
  const size_t n = static_cast<size_t>(mixed.num_tokens()) * cfg.hidden_size;
  device_array<float> eager(n), replayed(n);
  eager.fill_bytes(0xff);
  replayed.fill_bytes(0xff);
  // The KV writes of the eager step are repeated by the replay (same slots, same values).
  ASSERT_CUDA_OK(gpu.forward(mb.step, dev.views, {}, eager.get()));
  auto captured = piecewise_graph::capture(gpu, mb.step, replayed.get());
  ASSERT_TRUE(captured.status.ok()) << captured.status.message();
  auto& graph = *captured.graph;
  EXPECT_EQ(graph.pieces(), cfg.layers.size() + 1);
  ASSERT_CUDA_OK(graph.replay(mb.step, dev.views));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  auto e = eager.download(), r = replayed.download();
  EXPECT_EQ(std::memcmp(e.data(), r.data(), e.size() * sizeof(float)), 0)
      << "piecewise replay differs from eager";
  // Another token count than the captured one is refused by name.
  device_step other = mb.step;
  other.num_tokens -= 1;
  auto refused = graph.replay(other, dev.views);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("not the one captured"), std::string::npos);
  const double eager_us =
      mean_us([&] { (void)gpu.forward(mb.step, dev.views, {}, eager.get()); }, stream, 200);
  const double replay_us = mean_us([&] { (void)graph.replay(mb.step, dev.views); }, stream, 200);
  std::printf("[ piecewise] %zu pieces, %zu nodes, %lld bytes; mixed step of %d tokens: eager "
              "%.1f us, replay %.1f us (%.2fx)\n",
              graph.pieces(), graph.nodes(), static_cast<long long>(graph.bytes()),
              mixed.num_tokens(), eager_us, replay_us, eager_us / replay_us);
}

TEST(StackGraph, RefusesTheDefaultStreamAndEmptySteps) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_stack_cuda_options opt;
  opt.max_tokens = 16;
  auto created = attention_stack_cuda::create(small_config(), opt);
  ASSERT_TRUE(created.status.ok()) << created.status.message();
  device_step empty;
  auto r = stack_graph::capture(*created.stack, empty, {}, nullptr);
  EXPECT_FALSE(r.status.ok());
  EXPECT_FALSE(r.graph);
  EXPECT_NE(r.status.message().find("stack_graph::capture"), std::string::npos)
      << r.status.message();
}

} // namespace
} // namespace kvactor::kernels::gpu_test
