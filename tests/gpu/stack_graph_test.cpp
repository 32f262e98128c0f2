// CUDA graphs of the GPU decoder (the llama GPU fixture): a FULL replay equals the eager forward
// bit for bit for the same batch and reads its inputs from the persistent buffers at replay time;
// a PIECEWISE replay (attention eager between the pieces) equals the eager forward of a mixed
// batch bit for bit. How much faster a replay is than eager is measured by bench/graph_bench.cpp
// (a test on a shared GPU cannot say it reliably).
#include <gtest/gtest.h>

#include <cstring>

#include "decoder_fixtures.hpp"
#include "gpu_support.hpp"
#include "kvactor/kernels/cuda/stack_graph.h"

namespace kvactor::kernels::gpu_test {
namespace {

std::vector<float> download(const device_vec<float>& d, size_t n) {
  std::vector<float> h(n);
  check_call(cudaMemcpy(h.data(), d.get(), n * sizeof(float), cudaMemcpyDeviceToHost), "download");
  return h;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(StackGraph, ReplayEqualsEagerBitForBitAndReadsThePersistentInputs) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const auto d = fixture_decoder("llama", 256);
  ASSERT_TRUE(d->error.empty()) << d->error;
  auto& gpu = *d->decoder;
  decoder_cuda_runner run(gpu, 4, 64);
  prefill(run, {30, 30, 30, 30});
  ASSERT_CUDA_OK(run.status());
  // A uniform decode step of the four sequences: the graph's batch.
  const auto& step = run.prepare({0, 1, 2, 3}, {5, 6, 7, 8});
  const size_t n = 4 * static_cast<size_t>(gpu.hidden_size());
  device_vec<float> eager(n), replayed(n);
  ASSERT_CUDA_OK(gpu.forward(step, run.views(), {}, eager.get()));
  auto captured = stack_graph::capture(gpu, step, run.views(), replayed.get());
  ASSERT_TRUE(captured.status.ok()) << captured.status.message();
  auto& graph = *captured.graph;
  ASSERT_CUDA_OK(graph.replay());
  ASSERT_EQ(cudaStreamSynchronize(d->stream), cudaSuccess);
  const auto e = download(eager, n), r = download(replayed, n);
  EXPECT_TRUE(same_bits(e, r)) << "replay differs from eager";

  // New tokens written into the same buffers: the replay computes with them.
  const std::vector<int32_t> other{40, 41, 42, 43};
  check_call(cudaMemcpy(run.token_ids(), other.data(), other.size() * sizeof(int32_t),
                        cudaMemcpyHostToDevice),
             "tokens");
  ASSERT_CUDA_OK(gpu.forward(step, run.views(), {}, eager.get()));
  ASSERT_CUDA_OK(graph.replay());
  ASSERT_EQ(cudaStreamSynchronize(d->stream), cudaSuccess);
  const auto e2 = download(eager, n), r2 = download(replayed, n);
  EXPECT_TRUE(same_bits(e2, r2)) << "replay with the new tokens differs from eager";
  EXPECT_FALSE(same_bits(e, e2)) << "the new tokens changed nothing";

  EXPECT_GT(graph.nodes(), run.views().size());
}

TEST(PiecewiseGraph, ReplayWithEagerAttentionEqualsEagerBitForBit) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const auto d = fixture_decoder("llama", 256);
  ASSERT_TRUE(d->error.empty()) << d->error;
  auto& gpu = *d->decoder;
  decoder_cuda_runner run(gpu, 3, 64);
  prefill(run, {20, 20, 20});
  ASSERT_CUDA_OK(run.status());
  // A mixed step: a decode of sequence 0 and prefill chunks of 10 and 12 tokens.
  std::vector<int32_t> seqs{0}, tokens{5};
  for (int32_t s : {1, 2})
    for (int32_t i = 0; i < (s == 1 ? 10 : 12); ++i)
      seqs.push_back(s), tokens.push_back(100 + i);
  const auto& step = run.prepare(seqs, tokens);
  const size_t n = tokens.size() * static_cast<size_t>(gpu.hidden_size());
  device_vec<float> eager(n), replayed(n);
  // The KV writes of the eager step are repeated by the replay (same slots, same values).
  ASSERT_CUDA_OK(gpu.forward(step, run.views(), {}, eager.get()));
  auto captured = piecewise_graph::capture(gpu, step, replayed.get());
  ASSERT_TRUE(captured.status.ok()) << captured.status.message();
  auto& graph = *captured.graph;
  EXPECT_EQ(graph.pieces(), run.views().size() + 1);
  ASSERT_CUDA_OK(graph.replay(step, run.views()));
  ASSERT_EQ(cudaStreamSynchronize(d->stream), cudaSuccess);
  EXPECT_TRUE(same_bits(download(eager, n), download(replayed, n)))
      << "piecewise replay differs from eager";
  // Another token count than the captured one is refused by name.
  device_step other = step;
  other.num_tokens -= 1;
  auto refused = graph.replay(other, run.views());
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("not the one captured"), std::string::npos);
}

TEST(StackGraph, RefusesEmptySteps) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const auto d = fixture_decoder("llama", 16);
  ASSERT_TRUE(d->error.empty()) << d->error;
  device_step empty;
  auto r = stack_graph::capture(*d->decoder, empty, {}, nullptr);
  EXPECT_FALSE(r.status.ok());
  EXPECT_FALSE(r.graph);
  EXPECT_NE(r.status.message().find("stack_graph::capture"), std::string::npos)
      << r.status.message();
}

} // namespace
} // namespace kvactor::kernels::gpu_test
