#include "deploy/generate_command.hpp"

#include <cmath>
#include <fstream>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "actors/runtime_config.hpp"
#include "deploy/cli.hpp"
#include "deploy/run_modes.hpp"
#include "deploy/workload.hpp"
#include "messages/register.hpp"
#include "model/hf_decoder.hpp"
#include "model/loader.hpp"
#include "model/tokenizer.hpp"

namespace kvactor {

namespace {

using nlohmann::json;

// The run flags of one request: the prompt, max_tokens generated, all at once.
run_flags flags_for(const generate_flags& g, const std::vector<int32_t>& prompt) {
  run_flags f;
  f.plan = g.engine;
  f.requests = 1;
  f.prompt_len = std::to_string(prompt.size());
  f.output_len = std::to_string(g.max_tokens);
  f.arrival_rate = "inf";
  f.progress = false;
  return f;
}

int fail(const generate_flags& g, std::ostream& out, std::ostream& err, int code,
         const std::string& message) {
  fmt::print(err, "kvactor generate: error: {}\n", message);
  if (g.json) out << json{{"error", message}}.dump() << '\n';
  return code;
}

// The prompt's ids, and the tokenizer that turns the output into text (null without one).
struct prompt_input {
  std::vector<int32_t> ids;
  std::unique_ptr<tokenizer> tok;
};

expected<prompt_input> text_prompt(const generate_flags& g) {
  auto tok = load_tokenizer(g.engine.model);
  if (!tok)
    return make_error(errc::invalid_argument,
                      fmt::format("--prompt: {}{}", tok.err().message,
                                  tok.err().code == errc::io_error
                                      ? "; give the token ids with --prompt-ids"
                                      : ""));
  auto ids = (*tok)->encode(*g.prompt, true);
  if (!ids) return make_error(errc::invalid_argument, "--prompt: " + ids.err().message);
  if (ids->empty())
    return make_error(errc::invalid_argument,
                      fmt::format("--prompt: '{}' encodes to no tokens", *g.prompt));
  return prompt_input{std::move(*ids), std::move(*tok)};
}

// Token ids need no tokenizer: without one the output stays ids; a tokenizer that is there but
// cannot be read is reported and the run goes on.
expected<prompt_input> prompt_of(const generate_flags& g, std::ostream& err) {
  if (g.prompt && !g.prompt_ids.empty())
    return make_error(errc::invalid_argument, "--prompt and --prompt-ids: give one of them");
  if (g.prompt && g.prompt->empty())
    return make_error(errc::invalid_argument, "--prompt: empty (a prompt has at least one token)");
  if (g.prompt) return text_prompt(g);
  if (g.prompt_ids.empty())
    return make_error(errc::missing_field, "--prompt-ids: required (or --prompt TEXT)");
  auto ids = parse_prompt_ids(g.prompt_ids);
  if (!ids) return ids.err();
  auto tok = load_tokenizer(g.engine.model);
  if (!tok && tok.err().code != errc::io_error)
    fmt::print(err, "kvactor generate: warning: {}; the output stays token ids\n",
               tok.err().message);
  return prompt_input{std::move(*ids), tok ? std::move(*tok) : nullptr};
}

status check_model(const generate_flags& g) {
  if (!checkpoint_directory(g.engine.model))
    return make_error(errc::invalid_argument,
                      fmt::format("--model {}: not a Hugging Face model directory with weights "
                                  "(config.json and model.safetensors or its index)",
                                  g.engine.model));
  if (g.max_tokens < 1)
    return make_error(errc::invalid_argument,
                      fmt::format("--max-tokens: {} must be at least 1", g.max_tokens));
  if (g.max_tokens > max_tokens_per_request)
    return make_error(errc::invalid_argument, fmt::format("--max-tokens: {} is outside [1, {}]",
                                                          g.max_tokens, max_tokens_per_request));
  if (!std::isfinite(g.temperature) || g.temperature < 0.0f)
    return make_error(
        errc::invalid_argument,
        fmt::format("--temperature: {} is not a finite number >= 0 (0: greedy)", g.temperature));
  if (g.top_k < 0)
    return make_error(errc::invalid_argument,
                      fmt::format("--top-k: {} must be >= 0 (0: every token)", g.top_k));
  if (!(g.top_p > 0.0f && g.top_p <= 1.0f))
    return make_error(errc::invalid_argument,
                      fmt::format("--top-p: {} must be in (0, 1]", g.top_p));
  return ok();
}

// The continuation as text, special tokens (a stop token) left out; nullopt without a tokenizer.
std::optional<std::string> text_of(const tokenizer* tok, const std::vector<int32_t>& output,
                                   std::ostream& err) {
  if (tok == nullptr) return std::nullopt;
  auto text = tok->decode(output, true);
  if (!text) {
    fmt::print(err, "kvactor generate: warning: {}; the output stays token ids\n",
               text.err().message);
    return std::nullopt;
  }
  return std::move(*text);
}

// --json: one object once the request has finished.
void print_json(const prompt_input& prompt, const request_result& r, std::ostream& out,
                std::ostream& err) {
  const auto text = text_of(prompt.tok.get(), r.output, err);
  out << json{{"prompt_ids", prompt.ids},
              {"output_ids", r.output},
              {"text", text ? json(*text) : json(nullptr)},
              {"finish_reason", std::string(to_string(r.reason))}}
             .dump()
      << '\n';
}

// Prints the continuation as the driver samples it (on the driver's thread, while the main
// thread waits for the session): text through the tokenizer's incremental decoder, which holds
// back a character until all of its bytes have come, or the ids separated by spaces.
class token_stream {
public:
  token_stream(const tokenizer* tok, std::ostream& out, std::ostream& err) : out_(out), err_(err) {
    if (tok != nullptr) decoder_.emplace(*tok, true);
  }

  void on_tokens(const std::vector<sampled_token>& sampled) {
    for (const auto& s : sampled)
      if (s.request_id == 0) print(s.token);
    out_.flush();
  }

  bool streamed() const { return streamed_; }

  // What the decoder still holds, and the end of the line.
  void finish() {
    if (decoder_) {
      auto rest = decoder_->finish();
      if (rest) out_ << *rest;
    }
    out_ << '\n';
    out_.flush();
  }

private:
  void print(int32_t id) {
    streamed_ = true;
    if (!decoder_) {
      out_ << (first_ ? "" : " ") << id;
      first_ = false;
      return;
    }
    auto text = decoder_->push(id);
    if (text) {
      out_ << *text;
      return;
    }
    fmt::print(err_, "kvactor generate: warning: token {} has no text: {}\n", id,
               text.err().message);
  }

  std::ostream& out_;
  std::ostream& err_;
  std::optional<incremental_decoder> decoder_;
  bool first_ = true;
  bool streamed_ = false;
};

} // namespace

expected<std::vector<int32_t>> parse_prompt_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    const auto comma = text.find(',', at);
    const auto item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX)
      return make_error(errc::invalid_argument,
                        fmt::format("--prompt-ids: '{}' is not a token id", item));
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return ids;
}

int run_generate(const generate_flags& g, std::ostream& out, std::ostream& err) {
  if (auto ok = check_model(g); !ok) return fail(g, out, err, exit_bad_input, ok.err().message);
  auto prompt = prompt_of(g, err);
  if (!prompt) return fail(g, out, err, exit_bad_input, prompt.err().message);
  auto eos = model_eos_token_ids(g.engine.model);
  if (!eos) return fail(g, out, err, exit_bad_input, eos.err().message);
  const auto flags = flags_for(g, prompt->ids);
  auto options = check_run_flags(flags);
  if (!options) return fail(g, out, err, exit_bad_input, options.err().message);
  auto start = prepare_local_run(flags, *options);
  if (!start) return fail(g, out, err, exit_bad_input, start.err().message);
  sampling_params sampling{g.temperature, g.top_k, g.top_p, g.seed, {}};
  if (!g.ignore_eos) sampling.stop_token_ids = *eos;
  if (!g.stop_token_ids.empty()) {
    auto more = parse_prompt_ids(g.stop_token_ids);
    if (!more) {
      auto why = more.err().message;
      why.replace(0, std::string("--prompt-ids").size(), "--stop-token-ids");
      return fail(g, out, err, exit_bad_input, why);
    }
    sampling.stop_token_ids.insert(sampling.stop_token_ids.end(), more->begin(), more->end());
  }
  start->run.workload = {request_spec{0, prompt->ids, g.max_tokens, 0, sampling}};
  caf::actor_system_config cfg;
  register_types(cfg);
  configure_step_latency(cfg);
  caf::actor_system sys{cfg};
  token_stream stream(prompt->tok.get(), out, err);
  local_serving serving{flags, start->run, start->tp, nullptr, {}};
  serving.chaos.deadlines
      .step_timeout = {}; // one request, watched: a long CPU prompt may take minutes
  if (!g.json)
    serving.on_tokens = [&stream](const std::vector<sampled_token>& s) { stream.on_tokens(s); };
  const auto session = serve_locally(sys, serving, err);
  const bool finished =
      !session.failure && !session.summary.results.empty() && session.summary.results[0].finished;
  if (!g.json && (finished || stream.streamed())) stream.finish(); // ends the line it began
  if (session.failure)
    return fail(g, out, err, session.failure->exit_code, session.failure->err.message);
  if (session.summary.results.empty() || !session.summary.results.front().finished)
    return fail(g, out, err, exit_failure,
                session.summary.results.empty() ? session.summary.error.message
                                                : session.summary.results.front().failure);
  if (g.json) print_json(*prompt, session.summary.results.front(), out, err);
  return exit_ok;
}

} // namespace kvactor
