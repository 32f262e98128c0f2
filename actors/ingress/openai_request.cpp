#include "actors/ingress/openai_request.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "actors/ingress/json_fields.hpp"
#include "messages/request.hpp"

namespace kvactor::openai {

namespace {

// stop: a string or an array of strings; empty strings are dropped, as vLLM drops them.
maybe_error read_stop(const json& o, std::vector<std::string>& out) {
  const json* v = field(o, "stop");
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    if (!v->get<std::string>().empty()) out.push_back(v->get<std::string>());
    return std::nullopt;
  }
  if (!v->is_array()) return wrong_type("stop", "a string or an array of strings", *v);
  for (const auto& s : *v) {
    if (!s.is_string()) return wrong_type("stop", "a string or an array of strings", s);
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
  }
  return std::nullopt;
}

maybe_error read_stream_options(const json& o, generation_request& g) {
  const json* v = field(o, "stream_options");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return wrong_type("stream_options", "an object", *v);
  if (!g.stream)
    return bad_param("stream_options", "'stream_options': only allowed with \"stream\": true");
  return read_bool(*v, "include_usage", g.include_usage);
}

// The sampling and stopping fields both endpoints take.
maybe_error read_sampling(const json& o, generation_request& g) {
  if (auto e = read_string(o, "model", g.model)) return e;
  if (auto e = read_number(o, "temperature", g.temperature, 0, 1e6)) return e;
  if (auto e = read_number(o, "top_p", g.top_p, 0, 1, true)) return e;
  if (auto e = read_int_as(o, "top_k", g.top_k, -1, std::numeric_limits<int32_t>::max())) return e;
  if (g.top_k < 0) g.top_k = 0; // vLLM's -1: the whole vocabulary
  if (const json* v = field(o, "seed")) {
    if (!v->is_number_integer()) return wrong_type("seed", "an integer", *v);
    g.seed =
        v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (auto e = read_stop(o, g.stop)) return e;
  if (const json* v = field(o, "stop_token_ids"))
    if (auto e = read_ids(*v, "stop_token_ids", g.stop_token_ids)) return e;
  if (auto e = read_bool(o, "ignore_eos", g.ignore_eos)) return e;
  if (auto e = read_int_as(o, "n", g.n, 1, max_n)) return e;
  if (auto e = read_bool(o, "stream", g.stream)) return e;
  if (auto e = read_stream_options(o, g)) return e;
  if (auto e = read_bool(o, "skip_special_tokens", g.skip_special_tokens)) return e;
  return read_string(o, "user", g.user);
}

// max_tokens, or chat's max_completion_tokens (which wins when both are given).
maybe_error read_max_tokens(const json& o, generation_request& g, bool chat) {
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!chat && std::string_view{key} == "max_completion_tokens") continue;
    int64_t x = 0;
    if (field(o, key) == nullptr) continue;
    if (auto e = read_int(o, key, x, 1, std::numeric_limits<int32_t>::max())) return e;
    g.max_tokens = x;
  }
  return std::nullopt;
}

// One prompt: text (not empty) or token ids (not empty).
api_expected<prompt_input> prompt_of(const json& v, const std::string& param) {
  if (v.is_string()) {
    if (v.get<std::string>().empty())
      return bad_param(param, "'" + param + "': the prompt is empty");
    return prompt_input{v.get<std::string>()};
  }
  std::vector<int32_t> ids;
  if (auto e = read_ids(v, param, ids)) return *e;
  if (ids.empty()) return bad_param(param, "'" + param + "': the prompt is empty");
  return prompt_input{std::move(ids)};
}

// prompt: a string, token ids, or a non-empty array of either.
maybe_error read_prompts(const json& o, std::vector<prompt_input>& out) {
  const json* v = field(o, "prompt");
  if (v == nullptr) return bad_param("prompt", "'prompt' is required");
  const bool many =
      v->is_array() && !v->empty() && (v->front().is_string() || v->front().is_array());
  if (!many) {
    auto p = prompt_of(*v, "prompt");
    if (!p) return p.err();
    out.push_back(std::move(*p));
    return std::nullopt;
  }
  const bool texts = v->front().is_string();
  for (size_t i = 0; i < v->size(); ++i) {
    const auto param = fmt::format("prompt[{}]", i);
    if ((*v)[i].is_string() != texts) // a list holds texts or token-id lists, not both
      return wrong_type(param, texts ? "a string" : "an array of token ids", (*v)[i]);
    auto p = prompt_of((*v)[i], param);
    if (!p) return p.err();
    out.push_back(std::move(*p));
  }
  return std::nullopt;
}

// Completions' logprobs: the number of top alternatives, 0 to max_logprobs.
maybe_error read_completion_logprobs(const json& o, generation_request& g) {
  if (field(o, "logprobs") == nullptr) return std::nullopt;
  int64_t k = 0;
  if (auto e = read_int(o, "logprobs", k, 0, max_logprobs)) return e;
  g.logprobs = static_cast<int32_t>(k);
  return std::nullopt;
}

// Chat's logprobs (a boolean) and top_logprobs (0 to max_logprobs, only with logprobs).
maybe_error read_chat_logprobs(const json& o, generation_request& g) {
  bool on = false;
  if (auto e = read_bool(o, "logprobs", on)) return e;
  int64_t top = 0;
  if (auto e = read_int(o, "top_logprobs", top, 0, max_logprobs)) return e;
  if (field(o, "top_logprobs") != nullptr && !on)
    return bad_param("top_logprobs", "'top_logprobs': only allowed with \"logprobs\": true");
  if (on) g.logprobs = static_cast<int32_t>(top);
  return std::nullopt;
}

// One message: an object with a role (a string) and content (a string, an array of text parts,
// or null where the role allows it, as an assistant's tool calls do).
maybe_error check_message(const json& m, size_t i) {
  const auto param = fmt::format("messages[{}]", i);
  if (!m.is_object()) return wrong_type(param, "an object", m);
  const json* role = field(m, "role");
  if (role == nullptr || !role->is_string())
    return bad_param(param + ".role", fmt::format("'{}.role': expected a string", param));
  const json* content = field(m, "content");
  if (content == nullptr || content->is_string()) return std::nullopt;
  if (!content->is_array())
    return wrong_type(param + ".content", "a string or an array of content parts", *content);
  for (const auto& part : *content)
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text")
        || !part["text"].is_string())
      return bad_param(param + ".content",
                       fmt::format("'{}.content': only text parts ({{\"type\": \"text\", \"text\": "
                                   "...}}) are served",
                                   param));
  return std::nullopt;
}

maybe_error read_messages(const json& o, chat_request& r) {
  const json* v = field(o, "messages");
  if (v == nullptr) return bad_param("messages", "'messages' is required");
  if (!v->is_array()) return wrong_type("messages", "an array", *v);
  if (v->empty()) return bad_param("messages", "'messages': the conversation is empty");
  for (size_t i = 0; i < v->size(); ++i)
    if (auto e = check_message((*v)[i], i)) return e;
  r.messages = *v;
  return std::nullopt;
}

maybe_error read_chat_extras(const json& o, chat_request& r) {
  if (auto e = read_bool(o, "add_generation_prompt", r.add_generation_prompt)) return e;
  if (auto e = read_bool(o, "continue_final_message", r.continue_final_message)) return e;
  if (r.continue_final_message && r.add_generation_prompt && field(o, "add_generation_prompt"))
    return bad_param("continue_final_message", "'continue_final_message' and "
                                               "'add_generation_prompt' cannot both be true");
  if (r.continue_final_message) r.add_generation_prompt = false;
  if (const json* t = field(o, "tools")) {
    if (!t->is_array()) return wrong_type("tools", "an array", *t);
    r.tools = *t;
  }
  if (const json* k = field(o, "chat_template_kwargs")) {
    if (!k->is_object()) return wrong_type("chat_template_kwargs", "an object", *k);
    r.chat_template_kwargs = *k;
  }
  return std::nullopt;
}

} // namespace

std::string api_error::body() const {
  using ojson = nlohmann::ordered_json;
  ojson e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? ojson() : ojson(param);
  e["code"] = code.empty() ? ojson(status) : ojson(code);
  return ojson{{"error", std::move(e)}}.dump();
}

api_error bad_param(std::string param, std::string message) {
  return {400, std::move(message), "BadRequestError", std::move(param), ""};
}

api_expected<completion_request> parse_completion_request(std::string_view body) {
  auto root = parse_object(body);
  if (!root) return root.err();
  completion_request r;
  if (auto e = read_prompts(*root, r.prompts)) return *e;
  if (auto e = read_sampling(*root, r.gen)) return *e;
  if (auto e = read_max_tokens(*root, r.gen, false)) return *e;
  if (auto e = read_completion_logprobs(*root, r.gen)) return *e;
  if (auto e = read_bool(*root, "echo", r.gen.echo)) return *e;
  return r;
}

api_expected<chat_request> parse_chat_request(std::string_view body) {
  auto root = parse_object(body);
  if (!root) return root.err();
  chat_request r;
  if (auto e = read_messages(*root, r)) return *e;
  if (auto e = read_sampling(*root, r.gen)) return *e;
  if (auto e = read_max_tokens(*root, r.gen, true)) return *e;
  if (auto e = read_chat_logprobs(*root, r.gen)) return *e;
  if (auto e = read_chat_extras(*root, r)) return *e;
  return r;
}

} // namespace kvactor::openai
