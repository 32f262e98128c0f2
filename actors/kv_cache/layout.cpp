#include "actors/kv_cache/layout.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kvactor {

std::array<layout_dim, 5> physical_order(kv_cache_layout layout) {
  switch (layout) {
  case kv_cache_layout::lbhnc: return {dim_l, dim_b, dim_h, dim_n, dim_c};
  case kv_cache_layout::lbnhc: return {dim_l, dim_b, dim_n, dim_h, dim_c};
  case kv_cache_layout::lhbnc: return {dim_l, dim_h, dim_b, dim_n, dim_c};
  case kv_cache_layout::blhnc: return {dim_b, dim_l, dim_h, dim_n, dim_c};
  case kv_cache_layout::blnhc: return {dim_b, dim_l, dim_n, dim_h, dim_c};
  case kv_cache_layout::bhlnc: return {dim_b, dim_h, dim_l, dim_n, dim_c};
  }
  return {dim_l, dim_b, dim_h, dim_n, dim_c};
}

bool is_layer_compact(kv_cache_layout layout) {
  return physical_order(layout)[0] == dim_l;
}

bool is_block_outermost(kv_cache_layout layout) {
  return physical_order(layout)[0] == dim_b;
}

dims5 layout_strides(kv_cache_layout layout, const dims5& sizes, const dims5& fixed,
                     int64_t padded_page) {
  auto order = physical_order(layout);
  dims5 strides{};
  int64_t running = 1;
  bool seen_lb = false;
  for (int i = 4; i >= 0; --i) {
    auto d = order[static_cast<size_t>(i)];
    int64_t stride = running;
    if (!seen_lb && (d == dim_l || d == dim_b)) {
      seen_lb = true;
      if (padded_page > 0) stride = std::max(stride, padded_page);
    }
    if (fixed[d] > 0) stride = fixed[d];
    strides[d] = stride;
    running = stride * sizes[d];
  }
  return strides;
}

expected<kv_cache_view> layer_view(const kv_cache_tensor& tensor, const std::string& layer,
                                   const kv_cache_spec& spec, int64_t num_blocks,
                                   kv_cache_layout layout, int32_t kernel_block_size) {
  auto pos = std::find(tensor.layers.begin(), tensor.layers.end(), layer);
  if (pos == tensor.layers.end())
    return make_error(errc::invalid_argument,
                      fmt::format("layer: {} is not in this KV cache tensor", layer));
  const int64_t l = pos - tensor.layers.begin();
  kv_cache_view v;
  v.layer = layer;
  v.offset_bytes = tensor.offset + l * tensor.layer_stride;
  if (!is_attention_kind(spec.kind)) {
    const int64_t page = page_size_bytes(spec);
    // State pages are opaque bytes to the cache; the state kernels unpack them.
    v.element_type = dtype::uint8;
    v.shape = {num_blocks, 1, 1, page};
    v.strides = {tensor.block_stride, page, page, 1};
    return v;
  }
  const int32_t kbs = kernel_block_size > 0 ? kernel_block_size : spec.block_size;
  if (spec.block_size % kbs != 0)
    return make_error(errc::invalid_argument,
                      fmt::format("kernel_block_size: {} does not divide the block size {}", kbs,
                                  spec.block_size));
  const int64_t ratio = spec.block_size / kbs;
  const int64_t content = state_content_size_bytes(spec);
  const int64_t dense_page = real_page_size_bytes(spec);
  if (ratio > 1 && tensor.block_stride != dense_page)
    return make_error(
        errc::unsupported,
        fmt::format("block_size: a block of {} tokens cannot be split into kernel blocks of {} "
                    "(block stride {} bytes, dense page {} bytes); reduce --block-size or use a "
                    "layer-compact layout (e.g. LBNHC)",
                    spec.block_size, kbs, tensor.block_stride, dense_page));
  dims5 sizes{1, num_blocks * ratio, spec.num_kv_heads, num_kernel_states(spec, kbs), content};
  dims5 fixed{0, tensor.block_stride / ratio, 0, 0, 0};
  auto bytes = layout_strides(layout, sizes, fixed, ratio > 1 ? 0 : spec.page_size_padded);
  const int64_t elem = dtype_size(spec.kv_dtype);
  v.element_type = spec.kv_dtype;
  v.shape = {sizes[dim_b], sizes[dim_h], sizes[dim_n], content / elem};
  v.strides = {bytes[dim_b] / elem, bytes[dim_h] / elem, bytes[dim_n] / elem, 1};
  return v;
}

} // namespace kvactor
