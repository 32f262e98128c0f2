// A model's chat template: found in its directory as transformers finds it (chat_template.jinja,
// else tokenizer_config.json's "chat_template": a string, or a list of named templates of which
// "default" is taken), or given as a file; compiled once at start-up, so that a template using a
// construct the interpreter lacks is refused before serving, naming it and its line.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "messages/errc.hpp"
#include "model/jinja/template.hpp"

namespace kvactor {

class chat_template {
public:
  /// The template of `model_dir`, or of `file` when it is not empty. errc::missing_field when the
  /// directory has none (the message says to pass --chat-template); errc::invalid_argument for a
  /// template the interpreter refuses (its line and construct named) or a malformed config.
  static expected<chat_template> load(const std::string& model_dir, const std::string& file = "");

  /// The prompt text of a conversation: `messages` ([{role, content, ...}]) rendered with
  /// add_generation_prompt, the model's bos_token / eos_token, `tools` (null: none) and the
  /// `extra` keys (chat_template_kwargs). A template's raise_exception() is an error naming it.
  expected<std::string> render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                               const nlohmann::ordered_json& tools = nullptr,
                               const nlohmann::ordered_json& extra = nullptr) const;

  /// Where the template came from, for the log ("DIR/tokenizer_config.json").
  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }

private:
  chat_template(jinja::compiled_template t, std::string source, std::string bos, std::string eos)
      : tpl_(std::move(t)), source_(std::move(source)), bos_(std::move(bos)), eos_(std::move(eos)) {
  }

  jinja::compiled_template tpl_;
  std::string source_, bos_, eos_;
};

} // namespace kvactor
