// The GPU rank's graph runner over the GPU decoder (the llama GPU fixture): a batch staged into the
// persistent buffers and padded to a captured
// size replays bit for bit what the eager forward of the same staged batch computes, for FULL
// (uniform decode, requests padded) and PIECEWISE (a mixed batch, tokens padded, attention
// eager), and its real rows agree with the eager step of the real requests alone. Tensor-parallel
// ranks sharing the GPU do the same with their all-reduces captured inside the graphs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "actors/rank/graph_runner.hpp"
#include "decoder_fixtures.hpp"
#include "gpu_support.hpp"
#include "kvactor/comm/collective_ledger.h"
#include "kvactor/comm/device_local_communicator.h"

namespace kvactor::kernels::gpu_test {
namespace {

using comm::collective_error;
using comm::collective_ledger;
using comm::collective_record;
using comm::collective_status;
using comm::communicator;
using comm::make_device_local_group;
using comm::reduce_op;

::testing::AssertionResult bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "the " << a.size() << " and " << b.size() << " floats differ";
}

// A batch as the rank hands it to the graph runner: the step and one metadata group, both from
// the runner's layout of its last prepared step.
struct staged_batch {
  kvactor::step_batch batch;
  std::shared_ptr<backend_metadata> meta = std::make_shared<backend_metadata>();
};

staged_batch batch_of(const decoder_cuda_runner& run, const std::vector<int32_t>& tokens) {
  const auto& l = run.layout();
  staged_batch s;
  s.meta->backend = "cuda";
  s.meta->common.num_reqs = static_cast<int32_t>(l.order.size());
  s.meta->common.num_actual_tokens = static_cast<int32_t>(tokens.size());
  s.meta->common.seq_lens = l.seq_lens;
  s.meta->common.query_start_loc = l.qsl;
  s.meta->common.block_table = l.table;
  s.meta->common.block_table_width = run.blocks_per_seq();
  s.meta->common.slot_mapping = l.slots;
  s.batch.token_ids = tokens;
  s.batch.positions.assign(l.positions.begin(), l.positions.end());
  for (size_t i = 0; i < l.order.size(); ++i)
    s.batch.request_ids.push_back(static_cast<uint64_t>(i + 1));
  return s;
}

// Three requests prefilled (30, 21 and 12 tokens) on the llama GPU fixture's decoder.
struct warm_cache {
  std::unique_ptr<loaded_decoder> d = fixture_decoder("llama", 64);
  decoder_cuda_runner run{*d->decoder, 3, 64};
  cudaStream_t stream = d->stream;
  int32_t hidden_size = d->decoder->hidden_size();

  warm_cache() { prefill(run, {30, 21, 12}); }

  // The step appending tokens[i] to sequence seqs[i], run eagerly alone, unpadded, into `out`;
  // returns it as the rank would stage it.
  staged_batch forward_alone(const std::vector<int32_t>& seqs, const std::vector<int32_t>& tokens,
                             device_array<float>& out) {
    const auto& step = run.prepare(seqs, tokens);
    EXPECT_TRUE(d->decoder->forward(step, run.views(), {}, out.get()).ok());
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    return batch_of(run, tokens);
  }

  // A graph runner (one metadata group) whose steps write `hidden`, first filled with 0xff (NaN)
  // so that a row left unwritten shows.
  expected<std::unique_ptr<graph_runner>> runner(device_array<float>& hidden,
                                                 const graph_runner_limits& limits) {
    hidden.fill_bytes(0xff);
    return graph_runner::create(*d->decoder, run.views(),
                                std::vector<int32_t>(run.views().size(), 0), 1, limits,
                                hidden.get());
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
                                     cudaStream_t stream, int32_t hidden_size,
                                     const std::function<void()>& before_replay = {}) {
  eager_and_replayed out;
  auto st = r.stage(b, {&meta}, graph.num_tokens, reqs);
  EXPECT_TRUE(st) << st.err().message;
  st = r.forward_eager(graph, reqs);
  EXPECT_TRUE(st) << st.err().message;
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  out.eager = rows_of(hidden, rows, hidden_size);
  hidden.fill_bytes(0xff);
  st = r.stage(b, {&meta}, graph.num_tokens, reqs);
  EXPECT_TRUE(st) << st.err().message;
  if (before_replay) before_replay();
  st = r.replay(graph, reqs);
  EXPECT_TRUE(st) << st.err().message;
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  out.replayed = rows_of(hidden, rows, hidden_size);
  return out;
}

// The graph's replay of the staged batch `b` against the eager forward of the same staging, and
// its real rows against `alone`, the eager step of the real requests alone (their first
// `real_tokens` rows).
void expect_replay_matches(graph_runner& r, const kvactor::step_batch& b,
                           const backend_metadata& meta, const batch_descriptor& graph,
                           int32_t reqs, device_array<float>& hidden,
                           const device_array<float>& alone, int32_t real_tokens,
                           const std::vector<int32_t>& sample_rows, const warm_cache& w) {
  const auto out =
      eager_then_replay(r, b, meta, graph, reqs, hidden, static_cast<size_t>(graph.num_tokens),
                        w.stream, w.hidden_size);
  // README.md and bench/RESULTS.md: a replay equals the eager forward of the same padded batch
  // bit for bit.
  EXPECT_TRUE(bit_identical(out.eager, out.replayed))
      << to_string(graph.mode) << " replay differs from the eager step of the same padded batch";
  // The real requests alone are not the same computation, and nothing claims bit equality for
  // them: the padded batch multiplies matrices with more rows, for which cuBLAS may pick another
  // kernel and summation order, so some activations may round to a neighbouring bf16 value.
  // Agreement within 1e-3 relative L2 over the real rows (this test's bound; a wrong row would
  // be off by order 1), and the same greedy tokens for these rows: a fixture whose greedy
  // margins are not near-ties (bench/RESULTS.md: a padded batch may flip a near-tie in long
  // runs).
  const auto rows = static_cast<size_t>(real_tokens);
  EXPECT_LE(relative_l2(rows_of(hidden, rows, w.hidden_size), alone.download()), 1e-3);
  auto& gpu = *w.d->decoder;
  sampled_rows t_alone, t_graph;
  ASSERT_CUDA_OK(gpu.sample(alone.get(), {sample_rows, {}, {}}, t_alone));
  ASSERT_CUDA_OK(gpu.sample(hidden.get(), {sample_rows, {}, {}}, t_graph));
  EXPECT_EQ(t_alone.tokens, t_graph.tokens);
}

TEST(GraphRunner, AFullGraphReplaysTheEagerStepOfThePaddedDecodeBitForBit) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  warm_cache w;
  device_array<float> alone(static_cast<size_t>(3) * w.hidden_size);
  const auto decode = w.forward_alone({0, 1, 2}, {5, 6, 7}, alone);

  device_array<float> hidden(static_cast<size_t>(8) * w.hidden_size);
  auto runner = w.runner(hidden, {8, 8, 8});
  ASSERT_TRUE(runner) << runner.err().message;
  auto& r = **runner;
  const auto& meta = decode.meta;
  const auto& b = decode.batch;
  const batch_descriptor graph{cudagraph_mode::full, 4, 4, 1, 0, 0, false, 1};
  auto st = r.capture(graph);
  ASSERT_TRUE(st) << st.err().message;
  EXPECT_GT(r.graph_bytes(), -1);
  // Eager over the staged batch padded to 4 requests; then the replay over the same staging.
  expect_replay_matches(r, b, *meta, graph, 4, hidden, alone, 3, {0, 1, 2}, w);
  // More requests than the graph holds: refused, nothing staged.
  EXPECT_FALSE(r.stage(b, {meta.get()}, 2, 2));
}

TEST(GraphRunner, APiecewiseGraphReplaysTheEagerStepOfAPaddedMixedBatchBitForBit) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  warm_cache w;
  // A mixed batch: two decodes and a chunk of 18 more tokens of the third request: 20 tokens.
  std::vector<int32_t> seqs{0, 1}, tokens{5, 6};
  for (int32_t i = 0; i < 18; ++i)
    seqs.push_back(2), tokens.push_back(100 + i);
  device_array<float> alone(static_cast<size_t>(20) * w.hidden_size);
  const auto mixed = w.forward_alone(seqs, tokens, alone);

  device_array<float> hidden(static_cast<size_t>(32) * w.hidden_size);
  auto runner = w.runner(hidden, {8, 32, 8});
  ASSERT_TRUE(runner) << runner.err().message;
  auto& r = **runner;
  const batch_descriptor graph{cudagraph_mode::piecewise, 24, 0, 0, 0, 0, false, 1};
  auto st = r.capture(graph);
  ASSERT_TRUE(st) << st.err().message;
  const auto& meta = mixed.meta;
  const auto& b = mixed.batch;
  // Eager over the staged batch padded to 24 tokens; then the replay over the same staging.
  expect_replay_matches(r, b, *meta, graph, 3, hidden, alone, 20, {0, 1, 19}, w);
  // A FULL graph of a mixed shape is refused by name.
  auto bad = r.capture({cudagraph_mode::full, 24, 3, 0, 0, 0, false, 1});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.err().message.find("uniform one-token decode"), std::string::npos);
}

// What one tensor-parallel rank's graphs gave: eager and replayed rows of a FULL decode graph and
// of a PIECEWISE mixed batch, and the collectives its ledger holds at the end.
struct tp_rank_result {
  eager_and_replayed full, piecewise;
  std::vector<collective_record> ledger;
};

// Rank `r` of the group: the warm cache of warm_cache (its shard of the llama fixture, the
// all-reduces through `comm`), then each graph captured, run eagerly and replayed.
void run_tp_rank(loaded_decoder& d, communicator& comm, const std::shared_ptr<communicator>& shared,
                 tp_rank_result& out) {
  cudaSetDevice(0);
  decoder_cuda_runner run(*d.decoder, 3, 64);
  run.set_all_reduce([&](float* buf, size_t count) -> cuda_status {
    try {
      comm.all_reduce(buf, count, reduce_op::sum, d.stream);
      return {};
    } catch (const collective_error& e) {
      return cuda_status::failure(cudaErrorUnknown, e.what());
    }
  });
  prefill(run, {30, 21, 12});
  const int32_t hidden_size = d.decoder->hidden_size();
  device_array<float> hidden(static_cast<size_t>(32) * hidden_size);
  hidden.fill_bytes(0xff);
  auto runner =
      graph_runner::create(*d.decoder, run.views(), std::vector<int32_t>(run.views().size(), 0), 1,
                           {8, 32, 8}, hidden.get(), shared);
  ASSERT_TRUE(runner) << runner.err().message;
  auto& g = **runner;
  // A replay waits on the device for the peers, and a memset or an allocation waits for the
  // whole device: the ranks meet on the host before each replay, as kvactor's ranks do.
  auto meet = [&] { comm.barrier(); };
  run.prepare({0, 1, 2}, {5, 6, 7});
  comm.barrier(); // prepare synchronizes the device, which no rank may do while a peer captures
  const auto decode = batch_of(run, {5, 6, 7});
  const batch_descriptor full{cudagraph_mode::full, 4, 4, 1, 0, 0, false, 1};
  auto st = g.capture(full);
  ASSERT_TRUE(st) << st.err().message;
  out.full = eager_then_replay(g, decode.batch, *decode.meta, full, 4, hidden, 4, d.stream,
                               hidden_size, meet);
  std::vector<int32_t> seqs{0, 1}, tokens{8, 9};
  for (int32_t i = 0; i < 18; ++i)
    seqs.push_back(2), tokens.push_back(100 + i);
  run.prepare(seqs, tokens);
  comm.barrier();
  const auto mixed = batch_of(run, tokens);
  const batch_descriptor piecewise{cudagraph_mode::piecewise, 24, 0, 0, 0, 0, false, 1};
  st = g.capture(piecewise);
  ASSERT_TRUE(st) << st.err().message;
  out.piecewise = eager_then_replay(g, mixed.batch, *mixed.meta, piecewise, 3, hidden, 24, d.stream,
                                    hidden_size, meet);
  comm.synchronize();
  out.ledger = comm.ledger().entries();
}

TEST(GraphRunner, TensorParallelRanksReplayTheirEagerStepsWithTheAllReducesInside) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  constexpr int tp = 2;
  std::vector<std::unique_ptr<loaded_decoder>> shards;
  for (int r = 0; r < tp; ++r) {
    shards.push_back(fixture_decoder("llama", 64, tp, r));
    ASSERT_TRUE(shards.back()->error.empty()) << shards.back()->error;
  }
  auto comms = make_device_local_group(tp, 0, std::chrono::seconds(60));
  std::vector<tp_rank_result> results(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r)
    threads.emplace_back([&, r] {
      const auto i = static_cast<size_t>(r);
      try {
        run_tp_rank(*shards[i], *comms[i], comms[i], results[i]);
      } catch (const collective_error& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
        comms[i]->abort(e.what()); // the peer must not wait for this rank
      }
    });
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < tp; ++r) {
    const auto& got = results[static_cast<size_t>(r)];
    EXPECT_TRUE(bit_identical(got.full.eager, got.full.replayed)) << "FULL, rank " << r;
    EXPECT_TRUE(bit_identical(got.piecewise.eager, got.piecewise.replayed))
        << "PIECEWISE, rank " << r;
    // One rank-order reduction for all: every rank holds rank 0's rows.
    EXPECT_TRUE(bit_identical(got.full.replayed, results[0].full.replayed)) << "rank " << r;
    EXPECT_TRUE(bit_identical(got.piecewise.replayed, results[0].piecewise.replayed))
        << "rank " << r;
    // Replays entered their all-reduces into the ledger as eager steps do, all completed.
    ASSERT_FALSE(got.ledger.empty());
    for (const auto& e : got.ledger)
      EXPECT_EQ(e.status, collective_status::completed) << describe(e);
    EXPECT_EQ(got.ledger.size(), results[0].ledger.size()) << "rank " << r;
  }
}

} // namespace
} // namespace kvactor::kernels::gpu_test
