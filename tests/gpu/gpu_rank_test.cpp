// The GPU rank end to end: `kvactor run --device cuda` serves the default workload with the same
// protocol and summary as the CPU, and its greedy tokens agree with the CPU path.
//
// Tolerance: the GPU computes in bf16 with float accumulation, the CPU reference in float over
// the same bf16 cache, so a near-tie in the greedy argmax may flip one token; after a flip a
// request's continuation legitimately differs. Stated bound: >= 90% of first generated tokens
// identical, and >= 75% of requests identical in every token.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "deploy/cli.hpp"
#include "gpu_support.hpp"

namespace {

struct cli_run {
  int code = -1;
  std::string out, err;
  nlohmann::json summary;
};

cli_run run(const std::string& device, const std::string& tag) {
  const auto path = ::testing::TempDir() + "gpu_rank_" + tag + ".json";
  std::vector<std::string> args{
      "kvactor",    "run", "--device",      device,           "--seed", "11",
      "--requests", "24",  "--no-progress", "--summary-json", path,     "--kv-cache-memory",
      "256MiB"};
  std::vector<const char*> argv;
  for (const auto& a : args)
    argv.push_back(a.c_str());
  std::ostringstream out, err;
  cli_run r;
  r.code = kvactor::kvactor_main(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  if (r.code == 0) {
    std::ifstream in(path);
    r.summary = nlohmann::json::parse(in);
  }
  return r;
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
  const auto& g = gpu.summary["outputs"];
  const auto& c = cpu.summary["outputs"];
  ASSERT_EQ(g.size(), c.size());
  int first_same = 0, all_same = 0, total = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& go = g[i]["tokens"];
    const auto& co = c[i]["tokens"];
    if (go.empty() || co.empty()) continue;
    ++total;
    first_same += go[0] == co[0];
    all_same += go == co;
  }
  ASSERT_GT(total, 0);
  const double first = static_cast<double>(first_same) / total;
  const double whole = static_cast<double>(all_same) / total;
  std::printf("GPU vs CPU: first tokens identical %d/%d (%.0f%%), whole outputs %d/%d (%.0f%%)\n",
              first_same, total, 100 * first, all_same, total, 100 * whole);
  EXPECT_GE(first, 0.90);
  EXPECT_GE(whole, 0.75);
}
