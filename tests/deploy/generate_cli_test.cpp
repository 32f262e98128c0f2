// `kvactor generate` end to end: a transformers fixture loaded from its directory, served by the
// driver, the ranks and their builders with a paged KV cache, continues each prompt exactly as
// transformers did, on one rank and on two; a text prompt goes through the directory's tokenizer
// and the continuation comes back as text; bad input is an error that names the flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_support.hpp"
#include "deploy/generate_command.hpp"
#include "model/tokenizer.hpp"
#include "tests/support/fixture_paths.hpp"

namespace kvactor::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The fixture's tokenizer (mistral and qwen2 hold one), or null.
std::unique_ptr<tokenizer> tokenizer_of(const std::string& family) {
  auto t = load_tokenizer(transformers_fixture(family));
  return t ? std::move(*t) : nullptr;
}

nlohmann::json expected_of(const std::string& family) {
  std::ifstream in(transformers_fixture(family) + "/expected.json");
  return nlohmann::json::parse(in);
}

class GenerateCli : public ::testing::TestWithParam<std::string> {};

TEST_P(GenerateCli, ContinuesEveryPromptAsTransformersDid) {
  const auto want = expected_of(GetParam());
  const auto tok = tokenizer_of(GetParam());
  for (size_t p = 0; p < want["prompts"].size(); ++p) {
    const auto prompt = want["prompts"][p].get<std::vector<int32_t>>();
    const auto continuation = want["continuations"][p].get<std::vector<int32_t>>();
    for (const char* tp : {"1", "2"}) {
      auto r = run_cli({"generate", "--model", transformers_fixture(GetParam()), "--prompt-ids",
                        fmt::format("{}", fmt::join(prompt, ",")), "--max-tokens",
                        std::to_string(continuation.size()), "--tensor-parallel-size", tp,
                        "--device", "cpu", "--json"});
      ASSERT_EQ(r.code, 0) << r.err;
      const auto j = r.json();
      EXPECT_EQ(j["output_ids"].get<std::vector<int32_t>>(), continuation)
          << GetParam() << " prompt " << p << " tp " << tp;
      EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), prompt);
      if (tok)
        EXPECT_EQ(j["text"], *tok->decode(continuation, true)) << GetParam();
      else
        EXPECT_TRUE(j["text"].is_null()) << "no tokenizer in " << GetParam();
      EXPECT_EQ(j["finish_reason"], "length");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DenseFamilies, GenerateCli,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2",
                                           "gemma3_text", "phi3"),
                         [](const auto& info) { return info.param; });

std::vector<int32_t> generated(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "generate",     "--model",           transformers_fixture("llama"),
      "--prompt-ids", "39,177,182,216,62", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_cli(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? r.json()["output_ids"].get<std::vector<int32_t>>() : std::vector<int32_t>{};
}

TEST(GenerateCliSampling, AStopTokenEndsTheRequestAndIsKept) {
  auto r =
      run_cli({"generate", "--model", transformers_fixture("llama"), "--prompt-ids",
               "39,177,182,216,62", "--max-tokens", "20", "--stop-token-ids", "222", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.json()["output_ids"].get<std::vector<int32_t>>(),
            (std::vector<int32_t>{126, 126, 222}));
  EXPECT_EQ(r.json()["finish_reason"], "stop");
}

TEST(GenerateCliSampling, TheSameSeedGivesTheSameTokensOnAnyNumberOfRanks) {
  const std::vector<std::string> sample = {"--max-tokens", "24", "--temperature", "0.9",
                                           "--top-k",      "50", "--top-p",       "0.95"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), sample.begin(), sample.end());
    return generated(more);
  };
  const auto a = with({"--seed", "11"});
  EXPECT_EQ(a.size(), 24u);
  EXPECT_EQ(with({"--seed", "11"}), a);
  EXPECT_EQ(with({"--seed", "11", "--tensor-parallel-size", "2"}), a);
  EXPECT_NE(with({"--seed", "12"}), a) << "another seed, another draw";
  EXPECT_NE(a, generated({"--max-tokens", "24"})) << "sampling is not greedy";
}

TEST(GenerateCliText, APromptIsEncodedByTheDirectorysTokenizerAndTheOutputDecoded) {
  for (const std::string family : {"mistral", "qwen2"}) {
    const auto tok = tokenizer_of(family);
    ASSERT_TRUE(tok) << family << " ships a tokenizer";
    auto r = run_cli({"generate", "--model", transformers_fixture(family), "--prompt",
                      "Hello world", "--max-tokens", "6", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), *tok->encode("Hello world", true));
    const auto output = j["output_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(output.size(), 6u);
    EXPECT_EQ(j["text"], *tok->decode(output, true));
    auto plain = run_cli({"generate", "--model", transformers_fixture(family), "--prompt",
                          "Hello world", "--max-tokens", "6"});
    ASSERT_EQ(plain.code, 0) << plain.err;
    EXPECT_EQ(plain.out, j["text"].get<std::string>() + "\n") << "the continuation as text";
  }
}

TEST(GenerateCliText, PromptIdsStillGenerateWhenTheTokenizerCannotBeRead) {
  const auto dir = fs::temp_directory_path() / "kvactor-generate-badtok";
  fs::create_directories(dir);
  fs::copy_file(transformers_fixture("mistral") + "/config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  fs::remove(dir / "model.safetensors");
  fs::create_symlink(transformers_fixture("mistral") + "/model.safetensors",
                     dir / "model.safetensors");
  std::ofstream(dir / "tokenizer.json") << "{";
  auto r = run_cli(
      {"generate", "--model", dir.string(), "--prompt-ids", "1,46", "--max-tokens", "2", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.json()["text"].is_null());
  EXPECT_THAT(r.err, HasSubstr("warning: " + (dir / "tokenizer.json").string() + ": not JSON"));
  auto text = run_cli({"generate", "--model", dir.string(), "--prompt", "Hello"});
  EXPECT_EQ(text.code, 2);
  EXPECT_THAT(text.err, HasSubstr("--prompt: " + (dir / "tokenizer.json").string()));
  fs::remove_all(dir);
}

TEST(GenerateCliErrors, NameTheFlagAndTheValue) {
  const auto dir = transformers_fixture("llama");
  auto ids = run_cli({"generate", "--model", dir, "--prompt-ids", "5,-3,7"});
  EXPECT_EQ(ids.code, 2);
  EXPECT_THAT(ids.err, HasSubstr("--prompt-ids: '-3' is not a token id"));
  auto text = run_cli({"generate", "--model", dir, "--prompt", "hello"});
  EXPECT_EQ(text.code, 2);
  EXPECT_THAT(text.err, HasSubstr("--prompt: " + dir
                                  + ": no tokenizer (looked for tokenizer.json and "
                                    "tokenizer.model); give the token ids with --prompt-ids"));
  auto both = run_cli({"generate", "--model", transformers_fixture("mistral"), "--prompt", "hello",
                       "--prompt-ids", "1"});
  EXPECT_THAT(both.err, HasSubstr("--prompt and --prompt-ids: give one of them"));
  auto none = run_cli({"generate", "--model", std::string(KVACTOR_SOURCE_DIR) + "/deploy/models",
                       "--prompt-ids", "1"});
  EXPECT_THAT(none.err, HasSubstr("not a Hugging Face model directory with weights"));
  auto zero = run_cli({"generate", "--model", dir, "--prompt-ids", "1", "--max-tokens", "0"});
  EXPECT_THAT(zero.err, HasSubstr("--max-tokens: 0 must be at least 1"));
  auto p = run_cli({"generate", "--model", dir, "--prompt-ids", "1", "--top-p", "1.5"});
  EXPECT_THAT(p.err, HasSubstr("--top-p: 1.5 must be in (0, 1]"));
  auto t = run_cli({"generate", "--model", dir, "--prompt-ids", "1", "--temperature", "-1"});
  EXPECT_THAT(t.err, HasSubstr("--temperature: -1 is not a finite number >= 0"));
  auto stop = run_cli({"generate", "--model", dir, "--prompt-ids", "1", "--stop-token-ids", "a"});
  EXPECT_THAT(stop.err, HasSubstr("--stop-token-ids: 'a' is not a token id"));
  auto big = run_cli({"generate", "--model", dir, "--prompt-ids", "1,256", "--json"});
  EXPECT_NE(big.code, 0);
  EXPECT_THAT(big.json()["error"].get<std::string>(), HasSubstr("256"));
}

// generate takes the engine flags run takes (vLLM's spellings too) and checks them in run's words.
TEST(GenerateCli, TakesTheEngineFlagsRunTakes) {
  const auto want = expected_of("qwen3");
  const auto prompt = want["prompts"][0].get<std::vector<int32_t>>();
  const auto continuation = want["continuations"][0].get<std::vector<int32_t>>();
  const std::string ids = fmt::format("{}", fmt::join(prompt, ","));
  const std::string n = std::to_string(continuation.size());
  for (const std::vector<std::string>& engine :
       {std::vector<std::string>{"--dtype", "float32"},
        {"--block-size", "32", "--max-model-len", "128", "--kv-cache-memory", "16MiB"},
        {"-tp", "2", "--enforce-eager"}}) {
    std::vector<std::string> args{"generate",
                                  "--model",
                                  transformers_fixture("qwen3"),
                                  "--prompt-ids",
                                  ids,
                                  "--max-tokens",
                                  n,
                                  "--device",
                                  "cpu",
                                  "--json"};
    args.insert(args.end(), engine.begin(), engine.end());
    auto r = run_cli(args);
    ASSERT_EQ(r.code, 0) << engine.front() << ": " << r.err;
    EXPECT_EQ(r.json()["output_ids"].get<std::vector<int32_t>>(), continuation) << engine.front();
  }
  auto bad = run_cli({"generate", "--model", transformers_fixture("qwen3"), "--prompt-ids", ids,
                      "--block-size", "0"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--block-size: 0 is outside [1, 8192]"));
}

} // namespace
} // namespace kvactor::test
