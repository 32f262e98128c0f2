// bf16 / f16 <-> float conversions with round-to-nearest-even, as the hardware converts
// (__float2bfloat16_rn, __float2half_rn), so CPU and GPU caches hold the same bits.
#pragma once

#include <bit>
#include <cstdint>

#include "kvactor/kernels/fp8.h"

namespace kvactor::kernels {

/// Storage types of the cache: raw bits, converted through the functions below only.
struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};
/// FP8 E4M3 code (fp8.h); stored values carry a per-tensor scale applied outside.
struct fp8_t {
  uint8_t bits;
};

inline float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  // NaN stays NaN (quiet): rounding could otherwise carry the payload into infinity.
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Subnormal: mant * 2^-24 is exact in float.
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -mag : mag;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t float_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (mag >= 0x477ff000u) return sign | 0x7c00u; // >= 65520 rounds to infinity
  if (mag < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is a subnormal in units of 2^-24.
    const uint32_t e = mag >> 23;
    const uint32_t shift = 126u - e; // >= 14
    if (shift > 24u) return sign;    // < 2^-25 (or a tie at exactly 2^-25): rounds to zero
    const uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r; // may carry into the smallest normal
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t h = (mag >> 13) - ((127u - 15u) << 10);
  const uint32_t rem = mag & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h; // carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

inline float to_float(float x) {
  return x;
}
inline float to_float(bf16_t x) {
  return bf16_to_float(x.bits);
}
inline float to_float(f16_t x) {
  return f16_to_float(x.bits);
}
inline float to_float(fp8_t x) {
  return fp8_e4m3_to_float(x.bits);
}

/// from_float<T>(f): f rounded into storage type T.
template <class T>
T from_float(float f);
template <>
inline float from_float<float>(float f) {
  return f;
}
template <>
inline bf16_t from_float<bf16_t>(float f) {
  return {float_to_bf16(f)};
}
template <>
inline f16_t from_float<f16_t>(float f) {
  return {float_to_f16(f)};
}
template <>
inline fp8_t from_float<fp8_t>(float f) {
  return {float_to_fp8_e4m3(f)};
}

} // namespace kvactor::kernels
