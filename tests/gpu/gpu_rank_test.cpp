// The GPU rank end to end: `kvactor run --device cuda` serves the default workload with the same
// protocol and summary as the CPU, and its greedy tokens agree with the CPU path.
//
// Tolerance, the margin rule: the GPU decoder computes in bf16 with float accumulation, the CPU
// decoder in float over the same bf16 cache, so their logits drift apart by a little, and a
// near-tie in the greedy argmax may flip one token (after which a request's continuation
// legitimately differs). Both runs report every token's logprob and the two most likely tokens
// (--logprobs 2). The drift is measured in the same run: the largest |GPU - reference| logprob of
// a token both chose at a position both reached alike. Wherever a request's outputs first differ,
// the reference's lead there (its top logprob minus its second) must be at most twice that drift;
// a wider lead flipped means a bug. How close the GPU decoder is to an independent reference is
// tested against transformers' fixtures (decoder_cuda_test.cpp), not here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "../deploy/cli_support.hpp"
#include "gpu_support.hpp"

namespace {

// `kvactor run` in-process, with the summary it wrote (when it succeeded).
struct cli_run : kvactor::test::cli_result {
  nlohmann::json summary;
};

cli_run run(const std::string& device, const std::string& tag,
            const std::vector<std::string>& more = {}) {
  const auto path = ::testing::TempDir() + "gpu_rank_" + tag + ".json";
  std::vector<std::string> args{
      "run",           "--device",          device,   "--seed",     "11", "--requests",     "24",
      "--no-progress", "--kv-cache-memory", "256MiB", "--logprobs", "2",  "--summary-json", path};
  args.insert(args.end(), more.begin(), more.end());
  cli_run r{kvactor::test::run_cli(std::move(args)), {}};
  if (r.code == 0) {
    std::ifstream in(path);
    r.summary = nlohmann::json::parse(in);
  }
  return r;
}

// What the margin rule saw over two runs' outputs.
struct agreement {
  int requests = 0, identical = 0, compared_tokens = 0;
  double drift = 0;                  // largest |a - b| logprob of a token both chose
  std::vector<double> flipped_leads; // the reference's lead where a request first differs
};

double lead_of(const nlohmann::json& logprobs) {
  const auto& top = logprobs["top"];
  return top.size() < 2 ? 1e9 : top[0][1].get<double>() - top[1][1].get<double>();
}

agreement agree(const nlohmann::json& got, const nlohmann::json& ref) {
  agreement x;
  const auto& g = got["outputs"];
  const auto& r = ref["outputs"];
  for (size_t i = 0; i < g.size() && i < r.size(); ++i) {
    const auto& gt = g[i]["tokens"];
    const auto& rt = r[i]["tokens"];
    if (gt.empty() || rt.empty()) continue;
    ++x.requests;
    x.identical += gt == rt;
    for (size_t t = 0; t < gt.size() && t < rt.size(); ++t) {
      if (gt[t] != rt[t]) {
        x.flipped_leads.push_back(lead_of(r[i]["logprobs"][t]));
        break;
      }
      ++x.compared_tokens;
      x.drift = std::max(x.drift, std::abs(g[i]["logprobs"][t]["logprob"].get<double>()
                                           - r[i]["logprobs"][t]["logprob"].get<double>()));
    }
  }
  return x;
}

// Every request of `got` equals `ref` wherever the reference's lead exceeds twice the drift.
void expect_agreement(const nlohmann::json& got, const nlohmann::json& ref, const char* what) {
  const agreement x = agree(got, ref);
  ASSERT_GT(x.requests, 0) << what << ": no request generated a token";
  ASSERT_GT(x.compared_tokens, 0) << what;
  std::printf("%s: %d of %d requests identical, %d tokens compared, drift %.4f, leads flipped:",
              what, x.identical, x.requests, x.compared_tokens, x.drift);
  for (double l : x.flipped_leads)
    std::printf(" %.4f", l);
  std::printf("\n");
  for (double lead : x.flipped_leads)
    EXPECT_LE(lead, 2 * x.drift) << what << ": a token whose reference lead is " << lead
                                 << " flipped, more than twice the drift " << x.drift;
}

} // namespace

TEST(GpuRank, ServesTheDefaultWorkloadAndAgreesWithTheCpuWithinTheStatedTolerance) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto gpu = run("cuda", "cuda");
  ASSERT_EQ(gpu.code, 0) << gpu.err;
  EXPECT_NE(gpu.out.find("on cuda"), std::string::npos) << gpu.out;
  auto cpu = run("cpu", "cpu");
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  EXPECT_EQ(gpu.summary["device"], "cuda");
  EXPECT_EQ(gpu.summary["requests"], cpu.summary["requests"]);
  ASSERT_EQ(gpu.summary["outputs"].size(), cpu.summary["outputs"].size());
  expect_agreement(gpu.summary, cpu.summary, "GPU vs CPU");
}

// Graphs pad a batch to a captured size, so a replayed step multiplies differently shaped
// matrices than the eager step of the same requests: its greedy tokens may flip on a near-tie,
// as between GPU and CPU. The same margin rule, with the eager run as the reference.
TEST(GpuRank, CapturesGraphsAtStartUpReplaysThemAndAgreesWithEagerSteps) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto graphs = run("cuda", "graphs", {"--cudagraph-mode", "full_and_piecewise"});
  ASSERT_EQ(graphs.code, 0) << graphs.err;
  auto eager = run("cuda", "eager", {"--cudagraph-mode", "none"});
  ASSERT_EQ(eager.code, 0) << eager.err;
  const auto steps = eager.summary["steps"].get<int64_t>();
  EXPECT_EQ(eager.summary["graphs"]["replays"], 0);
  EXPECT_EQ(eager.summary["graphs"]["eager_steps"], steps);
  const auto replays = graphs.summary["graphs"]["replays"].get<int64_t>();
  std::printf("graphs: %lld of %lld steps replayed\n", static_cast<long long>(replays),
              static_cast<long long>(graphs.summary["steps"].get<int64_t>()));
  EXPECT_GT(replays, graphs.summary["steps"].get<int64_t>() / 2)
      << "every step of at most 512 tokens has a graph";
  expect_agreement(graphs.summary, eager.summary, "graphs vs eager");
}

TEST(GpuRank, LazyCaptureServesEagerlyFirstThenReplaysTheSizesSeen) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto lazy = run("cuda", "lazy", {"--cudagraph-capture", "lazy"});
  ASSERT_EQ(lazy.code, 0) << lazy.err;
  const auto replays = lazy.summary["graphs"]["replays"].get<int64_t>();
  const auto eager_steps = lazy.summary["graphs"]["eager_steps"].get<int64_t>();
  std::printf("lazy: %lld replays, %lld eager steps\n", static_cast<long long>(replays),
              static_cast<long long>(eager_steps));
  EXPECT_GT(eager_steps, 0) << "the first step cannot have a graph yet";
  EXPECT_GT(replays, 0) << "sizes seen again replay once captured";
}

TEST(GpuRank, NoGraphMemoryMeansEveryStepRunsEagerly) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto capped = run("cuda", "capped", {"--cudagraph-memory", "0"});
  ASSERT_EQ(capped.code, 0) << capped.err;
  EXPECT_EQ(capped.summary["graphs"]["replays"], 0);
}

TEST(GpuRank, AFloat32RunIsRefusedNamingTheDtypeAndTheCpuThatRunsIt) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto f32 = run("cuda", "f32", {"--dtype", "float32"});
  EXPECT_NE(f32.code, 0);
  EXPECT_NE(f32.err.find("dtype float32: the GPU decoder computes in bfloat16"), std::string::npos)
      << f32.err;
  auto cpu = run("cpu", "cpu_f32", {"--dtype", "float32"});
  EXPECT_EQ(cpu.code, 0) << cpu.err;
}
