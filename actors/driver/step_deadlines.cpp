#include "actors/driver/step_deadlines.hpp"

#include <algorithm>
#include <cmath>

namespace kvactor {

std::chrono::milliseconds step_deadlines::resend_after(const std::vector<double>& step_ms) const {
  const size_t n = std::min<size_t>(step_ms.size(), 16);
  if (n == 0) return resend_floor;
  std::vector<double> recent(step_ms.end() - static_cast<std::ptrdiff_t>(n), step_ms.end());
  std::nth_element(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(n / 2),
                   recent.end());
  const auto wanted =
      std::chrono::milliseconds(static_cast<int64_t>(std::ceil(4.0 * recent[n / 2])));
  return std::clamp(wanted, resend_floor, resend_ceiling);
}

} // namespace kvactor
