#include "model/jinja/template.hpp"

#include "model/jinja/parser.hpp"
#include "model/jinja/renderer.hpp"

#include <fmt/format.h>

namespace kvactor::jinja {

struct program {
  node_list body;
};

namespace {

// Deeper JSON is refused rather than recursed into.
constexpr int max_context_depth = 256;

template <class Json>
value from_json(const Json& j, int depth) {
  if (depth > max_context_depth) fail(0, "the context nests deeper than 256 levels");
  switch (j.type()) {
  case Json::value_t::null: return value::none();
  case Json::value_t::boolean: return value::from(j.template get<bool>());
  case Json::value_t::number_integer: return value::from(j.template get<int64_t>());
  case Json::value_t::number_unsigned: {
    auto u = j.template get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return value::from(static_cast<double>(u));
    return value::from(static_cast<int64_t>(u));
  }
  case Json::value_t::number_float: return value::from(j.template get<double>());
  case Json::value_t::string: return value::from(j.template get<std::string>());
  case Json::value_t::array: {
    value_list items;
    for (const auto& item : j)
      items.push_back(from_json(item, depth + 1));
    return value::list(std::move(items));
  }
  case Json::value_t::object: {
    value_dict entries;
    for (auto it = j.begin(); it != j.end(); ++it)
      entries.emplace_back(it.key(), from_json(it.value(), depth + 1));
    return value::dict(std::move(entries));
  }
  default: return value::none();
  }
}

template <class Json>
expected<std::string> render_with(const program& p, const Json& context) {
  try {
    if (!context.is_object() && !context.is_null())
      return make_error(errc::invalid_argument, "the render context must be a JSON object");
    value_dict globals;
    add_builtins(globals);
    if (context.is_object())
      for (auto it = context.begin(); it != context.end(); ++it)
        globals.emplace_back(it.key(), from_json(it.value(), 0));
    renderer r(std::move(globals), render_limits{});
    return r.run(p.body);
  } catch (const failure& f) {
    return make_error(f.code, fmt::format("line {}: {}", f.line, f.message));
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument, fmt::format("render failed: {}", e.what()));
  }
}

} // namespace

expected<compiled_template> compiled_template::parse(std::string_view source) {
  auto tokens = lex(source);
  if (!tokens) return tokens.err();
  auto body = parse_tokens(*tokens);
  if (!body) return body.err();
  auto p = std::make_shared<program>();
  p->body = std::move(*body);
  return compiled_template(std::move(p));
}

expected<std::string> compiled_template::render(const nlohmann::json& context) const {
  return render_with(*program_, context);
}

expected<std::string> compiled_template::render(const nlohmann::ordered_json& context) const {
  return render_with(*program_, context);
}

} // namespace kvactor::jinja
