// The GPU rank end to end: `kvactor run --device cuda` serves the default workload with the same
// protocol and summary as the CPU, and its greedy tokens agree with the CPU path.
//
// Tolerance: the GPU decoder computes in bf16 with float accumulation, the CPU decoder in float
// over the same bf16 cache, so a near-tie in the greedy argmax may flip one token; after a flip a
// request's continuation legitimately differs. The default model's weights are random
// (generated from the seed), so its logits are flat and near-ties are common: on an H200
// 96% of first tokens and 58% of the 24 requests' whole outputs were identical.
// Stated bound: >= 90% of first generated tokens identical, and >= 50% of requests identical in
// every token. How close the GPU decoder is to an independent reference is tested against
// transformers' fixtures (decoder_cuda_test.cpp), not here.
#include <gtest/gtest.h>

#include <fstream>

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
      "run",           "--device",          device,   "--seed",         "11", "--requests", "24",
      "--no-progress", "--kv-cache-memory", "256MiB", "--summary-json", path};
  args.insert(args.end(), more.begin(), more.end());
  cli_run r{kvactor::test::run_cli(std::move(args)), {}};
  if (r.code == 0) {
    std::ifstream in(path);
    r.summary = nlohmann::json::parse(in);
  }
  return r;
}

struct agreement {
  double first = 0, whole = 0;
};

agreement agree(const nlohmann::json& a, const nlohmann::json& b) {
  const auto& g = a["outputs"];
  const auto& c = b["outputs"];
  int first_same = 0, all_same = 0, total = 0;
  for (size_t i = 0; i < g.size() && i < c.size(); ++i) {
    const auto& go = g[i]["tokens"];
    const auto& co = c[i]["tokens"];
    if (go.empty() || co.empty()) continue;
    ++total;
    first_same += go[0] == co[0];
    all_same += go == co;
  }
  EXPECT_GT(total, 0) << "no request generated a token";
  if (total == 0) return {};
  return {static_cast<double>(first_same) / total, static_cast<double>(all_same) / total};
}

// The outputs of two runs agree within the bound stated at the top of this file.
void expect_agreement(const nlohmann::json& a, const nlohmann::json& b, const char* what) {
  const agreement x = agree(a, b);
  std::printf("%s: first tokens identical %.0f%%, whole outputs %.0f%%\n", what, 100 * x.first,
              100 * x.whole);
  EXPECT_GE(x.first, 0.90) << what;
  EXPECT_GE(x.whole, 0.50) << what;
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
// as between GPU and CPU. Same stated bound.
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
