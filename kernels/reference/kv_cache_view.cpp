#include "kvactor/kernels/kv_cache_view.h"

#include <cmath>

#include "kvactor/kernels/check.h"

namespace kvactor::kernels {

const char* to_string(element_type t) {
  switch (t) {
  case element_type::f32: return "f32";
  case element_type::bf16: return "bf16";
  case element_type::f16: return "f16";
  case element_type::fp8_e4m3: return "fp8_e4m3";
  }
  return "unknown";
}

size_t element_size(element_type t) {
  switch (t) {
  case element_type::f32: return 4;
  case element_type::fp8_e4m3: return 1;
  case element_type::bf16:
  case element_type::f16: break;
  }
  return 2;
}

void check_view(const kv_view& view, const char* what) {
  KVACTOR_CHECK(view.base != nullptr, what, ".base: is null");
  KVACTOR_CHECK(view.type == element_type::f32 || view.type == element_type::bf16
                    || view.type == element_type::f16 || view.type == element_type::fp8_e4m3,
                what, ".type: ", static_cast<int>(view.type), " is not an element_type");
  if (view.type == element_type::fp8_e4m3) {
    KVACTOR_CHECK(std::isfinite(view.k_scale) && view.k_scale > 0.0f, what,
                  ".k_scale: ", view.k_scale, " must be finite and > 0");
    KVACTOR_CHECK(std::isfinite(view.v_scale) && view.v_scale > 0.0f, what,
                  ".v_scale: ", view.v_scale, " must be finite and > 0");
  }
  KVACTOR_CHECK(view.num_blocks > 0, what, ".num_blocks: ", view.num_blocks, " must be > 0");
  KVACTOR_CHECK(view.num_heads > 0, what, ".num_heads: ", view.num_heads, " must be > 0");
  KVACTOR_CHECK(view.block_size > 0, what, ".block_size: ", view.block_size, " must be > 0");
  KVACTOR_CHECK(view.content > 0, what, ".content: ", view.content, " must be > 0");
  KVACTOR_CHECK(view.stride_block > 0, what, ".stride_block: ", view.stride_block, " must be > 0");
  KVACTOR_CHECK(view.stride_head > 0, what, ".stride_head: ", view.stride_head, " must be > 0");
  KVACTOR_CHECK(view.stride_token > 0, what, ".stride_token: ", view.stride_token, " must be > 0");
  // The content of one entry must not run into the next token's or head's entry.
  KVACTOR_CHECK(view.block_size == 1 || view.stride_token >= view.content, what,
                ".stride_token: ", view.stride_token, " is smaller than content ", view.content);
  KVACTOR_CHECK(view.num_heads == 1 || view.stride_head >= view.content, what,
                ".stride_head: ", view.stride_head, " is smaller than content ", view.content);
}

} // namespace kvactor::kernels
