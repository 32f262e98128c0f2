// The sampler: greedy is the argmax; a draw depends on (seed, position) alone; temperature, top-k
// and top-p shape the distribution the draws follow; bad parameters are refused.
#include "kvactor/kernels/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <vector>

namespace kvactor::kernels {
namespace {

const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.5f, 2.0f, -1.0f};

TEST(Sampler, GreedyIsTheArgmaxWithTheLowestIdOnTies) {
  EXPECT_EQ(sample_token(logits.data(), 6, {}, 0), 1);
  EXPECT_EQ(sample_token(logits.data(), 6, {}, 12345), 1);
}

TEST(Sampler, ADrawDependsOnSeedAndPositionAlone) {
  const sampling_config cfg{1.0f, 0, 1.0f, 42};
  for (uint64_t pos = 0; pos < 50; ++pos)
    EXPECT_EQ(sample_token(logits.data(), 6, cfg, pos), sample_token(logits.data(), 6, cfg, pos));
  int differ = 0;
  for (uint64_t pos = 0; pos < 50; ++pos)
    differ += sample_token(logits.data(), 6, cfg, pos)
              != sample_token(logits.data(), 6, {1.0f, 0, 1.0f, 43}, pos);
  EXPECT_GT(differ, 10) << "another seed draws other tokens";
}

// Frequencies over 200000 positions (deterministic: no flakiness) against the softmax.
std::map<int32_t, double> frequencies(const sampling_config& cfg) {
  std::map<int32_t, double> f;
  const int n = 200000;
  for (int pos = 0; pos < n; ++pos)
    f[sample_token(logits.data(), 6, cfg, static_cast<uint64_t>(pos))] += 1.0 / n;
  return f;
}

TEST(Sampler, DrawsFollowTheTemperatureScaledSoftmax) {
  const float t = 0.7f;
  double z = 0;
  for (float l : logits)
    z += std::exp(l / t);
  const auto f = frequencies({t, 0, 1.0f, 9});
  for (int32_t i = 0; i < 6; ++i)
    EXPECT_NEAR(f.count(i) ? f.at(i) : 0.0, std::exp(logits[static_cast<size_t>(i)] / t) / z, 0.005)
        << "token " << i;
}

TEST(Sampler, TopKAndTopPKeepOnlyTheMostLikelyTokens) {
  const auto k2 = frequencies({1.0f, 2, 1.0f, 3});
  EXPECT_EQ(k2.size(), 2u);
  EXPECT_NEAR(k2.at(1), 0.5, 0.005);
  EXPECT_NEAR(k2.at(2), 0.5, 0.005);
  // p(1) = p(2) ~ 0.36 each: top_p 0.5 keeps both, 0.3 only the first of them.
  EXPECT_EQ(frequencies({1.0f, 0, 0.5f, 3}).size(), 2u);
  const auto p = frequencies({1.0f, 0, 0.3f, 3});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p.begin()->first, 1);
}

TEST(Sampler, BadParametersAreRefusedNamingThem) {
  EXPECT_THROW(sample_token(logits.data(), 6, {-1.0f, 0, 1.0f, 0}, 0), std::invalid_argument);
  EXPECT_THROW(sample_token(logits.data(), 6, {1.0f, -2, 1.0f, 0}, 0), std::invalid_argument);
  EXPECT_THROW(sample_token(logits.data(), 6, {1.0f, 0, 0.0f, 0}, 0), std::invalid_argument);
  EXPECT_THROW(sample_token(logits.data(), 6, {1.0f, 0, 1.5f, 0}, 0), std::invalid_argument);
}

} // namespace
} // namespace kvactor::kernels
