#include "model/chat_template.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace kvactor {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A special token as tokenizer_config.json writes it: a string, or {"content": ...}.
std::string token_text(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return "";
}

// "chat_template": a string, or [{"name", "template"}] of which "default" is the one used.
expected<std::string> template_in_config(const json& cfg, const std::string& where) {
  const auto& t = cfg["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const auto& named : t)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template")
          && named["template"].is_string())
        return named["template"].get<std::string>();
  return make_error(errc::invalid_argument,
                    fmt::format("{}: \"chat_template\" is neither a string nor a list holding a "
                                "template named \"default\"",
                                where));
}

expected<json> read_config(const fs::path& path) {
  auto text = read_text(path);
  if (!text) return json::object(); // no tokenizer_config.json: no special tokens
  json cfg = json::parse(*text, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object())
    return make_error(errc::invalid_argument, fmt::format("{}: not a JSON object", path.string()));
  return cfg;
}

} // namespace

expected<chat_template> chat_template::load(const std::string& model_dir, const std::string& file) {
  const fs::path dir = model_dir;
  auto cfg = read_config(dir / "tokenizer_config.json");
  if (!cfg) return cfg.err();
  std::string source, text;
  if (!file.empty()) {
    auto t = read_text(file);
    if (!t)
      return make_error(errc::io_error, fmt::format("--chat-template: cannot read '{}'", file));
    source = file;
    text = std::move(*t);
  } else if (auto t = read_text(dir / "chat_template.jinja")) {
    source = (dir / "chat_template.jinja").string();
    text = std::move(*t);
  } else if (cfg->contains("chat_template")) {
    source = (dir / "tokenizer_config.json").string();
    auto from_config = template_in_config(*cfg, source);
    if (!from_config) return from_config.err();
    text = std::move(*from_config);
  } else {
    return make_error(errc::missing_field,
                      fmt::format("{}: the model has no chat template (neither chat_template.jinja "
                                  "nor tokenizer_config.json's \"chat_template\"): pass "
                                  "--chat-template FILE",
                                  model_dir));
  }
  auto compiled = jinja::compiled_template::parse(text);
  if (!compiled)
    return make_error(errc::invalid_argument,
                      fmt::format("chat template {}: {}", source, compiled.err().message));
  return chat_template(std::move(*compiled), std::move(source), token_text(*cfg, "bos_token"),
                       token_text(*cfg, "eos_token"));
}

expected<std::string> chat_template::render(const nlohmann::ordered_json& messages,
                                            bool add_generation_prompt,
                                            const nlohmann::ordered_json& tools,
                                            const nlohmann::ordered_json& extra) const {
  json ctx = json::object();
  if (extra.is_object())
    for (const auto& [k, v] : extra.items())
      ctx[k] = v;
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_;
  ctx["eos_token"] = eos_;
  if (!tools.is_null()) ctx["tools"] = tools;
  auto text = tpl_.render(ctx);
  if (!text)
    return make_error(text.err().code == errc::no_error ? errc::invalid_argument : text.err().code,
                      fmt::format("chat template: {}", text.err().message));
  return text;
}

} // namespace kvactor
