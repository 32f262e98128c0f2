// Lazy capture: eager from the first step, then the graphs the traffic wants, most wanted first,
// under the memory cap; a batch replays once its graph is captured.
#include "actors/cudagraph/lazy_capture.hpp"

#include <gtest/gtest.h>

#include "actors/cudagraph/planner.hpp"

namespace kvactor {
namespace {

cudagraph_plan full_and_piecewise() {
  cudagraph_options opt;
  opt.requested = cudagraph_mode::full_and_piecewise;
  opt.max_num_seqs = 256;
  auto plan = plan_cudagraphs(opt);
  EXPECT_TRUE(plan) << plan.err().message;
  return plan ? *plan : cudagraph_plan{};
}

constexpr int64_t mib = int64_t{1} << 20;

TEST(LazyCapture, ServesEagerlyUntilAGraphIsCaptured) {
  lazy_capture lazy(full_and_piecewise(), 256, 512 * mib);
  EXPECT_EQ(lazy.dispatch(5, 5, 1).mode, cudagraph_mode::none);
  lazy.observe(5, 5, 1);
  auto next = lazy.next();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->mode, cudagraph_mode::full);
  EXPECT_EQ(next->num_tokens, 8) << "the graph the full plan would replay 5 decodes with";
  lazy.captured(*next, 20 * mib);
  auto d = lazy.dispatch(5, 5, 1);
  EXPECT_EQ(d.mode, cudagraph_mode::full);
  EXPECT_EQ(d.num_tokens, 8);
  EXPECT_EQ(lazy.dispatch(20, 20, 1).mode, cudagraph_mode::none) << "24 is not captured yet";
  EXPECT_FALSE(lazy.next()) << "nothing else was wanted";
}

TEST(LazyCapture, CapturesTheMostWantedGraphFirstThenTheEarliestSeen) {
  lazy_capture lazy(full_and_piecewise(), 256, 512 * mib);
  lazy.observe(1, 1, 1);   // full 1
  lazy.observe(3, 100, 0); // piecewise 104
  lazy.observe(3, 100, 0);
  lazy.observe(2, 2, 1); // full 2
  auto first = lazy.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->mode, cudagraph_mode::piecewise);
  EXPECT_EQ(first->num_tokens, 104);
  lazy.captured(*first, 10 * mib);
  auto second = lazy.next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->num_tokens, 1) << "a tie goes to the batch seen first";
}

TEST(LazyCapture, StopsAtTheMemoryCapAndKeepsServingEagerly) {
  lazy_capture lazy(full_and_piecewise(), 256, 25 * mib);
  for (int32_t n : {1, 2, 4})
    lazy.observe(n, n, 1);
  auto a = lazy.next();
  ASSERT_TRUE(a);
  lazy.captured(*a, 12 * mib);
  auto b = lazy.next();
  ASSERT_TRUE(b);
  lazy.captured(*b, 12 * mib);
  EXPECT_FALSE(lazy.next()) << "a third graph of about 12 MiB would pass the 25 MiB cap";
  EXPECT_EQ(lazy.memory_used(), 24 * mib);
  EXPECT_EQ(lazy.captured_graphs().size(), 2u);
}

TEST(LazyCapture, NoMemoryMeansNoCapture) {
  lazy_capture lazy(full_and_piecewise(), 256, 0);
  lazy.observe(4, 4, 1);
  EXPECT_FALSE(lazy.next());
  EXPECT_EQ(lazy.dispatch(4, 4, 1).mode, cudagraph_mode::none);
}

TEST(LazyCapture, ASkippedGraphIsNotOfferedAgain) {
  lazy_capture lazy(full_and_piecewise(), 256, 512 * mib);
  lazy.observe(4, 4, 1);
  auto g = lazy.next();
  ASSERT_TRUE(g);
  lazy.skip(*g);
  EXPECT_FALSE(lazy.next());
  EXPECT_EQ(lazy.skipped_graphs().size(), 1u);
  EXPECT_EQ(lazy.dispatch(4, 4, 1).mode, cudagraph_mode::none);
}

TEST(LazyCapture, BatchesNoGraphServesAreNotWanted) {
  lazy_capture lazy(full_and_piecewise(), 256, 512 * mib);
  lazy.observe(2, 4000, 0); // above every capture size
  EXPECT_FALSE(lazy.next());
}

TEST(LazyCapture, PlannedOrderOffersEveryFullGraphLargestFirstThenThePiecewiseOnes) {
  const auto plan = full_and_piecewise();
  lazy_capture startup(plan, 256, 512 * mib, capture_order::planned);
  EXPECT_EQ(startup.planned(), plan.full_graphs.size() + plan.piecewise_graphs.size());
  std::vector<batch_descriptor> order;
  while (auto next = startup.next()) {
    order.push_back(*next);
    startup.captured(*next, 1024);
  }
  std::vector<batch_descriptor> want = plan.full_graphs;
  want.insert(want.end(), plan.piecewise_graphs.begin(), plan.piecewise_graphs.end());
  EXPECT_EQ(order, want) << "no traffic needed: the plan is the order";
  EXPECT_EQ(startup.memory_used(), static_cast<int64_t>(want.size()) * 1024);
  EXPECT_EQ(startup.dispatch(3, 3, 1).mode, cudagraph_mode::full);
  EXPECT_EQ(startup.dispatch(2, 40, 0).mode, cudagraph_mode::piecewise);
}

TEST(LazyCapture, PlannedOrderStopsAtTheCapAndTheRestDispatchesEagerly) {
  const auto plan = full_and_piecewise();
  lazy_capture startup(plan, 256, 10 * mib, capture_order::planned);
  size_t captured = 0;
  while (auto next = startup.next()) {
    startup.captured(*next, 3 * mib);
    ++captured;
  }
  EXPECT_EQ(captured, 3u) << "3 x 3 MiB fit 10 MiB; a fourth (estimated alike) would not";
  EXPECT_EQ(startup.memory_used(), 9 * mib) << "3 captured graphs of 3 MiB each";
  // The three largest FULL graphs are captured: one decode pads to the smallest of them, and a
  // mixed batch (its PIECEWISE graphs were cut) runs eagerly.
  const auto one = startup.dispatch(1, 1, 1);
  EXPECT_EQ(one.mode, cudagraph_mode::full);
  EXPECT_EQ(one.num_tokens, plan.full_graphs[2].num_tokens);
  EXPECT_EQ(startup.dispatch(2, 40, 0).mode, cudagraph_mode::none);
}

} // namespace
} // namespace kvactor
