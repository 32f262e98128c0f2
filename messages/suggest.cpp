#include "messages/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace kvactor {

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1]))
                        == std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

} // namespace

std::optional<std::string> closest_name(std::string_view word,
                                        const std::vector<std::string>& names) {
  const size_t limit = std::max<size_t>(2, word.size() / 4);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  bool tie = false;
  for (const auto& name : names) {
    const size_t d = edit_distance(word, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
      tie = false;
    } else if (d == best_distance) {
      tie = true;
    }
  }
  if (!best || tie || best_distance == 0) return std::nullopt;
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& names) {
  auto name = closest_name(word, names);
  return name ? " (did you mean " + *name + "?)" : "";
}

} // namespace kvactor
