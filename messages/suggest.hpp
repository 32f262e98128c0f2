// "Did you mean ...?" for a mistyped name (a model, a flag): the closest known one by edit
// distance, when it is close enough to be a typo.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvactor {

/// The name among `names` nearest to `word` (Levenshtein distance, case-insensitive), when that
/// distance is at most max(2, |word| / 4) and no other name is as near; nullopt otherwise.
std::optional<std::string> closest_name(std::string_view word,
                                        const std::vector<std::string>& names);

/// " (did you mean X?)" for closest_name's answer, or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& names);

} // namespace kvactor
