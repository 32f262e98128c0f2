// FP8 E4M3, the format of vLLM's FP8 KV cache (OCP "e4m3fn"): 1 sign bit, 4 exponent bits (bias
// 7), 3 mantissa bits; no infinities; 0x7F and 0xFF are NaN; the largest finite value is 448.
// The host reference for the FP8 KV cache: the GPU kernels must give these codes.
#pragma once

#include <array>
#include <cstdint>

namespace kvactor::kernels {

inline constexpr float fp8_e4m3_max = 448.0f;

/// The value of every code, indexed by the code (NaN for 0x7F / 0xFF).
extern const std::array<float, 256> fp8_e4m3_values;

/// The value of code v (NaN for 0x7F / 0xFF).
inline float fp8_e4m3_to_float(uint8_t v) {
  return fp8_e4m3_values[v];
}

/// The nearest code to x, ties to the even code (round to nearest even), saturating to +-448 as
/// vLLM's quantisation clamps before it casts; NaN gives 0x7F, -0.0 gives 0x80.
uint8_t float_to_fp8_e4m3(float x);

/// A value stored with a per-tensor scale (vLLM's k_scale / v_scale): code of x / scale, and the
/// value scale * decode(code). REQUIRES: scale > 0 and finite.
inline uint8_t fp8_quantize(float x, float scale) {
  return float_to_fp8_e4m3(x / scale);
}
inline float fp8_dequantize(uint8_t v, float scale) {
  return fp8_e4m3_to_float(v) * scale;
}

} // namespace kvactor::kernels
