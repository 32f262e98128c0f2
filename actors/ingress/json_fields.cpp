#include "actors/ingress/json_fields.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace kvactor::openai {

// "a string", "an array", ... for messages.
std::string kind_of(const json& v) {
  switch (v.type()) {
  case json::value_t::null: return "null";
  case json::value_t::boolean: return "a boolean";
  case json::value_t::string: return "a string";
  case json::value_t::array: return "an array";
  case json::value_t::object: return "an object";
  case json::value_t::number_float: return "a number";
  default: return "an integer";
  }
}

api_error wrong_type(const std::string& param, const char* expected, const json& got) {
  return bad_param(param, fmt::format("'{}': expected {}, got {}", param, expected, kind_of(got)));
}

// The field, or null when absent or JSON null (OpenAI treats both as "not given").
const json* field(const json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

maybe_error read_bool(const json& o, const char* key, bool& out) {
  const json* v = field(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return wrong_type(key, "a boolean", *v);
  out = v->get<bool>();
  return std::nullopt;
}

maybe_error read_string(const json& o, const char* key, std::string& out) {
  const json* v = field(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return wrong_type(key, "a string", *v);
  out = v->get<std::string>();
  return std::nullopt;
}

maybe_error read_number(const json& o, const char* key, double& out, double lo, double hi,
                        bool lo_open) {
  const json* v = field(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return wrong_type(key, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
    return bad_param(
        key, fmt::format("'{}': {} is outside {}{}, {}]", key, x, lo_open ? "(" : "[", lo, hi));
  out = x;
  return std::nullopt;
}

// An integer within [lo, hi]: JSON integers only (2.0 is refused as Python's int fields do).
maybe_error read_int(const json& o, const char* key, int64_t& out, int64_t lo, int64_t hi) {
  const json* v = field(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return wrong_type(key, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    return bad_param(key,
                     fmt::format("'{}': {} is outside [{}, {}]", key, v->get<uint64_t>(), lo, hi));
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    return bad_param(key, fmt::format("'{}': {} is outside [{}, {}]", key, x, lo, hi));
  out = x;
  return std::nullopt;
}

// Token ids: an array of integers in [0, 2^31).
maybe_error read_ids(const json& v, const std::string& param, std::vector<int32_t>& out) {
  if (!v.is_array()) return wrong_type(param, "an array of token ids", v);
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& t = v[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0
        || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return bad_param(param, fmt::format("'{}[{}]': {} is not a token id (an integer >= 0)", param,
                                          i, t.dump()));
    out.push_back(t.get<int32_t>());
  }
  return std::nullopt;
}

api_expected<json> parse_object(std::string_view body) {
  json root = json::parse(body, nullptr, false);
  if (root.is_discarded())
    return api_error{400, "the request body is not valid JSON", "BadRequestError", "", ""};
  if (!root.is_object())
    return api_error{400,
                     fmt::format("the request body must be a JSON object, not {}", kind_of(root)),
                     "BadRequestError", "", ""};
  return root;
}

} // namespace kvactor::openai
