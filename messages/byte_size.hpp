// Byte sizes as users type them: "21474836480", "20GiB", "512 MiB", "70.5GiB", "1.5e9".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

/// Binary suffixes KiB/MiB/GiB/TiB (also K/M/G/T), decimal KB/MB/GB/TB, optional B. Fractions
/// are allowed with a suffix and rounded down to whole bytes. `flag` names the option in errors.
expected<int64_t> parse_byte_size(std::string_view text, std::string_view flag);

/// A comma-separated list of sizes (one per rank).
expected<std::vector<int64_t>> parse_byte_sizes(std::string_view text, std::string_view flag);

/// "20.00 GiB" style, for reports.
std::string format_bytes(int64_t bytes);

} // namespace kvactor
