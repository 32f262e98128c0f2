// `kvactor plan` end to end: the issue's contract, the human report and the bad inputs.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "cli_support.hpp"

using namespace kvactor::test;

namespace {

std::vector<std::string> llama_args() {
  return {"plan", "--model",         "llama-3.1-8b", "--kv-cache-memory", "20GiB", "--block-size",
          "16",   "--max-model-len", "8192"};
}

std::string temp_file(const std::string& name, const std::string& text) {
  auto path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

void expect_bad_input(const cli_result& r, const std::string& needle) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  // One line on stderr.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

} // namespace

TEST(PlanCli, Llama31With20GiBHas10240BlocksAnd163840TokensAt20x) {
  auto args = llama_args();
  args.push_back("--json");
  auto r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  EXPECT_EQ(j["schema"], "kvactor.plan/1");
  EXPECT_EQ(j["num_blocks"], 10240);
  EXPECT_EQ(j["block_size"], 16);
  EXPECT_EQ(j["bytes_per_block"], 2097152);
  EXPECT_EQ(j["kv_cache_tokens"], 163840);
  EXPECT_DOUBLE_EQ(j["max_concurrency"].get<double>(), 20.0);
  EXPECT_EQ(j["max_model_len"], 8192);
  ASSERT_EQ(j["groups"].size(), 1u);
  const auto& g = j["groups"][0];
  EXPECT_EQ(g["id"], 0);
  EXPECT_EQ(g["kind"], "full");
  EXPECT_EQ(g["layers"].size(), 32u);
  EXPECT_EQ(g["layers"][31], 31);
  EXPECT_EQ(g["layer_names"][0], "model.layers.0.self_attn.attn");
  EXPECT_EQ(g["block_size"], 16);
  EXPECT_EQ(g["kernel_block_size"], 16);
  EXPECT_EQ(g["page_size_bytes"], 65536);
  EXPECT_TRUE(g["sliding_window"].is_null());
  EXPECT_EQ(g["backend"], "paged");
  ASSERT_EQ(j["tensors"].size(), 1u);
  EXPECT_EQ(j["tensors"][0]["size_bytes"], int64_t{2097152} * 10240);
  EXPECT_EQ(j["tensors"][0]["layers"].size(), 32u);
  EXPECT_TRUE(j["kv_sharing"].is_object());
  EXPECT_TRUE(j["kv_sharing"].empty());
  const auto& cg = j["cudagraph"];
  EXPECT_EQ(cg["mode"], "full_and_piecewise");
  EXPECT_EQ(cg["min_graph_support"], "always");
  EXPECT_EQ(cg["capture_sizes"].size(), 51u);
  EXPECT_EQ(cg["piecewise_graphs"].size(), 51u);
  EXPECT_FALSE(cg["full_graphs"].empty());
  EXPECT_EQ(cg["full_graphs"][0]["num_reqs"].get<int>(),
            cg["full_graphs"][0]["num_tokens"].get<int>());
  ASSERT_EQ(j["per_rank"].size(), 1u);
  EXPECT_EQ(j["per_rank"][0]["rank"], 0);
  EXPECT_EQ(j["per_rank"][0]["num_heads"], 32);
  EXPECT_EQ(j["per_rank"][0]["num_kv_heads"], 8);
  EXPECT_EQ(j["per_rank"][0]["available_bytes"], int64_t{20} << 30);
  EXPECT_EQ(j["per_rank"][0]["num_blocks"], 10240);
  EXPECT_EQ(j["views"][0]["shape"], (std::vector<int64_t>{10240, 8, 16, 256}));
  EXPECT_EQ(j["views"][0]["strides"], (std::vector<int64_t>{32768, 4096, 256, 1}));
}

TEST(PlanCli, HumanReportEndsWithVllmsCapacityLine) {
  auto r = run_cli(llama_args());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU KV cache size: 163,840 tokens, Maximum concurrency for 8,192 tokens "
                       "per request: 20.00x"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("KV cache groups"), std::string::npos);
  EXPECT_NE(r.out.find("Ranks"), std::string::npos);
}

TEST(PlanCli, TensorParallelTwoKeepsTenThousandBlocksPerRankWithHalfTheBudget) {
  auto r = run_cli({"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "10GiB",
                    "--max-model-len", "8192", "--tensor-parallel-size", "2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  EXPECT_EQ(j["num_blocks"], 10240);
  EXPECT_EQ(j["bytes_per_block"], 1 << 20);
  ASSERT_EQ(j["per_rank"].size(), 2u);
  EXPECT_EQ(j["per_rank"][1]["num_kv_heads"], 4);
  EXPECT_EQ(j["per_rank"][1]["num_heads"], 16);
}

TEST(PlanCli, UnequalRankBudgetsTakeTheMinimum) {
  auto r = run_cli({"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "10GiB,8GiB",
                    "--max-model-len", "8192", "--tp", "2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  EXPECT_EQ(j["per_rank"][0]["planned_blocks"], 10240);
  EXPECT_EQ(j["per_rank"][1]["planned_blocks"], 8192);
  EXPECT_EQ(j["num_blocks"], 8192);
  EXPECT_EQ(j["per_rank"][0]["num_blocks"], 8192);
}

TEST(PlanCli, Fp8KvCacheDoublesTheBlocks) {
  auto args = llama_args();
  args.insert(args.end(), {"--kv-cache-dtype", "fp8", "--json"});
  auto j = run_cli(args).json();
  EXPECT_EQ(j["num_blocks"], 20480);
  EXPECT_EQ(j["kv_cache_tokens"], 327680);
}

TEST(PlanCli, BlockOverrideIgnoresTheBudget) {
  auto args = llama_args();
  args.insert(args.end(), {"--num-gpu-blocks-override", "1000", "--json"});
  auto j = run_cli(args).json();
  EXPECT_EQ(j["num_blocks"], 1000);
  EXPECT_EQ(j["warnings"].back(),
            "Overriding num_gpu_blocks=10240 with num_gpu_blocks_override=1000");
}

TEST(PlanCli, GpuMemoryTimesUtilizationLessWeightsIsTheBudget) {
  auto r = run_cli({"plan", "--model", "llama-3.1-8b", "--gpu-memory", "80GiB",
                    "--gpu-memory-utilization", "0.9", "--weights-memory", "16GiB",
                    "--max-model-len", "8192", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  EXPECT_EQ(j["per_rank"][0]["available_bytes"], int64_t{77309411328} - (int64_t{16} << 30));
  EXPECT_EQ(j["num_blocks"], (int64_t{77309411328} - (int64_t{16} << 30)) / 2097152);
}

TEST(PlanCli, CpuDeviceUsesTheReferenceBackendAndNoGraphs) {
  auto args = llama_args();
  args.insert(args.end(), {"--device", "cpu", "--json"});
  auto j = run_cli(args).json();
  EXPECT_EQ(j["groups"][0]["backend"], "reference");
  EXPECT_EQ(j["cudagraph"]["mode"], "none");
  EXPECT_TRUE(j["cudagraph"]["full_graphs"].empty());
}

TEST(PlanCli, UserCaptureSizesAreSortedAndDeduplicated) {
  auto args = llama_args();
  args.insert(args.end(), {"--cudagraph-capture-sizes", "8,1,4,4,2", "--json"});
  auto j = run_cli(args).json();
  EXPECT_EQ(j["cudagraph"]["capture_sizes"], (std::vector<int>{1, 2, 4, 8}));
}

TEST(PlanCliErrors, UnknownFlagIsExitTwoWithJsonError) {
  auto args = llama_args();
  args.insert(args.end(), {"--frobnicate", "--json"});
  auto r = run_cli(args);
  expect_bad_input(r, "--frobnicate");
  EXPECT_TRUE(r.json().contains("error"));
}

TEST(PlanCliErrors, MissingModelFlagIsExitTwo) {
  expect_bad_input(run_cli({"plan", "--kv-cache-memory", "1GiB"}), "--model");
}

TEST(PlanCliErrors, MalformedConfigJsonIsAParseError) {
  auto path = temp_file("malformed.json", "{\"model_type\": \"llama\", ");
  auto r = run_cli({"plan", "--model", path, "--kv-cache-memory", "1GiB", "--json"});
  expect_bad_input(r, "parse");
  EXPECT_EQ(r.json()["code"], "parse_error");
}

TEST(PlanCliErrors, UnknownModelTypeNamesIt) {
  auto path = temp_file("unknown.json", R"({"model_type": "frobnet", "num_hidden_layers": 2})");
  auto r = run_cli({"plan", "--model", path, "--kv-cache-memory", "1GiB"});
  expect_bad_input(r, "frobnet");
}

TEST(PlanCliErrors, UnknownShippedNameIsAnError) {
  expect_bad_input(run_cli({"plan", "--model", "llama-9", "--kv-cache-memory", "1GiB"}), "llama-9");
}

TEST(PlanCliErrors, HeadsNotDivisibleByTensorParallelSize) {
  auto r = run_cli({"plan", "--model", "qwen2.5-7b", "--kv-cache-memory", "10GiB",
                    "--tensor-parallel-size", "3"});
  expect_bad_input(r, "num_attention_heads");
  EXPECT_NE(r.err.find("28"), std::string::npos);
}

TEST(PlanCliErrors, ZeroOrNegativeBudgetIsRejected) {
  expect_bad_input(run_cli({"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "0"}),
                   "--kv-cache-memory");
  expect_bad_input(run_cli({"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "-5GiB"}),
                   "'-5GiB' is negative");
  expect_bad_input(run_cli({"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "5 parsecs"}),
                   "unknown unit");
}

TEST(PlanCliErrors, NoBudgetAtAllSaysWhichFlagsGiveOne) {
  expect_bad_input(run_cli({"plan", "--model", "llama-3.1-8b"}), "--kv-cache-memory");
}

TEST(PlanCliErrors, UnknownFlagValuesNameFlagAndValue) {
  auto base = llama_args();
  for (auto [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--cudagraph-mode", "sometimes"},
                                                        {"--dtype", "int4"},
                                                        {"--kv-cache-dtype", "fp4"},
                                                        {"--kv-cache-layout", "XYZ"},
                                                        {"--device", "tpu"},
                                                        {"--attention-backend", "flash"}}) {
    auto args = base;
    args.insert(args.end(), {flag, value});
    auto r = run_cli(args);
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(value), std::string::npos) << r.err;
  }
}

TEST(PlanCliErrors, BudgetTooSmallForOneRequestSaysHowMuchIsNeeded) {
  auto r = run_cli(
      {"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "1GiB", "--max-model-len", "8192"});
  expect_bad_input(r, "1.00 GiB");
  EXPECT_NE(r.err.find("estimated maximum model length is 8176"), std::string::npos) << r.err;
}

TEST(PlanCliErrors, MaxModelLenAboveTheModelsIsRejected) {
  expect_bad_input(run_cli({"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "20GiB",
                            "--max-model-len", "200000"}),
                   "--max-model-len");
}

TEST(PlanCliErrors, NonNumericIntegerFlagIsExitTwo) {
  expect_bad_input(run_cli({"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "20GiB",
                            "--block-size", "sixteen"}),
                   "--block-size");
}

TEST(PlanCliErrors, BadLogLevelIsExitTwo) {
  auto args = llama_args();
  args.insert(args.end(), {"--log-level", "loud"});
  expect_bad_input(run_cli(args), "loud");
}
