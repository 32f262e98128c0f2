#include "model/jinja/text.hpp"

#include "model/jinja/value.hpp"

#include <cctype>

namespace kvactor::jinja {
namespace {

uint32_t decode(std::string_view cp) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(cp[i])); };
  if (cp.size() == 1) return b(0);
  if (cp.size() == 2) return ((b(0) & 0x1f) << 6) | (b(1) & 0x3f);
  if (cp.size() == 3) return ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3f) << 12) | ((b(2) & 0x3f) << 6) | (b(3) & 0x3f);
}

// Python's str.isspace() code points.
bool is_python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0
         || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f
         || c == 0x205f || c == 0x3000;
}

bool strippable(std::string_view cp, const std::string* chars) {
  if (!chars) return is_python_space(decode(cp));
  for (auto c : code_points(*chars))
    if (c == cp) return true;
  return false;
}

} // namespace

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  auto cps = code_points(s);
  size_t begin = 0;
  size_t end = cps.size();
  while (left && begin < end && strippable(cps[begin], chars))
    ++begin;
  while (right && end > begin && strippable(cps[end - 1], chars))
    --end;
  std::string out;
  for (size_t i = begin; i < end; ++i)
    out += cps[i];
  return out;
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t found = s.find(*sep, start);
      if (found == std::string_view::npos) break;
      out.emplace_back(s.substr(start, found - start));
      start = found + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  auto cps = code_points(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_python_space(decode(cps[i])))
      ++i;
    if (i == cps.size()) break;
    std::string word;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      for (; i < cps.size(); ++i)
        word += cps[i];
      out.push_back(strip(word, nullptr, false, true));
      break;
    }
    for (; i < cps.size() && !is_python_space(decode(cps[i])); ++i)
      word += cps[i];
    out.push_back(std::move(word));
  }
  return out;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to,
                        int64_t count) {
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` between code points (and at both ends).
    for (auto cp : code_points(s)) {
      if (count < 0 || done < count) out += to, ++done;
      out += cp;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  while (count < 0 || done < count) {
    size_t found = s.find(from, start);
    if (found == std::string_view::npos) break;
    out.append(s.substr(start, found - start));
    out.append(to);
    start = found + from.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::string to_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string python_title(std::string_view s) {
  std::string out(s);
  bool previous_cased = false;
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    bool cased = std::isalpha(u);
    c = static_cast<char>(previous_cased ? std::tolower(u) : std::toupper(u));
    previous_cased = cased;
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  std::string out(s);
  bool word_start = true;
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    bool boundary = std::isspace(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (!boundary) c = static_cast<char>(word_start ? std::toupper(u) : std::tolower(u));
    word_start = boundary;
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out = to_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

} // namespace kvactor::jinja
