#include "kvactor/kernels/fp8.h"

#include <bit>
#include <cmath>
#include <limits>

namespace kvactor::kernels {

namespace {

// 2^e for a small integer e, in a constant expression.
constexpr float power_of_two(int e) {
  float p = 1.0f;
  for (; e > 0; --e)
    p *= 2.0f;
  for (; e < 0; ++e)
    p *= 0.5f;
  return p;
}

constexpr std::array<float, 256> make_values() {
  std::array<float, 256> v{};
  for (int c = 0; c < 256; ++c) {
    const int exponent = (c >> 3) & 0xF, mantissa = c & 0x7;
    float magnitude = exponent == 0
                          ? static_cast<float>(mantissa) * power_of_two(-9) // subnormal
                          : (8.0f + static_cast<float>(mantissa)) * power_of_two(exponent - 10);
    if (exponent == 0xF && mantissa == 0x7) magnitude = std::numeric_limits<float>::quiet_NaN();
    v[static_cast<size_t>(c)] = (c & 0x80) != 0 ? -magnitude : magnitude;
  }
  return v;
}

// Rounds the magnitude m in [0, 2^-6) to units of 2^-9, ties to even: the subnormal codes (and
// 0x08, the smallest normal, when it rounds up).
uint8_t subnormal_code(float m) {
  const float units = m * 512.0f; // exact: a power of two
  auto code = static_cast<uint32_t>(units);
  const float rest = units - static_cast<float>(code);
  if (rest > 0.5f || (rest == 0.5f && (code & 1u) != 0)) ++code;
  return static_cast<uint8_t>(code);
}

// Rounds the magnitude m in [2^-6, 448) to 3 mantissa bits, ties to even; a carry out of the
// mantissa steps the exponent, which is the next code up.
uint8_t normal_code(float m) {
  const uint32_t u = std::bit_cast<uint32_t>(m);
  const auto exponent = static_cast<int32_t>(u >> 23) - 127; // -6 .. 8
  const uint32_t mantissa = u & 0x7FFFFFu;
  uint32_t code = (static_cast<uint32_t>(exponent + 7) << 3) | (mantissa >> 20);
  const uint32_t rest = mantissa & 0xFFFFFu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u) != 0)) ++code;
  return static_cast<uint8_t>(code); // at most 0x7E: m < 448 rounds to 448 at most
}

} // namespace

const std::array<float, 256> fp8_e4m3_values = make_values();

uint8_t float_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= fp8_e4m3_max) return static_cast<uint8_t>(sign | 0x7E);
  const float smallest_normal = 0.015625f; // 2^-6
  return static_cast<uint8_t>(sign | (a < smallest_normal ? subnormal_code(a) : normal_code(a)));
}

} // namespace kvactor::kernels
