// Tensor parallelism: ranks holding slices of the TP = 1 weights, joined by a summing
// all-reduce, reproduce the TP = 1 stack within float rounding, and agree with each other bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "stack_fixture.hpp"

namespace kvactor::kernels::test {
namespace {

// max |a - b| / max |b|
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(double{a[i]} - b[i]));
    scale = std::max(scale, std::fabs(double{b[i]}));
  }
  return diff / scale;
}

// Runs a prefill and three decode steps on TP = 1 and on `tp` ranks (one thread each), with the
// same block ids on every rank as the driver would hand out, and compares every step.
void expect_tp_matches(int32_t tp) {
  attention_stack reference(mixed_config());
  std::vector<std::unique_ptr<attention_stack>> ranks;
  std::vector<std::unique_ptr<stack_cache>> caches;
  for (int32_t r = 0; r < tp; ++r) {
    ranks.push_back(std::make_unique<attention_stack>(mixed_config(tp, r)));
    caches.push_back(std::make_unique<stack_cache>(*ranks.back(), 32, 4));
  }
  stack_cache reference_cache(reference, 32, 4);
  block_pool pool(32, 13);
  std::vector<sequence> seqs(3);
  seqs[0].tokens = {11, 22, 33, 44, 55, 66, 77, 88, 99};
  seqs[1].tokens = {7, 7};
  seqs[2].tokens = {120, 3, 5, 8, 13, 21};
  std::vector<sequence*> all{&seqs[0], &seqs[1], &seqs[2]};
  std::vector<int32_t> counts{9, 2, 6};
  host_all_reduce all_reduce(tp);
  for (int32_t step = 0; step < 4; ++step) {
    const step_batch b = schedule(all, counts, pool, 4);
    const std::vector<float> expected = run_step(reference, reference_cache, b);
    std::vector<std::vector<float>> got(static_cast<size_t>(tp));
    std::vector<std::thread> threads;
    for (int32_t r = 0; r < tp; ++r)
      threads.emplace_back([&, r] {
        got[static_cast<size_t>(r)] = run_step(
            *ranks[static_cast<size_t>(r)], *caches[static_cast<size_t>(r)], b,
            [&all_reduce, r](float* buffer, size_t count) { all_reduce(r, buffer, count); });
      });
    for (std::thread& t : threads)
      t.join();
    for (int32_t r = 0; r < tp; ++r) {
      const std::vector<float>& g = got[static_cast<size_t>(r)];
      ASSERT_EQ(g.size(), expected.size());
      EXPECT_LE(relative_error(g, expected), 1e-4) << "step " << step << " rank " << r;
      EXPECT_EQ(std::memcmp(g.data(), got[0].data(), g.size() * sizeof(float)), 0);
    }
    // Next step: every request decodes the token TP = 1 picks.
    std::vector<int32_t> rows;
    for (int32_t i = 1; i <= 3; ++i)
      rows.push_back(b.query_start_loc[static_cast<size_t>(i)] - 1);
    const std::vector<int32_t> next = reference.sample(expected.data(), rows);
    EXPECT_EQ(ranks[0]->sample(got[0].data(), rows), next) << "step " << step;
    for (size_t i = 0; i < seqs.size(); ++i)
      seqs[i].tokens.push_back(next[i]);
    counts = {1, 1, 1};
  }
}

TEST(stack_tp, two_ranks_match_one) {
  expect_tp_matches(2);
}

TEST(stack_tp, four_ranks_with_replicated_kv_heads_match_one) {
  expect_tp_matches(4);
}

} // namespace
} // namespace kvactor::kernels::test
