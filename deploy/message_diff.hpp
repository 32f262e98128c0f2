// The first difference between a recorded message and a replayed one, named by field
// ("step_plan.scheduled[3].token_ids[0]: recorded integer 5, replayed integer 7"). Works on the
// codec's envelopes, so every message type is covered; fields that measure time are ignored.
#pragma once

#include <string>
#include <vector>

#include "messages/codec.hpp"

namespace kvactor {

/// Empty when the envelopes agree (timings aside), else the first differing field.
std::string diff_envelopes(const std::vector<char>& recorded, const std::vector<char>& replayed);

template <class T>
std::string diff_messages(const T& recorded, const T& replayed) {
  return diff_envelopes(encode(recorded), encode(replayed));
}

} // namespace kvactor
