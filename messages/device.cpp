#include "messages/device.hpp"

#include <fmt/format.h>

namespace kvactor {

std::string_view to_string(device_kind x) {
  switch (x) {
  case device_kind::cpu: return "cpu";
  case device_kind::cuda: return "cuda";
  }
  return "unknown";
}

expected<device_kind> parse_device(std::string_view name, std::string_view flag) {
  if (name == "cuda" || name == "gpu") return device_kind::cuda;
  if (name == "cpu") return device_kind::cpu;
  return make_error(errc::invalid_argument,
                    fmt::format("{}: unknown value '{}' (expected cpu or cuda)", flag, name));
}

} // namespace kvactor
