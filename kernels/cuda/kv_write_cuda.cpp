// Host side of kv_write_cuda: argument checks (before any CUDA call), then the launch.
#include "kvactor/kernels/cuda/kv_write_cuda.h"

#include <cstdint>

#include "host_checks.h"
#include "kv_write_args.h"

namespace kvactor::kernels {

using cuda_detail::aligned;

cuda_status check_kv_write_cuda(const kv_view& view, const void* k, const void* v,
                                element_type type, int32_t head_size, int32_t head_size_v,
                                const int64_t* slot_mapping, int32_t num_tokens) {
  if (cuda_status s = cuda_detail::check_view_as_status(view, "kv_write_cuda: view"); !s) return s;
  const bool fp8 = view.type == element_type::fp8_e4m3;
  KVACTOR_CUDA_CHECK_ARG(view.type == element_type::bf16 || view.type == element_type::f16 || fp8,
                         "kv_write_cuda: view.type: ", to_string(view.type),
                         " is not supported (bf16, f16 or fp8_e4m3)");
  if (fp8)
    KVACTOR_CUDA_CHECK_ARG(type == element_type::bf16 || type == element_type::f16,
                           "kv_write_cuda: type: ", to_string(type),
                           " is not supported for an fp8_e4m3 cache (bf16 or f16)");
  else
    KVACTOR_CUDA_CHECK_ARG(type == view.type, "kv_write_cuda: type: ", to_string(type),
                           " differs from the view's ", to_string(view.type));
  KVACTOR_CUDA_CHECK_ARG(num_tokens >= 0, "kv_write_cuda: num_tokens: ", num_tokens,
                         " is negative");
  KVACTOR_CUDA_CHECK_ARG(head_size > 0, "kv_write_cuda: head_size: ", head_size, " must be > 0");
  KVACTOR_CUDA_CHECK_ARG(head_size_v >= 0, "kv_write_cuda: head_size_v: ", head_size_v,
                         " is negative");
  KVACTOR_CUDA_CHECK_ARG(head_size + head_size_v <= view.content,
                         "kv_write_cuda: head_size + head_size_v: ", head_size, " + ", head_size_v,
                         " exceeds the view's content ", view.content);
  KVACTOR_CUDA_CHECK_ARG(aligned(view.base, element_size(view.type)),
                         "kv_write_cuda: view.base: ", view.base,
                         " is not aligned to its element size");
  if (num_tokens == 0) return {}; // nothing is read: empty buffers may come as null pointers
  KVACTOR_CUDA_CHECK_ARG((v == nullptr) == (head_size_v == 0),
                         "kv_write_cuda: v: ", v == nullptr ? "null" : "non-null",
                         " with head_size_v ", head_size_v, " (V needs both, MLA neither)");
  KVACTOR_CUDA_CHECK_ARG(k != nullptr && aligned(k, 2), "kv_write_cuda: k: ", k,
                         " is null or not aligned to its element size");
  KVACTOR_CUDA_CHECK_ARG(aligned(v, 2), "kv_write_cuda: v: ", v,
                         " is not aligned to its element size");
  KVACTOR_CUDA_CHECK_ARG(slot_mapping != nullptr && aligned(slot_mapping, 8),
                         "kv_write_cuda: slot_mapping: ", slot_mapping,
                         " is null or not 8-byte aligned");
  return {};
}

cuda_status kv_write_cuda(const kv_view& view, const void* k, const void* v, element_type type,
                          int32_t head_size, int32_t head_size_v, const int64_t* slot_mapping,
                          int32_t num_tokens, cudaStream_t stream) {
  if (cuda_status s =
          check_kv_write_cuda(view, k, v, type, head_size, head_size_v, slot_mapping, num_tokens);
      !s)
    return s;
  if (num_tokens == 0) return {};
  cuda_detail::kv_write_args a{};
  a.cache = view.base;
  a.k_scale = key_scale(view);
  a.v_scale = value_scale(view);
  a.stride_block = view.stride_block;
  a.stride_head = view.stride_head;
  a.stride_token = view.stride_token;
  a.capacity = view.capacity_tokens();
  a.block_size = view.block_size;
  a.num_heads = view.num_heads;
  a.head_size = head_size;
  a.head_size_v = head_size_v;
  a.k = static_cast<const uint16_t*>(k);
  a.v = static_cast<const uint16_t*>(v);
  a.slot_mapping = slot_mapping;
  a.num_tokens = num_tokens;
  const bool vectorized = aligned(view.base, 16) && aligned(k, 16) && aligned(v, 16)
                          && head_size % 8 == 0 && head_size_v % 8 == 0
                          && view.stride_block % 8 == 0 && view.stride_head % 8 == 0
                          && view.stride_token % 8 == 0;
  using cuda_detail::kv_write_kind;
  const kv_write_kind kind = view.type != element_type::fp8_e4m3 ? kv_write_kind::copy
                             : type == element_type::bf16        ? kv_write_kind::fp8_bf16
                                                                 : kv_write_kind::fp8_f16;
  return cuda_detail::launch_kv_write(a, kind, vectorized, stream);
}

} // namespace kvactor::kernels
