// The ingress logic with recording clients and simulated engine updates: a request becomes
// engine requests and its client gets the answer once they end; a refusal (bad body, unknown
// model, no chat template, too many waiting, draining) is answered at once and reaches no engine;
// a client that leaves has its engine requests aborted; a drain's deadline fails what is left.
#include "actors/ingress/ingress_core.hpp"

#include <gtest/gtest.h>

#include "tests/ingress/llama3_tokenizer.hpp"

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.hpp"

namespace kvactor::openai {
namespace {

using json = nlohmann::json;

using test::llama3;

// What a client was told.
struct recording_client final : client {
  int status = 0;
  std::string body;
  bool streaming = false, ended = false;
  std::vector<std::string> events;
  void respond(int s, std::string b) override {
    status = s;
    body = std::move(b);
  }
  void begin_stream() override { streaming = true; }
  void send(std::string e) override { events.push_back(std::move(e)); }
  void end_stream() override { ended = true; }
  json error() const { return json::parse(body)["error"]; }
};

constexpr int32_t eos = test::llama3_eos;

struct IngressCore : ::testing::Test {
  test::temp_dir dir{"kvactor-ingress"};
  std::optional<chat_template> chat;
  served_model model = test::tiny_served_model();

  ingress_core make(ingress_limits limits = {}, bool with_chat = true) {
    if (with_chat) {
      dir.write("chat_template.jinja", "{% for m in messages %}{{ m.role }}: {{ m.content }}\n"
                                       "{% endfor %}{% if add_generation_prompt %}assistant:"
                                       "{% endif %}");
      chat = *chat_template::load(dir.path.string());
      model.chat = &*chat;
    }
    return ingress_core(
        model, limits, [] { return int64_t{1700000000}; }, 7);
  }
};

request_update finished(uint64_t id, std::vector<int32_t> tokens) {
  request_update u{id, std::move(tokens)};
  u.done = u.finished = true;
  u.reason = finish_reason::length;
  return u;
}

TEST_F(IngressCore, ACompletionBecomesEngineRequestsAndItsClientGetsTheAnswer) {
  auto core = make();
  auto c = std::make_shared<recording_client>();
  uint64_t key = 0;
  auto specs = core.accept(endpoint::completions, R"({"model": "tiny", "prompt": "Hello",
      "max_tokens": 2})",
                           c, key);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].prompt, *llama3().encode("Hello", true)) << "completions add the BOS";
  EXPECT_EQ(c->status, 0) << "nothing answered before the engine";
  EXPECT_EQ(core.in_flight(), 1u);
  const auto world = *llama3().encode(" world", false);
  auto aborts = core.on_updates({{finished(specs[0].request_id, {world[0], world[0]})}});
  EXPECT_TRUE(aborts.empty());
  EXPECT_EQ(c->status, 200);
  const auto j = json::parse(c->body);
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["choices"][0]["text"], " world world");
  EXPECT_EQ(core.in_flight(), 0u);
  EXPECT_EQ(core.counts().by_status.at(200), 1);
}

TEST_F(IngressCore, AChatIsRenderedByTheTemplateAndStreamed) {
  auto core = make();
  auto c = std::make_shared<recording_client>();
  uint64_t key = 0;
  auto specs =
      core.accept(endpoint::chat_completions,
                  R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true})", c, key);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].prompt, *llama3().encode("user: Hi\nassistant:", false));
  EXPECT_TRUE(c->streaming);
  EXPECT_EQ(core.counts().streams_open, 1);
  core.on_updates({{finished(specs[0].request_id, *llama3().encode(" Hello", false))}});
  EXPECT_TRUE(c->ended);
  ASSERT_GE(c->events.size(), 2u);
  EXPECT_EQ(c->events.back(), sse_done);
  EXPECT_EQ(core.counts().streams_open, 0);
}

TEST_F(IngressCore, RefusalsAreAnsweredAtOnceAndReachNoEngine) {
  auto core = make({}, false);
  struct refused {
    endpoint kind;
    const char* body;
    int status;
    const char* words;
  };
  const refused cases[] = {
      {endpoint::completions, "{", 400, "not valid JSON"},
      {endpoint::completions, R"({"model": "other", "prompt": "x"})", 404,
       "The model `other` does not exist."},
      {endpoint::chat_completions, R"({"messages": [{"role": "user", "content": "x"}]})", 400,
       "--chat-template"},
      {endpoint::completions, R"({"prompt": [1, 999]})", 400, "Token id 999 is out of vocabulary"},
      {endpoint::completions, R"({"prompt": "x", "max_tokens": 500})", 400,
       "maximum context length is 64 tokens"},
  };
  for (const auto& r : cases) {
    auto c = std::make_shared<recording_client>();
    uint64_t key = 1;
    EXPECT_TRUE(core.accept(r.kind, r.body, c, key).empty()) << r.body;
    EXPECT_EQ(key, 0u);
    EXPECT_EQ(c->status, r.status) << r.body;
    EXPECT_NE(c->error()["message"].get<std::string>().find(r.words), std::string::npos) << c->body;
  }
  EXPECT_EQ(core.in_flight(), 0u);
  EXPECT_EQ(core.counts().by_status.at(400), 4);
  EXPECT_EQ(core.counts().by_status.at(404), 1);
}

TEST_F(IngressCore, BeyondTheWaitingLimitRequestsGet429AndWhileDraining503) {
  auto core = make({1});
  auto first = std::make_shared<recording_client>();
  auto second = std::make_shared<recording_client>();
  uint64_t key = 0;
  EXPECT_EQ(core.accept(endpoint::completions, R"({"prompt": "x"})", first, key).size(), 1u);
  EXPECT_TRUE(core.accept(endpoint::completions, R"({"prompt": "x"})", second, key).empty());
  EXPECT_EQ(second->status, 429);
  core.drain();
  auto third = std::make_shared<recording_client>();
  EXPECT_TRUE(core.accept(endpoint::completions, R"({"prompt": "x"})", third, key).empty());
  EXPECT_EQ(third->status, 503);
  EXPECT_EQ(core.in_flight(), 1u) << "the request in flight is still served";
}

TEST_F(IngressCore, AClientThatLeavesHasItsEngineRequestsAbortedAndLaterUpdatesAreDropped) {
  auto core = make();
  auto c = std::make_shared<recording_client>();
  uint64_t key = 0;
  auto specs =
      core.accept(endpoint::completions, R"({"prompt": "x", "n": 3, "stream": true})", c, key);
  ASSERT_EQ(specs.size(), 3u);
  const auto aborted = core.disconnect(key);
  EXPECT_EQ(aborted.size(), 3u);
  EXPECT_EQ(core.in_flight(), 0u);
  EXPECT_EQ(core.counts().streams_open, 0);
  core.on_updates({{finished(specs[0].request_id, {5})}});
  EXPECT_TRUE(c->events.empty()) << "nothing is sent to a client that left";
  EXPECT_TRUE(core.disconnect(key).empty()) << "a second disconnect is harmless";
  EXPECT_TRUE(core.disconnect(c.get()).empty());
  auto other = std::make_shared<recording_client>();
  ASSERT_EQ(core.accept(endpoint::completions, R"({"prompt": "x"})", other, key).size(), 1u);
  EXPECT_EQ(core.disconnect(other.get()).size(), 1u) << "found by its client too";
}

TEST_F(IngressCore, AStopStringAbortsTheEngineRequestThatReachedIt) {
  auto core = make();
  auto c = std::make_shared<recording_client>();
  uint64_t key = 0;
  auto specs = core.accept(endpoint::completions, R"({"prompt": "x", "stop": "world"})", c, key);
  ASSERT_EQ(specs.size(), 1u);
  auto aborts = core.on_updates(
      {{request_update{specs[0].request_id, *llama3().encode("Hello world", false)}}});
  EXPECT_EQ(aborts, (std::vector<uint64_t>{specs[0].request_id}));
  EXPECT_EQ(json::parse(c->body)["choices"][0]["text"], "Hello ");
}

TEST_F(IngressCore, FailAllAnswersEveryRequestLeftWith503) {
  auto core = make();
  auto whole = std::make_shared<recording_client>();
  auto stream = std::make_shared<recording_client>();
  uint64_t key = 0;
  core.accept(endpoint::completions, R"({"prompt": "x"})", whole, key);
  core.accept(endpoint::completions, R"({"prompt": "x", "stream": true})", stream, key);
  core.fail_all("the server stopped before this request finished");
  EXPECT_EQ(whole->status, 503);
  EXPECT_TRUE(stream->ended);
  EXPECT_EQ(stream->events.back(), sse_done);
  EXPECT_EQ(core.in_flight(), 0u);
}

// An answer the core gives at once (tokenize, detokenize, refusals).
std::shared_ptr<recording_client> answered(ingress_core& core, endpoint kind,
                                           const std::string& body) {
  auto c = std::make_shared<recording_client>();
  uint64_t key = 0;
  EXPECT_TRUE(core.accept(kind, body, c, key).empty()) << "reached the engine: " << body;
  return c;
}

TEST_F(IngressCore, TokenizeCountsAPromptAsACompletionWouldAndDetokenizeGivesItBack) {
  auto core = make();
  auto t = answered(core, endpoint::tokenize, R"({"model": "tiny", "prompt": "Hello world"})");
  ASSERT_EQ(t->status, 200) << t->body;
  const auto j = json::parse(t->body);
  const auto ids = *llama3().encode("Hello world", true);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(j["count"], ids.size());
  EXPECT_EQ(j["max_model_len"], 64);
  EXPECT_TRUE(j["token_strs"].is_null());
  auto bare = answered(core, endpoint::tokenize,
                       R"({"prompt": "Hello world", "add_special_tokens": false})");
  EXPECT_EQ(json::parse(bare->body)["tokens"].get<std::vector<int32_t>>(),
            *llama3().encode("Hello world", false));
  const json back = {{"tokens", *llama3().encode("Hello world", false)}};
  auto d = answered(core, endpoint::detokenize, back.dump());
  ASSERT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(json::parse(d->body)["prompt"], "Hello world");
  EXPECT_EQ(core.counts().by_status.at(200), 3);
  EXPECT_EQ(core.in_flight(), 0u);
}

TEST_F(IngressCore, TokenizeRendersMessagesThroughTheChatTemplate) {
  auto core = make();
  auto t =
      answered(core, endpoint::tokenize, R"({"messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_EQ(t->status, 200) << t->body;
  EXPECT_EQ(json::parse(t->body)["tokens"].get<std::vector<int32_t>>(),
            *llama3().encode("user: Hi\nassistant:", false));
}

TEST_F(IngressCore, BadTokenizeAndDetokenizeCallsAreRefusedNamingTheField) {
  auto core = make();
  const std::pair<endpoint, std::string> cases[] = {
      {endpoint::tokenize, R"({})"},
      {endpoint::tokenize, R"({"prompt": "a", "messages": [{"role": "user", "content": "b"}]})"},
      {endpoint::tokenize, R"({"prompt": ["a"]})"},
      {endpoint::tokenize, R"({"prompt": "a", "return_token_strs": true})"},
      {endpoint::tokenize, R"({"prompt": "a", "add_special_tokens": "yes"})"},
      {endpoint::detokenize, R"({"tokens": "1 2"})"},
      {endpoint::detokenize, R"({"tokens": [1, -2]})"},
      {endpoint::detokenize, R"({"tokens": [1, 500]})"},
  };
  const char* params[] = {"prompt", "messages", "prompt", "return_token_strs", "add_special_tokens",
                          "tokens", "tokens",   "tokens"};
  for (size_t i = 0; i < std::size(cases); ++i) {
    auto c = answered(core, cases[i].first, cases[i].second);
    EXPECT_EQ(c->status, 400) << cases[i].second;
    EXPECT_EQ(c->error()["param"], params[i]) << cases[i].second << ": " << c->body;
  }
  EXPECT_EQ(answered(core, endpoint::tokenize, R"({"model": "other", "prompt": "a"})")->status,
            404);
}

TEST_F(IngressCore, ContinuingTheFinalMessageEndsThePromptWithItsContent) {
  auto core = make();
  auto c = std::make_shared<recording_client>();
  uint64_t key = 0;
  auto specs = core.accept(endpoint::chat_completions, R"({"messages": [
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello the"}],
      "continue_final_message": true, "add_generation_prompt": false})",
                           c, key);
  ASSERT_EQ(specs.size(), 1u) << c->body;
  EXPECT_EQ(specs[0].prompt, *llama3().encode("user: Hi\nassistant: Hello the", false))
      << "the template's newline after the last message is cut";
}

} // namespace
} // namespace kvactor::openai
