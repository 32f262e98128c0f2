// Tensor-parallel shards of real checkpoints on one GPU: the ranks of TP 2, 4 and 8,
// each its slice of the checkpoint on its own thread and stream, joined by the device-local
// communicator. Every rank ends with the same logits bit for bit (one rank-order reduction for
// all); those logits are within 2e-2 relative L2 of TP 1's and of transformers', the first
// greedy token is transformers', and the share of identical continuations is printed. The
// Llama-3.1-8B shape (weights generated on the device) does the same at TP 1, 2, 4 and 8 against
// TP 1. A TP size the model's heads do not split is skipped by name.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "../support/sanitizer_slowdown.hpp"
#include "decoder_fixtures.hpp"
#include "gpu_support.hpp"
#include "kvactor/comm/device_local_communicator.h"

namespace kvactor::kernels::gpu_test {
namespace {

using comm::collective_error;
using comm::communicator;
using comm::make_device_local_group;
using comm::reduce_op;

using namespace std::chrono_literals;

// What one rank of a group produced: the prompt's last logits and the greedy continuation.
struct rank_output {
  std::vector<float> logits;
  std::vector<int32_t> tokens;
  cuda_status status;
};

// The ranks' decoders run `prompt` and `n` greedy tokens together, each on its own thread, their
// partial sums all-reduced by a device-local group on GPU 0.
std::vector<rank_output> run_group(const std::vector<std::unique_ptr<loaded_decoder>>& ranks,
                                   const std::vector<int32_t>& prompt, int32_t n) {
  const auto world = static_cast<int>(ranks.size());
  auto comms = make_device_local_group(world, 0, 60s * ::kvactor::test::test_slowdown());
  std::vector<rank_output> out(ranks.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      const auto rr = static_cast<size_t>(r);
      decoder_cuda_runner run(*ranks[rr]->decoder, 1, 128);
      const cudaStream_t stream = ranks[rr]->stream;
      if (world > 1)
        run.set_all_reduce([&, rr, stream](float* buf, size_t count) -> cuda_status {
          try {
            comms[rr]->all_reduce(buf, count, reduce_op::sum, stream);
            return {};
          } catch (const collective_error& e) {
            return cuda_status::failure(cudaErrorUnknown, e.what());
          }
        });
      out[rr].tokens = run.greedy(0, prompt, n, &out[rr].logits);
      out[rr].status = run.status();
      if (!out[rr].status) comms[rr]->abort(out[rr].status.message());
    });
  for (auto& t : threads)
    t.join();
  return out;
}

double top_two_gap(const std::vector<float>& logits) {
  float first = -INFINITY, second = -INFINITY;
  for (float x : logits)
    if (x > first) {
      second = first;
      first = x;
    } else if (x > second) {
      second = x;
    }
  return static_cast<double>(first) - second;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

class TpSharedGpuFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(TpSharedGpuFixtures, EveryTpSizeGivesOneRanksLogitsOnEveryRank) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const auto family = GetParam();
  std::ifstream in(fixture_dir(family) + "/expected.json");
  const auto want = nlohmann::json::parse(in);
  const auto prompt = want["prompts"][0].get<std::vector<int32_t>>();
  const auto continuation = want["continuations"][0].get<std::vector<int32_t>>();
  const auto reference = want["last_logits"][0].get<std::vector<float>>();
  const auto n = static_cast<int32_t>(continuation.size());
  std::vector<std::unique_ptr<loaded_decoder>> one;
  one.push_back(fixture_decoder(family, 256));
  ASSERT_TRUE(one[0]->error.empty()) << one[0]->error;
  const auto tp1 = run_group(one, prompt, n).front();
  ASSERT_CUDA_OK(tp1.status);
  for (int32_t tp : {2, 4, 8}) {
    std::vector<std::unique_ptr<loaded_decoder>> ranks;
    auto probe = open_hf_decoder(fixture_dir(family), tp, 0);
    if (!probe) { // heads that do not split this way
      std::printf("%s TP %d: not split (%s)\n", family.c_str(), tp, probe.err().message.c_str());
      continue;
    }
    for (int32_t r = 0; r < tp; ++r) {
      ranks.push_back(fixture_decoder(family, 256, tp, r));
      ASSERT_TRUE(ranks.back()->error.empty()) << ranks.back()->error;
    }
    const auto got = run_group(ranks, prompt, n);
    for (int32_t r = 0; r < tp; ++r) {
      ASSERT_CUDA_OK(got[static_cast<size_t>(r)].status);
      EXPECT_EQ(got[static_cast<size_t>(r)].logits, got[0].logits)
          << family << " TP " << tp << ": rank " << r << " differs from rank 0";
    }
    const double vs_tp1 = relative_l2(got[0].logits, tp1.logits);
    const double vs_hf = relative_l2(got[0].logits, reference);
    EXPECT_LE(vs_tp1, 2e-2) << family << " TP " << tp;
    EXPECT_LE(vs_hf, 2e-2) << family << " TP " << tp;
    ASSERT_FALSE(got[0].tokens.empty());
    EXPECT_EQ(got[0].tokens.front(), continuation.front()) << family << " TP " << tp;
    std::printf("%s TP %d: relative L2 %.3g to TP 1, %.3g to transformers; continuation %s TP "
                "1's, %s transformers'\n",
                family.c_str(), tp, vs_tp1, vs_hf,
                got[0].tokens == tp1.tokens ? "equals" : "differs from",
                got[0].tokens == continuation ? "equals" : "differs from");
  }
}

INSTANTIATE_TEST_SUITE_P(DenseFamilies, TpSharedGpuFixtures,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2",
                                           "gemma3_text", "phi3", "llama_gqa", "phi3_partial"),
                         [](const auto& info) { return info.param; });

// The Llama-3.1-8B shape with weights generated on the device from one seed: each rank's slice
// is the slice of the same tensors, so TP 2, 4 and 8 compute TP 1's model.
TEST(TpSharedGpuLlama8b, TpTwoFourAndEightOnOneGpuGiveTpOnesLogits) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const char* root = std::getenv("KVACTOR_SOURCE_DIR");
  std::ifstream in(std::string(root != nullptr ? root : KVACTOR_SOURCE_DIR)
                   + "/deploy/models/llama-3.1-8b.json");
  ASSERT_TRUE(in) << "deploy/models/llama-3.1-8b.json";
  const auto config = nlohmann::json::parse(in);
  const uint64_t seed = 7;
  auto load = [&](int32_t tp) {
    std::vector<std::unique_ptr<loaded_decoder>> ranks;
    for (int32_t r = 0; r < tp; ++r) {
      auto shapes = synthetic_hf_shapes(config, tp, r);
      if (!shapes) throw std::runtime_error(shapes.err().message);
      ranks.push_back(std::make_unique<loaded_decoder>(*shapes, 256, false, seed));
      if (!ranks.back()->error.empty()) throw std::runtime_error(ranks.back()->error);
    }
    return ranks;
  };
  // Under a tool or a sanitizer build (slowed_run()), one prompt and two greedy tokens:
  // every kernel still runs at the 8B shapes and every TP size, in less time (under racecheck,
  // four prompts and eight tokens did not finish in 900 s). Each stage's time goes to stderr,
  // unbuffered, so that a run stopped at a limit shows where it was (buffered stdout is lost).
  const auto t0 = std::chrono::steady_clock::now();
  auto progress = [&](const char* what, int32_t tp) {
    std::fprintf(stderr, "llama-3.1-8b shape: %s TP %d at %.0f s\n", what, tp,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  const bool slowed = ::kvactor::test::slowed_run();
  const int32_t n = slowed ? 2 : 8;
  std::vector<std::vector<int32_t>> prompts(slowed ? 1 : 4);
  for (size_t p = 0; p < prompts.size(); ++p)
    for (int32_t i = 0; i < 60 + 20 * static_cast<int32_t>(p); ++i)
      prompts[p].push_back((i * 7919 + 13 + static_cast<int32_t>(p) * 104729) % 128000);
  std::vector<rank_output> tp1;
  {
    const auto one = load(1);
    progress("loaded", 1);
    for (const auto& prompt : prompts) {
      tp1.push_back(run_group(one, prompt, n).front());
      ASSERT_CUDA_OK(tp1.back().status);
    }
  }
  progress("ran", 1);
  for (int32_t tp : {2, 4, 8}) {
    const auto ranks = load(tp);
    progress("loaded", tp);
    double worst = 0;
    size_t same_first = 0;
    for (size_t p = 0; p < prompts.size(); ++p) {
      const auto got = run_group(ranks, prompts[p], n);
      for (const auto& r : got)
        ASSERT_CUDA_OK(r.status);
      EXPECT_EQ(got.back().logits, got.front().logits) << "TP " << tp;
      const double l2 = relative_l2(got[0].logits, tp1[p].logits);
      worst = std::max(worst, l2);
      EXPECT_LE(l2, 2e-2) << "TP " << tp << " prompt " << p;
      // Random weights leave near-ties: the first token must agree whenever TP 1's lead is more
      // than twice the largest logit difference between the two.
      const double lead = top_two_gap(tp1[p].logits),
                   moved = max_abs_diff(got[0].logits, tp1[p].logits);
      if (lead > 2 * moved) {
        EXPECT_EQ(got[0].tokens.front(), tp1[p].tokens.front())
            << "TP " << tp << " prompt " << p << ": lead " << lead << ", moved " << moved;
      }
      same_first += got[0].tokens.front() == tp1[p].tokens.front();
    }
    std::printf("llama-3.1-8b shape TP %d on one GPU: worst relative L2 %.3g to TP 1; first "
                "tokens equal for %zu of %zu prompts\n",
                tp, worst, same_first, prompts.size());
  }
}

} // namespace
} // namespace kvactor::kernels::gpu_test
