#include "messages/dtype.hpp"

#include <string>

namespace kvactor {

int64_t dtype_size(dtype x) {
  switch (x) {
  case dtype::float32: return 4;
  case dtype::float16:
  case dtype::bfloat16: return 2;
  case dtype::fp8_e4m3:
  case dtype::int8:
  case dtype::uint8: return 1;
  }
  return 0;
}

std::string_view to_string(dtype x) {
  switch (x) {
  case dtype::float32: return "float32";
  case dtype::float16: return "float16";
  case dtype::bfloat16: return "bfloat16";
  case dtype::fp8_e4m3: return "fp8_e4m3";
  case dtype::int8: return "int8";
  case dtype::uint8: return "uint8";
  }
  return "unknown";
}

expected<dtype> parse_dtype(std::string_view name) {
  if (name == "bfloat16" || name == "bf16") return dtype::bfloat16;
  if (name == "float16" || name == "half" || name == "fp16") return dtype::float16;
  if (name == "float32" || name == "float" || name == "fp32") return dtype::float32;
  if (name == "fp8" || name == "fp8_e4m3") return dtype::fp8_e4m3;
  if (name == "int8") return dtype::int8;
  if (name == "uint8") return dtype::uint8;
  std::string msg = "dtype: unknown value '";
  msg += name;
  msg += "' (expected bfloat16, float16, float32, fp8, int8 or uint8)";
  return make_error(errc::invalid_argument, std::move(msg));
}

} // namespace kvactor
