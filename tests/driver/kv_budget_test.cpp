// One rule for the KV cache budget of a GPU, used by `kvactor plan` and `kvactor run`.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "actors/driver/kv_budget.hpp"

using namespace kvactor;
using ::testing::HasSubstr;

TEST(KvBudget, IsUtilizationTimesTotalRoundedUpLessInUseAndNonKvBytes) {
  // 1001 x 0.5 = 500.5 rounds up to 501, as vLLM's math.ceil does.
  auto b = gpu_kv_cache_budget({1001, 0.5, 100, 200});
  ASSERT_TRUE(b) << b.err().message;
  EXPECT_EQ(*b, 201);
}

TEST(KvBudget, OnAnH200SizedGpuMatchesTheHandComputedFigure) {
  const int64_t total = int64_t{143771} << 20; // 140.4 GiB
  auto b = gpu_kv_cache_budget({total, 0.9, int64_t{1} << 30, int64_t{16} << 30});
  ASSERT_TRUE(b);
  const auto requested = static_cast<int64_t>(std::ceil(static_cast<double>(total) * 0.9));
  EXPECT_EQ(*b, requested - (int64_t{17} << 30));
}

TEST(KvBudget, NothingLeftIsInsufficientMemoryNamingEveryTerm) {
  auto b = gpu_kv_cache_budget({1000, 0.5, 300, 200});
  ASSERT_FALSE(b);
  EXPECT_EQ(b.err().code, errc::insufficient_memory);
  EXPECT_THAT(b.err().message, HasSubstr("--gpu-memory-utilization 0.5: 500 of 1000 bytes"));
  EXPECT_THAT(b.err().message, HasSubstr("300 bytes in use"));
  EXPECT_THAT(b.err().message, HasSubstr("200 bytes for weights"));
}

TEST(KvBudget, OneKvCacheMemoryValueServesEveryRank) {
  auto b = per_rank_budgets({64}, 4);
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, (std::vector<int64_t>{64, 64, 64, 64}));
}

TEST(KvBudget, OneValuePerRankIsKeptAndAnotherCountIsRefused) {
  auto b = per_rank_budgets({1, 2}, 2);
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, (std::vector<int64_t>{1, 2}));
  auto bad = per_rank_budgets({1, 2, 3}, 2);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.err().message, HasSubstr("--kv-cache-memory: 3 values for 2 ranks"));
}
