#include "messages/byte_size.hpp"

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
  // Case does not matter (20gib, 20GIB); K, Ki and KiB are binary, KB decimal.
  static constexpr std::pair<std::string_view, double> units[] = {{"", 1},
                                                                  {"b", 1},
                                                                  {"k", 1024.0},
                                                                  {"ki", 1024.0},
                                                                  {"kib", 1024.0},
                                                                  {"kb", 1e3},
                                                                  {"m", 1048576.0},
                                                                  {"mi", 1048576.0},
                                                                  {"mib", 1048576.0},
                                                                  {"mb", 1e6},
                                                                  {"g", 1073741824.0},
                                                                  {"gi", 1073741824.0},
                                                                  {"gib", 1073741824.0},
                                                                  {"gb", 1e9},
                                                                  {"t", 1099511627776.0},
                                                                  {"ti", 1099511627776.0},
                                                                  {"tib", 1099511627776.0},
                                                                  {"tb", 1e12}};
  std::string folded(unit);
  for (char& c : folded)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& [name, factor] : units)
    if (folded == name) scale = factor;
  if (scale == 0)
    return bad(flag, text,
               "has an unknown unit (use B; K, KiB, M, MiB, G, GiB, T or TiB for powers of "
               "1024; KB, MB, GB or TB for powers of 1000)");
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
