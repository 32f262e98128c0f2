// The sampler: greedy is the argmax; a draw depends on (seed, position) alone; temperature, top-k
// and top-p shape the distribution the draws follow; logprobs are the raw log_softmax; bad
// parameters are refused.
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

TEST(SamplerLogprobs, AreTheLogSoftmaxOfTheRawLogitsWithTheMostLikelyFirstAndTiesByLowerId) {
  double norm = 0;
  for (float l : logits)
    norm += std::exp(static_cast<double>(l));
  const auto lp = [&](int32_t id) { return logits[static_cast<size_t>(id)] - std::log(norm); };
  const row_logprobs got = logprobs_of(logits.data(), 6, 4, 3);
  EXPECT_NEAR(got.chosen, lp(4), 1e-6);
  EXPECT_EQ(got.top_ids, (std::vector<int32_t>{1, 2, 4}));
  ASSERT_EQ(got.top_values.size(), 3u);
  for (size_t k = 0; k < 3; ++k)
    EXPECT_NEAR(got.top_values[k], lp(got.top_ids[k]), 1e-6);
}

TEST(SamplerLogprobs, TemperatureAndTopKDoNotChangeThem) {
  // vLLM reports the model's distribution, not the one the draw used.
  const sampled_rows hot = sample_host_rows(logits.data(), 6, {{2.0f, 2, 0.5f, 9, 1}}, {3}, 1);
  const sampled_rows greedy = sample_host_rows(logits.data(), 6, {{0.0f, 0, 1.0f, 0, 1}}, {3}, 1);
  ASSERT_EQ(hot.logprobs.size(), 1u);
  EXPECT_EQ(hot.logprobs[0].top_values, greedy.logprobs[0].top_values);
  EXPECT_NEAR(hot.logprobs[0].chosen, logprobs_of(logits.data(), 6, hot.tokens[0], 0).chosen, 0);
}

TEST(SamplerLogprobs, OnlyRowsThatAskGetThemAndZeroAsksForTheChosenTokenAlone) {
  const std::vector<float> two_rows = {1, 3, 3, 0.5f, 2, -1, 0, 0, 0, 0, 5, 0};
  const sampled_rows got = sample_host_rows(
      two_rows.data(), 6, {{0.0f, 0, 1.0f, 0, -1}, {0.0f, 0, 1.0f, 0, 0}}, {0, 0}, 2);
  EXPECT_EQ(got.tokens, (std::vector<int32_t>{1, 4}));
  ASSERT_EQ(got.logprobs.size(), 2u);
  EXPECT_TRUE(got.logprobs[0].top_ids.empty());
  EXPECT_EQ(got.logprobs[0].chosen, 0.0f);
  EXPECT_TRUE(got.logprobs[1].top_ids.empty());
  EXPECT_LT(got.logprobs[1].chosen, 0.0f);
  EXPECT_TRUE(sample_host_rows(two_rows.data(), 6, {}, {}, 2).logprobs.empty())
      << "no row asked: no logprobs at all";
}

TEST(SamplerLogprobs, AWideVocabularyLosesNoPrecisionAndTopIsClippedToIt) {
  std::vector<float> wide(152064, -3.0f);
  wide[77] = 4.0f;
  const row_logprobs got = logprobs_of(wide.data(), static_cast<int32_t>(wide.size()), 77, 2);
  const double expect = 4.0 - std::log(std::exp(4.0) + (152064 - 1) * std::exp(-3.0));
  EXPECT_NEAR(got.chosen, expect, 1e-5);
  EXPECT_EQ(got.top_ids, (std::vector<int32_t>{77, 0}));
  EXPECT_EQ(logprobs_of(logits.data(), 6, 0, 50).top_ids.size(), 6u);
}

TEST(SamplerLogprobs, BadArgumentsAreRefusedNamingThem) {
  EXPECT_THROW(logprobs_of(logits.data(), 6, 6, 1), std::invalid_argument);
  EXPECT_THROW(logprobs_of(logits.data(), 6, -1, 1), std::invalid_argument);
  EXPECT_THROW(logprobs_of(logits.data(), 6, 0, -2), std::invalid_argument);
}

} // namespace
} // namespace kvactor::kernels
