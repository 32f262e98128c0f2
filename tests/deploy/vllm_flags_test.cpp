// vLLM's spellings of kvactor's flags: -tp, --kv-cache-memory-bytes, --enforce-eager and
// --compilation-config; and --version.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_support.hpp"
#include "deploy/vllm_flags.hpp"
#include "kvactor/kernels/device_runtime.h"

namespace kvactor::test {
namespace {

std::vector<std::string> llama_plan(std::vector<std::string> extra) {
  std::vector<std::string> args{"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "20GiB"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--json");
  return args;
}

TEST(VllmFlags, TpIsSpelledAsTensorParallelSizeAndNothingElseChanges) {
  const char* argv[] = {"kvactor", "plan", "-tp", "4", "-tp=2", "--tp", "3", "-t"};
  const auto args = spell_vllm_short_flags(8, argv);
  EXPECT_EQ(args, (std::vector<std::string>{"kvactor", "plan", "--tensor-parallel-size", "4",
                                            "--tensor-parallel-size=2", "--tp", "3", "-t"}));
}

TEST(VllmFlags, TheCompilationConfigSetsTheGraphModeAndSizesAndReturnsTheKeysItIgnores) {
  plan_flags f;
  vllm_flags v;
  v.compilation_config =
      R"({"level": 3, "cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [4, 1, 2]})";
  auto ignored = apply_vllm_flags(v, f);
  ASSERT_TRUE(ignored) << ignored.err().message;
  EXPECT_EQ(*ignored, std::vector<std::string>{"level"});
  EXPECT_EQ(f.cudagraph_mode, "full_decode_only");
  EXPECT_EQ(f.cudagraph_capture_sizes_text, "4,1,2");
}

TEST(VllmFlags, EnforceEagerTurnsGraphsOffUnlessAGraphModeIsAskedForToo) {
  plan_flags f;
  vllm_flags v;
  v.enforce_eager = true;
  ASSERT_TRUE(apply_vllm_flags(v, f));
  EXPECT_EQ(f.cudagraph_mode, "none");

  plan_flags g;
  g.cudagraph_mode = "full";
  v.cudagraph_mode_given = true;
  auto clash = apply_vllm_flags(v, g);
  ASSERT_FALSE(clash);
  EXPECT_NE(clash.err().message.find("--enforce-eager"), std::string::npos);
  EXPECT_NE(clash.err().message.find("'full'"), std::string::npos);
}

TEST(VllmFlags, BadCompilationConfigsAreErrorsNamingTheKeyAndValue) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"{not json", "is not JSON"},
      {"[1, 2]", "is not a JSON object"},
      {R"({"cudagraph_mode": 2})", "cudagraph_mode: 2 is not a string"},
      {R"({"cudagraph_mode": "SOMETIMES"})", "cudagraph_mode: unknown value 'SOMETIMES'"},
      {R"({"cudagraph_capture_sizes": "1,2"})", "cudagraph_capture_sizes: \"1,2\" is not a list"},
      {R"({"cudagraph_capture_sizes": [1, 2.5]})", "cudagraph_capture_sizes: 2.5 is not an"},
  };
  for (const auto& [config, needle] : cases) {
    plan_flags f;
    vllm_flags v;
    v.compilation_config = config;
    auto r = apply_vllm_flags(v, f);
    ASSERT_FALSE(r) << config;
    EXPECT_NE(r.err().message.find("--compilation-config"), std::string::npos) << config;
    EXPECT_NE(r.err().message.find(needle), std::string::npos) << r.err().message;
  }
}

TEST(VllmFlags, ACompilationConfigThatDisagreesWithKvactorsFlagIsAnError) {
  plan_flags f;
  f.cudagraph_mode = "piecewise";
  vllm_flags v;
  v.cudagraph_mode_given = true;
  v.compilation_config = R"({"cudagraph_mode": "FULL"})";
  auto r = apply_vllm_flags(v, f);
  ASSERT_FALSE(r);
  EXPECT_NE(r.err().message.find("disagrees with --cudagraph-mode piecewise"), std::string::npos)
      << r.err().message;
}

TEST(VllmFlagsCli, AVllmCommandLinePlansLikeKvactorsOwnFlags) {
  auto vllm = run_cli({"plan", "--model", "llama-3.1-8b", "-tp", "2", "--kv-cache-memory-bytes",
                       "21474836480", "--enforce-eager", "--json"});
  auto ours = run_cli({"plan", "--model", "llama-3.1-8b", "--tensor-parallel-size", "2",
                       "--kv-cache-memory", "20GiB", "--cudagraph-mode", "none", "--json"});
  ASSERT_EQ(vllm.code, 0) << vllm.err;
  ASSERT_EQ(ours.code, 0) << ours.err;
  EXPECT_EQ(vllm.json(), ours.json());
  EXPECT_EQ(vllm.json()["cudagraph"]["mode"], "none");
  EXPECT_EQ(vllm.json()["tensor_parallel_size"], 2);
}

TEST(VllmFlagsCli, TheCompilationConfigReachesThePlanAndItsErrorsAreExitTwo) {
  auto r = run_cli(
      llama_plan({"--compilation-config",
                  R"({"cudagraph_mode": "PIECEWISE", "cudagraph_capture_sizes": [8, 2]})"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.json()["cudagraph"]["mode"], "piecewise");
  EXPECT_EQ(r.json()["cudagraph"]["capture_sizes"], (std::vector<int>{2, 8}));
  auto bad = run_cli(llama_plan({"--compilation-config", "{oops"}));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--compilation-config"), std::string::npos) << bad.err;
  EXPECT_NE(bad.json()["error"].get<std::string>().find("is not JSON"), std::string::npos);
  auto eager =
      run_cli({"run", "--enforce-eager", "--requests", "2", "--output-len", "2", "--no-progress"});
  EXPECT_EQ(eager.code, 0) << eager.err;
}

TEST(VllmFlagsCli, VersionNamesKvactorItsCommitAndItsParts) {
  auto r = run_cli({"--version"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("kvactor 0.1.0 (commit ", 0), 0u) << r.out;
  for (const char* part : {"CAF 0.17.", "CUDA ", "NCCL ", "g++ "})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " in " << r.out;
}

// The rough edges a newcomer hit.
TEST(CliRoughEdges, AMistypedFlagNamesTheSubcommandAndTheFlagItMeant) {
  auto r = run_cli({"run", "--kv-cache-memroy", "20GiB"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("kvactor run: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("(did you mean --kv-cache-memory?)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("`kvactor run --help` lists the flags"), std::string::npos) << r.err;
  auto show = run_cli({"trace", "show"});
  EXPECT_EQ(show.err.rfind("kvactor trace show: error: ", 0), 0u) << show.err;
}

TEST(CliRoughEdges, AnUnknownModelIsTheErrorBeforeAnyBudgetAndSuggestsTheNearestName) {
  auto r = run_cli({"plan", "--model", "llama-3.1-9b"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model 'llama-3.1-9b'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(did you mean llama-3.1-8b?)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("budget"), std::string::npos) << r.err;
}

TEST(CliRoughEdges, ABudgetBelowOneBlockSaysSoWithoutANegativeFigure) {
  auto r = run_cli({"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "20"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("(20 B, 20 bytes) does not hold even the null block"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("-"), r.err.find("--")) << "a negative figure: " << r.err;
}

// Without a budget flag, plan measures the local GPU as run does; with none (CI), it says which
// flags to give and why it could not measure. (On the H200 it plans from GPU 0's memory less
// the decoder's estimated bytes.)
TEST(CliRoughEdges, PlanWithoutABudgetMeasuresTheLocalGpuOrSaysWhyItCannot) {
  std::string why;
  if (kernels::probe_gpu(0, &why)) {
    auto r = run_cli({"plan", "--model", "llama-3.1-8b", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_GT(r.json()["num_blocks"].get<int64_t>(), 0);
    return;
  }
  auto r = run_cli({"plan", "--model", "llama-3.1-8b"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("budget: give --kv-cache-memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no local GPU to measure ("), std::string::npos) << r.err;
  auto cpu = run_cli({"plan", "--model", "llama-3.1-8b", "--device", "cpu"});
  EXPECT_EQ(cpu.code, 2);
  EXPECT_EQ(cpu.err.find("no local GPU"), std::string::npos) << "a CPU plan measures nothing";
}

TEST(CliRoughEdges, HelpShowsDefaultsAndNoFlagInternals) {
  auto r = run_cli({"run", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.find("{false}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--requests INT=16"), std::string::npos) << r.out;
}

} // namespace
} // namespace kvactor::test
