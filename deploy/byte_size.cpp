#include "deploy/byte_size.hpp"

#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace kvactor {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

error bad(std::string_view flag, std::string_view text, std::string_view why) {
  return make_error(errc::invalid_argument, fmt::format("{}: '{}' {}", flag, text, why));
}

} // namespace

expected<int64_t> parse_byte_size(std::string_view text, std::string_view flag) {
  auto s = trim(text);
  if (s.empty()) return bad(flag, text, "is empty (expected bytes, e.g. 20GiB)");
  size_t i = 0;
  if (s[i] == '-' || s[i] == '+') ++i;
  while (i < s.size()
         && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e'
             || s[i] == 'E'))
    ++i;
  auto number = s.substr(0, i);
  auto unit = trim(s.substr(i));
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc{} || end != number.data() + number.size() || number.empty())
    return bad(flag, text, "is not a number of bytes (expected e.g. 21474836480 or 20GiB)");
  if (value < 0) return bad(flag, text, "is negative");
  double scale = 0;
  static constexpr std::pair<std::string_view, double> units[] = {{"", 1},
                                                                  {"B", 1},
                                                                  {"K", 1024.0},
                                                                  {"KiB", 1024.0},
                                                                  {"KB", 1e3},
                                                                  {"M", 1048576.0},
                                                                  {"MiB", 1048576.0},
                                                                  {"MB", 1e6},
                                                                  {"G", 1073741824.0},
                                                                  {"GiB", 1073741824.0},
                                                                  {"GB", 1e9},
                                                                  {"T", 1099511627776.0},
                                                                  {"TiB", 1099511627776.0},
                                                                  {"TB", 1e12}};
  for (const auto& [name, factor] : units)
    if (unit == name) scale = factor;
  if (scale == 0)
    return bad(flag, text, "has an unknown unit (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
  double bytes = std::floor(value * scale);
  if (bytes > 9.0e18) return bad(flag, text, "is too large");
  return static_cast<int64_t>(bytes);
}

expected<std::vector<int64_t>> parse_byte_sizes(std::string_view text, std::string_view flag) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    auto comma = text.find(',', start);
    auto part = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    auto v = parse_byte_size(part, flag);
    if (!v) return v.err();
    out.push_back(*v);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{:.2f} MiB", b / 1048576.0);
  if (bytes >= 1024) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

} // namespace kvactor
