// The CPU decoder's answers do not depend on how the work is split: a request's logits are the
// same bits whether it runs alone or batched with others, and tensor-parallel ranks (2 and 4, the
// KV heads split or replicated) give the single rank's tokens and logits within 1e-5, for every
// dense family's transformers fixture.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "decoder_runner.hpp"
#include "kvactor/comm/host_communicator.h"
#include "model/hf_decoder.hpp"
#include "tests/support/fixture_paths.hpp"

namespace kvactor::test {
namespace {

std::vector<std::vector<int32_t>> prompts_of(const std::string& family) {
  std::ifstream in(transformers_fixture(family) + "/expected.json");
  return nlohmann::json::parse(in)["prompts"].get<std::vector<std::vector<int32_t>>>();
}

kernels::decoder load(const std::string& family, int32_t tp = 1, int32_t rank = 0) {
  auto m = load_hf_decoder(transformers_fixture(family), tp, rank);
  if (!m) throw std::runtime_error(m.err().message);
  return kernels::decoder(m->config.spec, std::move(m->weights));
}

int32_t argmax(const float* x, int32_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

class DecoderSplits : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderSplits, ARequestsLogitsAreTheSameBitsAloneOrBatched) {
  const auto d = load(GetParam());
  const auto prompts = prompts_of(GetParam());
  const int32_t vocab = d.spec().vocab_size, steps = 12;
  // Alone: each prompt, then its greedy tokens, every step's logits kept.
  std::vector<std::vector<float>> alone(prompts.size());
  for (size_t p = 0; p < prompts.size(); ++p) {
    decoder_runner run(d, 1, 128);
    auto logits = run.step(std::vector<int32_t>(prompts[p].size(), 0), prompts[p]);
    for (int32_t i = 0; i < steps; ++i) {
      alone[p].insert(alone[p].end(), logits.begin(), logits.end());
      logits = run.step({0}, {argmax(logits.data(), vocab)});
    }
  }
  // Together: one prefill of all prompts, then one decode step for all of them at a time.
  decoder_runner run(d, static_cast<int32_t>(prompts.size()), 128);
  std::vector<int32_t> seqs, tokens;
  for (size_t p = 0; p < prompts.size(); ++p)
    for (auto t : prompts[p]) {
      seqs.push_back(static_cast<int32_t>(p));
      tokens.push_back(t);
    }
  auto logits = run.step(seqs, tokens);
  for (int32_t i = 0; i < steps; ++i) {
    std::vector<int32_t> next_seqs, next;
    for (size_t p = 0; p < prompts.size(); ++p) {
      const float* row = logits.data() + p * static_cast<size_t>(vocab);
      ASSERT_TRUE(std::equal(row, row + vocab, alone[p].data() + static_cast<size_t>(i) * vocab))
          << "prompt " << p << " step " << i;
      next_seqs.push_back(static_cast<int32_t>(p));
      next.push_back(argmax(row, vocab));
    }
    logits = run.step(next_seqs, next);
  }
}

TEST_P(DecoderSplits, TensorParallelRanksGiveTheSingleRanksTokensAndLogits) {
  const auto prompt = prompts_of(GetParam()).back();
  const int32_t n = 16;
  const auto single = load(GetParam());
  std::vector<float> want_logits;
  const auto want = decoder_runner(single, 1, 128).greedy(0, prompt, n, &want_logits);
  for (int32_t tp : {2, 4}) {
    auto comms = comm::host_communicator::create_group(tp);
    std::vector<std::vector<int32_t>> got(static_cast<size_t>(tp));
    std::vector<std::vector<float>> logits(static_cast<size_t>(tp));
    std::vector<std::thread> ranks;
    for (int32_t r = 0; r < tp; ++r)
      ranks.emplace_back([&, r] {
        const auto d = load(GetParam(), tp, r);
        auto& comm = *comms[static_cast<size_t>(r)];
        auto reduce = [&](float* x, size_t count) { comm.all_reduce(x, count); };
        got[static_cast<size_t>(r)] =
            decoder_runner(d, 1, 128).greedy(0, prompt, n, &logits[static_cast<size_t>(r)], reduce);
      });
    for (auto& t : ranks)
      t.join();
    for (int32_t r = 0; r < tp; ++r) {
      EXPECT_EQ(got[static_cast<size_t>(r)], want) << "tp " << tp << " rank " << r;
      double diff = 0, norm = 0;
      for (size_t i = 0; i < want_logits.size(); ++i) {
        const double e = logits[static_cast<size_t>(r)][i] - want_logits[i];
        diff += e * e;
        norm += static_cast<double>(want_logits[i]) * want_logits[i];
      }
      EXPECT_LE(std::sqrt(diff / norm), 1e-5) << "tp " << tp << " rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DenseFamilies, DecoderSplits,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2",
                                           "gemma3_text", "phi3"),
                         [](const auto& info) { return info.param; });

} // namespace
} // namespace kvactor::test

namespace kvactor::test {
namespace {

nlohmann::json config_json(const std::string& family) {
  std::ifstream in(transformers_fixture(family) + "/config.json");
  return nlohmann::json::parse(in);
}

kernels::decoder synthetic(const std::string& family, int32_t tp, int32_t rank, uint64_t seed) {
  auto m = synthetic_hf_decoder(config_json(family), tp, rank, seed);
  if (!m) throw std::runtime_error(m.err().message);
  return kernels::decoder(m->config.spec, std::move(m->weights));
}

// --load-format synthetic: generated weights are one model, so that its TP slices agree.
TEST(SyntheticDecoder, GeneratedWeightsAreOneModelSlicedAcrossRanks) {
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35, 89, 79};
  for (const char* family : {"llama", "qwen2", "gemma2", "phi3"}) {
    const auto one = synthetic(family, 1, 0, 5);
    const auto want = decoder_runner(one, 1, 64).greedy(0, prompt, 12);
    auto comms = comm::host_communicator::create_group(2);
    std::vector<std::vector<int32_t>> got(2);
    std::vector<std::thread> ranks;
    for (int32_t r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        const auto d = synthetic(family, 2, r, 5);
        auto& comm = *comms[static_cast<size_t>(r)];
        got[static_cast<size_t>(r)] = decoder_runner(d, 1, 64).greedy(
            0, prompt, 12, nullptr, [&](float* x, size_t n) { comm.all_reduce(x, n); });
      });
    for (auto& t : ranks)
      t.join();
    EXPECT_EQ(got[0], want) << family;
    EXPECT_EQ(got[1], want) << family;
    EXPECT_NE(decoder_runner(synthetic(family, 1, 0, 6), 1, 64).greedy(0, prompt, 12), want)
        << family << ": another seed, another model";
  }
}

} // namespace
} // namespace kvactor::test
