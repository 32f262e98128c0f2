// One OpenAI request while it is served, driven by engine updates as the driver sends them: its
// engine requests (one per choice, seeds apart), the whole answer once every choice ended, the
// stream's chunks as tokens arrive, a stop string that ends a choice and aborts its engine
// request, an engine failure, and vLLM's refusals of what cannot fit the model.
#include "actors/ingress/serving_request.hpp"

#include <gtest/gtest.h>

#include "tests/ingress/llama3_tokenizer.hpp"

#include <nlohmann/json.hpp>

namespace kvactor::openai {
namespace {

using json = nlohmann::json;

using test::llama3;

std::vector<int32_t> ids_of(const std::string& text) {
  return *llama3().encode(text, false);
}

constexpr int32_t eos = test::llama3_eos;

serving_setup setup_of(endpoint kind, const std::string& body) {
  serving_setup s;
  s.kind = kind;
  if (kind == endpoint::completions) {
    auto r = parse_completion_request(body);
    EXPECT_TRUE(r) << r.err().message;
    s.gen = r->gen;
    for (const auto& p : r->prompts) {
      s.prompt_texts.push_back(std::get<std::string>(p));
      s.prompts.push_back(ids_of(s.prompt_texts.back()));
    }
  } else {
    auto r = parse_chat_request(body);
    EXPECT_TRUE(r) << r.err().message;
    s.gen = r->gen;
    s.prompts = {ids_of("<rendered conversation>")};
  }
  s.head = {"cmpl-1", 1700000000, "tiny"};
  s.first_engine_id = 100;
  s.tok = &llama3();
  s.eos_token_ids = {eos};
  s.max_model_len = 64;
  s.vocab_size = 500;
  s.entropy = 42;
  return s;
}

request_update tokens(uint64_t id, std::vector<int32_t> t) {
  return {id, std::move(t)};
}

request_update end(uint64_t id, std::vector<int32_t> t, finish_reason why) {
  request_update u{id, std::move(t)};
  u.done = u.finished = true;
  u.reason = why;
  return u;
}

// The JSON of every data event, [DONE] excluded.
std::vector<json> events_of(const ingress_output& out, bool* done = nullptr) {
  std::vector<json> v;
  for (const auto& e : out.events) {
    EXPECT_EQ(e.rfind("data: ", 0), 0u);
    if (e == sse_done) {
      if (done) *done = true;
      continue;
    }
    v.push_back(json::parse(e.substr(6)));
  }
  return v;
}

TEST(ServingRequest, EachChoiceIsAnEngineRequestWithItsOwnSeedAndTheStopTokens) {
  auto r = serving_request::create(setup_of(
      endpoint::completions, R"({"prompt": ["Hello", "Hello world"], "n": 2, "max_tokens": 5,
          "temperature": 0.8, "stop_token_ids": [7]})"));
  ASSERT_TRUE(r) << r.err().message;
  const auto& specs = r->engine_requests();
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(r->engine_ids(), (std::vector<uint64_t>{100, 101, 102, 103}));
  EXPECT_EQ(specs[2].prompt, ids_of("Hello world"));
  EXPECT_EQ(specs[0].max_output_tokens, 5);
  EXPECT_NE(specs[0].sampling.seed, specs[1].sampling.seed) << "two samples, two draws";
  EXPECT_EQ(specs[0].sampling.seed, specs[2].sampling.seed);
  EXPECT_EQ(specs[0].sampling.stop_token_ids, (std::vector<int32_t>{7, eos}));
  EXPECT_FLOAT_EQ(specs[0].sampling.temperature, 0.8f);
}

TEST(ServingRequest, AWholeCompletionAnswersOnceEveryChoiceEndedWithUsage) {
  auto r = serving_request::create(
      setup_of(endpoint::completions, R"({"prompt": "Hi", "n": 2, "max_tokens": 3})"));
  ASSERT_TRUE(r);
  const auto hello = ids_of("Hello world");
  EXPECT_FALSE(r->on_update(tokens(100, {hello[0]})).complete);
  EXPECT_FALSE(r->on_update(end(101, {hello[0], eos}, finish_reason::stop)).complete);
  auto out = r->on_update(end(100, {hello[1]}, finish_reason::length));
  ASSERT_TRUE(out.complete);
  ASSERT_TRUE(out.body);
  const auto j = json::parse(*out.body);
  EXPECT_EQ(j["choices"][0]["text"], "Hello world");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][1]["text"], "Hello") << "the stop token is not text";
  EXPECT_EQ(j["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_EQ(j["usage"]["prompt_tokens"], static_cast<int>(ids_of("Hi").size()));
}

TEST(ServingRequest, AStreamSendsEachTokensTextAsItArrivesThenTheFinishAndDone) {
  auto r = serving_request::create(
      setup_of(endpoint::chat_completions,
               R"({"messages": [{"role": "user", "content": "x"}], "stream": true,
          "stream_options": {"include_usage": true}})"));
  ASSERT_TRUE(r);
  const auto hello = ids_of("Hello world");
  auto first = events_of(r->on_update(tokens(100, {hello[0]})));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first[0]["choices"][0]["delta"]["content"], "Hello");
  bool done = false;
  auto last = r->on_update(end(100, {hello[1], eos}, finish_reason::stop));
  auto rest = events_of(last, &done);
  ASSERT_EQ(rest.size(), 3u); // " world", the finish, the usage
  EXPECT_EQ(rest[0]["choices"][0]["delta"]["content"], " world");
  EXPECT_FALSE(rest[0]["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(rest[1]["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(rest[2]["choices"].empty());
  EXPECT_EQ(rest[2]["usage"]["completion_tokens"], 3);
  EXPECT_TRUE(done);
  EXPECT_TRUE(last.complete);
}

TEST(ServingRequest, AStopStringEndsTheChoiceTrimmedAndAbortsItsEngineRequest) {
  auto r = serving_request::create(
      setup_of(endpoint::completions, R"({"prompt": "x", "stop": " wor", "max_tokens": 9})"));
  ASSERT_TRUE(r);
  auto out = r->on_update(tokens(100, ids_of("Hello world again")));
  EXPECT_EQ(out.aborts, (std::vector<uint64_t>{100}));
  ASSERT_TRUE(out.complete);
  const auto j = json::parse(*out.body);
  EXPECT_EQ(j["choices"][0]["text"], "Hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // The engine then reports the aborted request failed: already answered, nothing more.
  request_update aborted{100};
  aborted.done = true;
  aborted.failure = "stop string";
  auto after = r->on_update(aborted);
  EXPECT_FALSE(after.body || after.error || !after.events.empty());
}

TEST(ServingRequest, LogprobsCarryEachTokensTextAndItsTopTokens) {
  auto r = serving_request::create(
      setup_of(endpoint::completions, R"({"prompt": "x", "logprobs": 1, "max_tokens": 1})"));
  ASSERT_TRUE(r);
  const auto hello = ids_of("Hello");
  request_update u = end(100, {hello[0]}, finish_reason::length);
  u.logprobs = {{-0.5f, {{hello[0], -0.5f}}}};
  auto out = r->on_update(u);
  const auto lp = json::parse(*out.body)["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"Hello"}));
  EXPECT_EQ(lp["token_logprobs"], json({-0.5}));
  EXPECT_EQ(lp["top_logprobs"][0]["Hello"], -0.5);
}

TEST(ServingRequest, EchoPutsThePromptBeforeTheText) {
  auto r = serving_request::create(
      setup_of(endpoint::completions, R"({"prompt": "Hi", "echo": true, "max_tokens": 1})"));
  ASSERT_TRUE(r);
  auto out = r->on_update(end(100, ids_of(" there"), finish_reason::length));
  EXPECT_EQ(json::parse(*out.body)["choices"][0]["text"], "Hi there");
}

TEST(ServingRequest, AnEngineFailureFailsTheAnswerAndAbortsTheOtherChoices) {
  auto r = serving_request::create(
      setup_of(endpoint::completions, R"({"prompt": "x", "n": 3, "max_tokens": 4})"));
  ASSERT_TRUE(r);
  request_update failed{101};
  failed.done = true;
  failed.failure = "server stopped";
  auto out = r->on_update(failed);
  EXPECT_TRUE(out.complete);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 500);
  EXPECT_NE(out.error->message.find("server stopped"), std::string::npos);
  EXPECT_EQ(out.aborts, (std::vector<uint64_t>{100, 102}));
}

TEST(ServingRequest, AStreamThatFailsEndsWithAnErrorEventAndDone) {
  auto r = serving_request::create(
      setup_of(endpoint::completions, R"({"prompt": "x", "stream": true})"));
  ASSERT_TRUE(r);
  request_update failed{100};
  failed.done = true;
  failed.failure = "rank 0 is unreachable";
  bool done = false;
  auto ev = events_of(r->on_update(failed), &done);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_NE(ev[0]["error"]["message"].get<std::string>().find("rank 0"), std::string::npos);
  EXPECT_TRUE(done);
}

TEST(ServingRequest, WhatCannotFitTheModelIsRefusedInVllmsWords) {
  auto long_ask = serving_request::create(
      setup_of(endpoint::completions, R"({"prompt": "Hello", "max_tokens": 100})"));
  ASSERT_FALSE(long_ask);
  EXPECT_EQ(long_ask.err().param, "max_tokens");
  EXPECT_NE(long_ask.err().message.find("This model's maximum context length is 64 tokens. "
                                        "However, you requested 101 tokens (1 in the messages, "
                                        "100 in the completion)."),
            std::string::npos)
      << long_ask.err().message;
  auto s = setup_of(endpoint::completions, R"({"prompt": "Hello"})");
  s.prompts = {std::vector<int32_t>(64, 5)};
  auto long_prompt = serving_request::create(s);
  ASSERT_FALSE(long_prompt);
  EXPECT_NE(long_prompt.err().message.find("your request has 64 input tokens"), std::string::npos);
  s.prompts = {{5, 900}};
  auto oov = serving_request::create(s);
  ASSERT_FALSE(oov);
  EXPECT_NE(oov.err().message.find("Token id 900 is out of vocabulary"), std::string::npos);
  EXPECT_FALSE(serving_request::create(setup_of(
      endpoint::completions, R"({"prompt": "x", "echo": true, "logprobs": 1, "max_tokens": 1})")))
      << "prompt logprobs are not served yet: refused, not ignored";
}

TEST(ServingRequest, WithoutMaxTokensAChoiceMayFillTheModelsLength) {
  auto r = serving_request::create(setup_of(endpoint::completions, R"({"prompt": "Hello"})"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->engine_requests()[0].max_output_tokens, 63);
}

} // namespace
} // namespace kvactor::openai
