// Comma-separated flag values ("a,b,c"), as several flags take them.
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "messages/errc.hpp"

namespace kvactor {

/// "a,b,,c" -> {"a", "b", "", "c"}; "" -> {""}.
inline std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const auto comma = text.find(',', start);
    out.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

/// Integers separated by commas; an error names `flag` and the part that is not one.
inline expected<std::vector<int32_t>> parse_int_list(const std::string& text,
                                                     std::string_view flag) {
  std::vector<int32_t> out;
  for (const auto& part : split_commas(text)) {
    int32_t v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc{} || end != part.data() + part.size() || part.empty())
      return make_error(errc::invalid_argument,
                        fmt::format("{}: '{}' is not an integer in '{}'", flag, part, text));
    out.push_back(v);
  }
  return out;
}

} // namespace kvactor
