// The GPU rank's graph runner: a batch staged into the persistent buffers and padded to a captured
// size replays bit for bit what the eager forward of the same staged batch computes, for FULL
// (uniform decode, requests padded) and PIECEWISE (a mixed batch, tokens padded, attention
// eager), and its real rows agree with the eager step of the real requests alone.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>

#include "actors/rank/graph_runner.hpp"
#include "stack_cuda_support.hpp"

namespace kvactor::kernels::gpu_test {
namespace {

constexpr int32_t block_size = 16;

// The metadata the rank's builders would hand over for a scheduled test batch.
std::shared_ptr<backend_metadata> metadata_of(const test::step_batch& s) {
  auto meta = std::make_shared<backend_metadata>();
  meta->backend = "cuda";
  meta->common.num_reqs = s.num_reqs();
  meta->common.num_actual_tokens = s.num_tokens();
  meta->common.seq_lens = s.seq_lens;
  meta->common.query_start_loc = s.query_start_loc;
  meta->common.block_table = s.block_table;
  meta->common.block_table_width = s.width;
  meta->common.slot_mapping = s.slot_mapping;
  return meta;
}

kvactor::step_batch batch_of(const test::step_batch& s) {
  kvactor::step_batch b;
  b.token_ids = s.token_ids;
  b.positions.assign(s.positions.begin(), s.positions.end());
  for (int32_t i = 0; i < s.num_reqs(); ++i)
    b.request_ids.push_back(static_cast<uint64_t>(i + 1));
  return b;
}

// Three requests prefilled (30, 21 and 12 of their 30 tokens) on the GPU stack.
struct warm_cache {
  stack_config cfg = small_config();
  stack_on_stream on{cfg, 128};
  attention_stack cpu{cfg};
  test::stack_cache host{cpu, 64, block_size, element_type::bf16};
  device_cache dev{cpu, host};
  test::block_pool pool{64, 5};
  std::mt19937 rng{9};
  std::vector<test::sequence> seqs = std::vector<test::sequence>(3);
  std::vector<test::sequence*> all;

  warm_cache() {
    for (auto& s : seqs) {
      for (int i = 0; i < 30; ++i)
        s.tokens.push_back(static_cast<int32_t>(rng() % 1024));
      all.push_back(&s);
    }
    const auto prefill = test::schedule(all, {30, 21, 12}, pool, block_size, 0);
    const device_batch pb(prefill, cfg.layers.size());
    device_array<float> ph(static_cast<size_t>(prefill.num_tokens()) * cfg.hidden_size);
    if (auto st = on.stack->forward(pb.step, dev.views, {}, ph.get()); !st)
      throw std::runtime_error(st.message());
    cuda_or_throw(cudaStreamSynchronize(on.stream), "prefill");
    for (auto* s : all)
      if (s->computed == static_cast<int32_t>(s->tokens.size()))
        s->tokens.push_back(static_cast<int32_t>(rng() % 1024));
  }
};

std::vector<float> rows_of(const device_array<float>& a, size_t rows, int32_t hidden) {
  auto v = a.download();
  v.resize(rows * static_cast<size_t>(hidden));
  return v;
}

// The batch staged and run eagerly, then staged again and replayed: both outputs (`rows` rows).
struct eager_and_replayed {
  std::vector<float> eager, replayed;
};

eager_and_replayed eager_then_replay(graph_runner& r, const kvactor::step_batch& b,
                                     const backend_metadata& meta, const batch_descriptor& graph,
                                     int32_t reqs, device_array<float>& hidden, size_t rows,
                                     const warm_cache& w) {
  eager_and_replayed out;
  auto st = r.stage(b, {&meta}, graph.num_tokens, reqs);
  EXPECT_TRUE(st) << st.err().message;
  st = r.forward_eager(graph, reqs);
  EXPECT_TRUE(st) << st.err().message;
  EXPECT_EQ(cudaStreamSynchronize(w.on.stream), cudaSuccess);
  out.eager = rows_of(hidden, rows, w.cfg.hidden_size);
  hidden.fill_bytes(0xff);
  st = r.stage(b, {&meta}, graph.num_tokens, reqs);
  EXPECT_TRUE(st) << st.err().message;
  st = r.replay(graph, reqs);
  EXPECT_TRUE(st) << st.err().message;
  EXPECT_EQ(cudaStreamSynchronize(w.on.stream), cudaSuccess);
  out.replayed = rows_of(hidden, rows, w.cfg.hidden_size);
  return out;
}

TEST(GraphRunner, AFullGraphReplaysTheEagerStepOfThePaddedDecodeBitForBit) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  warm_cache w;
  auto& gpu = *w.on.stack;
  const auto decode = test::schedule(w.all, {1, 1, 1}, w.pool, block_size, 0);
  // The real requests alone, eagerly.
  const device_batch db(decode, w.cfg.layers.size());
  device_array<float> alone(static_cast<size_t>(3) * w.cfg.hidden_size);
  ASSERT_CUDA_OK(gpu.forward(db.step, w.dev.views, {}, alone.get()));

  device_array<float> hidden(static_cast<size_t>(8) * w.cfg.hidden_size);
  hidden.fill_bytes(0xff);
  auto runner = graph_runner::create(gpu, w.dev.views, std::vector<int32_t>(w.cfg.layers.size(), 0),
                                     1, {8, 8, 8}, hidden.get());
  ASSERT_TRUE(runner) << runner.err().message;
  auto& r = **runner;
  const auto meta = metadata_of(decode);
  const auto b = batch_of(decode);
  const batch_descriptor graph{cudagraph_mode::full, 4, 4, 1, 0, 0, false, 1};
  auto st = r.capture(graph);
  ASSERT_TRUE(st) << st.err().message;
  EXPECT_GT(r.graph_bytes(), -1);
  // Eager over the staged, padded batch; then the replay over the same staging.
  const auto out = eager_then_replay(r, b, *meta, graph, 4, hidden, 4, w);
  EXPECT_EQ(std::memcmp(out.eager.data(), out.replayed.data(), out.eager.size() * sizeof(float)), 0)
      << "FULL replay differs from the eager step of the same padded batch";
  // The real rows against the three requests alone: the same tokens.
  EXPECT_LE(rel_l2(rows_of(hidden, 3, w.cfg.hidden_size), alone.download()), 1e-3);
  std::vector<int32_t> rows{0, 1, 2}, t_alone, t_graph;
  ASSERT_CUDA_OK(gpu.sample(alone.get(), rows, t_alone));
  ASSERT_CUDA_OK(gpu.sample(hidden.get(), rows, t_graph));
  EXPECT_EQ(t_alone, t_graph);
  // More requests than the graph holds: refused, nothing staged.
  EXPECT_FALSE(r.stage(b, {meta.get()}, 2, 2));
}

TEST(GraphRunner, APiecewiseGraphReplaysTheEagerStepOfAPaddedMixedBatchBitForBit) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  warm_cache w;
  auto& gpu = *w.on.stack;
  // A mixed batch: two decodes and the rest of the third prompt (18 tokens): 20 tokens.
  const auto mixed = test::schedule(w.all, {1, 1, 18}, w.pool, block_size, 0);
  ASSERT_EQ(mixed.num_tokens(), 20);
  const device_batch mb(mixed, w.cfg.layers.size());
  device_array<float> alone(static_cast<size_t>(20) * w.cfg.hidden_size);
  ASSERT_CUDA_OK(gpu.forward(mb.step, w.dev.views, {}, alone.get()));

  device_array<float> hidden(static_cast<size_t>(32) * w.cfg.hidden_size);
  auto runner = graph_runner::create(gpu, w.dev.views, std::vector<int32_t>(w.cfg.layers.size(), 0),
                                     1, {8, 32, 8}, hidden.get());
  ASSERT_TRUE(runner) << runner.err().message;
  auto& r = **runner;
  const batch_descriptor graph{cudagraph_mode::piecewise, 24, 0, 0, 0, 0, false, 1};
  auto st = r.capture(graph);
  ASSERT_TRUE(st) << st.err().message;
  const auto meta = metadata_of(mixed);
  const auto b = batch_of(mixed);
  const auto out = eager_then_replay(r, b, *meta, graph, 3, hidden, 24, w);
  EXPECT_EQ(std::memcmp(out.eager.data(), out.replayed.data(), out.eager.size() * sizeof(float)), 0)
      << "PIECEWISE replay differs from the eager step of the same padded batch";
  EXPECT_LE(rel_l2(rows_of(hidden, 20, w.cfg.hidden_size), alone.download()), 1e-3);
  std::vector<int32_t> rows{0, 1, 19}, t_alone, t_graph;
  ASSERT_CUDA_OK(gpu.sample(alone.get(), rows, t_alone));
  ASSERT_CUDA_OK(gpu.sample(hidden.get(), rows, t_graph));
  EXPECT_EQ(t_alone, t_graph);
  // A FULL graph of a mixed shape is refused by name.
  auto bad = r.capture({cudagraph_mode::full, 24, 3, 0, 0, 0, false, 1});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.err().message.find("uniform one-token decode"), std::string::npos);
}

} // namespace
} // namespace kvactor::kernels::gpu_test
