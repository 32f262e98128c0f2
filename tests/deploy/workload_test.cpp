// The synthetic workload of `kvactor run`: a shared prefix, and the ideal prefix-cache hits.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "deploy/workload.hpp"

namespace kvactor {
namespace {

TEST(Workload, ASharedPrefixStartsEveryPromptAndLeavesTheRestAsWithoutIt) {
  const auto plain = make_workload(8, {20, 40}, {4, 8}, 0, 512, 3);
  const auto shared = make_workload(8, {20, 40}, {4, 8}, 0, 512, 3, 16);
  ASSERT_EQ(shared.size(), plain.size());
  for (size_t i = 0; i < shared.size(); ++i) {
    ASSERT_EQ(shared[i].prompt.size(), plain[i].prompt.size()) << "the same lengths";
    EXPECT_TRUE(std::equal(shared[i].prompt.begin(), shared[i].prompt.begin() + 16,
                           shared[0].prompt.begin()))
        << "request " << i << " starts with the shared 16 tokens";
    EXPECT_TRUE(std::equal(shared[i].prompt.begin() + 16, shared[i].prompt.end(),
                           plain[i].prompt.begin() + 16))
        << "request " << i << ": the rest is the prompt it had without a shared prefix";
    EXPECT_EQ(shared[i].max_output_tokens, plain[i].max_output_tokens);
  }
}

TEST(Workload, SeveralSharedPrefixesAreEachUsedAndLeaveTheRestAsWithoutThem) {
  const auto plain = make_workload(64, {20, 40}, {4, 8}, 0, 512, 3);
  const auto shared = make_workload(64, {20, 40}, {4, 8}, 0, 512, 3, 16, 4);
  std::set<std::vector<int32_t>> prefixes;
  for (size_t i = 0; i < shared.size(); ++i) {
    ASSERT_EQ(shared[i].prompt.size(), plain[i].prompt.size());
    prefixes.emplace(shared[i].prompt.begin(), shared[i].prompt.begin() + 16);
    EXPECT_TRUE(std::equal(shared[i].prompt.begin() + 16, shared[i].prompt.end(),
                           plain[i].prompt.begin() + 16));
  }
  EXPECT_EQ(prefixes.size(), 4u) << "64 requests drew every one of the 4 prefixes";
  EXPECT_EQ(make_workload(64, {20, 40}, {4, 8}, 0, 512, 3, 16, 1)[5].prompt,
            make_workload(64, {20, 40}, {4, 8}, 0, 512, 3, 16)[5].prompt)
      << "one prefix is the workload of --shared-prefix-len alone";
}

TEST(Workload, TheIdealHitsCountEveryLaterPromptsSharedFullBlocksButItsLastToken) {
  std::vector<request_spec> w(3);
  w[0].prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  w[1].prompt = {1, 2, 3, 4, 5, 6, 7, 8, 0}; // shares 2 blocks of 4
  w[2].prompt = {1, 2, 3, 4, 5, 6, 7, 8};    // shares both, but its last token is computed again
  EXPECT_EQ(ideal_prefix_hit_tokens(w, 4), 8 + 4);
  EXPECT_EQ(ideal_prefix_hit_tokens(w, 16), 0) << "no full block";
  EXPECT_EQ(ideal_prefix_hit_tokens({w[0]}, 4), 0) << "the first request computes everything";
}

} // namespace
} // namespace kvactor
