#include "actors/ingress/ingress_core.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "actors/ingress/tokenize_request.hpp"
#include "kvactor/kernels/sampler.h"

namespace kvactor::openai {

namespace {

using kernels::splitmix64;

api_error refusal(int status, const char* type, std::string message) {
  return {status, std::move(message), type, "", ""};
}

// A message's content as text: the string, or its text parts joined.
std::string final_content(const nlohmann::ordered_json& message) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  std::string out;
  for (const auto& part : *it)
    out += part["text"].get<std::string>();
  return out;
}

} // namespace

ingress_core::ingress_core(served_model model, ingress_limits limits,
                           std::function<int64_t()> unix_now, uint64_t seed)
    : model_(std::move(model)), limits_(limits), now_(std::move(unix_now)), seed_(seed) {}

std::optional<api_error> ingress_core::check_model(const std::string& asked) const {
  if (asked.empty() || asked == model_.name) return std::nullopt;
  api_error e{404, fmt::format("The model `{}` does not exist.", asked), "NotFoundError", "model",
              ""};
  return e;
}

api_expected<std::vector<int32_t>> ingress_core::tokenize(const std::string& text,
                                                          bool add_special) const {
  auto ids = model_.tok->encode(text, add_special);
  if (!ids) return bad_param("prompt", fmt::format("cannot tokenize: {}", ids.err().message));
  return *ids;
}

api_expected<serving_setup> ingress_core::completion_setup(std::string_view body) {
  auto r = parse_completion_request(body);
  if (!r) return r.err();
  if (auto e = check_model(r->gen.model)) return *e;
  serving_setup s;
  s.kind = endpoint::completions;
  s.gen = std::move(r->gen);
  for (auto& p : r->prompts) {
    if (auto* text = std::get_if<std::string>(&p)) {
      auto ids = tokenize(*text, true); // completions add the model's BOS, as vLLM does
      if (!ids) return ids.err();
      s.prompts.push_back(std::move(*ids));
      s.prompt_texts.push_back(std::move(*text));
      continue;
    }
    auto& ids = std::get<std::vector<int32_t>>(p);
    auto text = model_.tok->decode(ids, false);
    s.prompt_texts.push_back(text ? *text : std::string{});
    s.prompts.push_back(std::move(ids));
  }
  return s;
}

api_expected<serving_setup> ingress_core::chat_setup(std::string_view body) {
  auto r = parse_chat_request(body);
  if (!r) return r.err();
  if (auto e = check_model(r->gen.model)) return *e;
  auto text = render_chat(*r);
  if (!text) return text.err();
  auto ids = tokenize(*text, false); // the template wrote the special tokens itself
  if (!ids) return ids.err();
  serving_setup s;
  s.kind = endpoint::chat_completions;
  s.gen = std::move(r->gen);
  s.prompts.push_back(std::move(*ids));
  s.prompt_texts.push_back(std::move(*text));
  return s;
}

// The conversation as the template writes it. continue_final_message: the text ends with the last
// message's content (what the template wrote after it, its end-of-turn, is cut), so that the
// model continues that message, as vLLM does.
api_expected<std::string> ingress_core::render_chat(const chat_request& r) const {
  if (model_.chat == nullptr)
    return bad_param("messages", "the model has no chat template: start the server with "
                                 "--chat-template FILE");
  auto text =
      model_.chat->render(r.messages, r.add_generation_prompt, r.tools, r.chat_template_kwargs);
  if (!text) return bad_param("messages", text.err().message);
  if (!r.continue_final_message) return *text;
  const auto content = final_content(r.messages.back());
  const auto at = content.empty() ? std::string::npos : text->rfind(content);
  if (at == std::string::npos)
    return bad_param("continue_final_message",
                     "'continue_final_message': the chat template did not write the last "
                     "message's content, so there is nothing to continue");
  return text->substr(0, at + content.size());
}

api_expected<serving_setup> ingress_core::setup_of(endpoint kind, std::string_view body) {
  auto s = kind == endpoint::completions ? completion_setup(body) : chat_setup(body);
  if (!s) return s;
  const uint64_t key = next_engine_id_;
  s->head = {fmt::format("{}-{:016x}", kind == endpoint::completions ? "cmpl" : "chatcmpl",
                         splitmix64(seed_ ^ key)),
             now_(), model_.name};
  s->first_engine_id = key;
  s->tok = model_.tok;
  s->eos_token_ids = model_.eos_token_ids;
  take<scheduler_limits>(*s, model_);
  s->vocab_size = model_.vocab_size;
  s->entropy = splitmix64(seed_ + key);
  return s;
}

void ingress_core::answer_tokenize(std::string_view body, client& c) {
  auto r = parse_tokenize_request(body);
  if (!r) return answer_error(c, r.err());
  if (auto e = check_model(r->model)) return answer_error(c, *e);
  std::string chat_text;
  if (r->chat) {
    auto text = render_chat(*r->chat);
    if (!text) return answer_error(c, text.err());
    chat_text = std::move(*text);
  }
  auto ids = tokenize(r->chat ? chat_text : *r->prompt, r->add_special_tokens);
  if (!ids) return answer_error(c, ids.err());
  const nlohmann::ordered_json out = {{"count", ids->size()},
                                      {"max_model_len", model_.max_model_len},
                                      {"tokens", *ids},
                                      {"token_strs", nullptr}};
  ++counts_.by_status[200];
  c.respond(200, out.dump());
}

// Special tokens are written out, as vLLM's /detokenize does.
void ingress_core::answer_detokenize(std::string_view body, client& c) {
  auto r = parse_detokenize_request(body);
  if (!r) return answer_error(c, r.err());
  if (auto e = check_model(r->model)) return answer_error(c, *e);
  for (size_t i = 0; i < r->tokens.size(); ++i)
    if (model_.vocab_size > 0 && r->tokens[i] >= model_.vocab_size)
      return answer_error(c, bad_param("tokens", fmt::format("'tokens[{}]': {} is not below the "
                                                             "vocabulary size {}",
                                                             i, r->tokens[i], model_.vocab_size)));
  auto text = model_.tok->decode(r->tokens, false);
  if (!text)
    return answer_error(c,
                        bad_param("tokens", fmt::format("cannot decode: {}", text.err().message)));
  ++counts_.by_status[200];
  c.respond(200, nlohmann::ordered_json{{"prompt", *text}}.dump());
}

void ingress_core::answer_error(client& c, const api_error& e) {
  ++counts_.by_status[e.status];
  c.respond(e.status, e.body());
}

std::vector<request_spec> ingress_core::accept(endpoint kind, std::string_view body,
                                               std::shared_ptr<client> c, uint64_t& key) {
  key = 0;
  if (draining_) {
    answer_error(*c, refusal(503, "ServiceUnavailableError", "the server is shutting down"));
    return {};
  }
  if (kind == endpoint::tokenize || kind == endpoint::detokenize) {
    if (kind == endpoint::tokenize)
      answer_tokenize(body, *c);
    else
      answer_detokenize(body, *c);
    return {};
  }
  if (limits_.max_waiting_requests > 0 && live_.size() >= limits_.max_waiting_requests) {
    answer_error(*c, refusal(429, "RateLimitError",
                             fmt::format("{} requests are being served (--max-waiting-requests): "
                                         "try again later",
                                         live_.size())));
    return {};
  }
  auto s = setup_of(kind, body);
  auto r = s ? serving_request::create(std::move(*s)) : api_expected<serving_request>(s.err());
  if (!r) {
    answer_error(*c, r.err());
    return {};
  }
  key = next_engine_id_;
  auto specs = r->engine_requests();
  next_engine_id_ += specs.size();
  for (const auto& sp : specs)
    key_of_[sp.request_id] = key;
  const bool streaming = r->streaming();
  if (streaming) {
    c->begin_stream();
    ++counts_.streams_open;
  }
  by_client_[c.get()] = key;
  live_.emplace(key, live_request{std::move(*r), std::move(c), streaming});
  counts_.in_flight = static_cast<int64_t>(live_.size());
  return specs;
}

void ingress_core::deliver(uint64_t key, live_request& r, ingress_output out,
                           std::vector<uint64_t>& aborts) {
  for (auto& e : out.events)
    r.to->send(std::move(e));
  aborts.insert(aborts.end(), out.aborts.begin(), out.aborts.end());
  if (!out.complete) return;
  if (r.streaming) {
    r.to->end_stream();
    --counts_.streams_open;
    ++counts_.by_status[200];
  } else if (out.error) {
    answer_error(*r.to, *out.error);
  } else {
    ++counts_.by_status[200];
    r.to->respond(200, std::move(*out.body));
  }
  forget(key);
}

std::vector<uint64_t> ingress_core::on_updates(const request_updates& updates) {
  std::vector<uint64_t> aborts;
  for (const auto& u : updates.updates) {
    auto k = key_of_.find(u.request_id);
    if (k == key_of_.end()) continue; // its request was answered or its client left
    const uint64_t key = k->second;
    auto& r = live_.at(key);
    deliver(key, r, r.req.on_update(u), aborts);
  }
  return aborts;
}

void ingress_core::forget(uint64_t key) {
  auto it = live_.find(key);
  if (it == live_.end()) return;
  for (auto id : it->second.req.engine_ids())
    key_of_.erase(id);
  by_client_.erase(it->second.to.get());
  live_.erase(it);
  counts_.in_flight = static_cast<int64_t>(live_.size());
}

std::vector<uint64_t> ingress_core::disconnect(uint64_t key) {
  auto it = live_.find(key);
  if (it == live_.end()) return {};
  auto ids = it->second.req.engine_ids();
  if (it->second.streaming) --counts_.streams_open;
  forget(key);
  return ids;
}

std::vector<uint64_t> ingress_core::disconnect(const client* c) {
  auto it = by_client_.find(c);
  return it == by_client_.end() ? std::vector<uint64_t>{} : disconnect(it->second);
}

void ingress_core::fail_all(const std::string& why) {
  std::vector<uint64_t> keys;
  for (const auto& [key, r] : live_)
    keys.push_back(key);
  for (auto key : keys)
    answer_failure(key, refusal(503, "ServiceUnavailableError", why));
}

void ingress_core::fail(uint64_t key, const std::string& why) {
  answer_failure(key, refusal(500, "InternalServerError", why));
}

void ingress_core::answer_failure(uint64_t key, const api_error& e) {
  auto it = live_.find(key);
  if (it == live_.end()) return;
  auto& r = it->second;
  if (r.streaming) {
    r.to->send(sse_event(e.body()));
    r.to->send(sse_done);
    r.to->end_stream();
    --counts_.streams_open;
    ++counts_.by_status[e.status];
  } else {
    answer_error(*r.to, e);
  }
  forget(key);
}

} // namespace kvactor::openai
