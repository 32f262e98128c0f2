// Where an injected message goes, and which message types each kind of actor takes. Pure: no CAF.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "messages/errc.hpp"

namespace kvactor {

struct inject_target {
  enum class kind { driver, rank };
  kind k = kind::driver;
  int32_t index = 0; // rank[index]
};

/// "driver" or "rank[N]" with N < num_ranks; the error names the value and lists the choices.
expected<inject_target> parse_inject_target(std::string_view name, int32_t num_ranks);

/// ok() when `target` takes messages of `type` (an envelope type name); else an error naming
/// the type and what the target takes.
status check_injectable(const inject_target& target, std::string_view type);

std::string to_string(const inject_target& target);

} // namespace kvactor
