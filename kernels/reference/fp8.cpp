#include "kvactor/kernels/fp8.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace kvactor::kernels {

namespace {

// The values of the non-negative finite codes 0x00..0x7E, increasing with the code.
const std::array<float, 127>& positive_values() {
  static const std::array<float, 127> values = [] {
    std::array<float, 127> v{};
    for (int c = 0; c < 127; ++c)
      v[static_cast<size_t>(c)] = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    return v;
  }();
  return values;
}

// The code nearest to a in [0, 448], ties to the even code (the even mantissa: adjacent codes
// differ in the last mantissa bit, across an exponent step too).
uint8_t nearest_positive(float a) {
  const auto& v = positive_values();
  const auto hi = std::lower_bound(v.begin(), v.end(), a); // first value >= a
  if (hi == v.begin()) return 0;
  if (hi == v.end()) return 0x7E;
  const auto upper = static_cast<int>(hi - v.begin()), lower = upper - 1;
  const float below = a - v[static_cast<size_t>(lower)], above = *hi - a;
  if (below < above) return static_cast<uint8_t>(lower);
  if (above < below) return static_cast<uint8_t>(upper);
  return static_cast<uint8_t>(lower % 2 == 0 ? lower : upper);
}

} // namespace

float fp8_e4m3_to_float(uint8_t v) {
  const int exponent = (v >> 3) & 0xF, mantissa = v & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude =
      exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9) // subnormal: m x 2^-9
                    : std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  return (v & 0x80) != 0 ? -magnitude : magnitude;
}

uint8_t float_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= fp8_e4m3_max) return static_cast<uint8_t>(sign | 0x7E);
  return static_cast<uint8_t>(sign | nearest_positive(a));
}

} // namespace kvactor::kernels
