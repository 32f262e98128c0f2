// `kvactor plan` and `kvactor run` size the KV cache with one rule: for the same model, budget and
// tensor-parallel size, the block count plan prints is the one the run's ranks allocate.
#include <ostream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/deploy/cli_support.hpp"

namespace kvactor::test {
namespace {

struct agreement_case {
  std::string model;
  std::string budget; // --kv-cache-memory
  int32_t tp = 1;
  std::string max_model_len = "4096";
};

void PrintTo(const agreement_case& c, std::ostream* os) {
  *os << c.model << " with " << c.budget << " at TP " << c.tp;
}

// The run's block count, from "..., N blocks of KV cache, ..." (the protocol alone: no kernels).
int64_t run_blocks(const agreement_case& c) {
  auto r = run_cli({"run", "--no-progress", "--no-kernels", "--device", "cpu", "--model", c.model,
                    "--kv-cache-memory", c.budget, "--max-model-len", c.max_model_len,
                    "--tensor-parallel-size", std::to_string(c.tp), "--requests", "1",
                    "--prompt-len", "8", "--output-len", "2"});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  std::smatch m;
  if (!std::regex_search(r.out, m, std::regex(R"((\d+) blocks of KV cache)"))) {
    ADD_FAILURE() << "no block count in: " << r.out;
    return -1;
  }
  return std::stoll(m[1]);
}

int64_t plan_blocks(const agreement_case& c) {
  auto r = run_cli({"plan", "--json", "--device", "cpu", "--model", c.model, "--kv-cache-memory",
                    c.budget, "--max-model-len", c.max_model_len, "--tensor-parallel-size",
                    std::to_string(c.tp)});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  if (r.code != exit_ok) return -2;
  return r.json()["num_blocks"].get<int64_t>();
}

class PlanRunAgreement : public ::testing::TestWithParam<agreement_case> {};

TEST_P(PlanRunAgreement, PlanPrintsTheBlockCountTheRunAllocates) {
  const auto& c = GetParam();
  const auto planned = plan_blocks(c);
  EXPECT_GT(planned, 0);
  EXPECT_EQ(run_blocks(c), planned) << c.model << " with " << c.budget << " at TP " << c.tp;
}

INSTANTIATE_TEST_SUITE_P(ShippedModels, PlanRunAgreement,
                         ::testing::Values(agreement_case{"kvactor-tiny", "8MiB", 1, "2048"},
                                           agreement_case{"kvactor-tiny", "64MiB", 2, "1024"},
                                           agreement_case{"llama-3.1-8b", "1GiB"},
                                           agreement_case{"llama-3.1-8b", "2GiB", 2},
                                           agreement_case{"qwen3-8b", "1500MiB"},
                                           agreement_case{"mistral-7b-v0.1", "1GiB"},
                                           agreement_case{"gemma-2-9b-it", "3GiB", 2}),
                         [](const auto& info) {
                           auto name = info.param.model + "_" + info.param.budget + "_tp"
                                       + std::to_string(info.param.tp);
                           for (auto& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

} // namespace
} // namespace kvactor::test
