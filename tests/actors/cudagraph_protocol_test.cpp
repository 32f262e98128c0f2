// cudagraph protocol: plan (mode resolution against the device and attention support), then
// dispatch of batches to a captured graph or eager mode.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/cudagraph/actor.hpp"
#include "actors/spawn_plain.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/recorder.hpp"

namespace kvactor::test {
namespace {

using ::testing::HasSubstr;

cudagraph_request request_for(bool gpu, graph_support support) {
  cudagraph_request r;
  r.requested = cudagraph_mode::full_and_piecewise;
  r.support = {support, support == graph_support::always ? "" : "reference"};
  r.max_num_seqs = 16;
  r.max_num_batched_tokens = 256;
  r.num_blocks = 1024;
  r.gpu = gpu;
  return r;
}

class CudagraphProtocol : public deterministic_fixture {
protected:
  cudagraph_actor graphs = spawn(plain<&cudagraph>, nullptr);
  recorder_handle rec = track(spawn_recorder(sys));

  CudagraphProtocol() { run_all(); }

  std::optional<cudagraph_plan> plan(const cudagraph_request& r) {
    inject(rec.actor, graphs, atom::plan_v, r);
    run_once(graphs);
    return expect_reply<cudagraph_plan>(graphs, rec.actor);
  }

  // The rank reports every graph of the plan captured (what start-up capture does).
  void capture_all(const cudagraph_plan& p) {
    for (const auto* list : {&p.full_graphs, &p.piecewise_graphs})
      for (const auto& g : *list) {
        inject(rec.actor, graphs, cudagraph_captured{g, 4096, 1000, ""});
        run_once(graphs);
        ASSERT_TRUE(expect_reply<int64_t>(graphs, rec.actor));
      }
  }

  // rec -> graphs: dispatch(num_reqs, num_tokens, uniform); the reply stays for the test.
  void dispatch(int32_t num_reqs, int32_t num_tokens, int32_t uniform) {
    inject(rec.actor, graphs, atom::dispatch_v, num_reqs, num_tokens, uniform);
    run_once(graphs);
  }
};

TEST_F(CudagraphProtocol, PlansModeNoneWithANoteOnCpu) {
  auto p = plan(request_for(false, graph_support::always));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->requested, cudagraph_mode::full_and_piecewise);
  EXPECT_EQ(p->mode, cudagraph_mode::none);
  EXPECT_TRUE(p->full_graphs.empty());
  EXPECT_TRUE(p->piecewise_graphs.empty());
  ASSERT_FALSE(p->notes.empty());
  EXPECT_THAT(p->notes.front(), HasSubstr("cpu device"));
  // Every batch then runs eagerly.
  dispatch(4, 4, 1);
  auto d = expect_reply<batch_descriptor>(graphs, rec.actor);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, cudagraph_mode::none);
  EXPECT_EQ(d->num_tokens, 4);
}

TEST_F(CudagraphProtocol, RejectsDispatchBeforePlan) {
  dispatch(1, 1, 1);
  auto err = expect_error(graphs, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "dispatch:"));
  EXPECT_THAT(message_of(*err), HasSubstr("before plan"));
}

TEST_F(CudagraphProtocol, RejectsDispatchWithMoreRequestsThanMaxNumSeqs) {
  ASSERT_TRUE(plan(request_for(false, graph_support::always)));
  dispatch(17, 17, 1);
  auto err = expect_error(graphs, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "dispatch:"));
  EXPECT_THAT(message_of(*err), HasSubstr("num_reqs 17"));
  EXPECT_THAT(message_of(*err), HasSubstr("max_num_seqs 16"));
}

TEST_F(CudagraphProtocol, DispatchesAUniformDecodeBatchToAFullGraphOnGpuWithFullSupport) {
  auto p = plan(request_for(true, graph_support::always));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->mode, cudagraph_mode::full_and_piecewise);
  EXPECT_FALSE(p->full_graphs.empty());
  EXPECT_FALSE(p->piecewise_graphs.empty());
  capture_all(*p);
  dispatch(4, 4, 1); // 4 decodes of one token each
  auto d = expect_reply<batch_descriptor>(graphs, rec.actor);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, cudagraph_mode::full);
  EXPECT_EQ(d->num_tokens, 4) << "4 is on the ladder (1, 2, 4, 8, 16, ...): no padding";
  EXPECT_EQ(d->uniform_token_count, 1);
}

TEST_F(CudagraphProtocol, DispatchesAMixedBatchToAPiecewiseGraphOnGpu) {
  auto p = plan(request_for(true, graph_support::always));
  ASSERT_TRUE(p);
  capture_all(*p);
  dispatch(2, 9, 0); // a prefill chunk and a decode
  auto d = expect_reply<batch_descriptor>(graphs, rec.actor);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, cudagraph_mode::piecewise);
  EXPECT_EQ(d->num_tokens, 16) << "9 tokens pad to the next size of the ladder (1, 2, 4, 8, 16)";
}

TEST_F(CudagraphProtocol, AtStartUpOffersThePlanInOrderAndDispatchesOnlyWhatIsCaptured) {
  auto p = plan(request_for(true, graph_support::always));
  ASSERT_TRUE(p);
  ASSERT_EQ(p->mode, cudagraph_mode::full_and_piecewise);
  // Nothing is captured yet: a decode of 3 runs eagerly.
  dispatch(3, 3, 1);
  auto d = expect_reply<batch_descriptor>(graphs, rec.actor);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, cudagraph_mode::none);
  inject(rec.actor, graphs, atom::capture_v);
  run_once(graphs);
  auto next = expect_reply<std::vector<batch_descriptor>>(graphs, rec.actor);
  ASSERT_TRUE(next);
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ(next->front(), p->full_graphs.front()) << "the plan's first, largest FULL graph";
  // The rank captured every FULL graph; the decode of 3 now replays the graph of 4.
  for (const auto& g : p->full_graphs) {
    inject(rec.actor, graphs, cudagraph_captured{g, 4096, 1000, ""});
    run_once(graphs);
    ASSERT_TRUE(expect_reply<int64_t>(graphs, rec.actor));
  }
  dispatch(3, 3, 1);
  d = expect_reply<batch_descriptor>(graphs, rec.actor);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, cudagraph_mode::full);
  EXPECT_EQ(d->num_tokens, 4);
}

TEST_F(CudagraphProtocol, LazilyOffersTheGraphOfTheBatchesSeenAndAFailedCaptureStaysEager) {
  auto r = request_for(true, graph_support::always);
  r.lazy = true;
  auto p = plan(r);
  ASSERT_TRUE(p);
  EXPECT_THAT(p->notes.back(), HasSubstr("lazy capture"));
  inject(rec.actor, graphs, atom::capture_v);
  run_once(graphs);
  auto next = expect_reply<std::vector<batch_descriptor>>(graphs, rec.actor);
  ASSERT_TRUE(next);
  EXPECT_TRUE(next->empty()) << "no batch seen, nothing wanted";
  dispatch(5, 5, 1); // served eagerly, and now wanted
  auto d = expect_reply<batch_descriptor>(graphs, rec.actor);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, cudagraph_mode::none);
  inject(rec.actor, graphs, atom::capture_v);
  run_once(graphs);
  next = expect_reply<std::vector<batch_descriptor>>(graphs, rec.actor);
  ASSERT_TRUE(next);
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ(next->front().mode, cudagraph_mode::full);
  EXPECT_EQ(next->front().num_tokens, 8);
  inject(rec.actor, graphs, cudagraph_captured{next->front(), 0, 0, "out of memory"});
  run_once(graphs);
  ASSERT_TRUE(expect_reply<int64_t>(graphs, rec.actor));
  dispatch(5, 5, 1);
  d = expect_reply<batch_descriptor>(graphs, rec.actor);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, cudagraph_mode::none) << "a failed capture is not replayed";
  inject(rec.actor, graphs, atom::capture_v);
  run_once(graphs);
  next = expect_reply<std::vector<batch_descriptor>>(graphs, rec.actor);
  ASSERT_TRUE(next);
  EXPECT_TRUE(next->empty()) << "nor offered again";
}

TEST_F(CudagraphProtocol, ATensorParallelGpuRankPlansNoGraphsAndSaysWhy) {
  auto r = request_for(true, graph_support::always);
  r.not_capturable = "tensor parallelism: not captured yet";
  auto p = plan(r);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->mode, cudagraph_mode::none);
  ASSERT_FALSE(p->notes.empty());
  EXPECT_EQ(p->notes.front(), r.not_capturable);
}

TEST_F(CudagraphProtocol, RejectsANegativeMemoryCapAndACaptureOutsideThePlan) {
  auto r = request_for(true, graph_support::always);
  r.memory_cap = -1;
  inject(rec.actor, graphs, atom::plan_v, r);
  run_once(graphs);
  auto err = expect_error(graphs, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_THAT(message_of(*err), HasSubstr("memory cap: -1 bytes"));
  ASSERT_TRUE(plan(request_for(true, graph_support::always)));
  inject(rec.actor, graphs,
         cudagraph_captured{{cudagraph_mode::full, 3, 3, 1, 0, 0, false, 1}, 1, 1, ""});
  run_once(graphs);
  err = expect_error(graphs, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_THAT(message_of(*err),
              HasSubstr("full graph of 3 tokens / 3 requests is not in the plan"));
}

} // namespace
} // namespace kvactor::test
