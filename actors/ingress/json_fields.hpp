// Reading the fields of a JSON request body the OpenAI way: a field that is absent or null is
// "not given"; one of the wrong type or out of range is a 400 api_error naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/ingress/openai_request.hpp"

namespace kvactor::openai {

using json = nlohmann::ordered_json;
using maybe_error = std::optional<api_error>;

/// "a string", "an array", ... for messages.
std::string kind_of(const json& v);
api_error wrong_type(const std::string& param, const char* expected, const json& got);
/// The body as a JSON object, or a 400 saying why not.
api_expected<json> parse_object(std::string_view body);
/// The field, or null when absent or JSON null.
const json* field(const json& o, const char* key);

maybe_error read_bool(const json& o, const char* key, bool& out);
maybe_error read_string(const json& o, const char* key, std::string& out);
/// A finite number within [lo, hi] (or (lo, hi] with lo_open).
maybe_error read_number(const json& o, const char* key, double& out, double lo, double hi,
                        bool lo_open = false);
/// An integer within [lo, hi]: JSON integers only (2.0 is refused as Python's int fields do).
maybe_error read_int(const json& o, const char* key, int64_t& out, int64_t lo, int64_t hi);
/// Token ids: an array of integers in [0, 2^31).
maybe_error read_ids(const json& v, const std::string& param, std::vector<int32_t>& out);

template <class Int>
maybe_error read_int_as(const json& o, const char* key, Int& out, int64_t lo, int64_t hi) {
  int64_t x = static_cast<int64_t>(out);
  if (auto e = read_int(o, key, x, lo, hi)) return e;
  out = static_cast<Int>(x);
  return std::nullopt;
}

} // namespace kvactor::openai
