#include "deploy/served_model.hpp"

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/hf_decoder.hpp"

namespace kvactor {

run_flags engine_run_flags(const plan_flags& engine, uint64_t seed, const cluster_flags& c) {
  run_flags f;
  f.nodes = c.nodes;
  f.tls_cert = c.tls_cert;
  f.tls_key = c.tls_key;
  f.tls_ca = c.tls_ca;
  f.plan = engine;
  f.requests = 0;
  f.prompt_len = "1";
  f.output_len = "1";
  f.progress = false;
  f.seed = seed;
  return f;
}

expected<loaded_model> load_served_model(const std::string& model_dir,
                                         const std::string& served_name,
                                         const std::string& chat_template_file,
                                         int64_t max_model_len) {
  loaded_model m;
  auto tok = load_tokenizer(model_dir);
  if (!tok) return make_error(tok.err().code, fmt::format("--model: {}", tok.err().message));
  m.tok = std::move(*tok);
  auto chat = chat_template::load(model_dir, chat_template_file);
  if (chat) {
    m.chat = std::make_unique<chat_template>(std::move(*chat));
    spdlog::info("Using the chat template of {}", m.chat->source());
  } else if (chat.err().code != errc::missing_field || !chat_template_file.empty()) {
    return chat.err();
  } else {
    spdlog::warn("{}: chat completions (and batch lines for them) are answered 400",
                 chat.err().message);
  }
  auto eos = model_eos_token_ids(model_dir);
  if (!eos) return eos.err();
  m.served.name = served_name.empty()
                      ? std::filesystem::path(model_dir).lexically_normal().filename().string()
                      : served_name;
  if (m.served.name.empty()) m.served.name = model_dir;
  m.served.tok = m.tok.get();
  m.served.chat = m.chat.get();
  m.served.eos_token_ids = *eos;
  m.served.max_model_len = max_model_len;
  return m;
}

} // namespace kvactor
