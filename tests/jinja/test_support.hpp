// Renders a template source with a context, for the language tests.
#pragma once

#include "model/jinja/template.hpp"

#include <string>

namespace kvactor::jinja::testing_support {

// The rendered text, or "ERROR: <message>" when parsing or rendering fails.
inline std::string render(std::string_view source, const nlohmann::ordered_json& context = {}) {
  auto tpl = compiled_template::parse(source);
  if (!tpl) return "ERROR: " + tpl.err().message;
  auto out = tpl->render(context);
  return out ? *out : "ERROR: " + out.err().message;
}

} // namespace kvactor::jinja::testing_support
