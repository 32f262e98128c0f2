// What a new user trips on, as specifications: every value is checked before any work and its
// error names the flag or field and the rule; a run counts only the work it did; its exit code
// says whether every request finished; files kvactor reads are refused by name when damaged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "tests/support/fixture_paths.hpp"
#include "tests/support/temp_dir.hpp"

namespace kvactor::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// A small CPU run of kvactor-tiny; `more` flags replace the defaults they name.
std::vector<std::string> small_run(const std::vector<std::string>& more) {
  const std::vector<std::pair<std::string, std::string>> defaults = {{"--requests", "4"},
                                                                     {"--prompt-len", "8:24"},
                                                                     {"--output-len", "2:4"},
                                                                     {"--device", "cpu"},
                                                                     {"--kv-cache-memory", "8MiB"}};
  std::vector<std::string> args{"run", "--no-progress"};
  for (const auto& [flag, value] : defaults)
    if (std::find(more.begin(), more.end(), flag) == more.end())
      args.insert(args.end(), {flag, value});
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

struct refused_value {
  std::vector<std::string> flags;
  std::string says;
};

// Every one of these used to crash, wrap around, or be taken silently.
TEST(BadInput, EveryEngineValueOutsideItsRangeIsRefusedBeforeAnyWorkNamingTheFlag) {
  const std::vector<refused_value> cases = {
      {{"--block-size", "0"}, "--block-size: 0 is outside [1, 8192] (tokens per KV cache block)"},
      {{"--block-size", "-16"}, "--block-size: -16 is outside [1, 8192]"},
      {{"--max-model-len", "-1"}, "--max-model-len: -1 is outside [0, 2147483647]"},
      {{"--num-gpu-blocks-override", "-1"}, "--num-gpu-blocks-override: -1 is outside"},
      {{"--num-speculative-tokens", "-1"}, "--num-speculative-tokens: -1 is outside"},
      {{"--num-speculative-tokens", "100000"}, "--num-speculative-tokens: 100000 is outside"},
      {{"--num-speculative-tokens", "2"}, "--num-speculative-tokens: 2: a run has no draft model"},
      {{"--max-num-batched-tokens", "2147483647"},
       "--max-num-batched-tokens: 2147483647 is outside [1, 1048576] (tokens per step)"},
      {{"--max-num-seqs", "0"}, "--max-num-seqs: 0 is outside [1, 65536]"},
      {{"--seed", "-1"}, "--seed: '-1' is not a whole number >= 0"},
      {{"--seed", "99999999999999999999"}, "--seed: 99999999999999999999 is out of range"},
      {{"--stats-interval", "-1"}, "--stats-interval: -1 is not a number of seconds >= 0"},
      {{"--stats-interval", "nan"}, "--stats-interval: 'nan' is not a finite number"},
      {{"--requests", "2000000"}, "--requests: 2000000 is outside [0, 1000000]"},
      {{"--logprobs", "21"}, "--logprobs: 21 is outside [0, 20]"},
      {{"--logprobs", "-1"}, "--logprobs: -1 is outside [0, 20]"},
      {{"--ubatches", "3"}, "--ubatches: 3 is outside [1, 2]"},
      {{"--tensor-parallel-size", "0"}, "--tensor-parallel-size: 0 is outside [1, 64]"},
      {{"--restart-wait", "inf"}, "--restart-wait: 'inf' is not a finite number"},
      {{"--prompt-len", "3000"},
       "--prompt-len: prompts of up to 3000 tokens, but a prompt must "
       "be shorter than the model length of 2048 tokens"},
      {{"--summary-json", "/nonexistent/x.json"},
       "--summary-json: cannot write '/nonexistent/x.json' (no directory /nonexistent)"},
      {{"--record", "t.kvtrace", "--chaos", "1:0.1"},
       "--record with --chaos: lost, repeated and late messages"},
      {{"--record", "t.kvtrace", "--chaos-stall", "0:3"}, "--record with --chaos-stall"},
      {{"--record", "t.kvtrace", "--chaos-kill", "0:3"}, "--record with --chaos-kill"},
  };
  for (const auto& c : cases) {
    auto r = run_cli(small_run(c.flags));
    EXPECT_EQ(r.code, 2) << c.flags.front() << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.says)) << c.flags.front();
    EXPECT_THAT(r.out, Not(HasSubstr("kvactor run:"))) << "refused before the run began";
  }
}

TEST(BadInput, PlanRefusesWhatRunRefusesWithTheSameWords) {
  for (const std::vector<std::string> flags : {std::vector<std::string>{"--block-size", "0"},
                                               {"--max-num-batched-tokens", "2147483647"},
                                               {"--num-speculative-tokens", "100000"}}) {
    std::vector<std::string> plan{"plan", "--model", "llama-3.1-8b", "--kv-cache-memory", "1GiB"};
    plan.insert(plan.end(), flags.begin(), flags.end());
    const auto p = run_cli(plan);
    const auto r = run_cli(small_run(flags));
    EXPECT_EQ(p.code, 2) << p.err;
    EXPECT_EQ(r.code, 2) << r.err;
    const auto words = p.err.substr(p.err.find(flags.front()));
    EXPECT_THAT(r.err, HasSubstr(words)) << "plan said: " << p.err;
  }
}

TEST(BadInput, AConfigWhoseKvHeadsDoNotDivideItsQueryHeadsIsRefusedNamingTheField) {
  temp_dir dir{"kvactor-bad-heads"};
  std::ifstream in(std::string(KVACTOR_SOURCE_DIR) + "/deploy/models/kvactor-tiny.json");
  auto config = nlohmann::json::parse(in);
  config["num_key_value_heads"] = 3; // kvactor-tiny has 4 query heads
  dir.write("config.json", config.dump());
  const auto path = dir.file("config.json");
  auto plan = run_cli({"plan", "--model", path, "--kv-cache-memory", "1GiB"});
  EXPECT_EQ(plan.code, 2);
  EXPECT_THAT(plan.err, HasSubstr("num_key_value_heads: 3 does not divide num_attention_heads 4"));
  auto run = run_cli(small_run({"--model", path}));
  EXPECT_EQ(run.code, 2);
  EXPECT_THAT(run.err, HasSubstr("num_key_value_heads: 3 does not divide num_attention_heads 4"));
  config["num_key_value_heads"] = 4;
  config["hidden_size"] = -1;
  dir.write("config.json", config.dump());
  auto hidden = run_cli({"plan", "--model", path, "--kv-cache-memory", "1GiB"});
  EXPECT_EQ(hidden.code, 2);
  EXPECT_THAT(hidden.err, HasSubstr("hidden_size"));
}

TEST(BadInput, AModelDirectoryWithoutWeightsIsAnErrorNamingTheFilesLookedFor) {
  temp_dir dir{"kvactor-no-weights"};
  fs::copy_file(transformers_fixture("llama") + "/config.json", dir.file("config.json"));
  auto r = run_cli(small_run({"--model", dir.path.string()}));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.err, HasSubstr("a model directory without weights (looked for "
                               + dir.file("model.safetensors") + " and "
                               + dir.file("model.safetensors.index.json")));
  EXPECT_THAT(r.err, HasSubstr("--load-format synthetic"));
  auto synthetic = run_cli(small_run({"--model", dir.path.string(), "--load-format", "synthetic"}));
  EXPECT_EQ(synthetic.code, 0) << synthetic.err;
  EXPECT_THAT(synthetic.out, HasSubstr("4 finished, 0 failed"));
}

// The rank dies before the first step ends: nothing was prefilled, so nothing is counted.
TEST(BadInput, ARunThatNeverSteppedCountsNoTokensAndExitsOne) {
  temp_dir dir{"kvactor-counts"};
  auto r = run_cli(small_run({"--requests", "3", "--prompt-len", "48", "--chaos-kill", "0:0",
                              "--summary-json", dir.file("s.json")}));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("0 finished, 3 failed"));
  EXPECT_THAT(r.out, HasSubstr("tokens     0 prompt, 0 generated, 0.0 tok/s"));
  EXPECT_THAT(r.out, HasSubstr("throughput prompt 0.0 tok/s, generated 0.0 tok/s"));
  std::ifstream in(dir.file("s.json"));
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["tokens"]["prompt"], 0);
  EXPECT_EQ(j["prompt_throughput_tok_s"], 0.0);
}

// Steps of 64 tokens over four 48-token prompts: the first step prefills request 0 and a third
// of request 1, the second the rest of request 1; the rank dies at the third. Two prompts ran.
TEST(BadInput, ARunThatFailedSomeRequestsCountsOnlyThePromptsItRanAndExitsOne) {
  auto r = run_cli(small_run({"--prompt-len", "48", "--output-len", "2", "--max-num-batched-tokens",
                              "64", "--chaos-kill", "0:2"}));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("1 finished, 3 failed"));
  EXPECT_THAT(r.out, HasSubstr("tokens     96 prompt, 3 generated"))
      << "two 48-token prompts ran, not the workload's 192 tokens";
}

TEST(BadInput, ARunThatFailedEveryRequestExitsOne) {
  auto r = run_cli(small_run({"--chaos-stall", "0:1", "--step-timeout", "0.5"}));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("0 finished, 4 failed"));
}

TEST(BadInput, ARunThatFinishedEveryRequestExitsZero) {
  auto r = run_cli(small_run({}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 finished, 0 failed"));
}

struct generation_config_case {
  std::string text;
  std::string says;
};

TEST(BadInput, ADamagedGenerationConfigIsRefusedNamingTheFileAndField) {
  const std::vector<generation_config_case> cases = {
      {"{not json", "generation_config.json: not valid JSON"},
      {"[1, 2]", "generation_config.json: not a JSON object (array)"},
      {R"({"eos_token_id": "2"})", "generation_config.json: eos_token_id: \"2\" is not a token id"},
      {R"({"eos_token_id": [2, -1]})", "eos_token_id: [2,-1] is not a token id"},
      {R"({"eos_token_id": 1.5})", "eos_token_id: 1.5 is not a token id"}};
  for (const auto& c : cases) {
    temp_dir dir{"kvactor-genconfig"};
    for (const char* f : {"config.json", "model.safetensors"})
      fs::create_symlink(transformers_fixture("qwen3") + "/" + f, dir.file(f));
    dir.write("generation_config.json", c.text);
    auto r = run_cli({"generate", "--model", dir.path.string(), "--prompt-ids", "1,2,3",
                      "--max-tokens", "2", "--device", "cpu"});
    EXPECT_EQ(r.code, 2) << c.text << ": " << r.out;
    EXPECT_THAT(r.err, HasSubstr(c.says)) << c.text;
  }
}

TEST(BadInput, GenerateNamesTheFlagOfAnEmptyPromptAndAnInfiniteTemperature) {
  auto empty = run_cli({"generate", "--model", transformers_fixture("qwen3"), "--prompt", ""});
  EXPECT_EQ(empty.code, 2);
  EXPECT_THAT(empty.err, HasSubstr("--prompt: empty"));
  auto inf = run_cli({"generate", "--model", transformers_fixture("qwen3"), "--prompt-ids", "1,2",
                      "--temperature", "inf"});
  EXPECT_EQ(inf.code, 2);
  EXPECT_THAT(inf.err, HasSubstr("--temperature: 'inf' is not a finite number"));
}

TEST(BadInput, RunFlagsWithoutASubcommandRunTheDefaultWorkload) {
  auto r = run_cli({"--requests", "2", "--prompt-len", "8", "--output-len", "2", "--no-progress",
                    "--device", "cpu"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 finished, 0 failed"));
}

TEST(BadInput, AMistypedSubcommandGetsASuggestion) {
  auto r = run_cli({"rn", "--requests", "2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("did you mean `kvactor run`?"));
}

TEST(BadInput, TheSameNodeTwiceIsRefusedAsSuch) {
  auto r = run_cli(small_run({"--nodes", "127.0.0.1:7400,127.0.0.1:7400"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--nodes: 127.0.0.1:7400 is given twice (the same node twice"));
}

TEST(BadInput, WithJsonLogsTheFinalErrorLineIsJsonToo) {
  auto r = run_cli({"--log-format", "json", "run", "--block-size", "0"});
  EXPECT_EQ(r.code, 2);
  std::istringstream lines(r.err);
  std::string line, last;
  while (std::getline(lines, line))
    if (!line.empty()) last = line;
  const auto j = nlohmann::json::parse(last);
  EXPECT_EQ(j["level"], "error");
  EXPECT_THAT(j["message"].get<std::string>(), HasSubstr("--block-size: 0 is outside"));
}

TEST(BadInput, APlanForTheCpuTakesTheBudgetARunWouldTake) {
  auto r = run_cli({"plan", "--model", "kvactor-tiny", "--device", "cpu", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.json()["per_rank"][0]["available_bytes"], int64_t{256} << 20);
}

TEST(BadInput, TraceShowOfAStepTheTraceDoesNotHoldIsAnError) {
  temp_dir dir{"kvactor-trace-step"};
  const auto trace = dir.file("t.kvtrace");
  ASSERT_EQ(run_cli(small_run({"--record", trace})).code, 0);
  auto r = run_cli({"trace", "show", trace, "--step", "99999"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--step 99999: " + trace + " holds steps 0 to "));
}

} // namespace
} // namespace kvactor::test
