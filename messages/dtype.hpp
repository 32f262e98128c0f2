// Element types of KV caches and states.
#pragma once

#include <cstdint>
#include <string_view>

#include "messages/errc.hpp"

namespace kvactor {

enum class dtype : uint8_t { float32, float16, bfloat16, fp8_e4m3, int8, uint8 };

/// Bytes per element.
int64_t dtype_size(dtype x);

std::string_view to_string(dtype x);

/// Accepts the spellings of Hugging Face configs and vLLM flags: "bfloat16", "bf16",
/// "float16", "half", "fp16", "float32", "float", "fp32", "fp8", "fp8_e4m3", "int8", "uint8".
expected<dtype> parse_dtype(std::string_view name);

} // namespace kvactor
