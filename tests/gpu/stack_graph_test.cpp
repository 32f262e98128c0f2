// CUDA graphs of the GPU stack: a FULL replay equals the eager forward bit for bit for the same
// batch, reads its inputs from the persistent buffers at replay time, and is faster than eager
// for small decode batches; a PIECEWISE replay (attention eager between the pieces) equals the
// eager forward of a mixed batch bit for bit, and is faster too.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

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
  // Four prompts of 30 tokens prefilled eagerly, then a uniform decode step: the graph's batch.
  prefilled_stack w(5, 4, 30, {30, 30, 30, 30});
  const stack_config& cfg = w.cfg;
  auto& gpu = w.gpu();
  cudaStream_t stream = w.on.stream;
  w.extend_finished();
  const auto decode = test::schedule(w.all, {1, 1, 1, 1}, w.pool, w.block_size, 0);
  device_batch db(decode, cfg.layers.size());
  const size_t n = static_cast<size_t>(decode.num_tokens()) * cfg.hidden_size;
  device_array<float> eager(n), replayed(n);
  eager.fill_bytes(0xff);
  replayed.fill_bytes(0xff);
  ASSERT_CUDA_OK(gpu.forward(db.step, w.dev.views, {}, eager.get()));

  auto captured = stack_graph::capture(gpu, db.step, w.dev.views, replayed.get());
  ASSERT_TRUE(captured.status.ok()) << captured.status.message();
  auto& graph = *captured.graph;
  ASSERT_CUDA_OK(graph.replay());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  auto e = eager.download(), r = replayed.download();
  EXPECT_TRUE(test::bit_identical(e, r)) << "replay differs from eager";

  // New tokens written into the same buffers: the replay computes with them.
  std::vector<int32_t> other(decode.token_ids.size());
  for (auto& t : other)
    t = w.random_token();
  cuda_or_throw(cudaMemcpy(db.token_ids.get(), other.data(), other.size() * sizeof(int32_t),
                           cudaMemcpyHostToDevice),
                "tokens");
  ASSERT_CUDA_OK(gpu.forward(db.step, w.dev.views, {}, eager.get()));
  ASSERT_CUDA_OK(graph.replay());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  auto e2 = eager.download(), r2 = replayed.download();
  EXPECT_TRUE(test::bit_identical(e2, r2)) << "replay with the new tokens differs from eager";
  EXPECT_NE(std::memcmp(e.data(), e2.data(), e.size() * sizeof(float)), 0)
      << "the new tokens changed nothing";

  const double eager_us =
      mean_us([&] { (void)gpu.forward(db.step, w.dev.views, {}, eager.get()); }, stream, 200);
  const double replay_us = mean_us([&] { (void)graph.replay(); }, stream, 200);
  std::printf("[ graph    ] %zu nodes, %lld bytes; decode step of 4 x %zu layers: eager %.1f us, "
              "replay %.1f us (%.2fx)\n",
              graph.nodes(), static_cast<long long>(graph.bytes()), cfg.layers.size(), eager_us,
              replay_us, eager_us / replay_us);
  EXPECT_GT(graph.nodes(), cfg.layers.size());
  // This small stack is launch-bound: bench/RESULTS.md measured the replay 2.64x faster than
  // eager on the H200. Asserted only as faster, since timings on a shared GPU vary.
  EXPECT_LT(replay_us, eager_us) << "the replay is not faster than eager";
}

TEST(PiecewiseGraph, ReplayWithEagerAttentionEqualsEagerBitForBit) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  // Three prompts of 40 tokens, of which 40, 30 and 9 are prefilled eagerly.
  prefilled_stack w(7, 3, 40, {40, 30, 9});
  const stack_config& cfg = w.cfg;
  auto& gpu = w.gpu();
  cudaStream_t stream = w.on.stream;
  w.seqs[0].tokens.push_back(5);
  // A mixed step (a decode, two chunks of prefill) with 3 padding tokens.
  const auto mixed = test::schedule(w.all, {1, 10, 12}, w.pool, w.block_size, 3);
  const device_batch mb(mixed, cfg.layers.size());
  const size_t n = static_cast<size_t>(mixed.num_tokens()) * cfg.hidden_size;
  device_array<float> eager(n), replayed(n);
  eager.fill_bytes(0xff);
  replayed.fill_bytes(0xff);
  // The KV writes of the eager step are repeated by the replay (same slots, same values).
  ASSERT_CUDA_OK(gpu.forward(mb.step, w.dev.views, {}, eager.get()));
  auto captured = piecewise_graph::capture(gpu, mb.step, replayed.get());
  ASSERT_TRUE(captured.status.ok()) << captured.status.message();
  auto& graph = *captured.graph;
  EXPECT_EQ(graph.pieces(), cfg.layers.size() + 1);
  ASSERT_CUDA_OK(graph.replay(mb.step, w.dev.views));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(test::bit_identical(eager.download(), replayed.download()))
      << "piecewise replay differs from eager";
  // Another token count than the captured one is refused by name.
  device_step other = mb.step;
  other.num_tokens -= 1;
  auto refused = graph.replay(other, w.dev.views);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("not the one captured"), std::string::npos);
  const double eager_us =
      mean_us([&] { (void)gpu.forward(mb.step, w.dev.views, {}, eager.get()); }, stream, 200);
  const double replay_us = mean_us([&] { (void)graph.replay(mb.step, w.dev.views); }, stream, 200);
  std::printf("[ piecewise] %zu pieces, %zu nodes, %lld bytes; mixed step of %d tokens: eager "
              "%.1f us, replay %.1f us (%.2fx)\n",
              graph.pieces(), graph.nodes(), static_cast<long long>(graph.bytes()),
              mixed.num_tokens(), eager_us, replay_us, eager_us / replay_us);
  // bench/RESULTS.md measured this step 1.96x faster replayed on the H200; asserted only as
  // faster, since timings on a shared GPU vary.
  EXPECT_LT(replay_us, eager_us) << "the piecewise replay is not faster than eager";
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
