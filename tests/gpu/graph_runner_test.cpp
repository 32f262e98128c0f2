// The GPU rank's graph runner: a uniform decode batch staged into the persistent buffers, padded
// to a captured size, replays to the same rows as an eager step of the real requests.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "actors/rank/graph_runner.hpp"
#include "stack_cuda_support.hpp"

namespace kvactor::kernels::gpu_test {
namespace {

TEST(GraphRunner, APaddedDecodeReplayMatchesTheEagerStepOfTheRealRequests) {
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
  std::mt19937 rng(9);
  std::vector<test::sequence> seqs(3);
  for (auto& s : seqs)
    for (int i = 0; i < 30; ++i)
      s.tokens.push_back(static_cast<int32_t>(rng() % 1024));
  const std::vector<test::sequence*> all = {&seqs[0], &seqs[1], &seqs[2]};
  const auto prefill = test::schedule(all, {30, 21, 12}, pool, block_size, 0);
  const device_batch pb(prefill, cfg.layers.size());
  device_array<float> ph(static_cast<size_t>(prefill.num_tokens()) * cfg.hidden_size);
  ASSERT_CUDA_OK(gpu.forward(pb.step, dev.views, {}, ph.get()));
  for (auto* s : all)
    if (s->computed == static_cast<int32_t>(s->tokens.size()))
      s->tokens.push_back(static_cast<int32_t>(rng() % 1024));
  const auto decode = test::schedule(all, {1, 1, 1}, pool, block_size, 0);

  // Eager: the three real requests.
  const device_batch db(decode, cfg.layers.size());
  device_array<float> eager(static_cast<size_t>(3) * cfg.hidden_size);
  ASSERT_CUDA_OK(gpu.forward(db.step, dev.views, {}, eager.get()));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  // Graph: the same step as the rank's builders describe it, padded to 4 requests.
  step_batch b;
  b.token_ids = decode.token_ids;
  b.positions.assign(decode.positions.begin(), decode.positions.end());
  b.request_ids = {1, 2, 3};
  auto meta = std::make_shared<backend_metadata>();
  meta->backend = "cuda";
  meta->common.num_reqs = 3;
  meta->common.num_actual_tokens = 3;
  meta->common.seq_lens = decode.seq_lens;
  meta->common.query_start_loc = decode.query_start_loc;
  meta->common.block_table = decode.block_table;
  meta->common.block_table_width = decode.width;
  meta->common.slot_mapping = decode.slot_mapping;
  device_array<float> hidden(static_cast<size_t>(8) * cfg.hidden_size);
  hidden.fill_bytes(0xff);
  auto runner = graph_runner::create(gpu, dev.views, std::vector<int32_t>(cfg.layers.size(), 0), 1,
                                     8, 8, hidden.get());
  ASSERT_TRUE(runner) << runner.err().message;
  auto& r = **runner;
  auto st = r.stage(b, {meta.get()}, 4);
  ASSERT_TRUE(st) << st.err().message;
  st = r.capture(4);
  ASSERT_TRUE(st) << st.err().message;
  st = r.replay(4);
  ASSERT_TRUE(st) << st.err().message;
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const auto want = eager.download();
  auto got = hidden.download();
  got.resize(want.size());
  EXPECT_LE(rel_l2(got, want), 1e-3) << "real rows of the padded replay";
  std::vector<int32_t> rows{0, 1, 2}, t_eager, t_graph;
  ASSERT_CUDA_OK(gpu.sample(eager.get(), rows, t_eager));
  ASSERT_CUDA_OK(gpu.sample(hidden.get(), rows, t_graph));
  EXPECT_EQ(t_eager, t_graph);
  EXPECT_GT(r.buffer_bytes(), 0);
  // More requests than the graph holds: refused, nothing staged.
  EXPECT_FALSE(r.stage(b, {meta.get()}, 2));
}

} // namespace
} // namespace kvactor::kernels::gpu_test
