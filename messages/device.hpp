// The devices a rank runs on: a closed set, so an enum (the command line's "auto" is resolved
// before anything crosses an actor boundary).
#pragma once

#include <cstdint>
#include <string_view>

#include "messages/errc.hpp"

namespace kvactor {

enum class device_kind : uint8_t { cpu, cuda };

/// "cpu" or "cuda"; "unknown" for a value outside the enum (a hostile message).
std::string_view to_string(device_kind x);

/// "cpu", "cuda" (or its alias "gpu"); an error names `flag` and the value otherwise.
expected<device_kind> parse_device(std::string_view name, std::string_view flag = "--device");

} // namespace kvactor
