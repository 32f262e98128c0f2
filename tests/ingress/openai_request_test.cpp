// OpenAI request bodies: what the completions and chat endpoints take, with OpenAI's defaults;
// unknown fields ignored; a wrong type, a value out of range or a missing field refused with
// OpenAI's error object naming the field; hostile bodies answered, never thrown.
#include "actors/ingress/openai_request.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kvactor::openai {
namespace {

const std::string& text_of(const prompt_input& p) {
  return std::get<std::string>(p);
}

TEST(CompletionRequest, TakesTextTokenIdsOrAListOfEither) {
  auto one = parse_completion_request(R"({"model": "m", "prompt": "Hello"})");
  ASSERT_TRUE(one) << one.err().message;
  ASSERT_EQ(one->prompts.size(), 1u);
  EXPECT_EQ(text_of(one->prompts[0]), "Hello");
  EXPECT_EQ(one->gen.model, "m");
  auto ids = parse_completion_request(R"({"prompt": [1, 2, 3]})");
  ASSERT_TRUE(ids);
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids->prompts[0]), (std::vector<int32_t>{1, 2, 3}));
  auto texts = parse_completion_request(R"({"prompt": ["a", "b"]})");
  ASSERT_TRUE(texts);
  EXPECT_EQ(texts->prompts.size(), 2u);
  auto lists = parse_completion_request(R"({"prompt": [[1], [2, 3]]})");
  ASSERT_TRUE(lists);
  EXPECT_EQ(std::get<std::vector<int32_t>>(lists->prompts[1]), (std::vector<int32_t>{2, 3}));
}

TEST(CompletionRequest, DefaultsAreOpenAIs) {
  auto r = parse_completion_request(R"({"prompt": "x"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->gen.temperature, 1.0);
  EXPECT_EQ(r->gen.top_p, 1.0);
  EXPECT_EQ(r->gen.n, 1);
  EXPECT_FALSE(r->gen.max_tokens);
  EXPECT_FALSE(r->gen.logprobs);
  EXPECT_FALSE(r->gen.stream);
  EXPECT_FALSE(r->gen.echo);
  EXPECT_TRUE(r->gen.skip_special_tokens);
}

TEST(CompletionRequest, ReadsEverySamplingAndReportingField) {
  auto r = parse_completion_request(R"({"prompt": "x", "max_tokens": 7, "temperature": 0,
      "top_p": 0.5, "top_k": 40, "seed": 3, "stop": ["\n\n", ""], "stop_token_ids": [2],
      "ignore_eos": true, "n": 4, "logprobs": 5, "echo": true, "stream": true,
      "stream_options": {"include_usage": true}, "user": "u1"})");
  ASSERT_TRUE(r) << r.err().message;
  const auto& g = r->gen;
  EXPECT_EQ(*g.max_tokens, 7);
  EXPECT_EQ(g.temperature, 0.0);
  EXPECT_EQ(g.top_p, 0.5);
  EXPECT_EQ(g.top_k, 40);
  EXPECT_EQ(*g.seed, 3u);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"\n\n"})) << "empty stop strings are dropped";
  EXPECT_EQ(g.stop_token_ids, (std::vector<int32_t>{2}));
  EXPECT_TRUE(g.ignore_eos);
  EXPECT_EQ(g.n, 4);
  EXPECT_EQ(*g.logprobs, 5);
  EXPECT_TRUE(g.echo);
  EXPECT_TRUE(g.stream && g.include_usage);
  EXPECT_EQ(g.user, "u1");
}

TEST(CompletionRequest, UnknownFieldsAndNullsAreIgnoredAsOpenAIDoes) {
  auto r = parse_completion_request(
      R"({"prompt": "x", "frequency_penalty": 0, "best_of": 1, "suffix": null, "max_tokens": null})");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_FALSE(r->gen.max_tokens);
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "top_k": -1})")->gen.top_k, 0)
      << "vLLM's -1 means the whole vocabulary";
}

// Each bad body, the field the error must name and words its message must hold.
struct bad_case {
  const char* body;
  const char* param;
  const char* words;
};

TEST(CompletionRequest, BadFieldsAreRefusedNamingTheField) {
  const bad_case cases[] = {
      {R"({"prompt": "x", "temperature": "hot"})", "temperature",
       "expected a number, got a string"},
      {R"({"prompt": "x", "temperature": -1})", "temperature", "-1 is outside [0"},
      {R"({"prompt": "x", "top_p": 0})", "top_p", "outside (0, 1]"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "0 is outside [1"},
      {R"({"prompt": "x", "max_tokens": 2.5})", "max_tokens", "expected an integer"},
      {R"({"prompt": "x", "n": 0})", "n", "0 is outside [1, 128]"},
      {R"({"prompt": "x", "n": 1e3})", "n", "expected an integer"},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs", "21 is outside [0, 20]"},
      {R"({"prompt": "x", "logprobs": true})", "logprobs", "expected an integer"},
      {R"({"prompt": "x", "stop": 5})", "stop", "a string or an array of strings"},
      {R"({"prompt": "x", "stop": ["a", 1]})", "stop", "a string or an array of strings"},
      {R"({"prompt": "x", "stop_token_ids": [-1]})", "stop_token_ids", "not a token id"},
      {R"({"prompt": "x", "stream": "yes"})", "stream", "expected a boolean"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options",
       "only allowed with \"stream\": true"},
      {R"({"prompt": "x", "seed": "1"})", "seed", "expected an integer"},
      {R"({"prompt": "x", "model": 3})", "model", "expected a string"},
      {R"({"prompt": ""})", "prompt", "the prompt is empty"},
      {R"({"prompt": []})", "prompt", "the prompt is empty"},
      {R"({"prompt": ["a", ""]})", "prompt[1]", "the prompt is empty"},
      {R"({"prompt": [1, -5]})", "prompt", "'prompt[1]': -5 is not a token id"},
      {R"({"prompt": [[1], "a"]})", "prompt[1]", "expected an array of token ids"},
      {R"({"prompt": 7})", "prompt", "expected an array of token ids"},
      {R"({"max_tokens": 3})", "prompt", "'prompt' is required"},
  };
  for (const auto& c : cases) {
    auto r = parse_completion_request(c.body);
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.err().status, 400) << c.body;
    EXPECT_EQ(r.err().param, c.param) << c.body;
    EXPECT_NE(r.err().message.find(c.words), std::string::npos)
        << c.body << ": " << r.err().message;
  }
}

TEST(CompletionRequest, HostileBodiesAreAnsweredWithAnErrorObject) {
  for (const char* body : {"", "{", "null", "[]", "\"prompt\"", "{\"prompt\": \"x\"} trailing",
                           "{\"prompt\": \"\xff\xfe\"}", "{\"prompt\": [1e999]}"}) {
    auto r = parse_completion_request(body);
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.err().status, 400);
    const auto j = nlohmann::json::parse(r.err().body());
    EXPECT_TRUE(j["error"].contains("message"));
    EXPECT_TRUE(j["error"].contains("type"));
  }
  std::string deep(100000, '[');
  EXPECT_FALSE(parse_completion_request(deep)) << "deep nesting is an error, not a crash";
}

TEST(ApiError, IsOpenAIsErrorObject) {
  const auto e = bad_param("temperature", "'temperature': bad");
  const auto j = nlohmann::json::parse(e.body());
  EXPECT_EQ(j["error"]["message"], "'temperature': bad");
  EXPECT_EQ(j["error"]["type"], "BadRequestError");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["code"], 400);
}

TEST(ChatRequest, TakesMessagesAndTheTemplatesOptions) {
  auto r = parse_chat_request(R"({"model": "m", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
      {"role": "assistant", "content": null, "tool_calls": []}],
      "max_completion_tokens": 9, "max_tokens": 3, "logprobs": true, "top_logprobs": 2,
      "tools": [{"type": "function"}], "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[0]["content"], "Be brief.");
  EXPECT_EQ(*r->gen.max_tokens, 9) << "max_completion_tokens wins";
  EXPECT_EQ(*r->gen.logprobs, 2);
  EXPECT_TRUE(r->add_generation_prompt);
  EXPECT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->chat_template_kwargs["enable_thinking"], false);
  EXPECT_FALSE(
      parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}]})")->gen.logprobs)
      << "logprobs are off unless asked";
}

TEST(ChatRequest, ContinuingTheFinalMessageAddsNoGenerationPrompt) {
  auto r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": true})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->add_generation_prompt);
}

TEST(ChatRequest, BadMessagesAndOptionsAreRefusedNamingTheField) {
  const bad_case cases[] = {
      {R"({"model": "m"})", "messages", "'messages' is required"},
      {R"({"messages": []})", "messages", "the conversation is empty"},
      {R"({"messages": {"role": "user"}})", "messages", "expected an array"},
      {R"({"messages": ["hi"]})", "messages[0]", "expected an object"},
      {R"({"messages": [{"content": "hi"}]})", "messages[0].role", "expected a string"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content",
       "a string or an array of content parts"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content", "only text parts"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs",
       "only allowed with \"logprobs\": true"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 3})", "logprobs",
       "expected a boolean"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools",
       "expected an array"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -2})",
       "max_completion_tokens", "outside [1"},
      {R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": true,
          "continue_final_message": true})",
       "continue_final_message", "cannot both be true"},
  };
  for (const auto& c : cases) {
    auto r = parse_chat_request(c.body);
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.err().param, c.param) << c.body;
    EXPECT_NE(r.err().message.find(c.words), std::string::npos)
        << c.body << ": " << r.err().message;
  }
}

} // namespace
} // namespace kvactor::openai
