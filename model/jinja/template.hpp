// Chat templates (tokenizer_config.json's chat_template, chat_template.jinja) rendered as Python's
// Jinja2 renders them under transformers' apply_chat_template: ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loop controls, plus raise_exception, strftime_now and
// transformers' tojson. Pure C++: no Python at run time.
//
//   auto tpl = kvactor::jinja::compiled_template::parse(source);
//   if (!tpl) return tpl.err();
//   auto prompt = tpl->render({{"messages", messages}, {"add_generation_prompt", true}});
//
// The subset: text, {{ }}, {% %}, {# #} with whitespace control; if/elif/else, for (loop.*,
// filters, else, unpacking), set (namespace attributes, block set), break/continue, macros;
// the filters and tests chat templates use; Python's operators, literals, slicing and the str and
// dict methods templates call. Anything else (extends, include, import, filter blocks, unknown
// filters and tests) is refused at parse time with its name and line.
#pragma once

#include "messages/errc.hpp"

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kvactor::jinja {

struct program;

class compiled_template {
public:
  // Parses the whole template up front. A syntax error or a construct the interpreter lacks is an
  // error whose message names the construct and its line ("line 12: unsupported tag 'include'").
  static expected<compiled_template> parse(std::string_view source);

  // Renders with the context's keys as the template's variables (messages, add_generation_prompt,
  // bos_token, eos_token, tools, ...). raise_exception(), an undefined value misused where Jinja2
  // would refuse it, a type error, or a run past the step/output limits is an error naming the
  // line and the message. NOTE: nlohmann::json keeps object keys sorted, so `tojson` prints them
  // sorted; pass an ordered_json to keep the request's order, as Python would.
  expected<std::string> render(const nlohmann::json& context) const;
  expected<std::string> render(const nlohmann::ordered_json& context) const;

private:
  explicit compiled_template(std::shared_ptr<const program> p) : program_(std::move(p)) {}
  std::shared_ptr<const program> program_;
};

} // namespace kvactor::jinja
