#include "actors/ingress/openai_response.hpp"

#include <nlohmann/json.hpp>

namespace kvactor::openai {

namespace {

using json = nlohmann::ordered_json;

json usage_json(const token_usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"completion_tokens", u.completion_tokens}};
}

json finish_json(const choice_text& c) {
  return c.finish_reason.empty() ? json() : json(c.finish_reason);
}

// The bytes of a token's text as the chat API lists them.
json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char b : s)
    out.push_back(static_cast<int>(b));
  return out;
}

// Completions' logprobs: parallel lists, and each position's top tokens as an object.
json completion_logprobs(const choice_text& c) {
  if (!c.logprobs) return json();
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  int32_t offset = c.text_offset;
  for (const auto& t : *c.logprobs) {
    tokens.push_back(t.token);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [text, lp] : t.top)
      top[text] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int32_t>(t.token.size());
  }
  return {{"text_offset", std::move(offsets)},
          {"token_logprobs", std::move(lps)},
          {"tokens", std::move(tokens)},
          {"top_logprobs", std::move(tops)}};
}

// Chat's logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json chat_logprobs(const choice_text& c) {
  if (!c.logprobs) return json();
  json content = json::array();
  for (const auto& t : *c.logprobs) {
    json top = json::array();
    for (const auto& [text, lp] : t.top)
      top.push_back({{"token", text}, {"logprob", lp}, {"bytes", bytes_of(text)}});
    content.push_back({{"token", t.token},
                       {"logprob", t.logprob},
                       {"bytes", bytes_of(t.token)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json head_json(const response_head& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

// Text from a model may hold bytes that are not UTF-8 (a tokenizer that lost a character);
// they become U+FFFD rather than a JSON error.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace

std::string completion_body(const response_head& head, const std::vector<choice_text>& choices,
                            const token_usage& usage) {
  json out = head_json(head, "text_completion");
  json list = json::array();
  for (const auto& c : choices)
    list.push_back({{"index", c.index},
                    {"text", c.text},
                    {"logprobs", completion_logprobs(c)},
                    {"finish_reason", finish_json(c)}});
  out["choices"] = std::move(list);
  out["usage"] = usage_json(usage);
  return dump(out);
}

std::string completion_chunk(const response_head& head, const choice_text& choice) {
  json out = head_json(head, "text_completion");
  out["choices"] = json::array({{{"index", choice.index},
                                 {"text", choice.text},
                                 {"logprobs", completion_logprobs(choice)},
                                 {"finish_reason", finish_json(choice)}}});
  out["usage"] = nullptr;
  return dump(out);
}

std::string chat_body(const response_head& head, const std::vector<choice_text>& choices,
                      const token_usage& usage) {
  json out = head_json(head, "chat.completion");
  json list = json::array();
  for (const auto& c : choices)
    list.push_back({{"index", c.index},
                    {"message", {{"role", "assistant"}, {"content", c.text}}},
                    {"logprobs", chat_logprobs(c)},
                    {"finish_reason", finish_json(c)}});
  out["choices"] = std::move(list);
  out["usage"] = usage_json(usage);
  return dump(out);
}

std::string chat_chunk(const response_head& head, const choice_text& choice, bool first) {
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (!choice.text.empty() || choice.finish_reason.empty()) delta["content"] = choice.text;
  json out = head_json(head, "chat.completion.chunk");
  out["choices"] = json::array({{{"index", choice.index},
                                 {"delta", std::move(delta)},
                                 {"logprobs", chat_logprobs(choice)},
                                 {"finish_reason", finish_json(choice)}}});
  return dump(out);
}

std::string usage_chunk(const response_head& head, bool chat, const token_usage& usage) {
  json out = head_json(head, chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return dump(out);
}

std::string sse_event(const std::string& json_text) {
  return "data: " + json_text + "\n\n";
}

} // namespace kvactor::openai
