#include "actors/ingress/serving_request.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvactor::openai {

namespace {

// vLLM's words for a request that cannot fit the model's length.
api_error too_long(int64_t max_model_len, int64_t prompt_len, std::optional<int64_t> max_tokens) {
  if (!max_tokens)
    return bad_param("prompt", fmt::format("This model's maximum context length is {} tokens. "
                                           "However, your request has {} input tokens. Please "
                                           "reduce the length of the input messages.",
                                           max_model_len, prompt_len));
  return bad_param("max_tokens",
                   fmt::format("This model's maximum context length is {} tokens. However, you "
                               "requested {} tokens ({} in the messages, {} in the completion). "
                               "Please reduce the length of the messages or completion.",
                               max_model_len, prompt_len + *max_tokens, prompt_len, *max_tokens));
}

std::optional<api_error> check_ids(const std::vector<int32_t>& ids, int32_t vocab,
                                   const char* param) {
  for (int32_t id : ids)
    if (vocab > 0 && id >= vocab)
      return bad_param(param, fmt::format("Token id {} is out of vocabulary (the model has {} "
                                          "tokens)",
                                          id, vocab));
  return std::nullopt;
}

std::optional<api_error> check_setup(const serving_setup& s) {
  if (s.gen.echo && s.gen.logprobs)
    return bad_param("echo", "'echo' with 'logprobs': prompt logprobs are not served yet");
  if (auto e = check_ids(s.gen.stop_token_ids, s.vocab_size, "stop_token_ids")) return e;
  for (const auto& p : s.prompts) {
    if (auto e = check_ids(p, s.vocab_size, "prompt")) return e;
    const auto len = static_cast<int64_t>(p.size());
    if (len >= s.max_model_len) return too_long(s.max_model_len, len, std::nullopt);
    if (s.gen.max_tokens && len + *s.gen.max_tokens > s.max_model_len)
      return too_long(s.max_model_len, len, s.gen.max_tokens);
  }
  return std::nullopt;
}

api_error engine_failure(const std::string& why) {
  return {500, fmt::format("the request failed: {}", why), "InternalServerError", "", ""};
}

} // namespace

api_expected<serving_request> serving_request::create(serving_setup s) {
  if (auto e = check_setup(s)) return *e;
  serving_request r(std::move(s));
  r.add_choices();
  return r;
}

void serving_request::add_choices() {
  const auto n = static_cast<size_t>(s_.gen.n);
  std::vector<int32_t> stops = s_.gen.stop_token_ids;
  if (!s_.gen.ignore_eos)
    stops.insert(stops.end(), s_.eos_token_ids.begin(), s_.eos_token_ids.end());
  for (size_t p = 0; p < s_.prompts.size(); ++p)
    for (size_t k = 0; k < n; ++k) {
      request_spec spec;
      spec.request_id = s_.first_engine_id + specs_.size();
      spec.prompt = s_.prompts[p];
      const auto room = s_.max_model_len - static_cast<int64_t>(spec.prompt.size());
      spec.max_output_tokens = static_cast<int32_t>(s_.gen.max_tokens.value_or(room));
      auto& sp = spec.sampling;
      sp.temperature = static_cast<float>(s_.gen.temperature);
      sp.top_k = s_.gen.top_k;
      sp.top_p = static_cast<float>(s_.gen.top_p);
      // Draws are keyed by (seed, position): each sample of a prompt needs a seed of its own.
      sp.seed = s_.gen.seed.value_or(s_.entropy) + k * 0x9e3779b97f4a7c15ULL;
      sp.stop_token_ids = stops;
      sp.logprobs = s_.gen.logprobs.value_or(-1);
      specs_.push_back(std::move(spec));
      choice c;
      c.text = std::make_unique<text_stream>(*s_.tok, s_.gen.stop, s_.gen.skip_special_tokens);
      choices_.push_back(std::move(c));
    }
  open_choices_ = choices_.size();
}

std::vector<uint64_t> serving_request::engine_ids() const {
  std::vector<uint64_t> out;
  for (const auto& s : specs_)
    out.push_back(s.request_id);
  return out;
}

token_logprob_text serving_request::logprob_text(int32_t token, const token_logprobs& lp) const {
  auto text_of = [&](int32_t id) {
    const int32_t one[] = {id};
    auto t = s_.tok->decode(one, false);
    return t ? *t : std::string{};
  };
  token_logprob_text out{text_of(token), lp.logprob, {}};
  for (const auto& t : lp.top)
    out.top.emplace_back(text_of(t.token), t.logprob);
  return out;
}

void serving_request::stream_chunk(size_t i, std::string text, std::vector<token_logprob_text> lps,
                                   ingress_output& out) {
  auto& c = choices_[i];
  choice_text ct{static_cast<int32_t>(i), std::move(text), c.finish_reason, std::nullopt,
                 c.text_offset};
  if (s_.gen.logprobs) ct.logprobs = std::move(lps);
  const bool chat = s_.kind == endpoint::chat_completions;
  if (!chat && !c.told_role && s_.gen.echo) ct.text = s_.prompt_texts[i / s_.gen.n] + ct.text;
  c.text_offset += static_cast<int32_t>(ct.text.size());
  const bool first = !c.told_role;
  c.told_role = true;
  out.events.push_back(
      sse_event(chat ? chat_chunk(s_.head, ct, first) : completion_chunk(s_.head, ct)));
}

// The update's tokens of choice i through its text stream; a stop string ends the choice.
void serving_request::take_tokens(size_t i, const request_update& u, ingress_output& out) {
  auto& c = choices_[i];
  const auto& stops = specs_[i].sampling.stop_token_ids;
  for (size_t j = 0; j < u.tokens.size() && c.finish_reason.empty(); ++j) {
    const int32_t t = u.tokens[j];
    ++completion_tokens_;
    std::vector<token_logprob_text> lps;
    if (j < u.logprobs.size()) lps.push_back(logprob_text(t, u.logprobs[j]));
    // A stop token ends the request and is not part of its text.
    const bool stop_token = std::find(stops.begin(), stops.end(), t) != stops.end();
    text_stream::delta d;
    if (!stop_token) {
      auto pushed = c.text->push(t);
      if (pushed) d = std::move(*pushed);
    }
    c.whole += d.text;
    if (!lps.empty()) c.logprobs.insert(c.logprobs.end(), lps.begin(), lps.end());
    if (s_.gen.stream && (!d.text.empty() || !lps.empty())) stream_chunk(i, d.text, lps, out);
    if (d.stopped) {
      out.aborts.push_back(specs_[i].request_id);
      end_choice(i, "stop", out);
    }
  }
}

void serving_request::end_choice(size_t i, std::string reason, ingress_output& out) {
  auto& c = choices_[i];
  if (!c.finish_reason.empty()) return;
  std::string rest;
  if (auto r = c.text->finish()) rest = *r; // what was held back ("" after a stop string)
  if (c.text->stopped()) reason = "stop";   // a stop string completed by the held bytes
  c.whole += rest;
  c.finish_reason = std::move(reason);
  --open_choices_;
  if (s_.gen.stream) stream_chunk(i, rest, {}, out);
}

void serving_request::finish_answer(ingress_output& out) {
  out.complete = true;
  const token_usage usage{
      static_cast<int64_t>(
          std::accumulate(s_.prompts.begin(), s_.prompts.end(), size_t{0},
                          [](size_t a, const std::vector<int32_t>& p) { return a + p.size(); })),
      completion_tokens_};
  const bool chat = s_.kind == endpoint::chat_completions;
  if (s_.gen.stream) {
    if (s_.gen.include_usage) out.events.push_back(sse_event(usage_chunk(s_.head, chat, usage)));
    out.events.push_back(sse_done);
    return;
  }
  std::vector<choice_text> list;
  for (size_t i = 0; i < choices_.size(); ++i) {
    auto& c = choices_[i];
    std::string text = c.whole;
    if (!chat && s_.gen.echo) text = s_.prompt_texts[i / s_.gen.n] + text;
    choice_text ct{static_cast<int32_t>(i), std::move(text), c.finish_reason, std::nullopt, 0};
    if (s_.gen.logprobs) ct.logprobs = c.logprobs;
    list.push_back(std::move(ct));
  }
  out.body = chat ? chat_body(s_.head, list, usage) : completion_body(s_.head, list, usage);
}

ingress_output serving_request::on_update(const request_update& u) {
  ingress_output out;
  if (u.request_id < s_.first_engine_id || failed_) return out;
  const auto i = static_cast<size_t>(u.request_id - s_.first_engine_id);
  if (i >= choices_.size() || !choices_[i].finish_reason.empty()) return out; // ended here
  take_tokens(i, u, out);
  if (u.done && choices_[i].finish_reason.empty()) {
    if (!u.finished) {
      // A choice the engine failed fails the answer; the other choices are aborted.
      failed_ = true;
      const auto err = engine_failure(u.failure);
      for (size_t k = 0; k < choices_.size(); ++k)
        if (k != i && choices_[k].finish_reason.empty()) out.aborts.push_back(specs_[k].request_id);
      out.complete = true;
      open_choices_ = 0;
      if (s_.gen.stream) {
        out.events.push_back(sse_event(err.body()));
        out.events.push_back(sse_done);
      } else {
        out.error = err;
      }
      return out;
    }
    end_choice(i, u.reason == finish_reason::stop ? "stop" : "length", out);
  }
  if (open_choices_ == 0) finish_answer(out);
  return out;
}

} // namespace kvactor::openai
