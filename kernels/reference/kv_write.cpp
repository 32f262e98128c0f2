#include "kvactor/kernels/kv_write.h"

#include "kvactor/kernels/check.h"

namespace kvactor::kernels {

namespace {

template <class T>
void write_typed(const kv_view& view, const float* k, int32_t head_size, const float* v,
                 int32_t head_size_v, const int64_t* slot_mapping, int32_t num_tokens) {
  const int32_t heads = view.num_heads;
  // Dividing by a scale of 1 is exact: the types that store values are unaffected.
  const float ks_scale = key_scale(view), vs_scale = value_scale(view);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    const int64_t block = slot / view.block_size;
    const auto offset = static_cast<int32_t>(slot % view.block_size);
    for (int32_t h = 0; h < heads; ++h) {
      T* dst = entry<T>(view, block, h, offset);
      const float* ks = k + (static_cast<int64_t>(t) * heads + h) * head_size;
      for (int32_t d = 0; d < head_size; ++d)
        dst[d] = from_float<T>(ks[d] / ks_scale);
      if (v == nullptr) continue;
      const float* vs = v + (static_cast<int64_t>(t) * heads + h) * head_size_v;
      for (int32_t d = 0; d < head_size_v; ++d)
        dst[head_size + d] = from_float<T>(vs[d] / vs_scale);
    }
  }
}

} // namespace

void check_write_kv(const kv_view& view, const float* k, int32_t head_size, const float* v,
                    int32_t head_size_v, const int64_t* slot_mapping, int32_t num_tokens) {
  check_view(view, "write_kv: view");
  KVACTOR_CHECK(num_tokens >= 0, "write_kv: num_tokens: ", num_tokens, " is negative");
  KVACTOR_CHECK(head_size > 0, "write_kv: head_size: ", head_size, " must be > 0");
  KVACTOR_CHECK(head_size_v >= 0, "write_kv: head_size_v: ", head_size_v, " is negative");
  KVACTOR_CHECK(head_size + head_size_v <= view.content,
                "write_kv: head_size + head_size_v: ", head_size, " + ", head_size_v,
                " exceeds the view's content ", view.content);
  if (num_tokens == 0) return; // nothing is read: empty buffers may come as null pointers
  KVACTOR_CHECK((v == nullptr) == (head_size_v == 0),
                "write_kv: v: ", v == nullptr ? "null" : "non-null", " with head_size_v ",
                head_size_v, " (V needs both, MLA neither)");
  KVACTOR_CHECK(k != nullptr, "write_kv: k: is null");
  KVACTOR_CHECK(slot_mapping != nullptr, "write_kv: slot_mapping: is null");
  const int64_t capacity = view.capacity_tokens();
  for (int32_t t = 0; t < num_tokens; ++t)
    KVACTOR_CHECK(slot_mapping[t] >= -1 && slot_mapping[t] < capacity, "write_kv: slot_mapping[", t,
                  "]: ", slot_mapping[t], " is outside [-1, num_blocks * block_size = ", capacity,
                  ")");
}

void write_kv(const kv_view& view, const float* k, int32_t head_size, const float* v,
              int32_t head_size_v, const int64_t* slot_mapping, int32_t num_tokens) {
  check_write_kv(view, k, head_size, v, head_size_v, slot_mapping, num_tokens);
  dispatch_element_type(view.type, [&](auto tag) {
    write_typed<decltype(tag)>(view, k, head_size, v, head_size_v, slot_mapping, num_tokens);
  });
}

} // namespace kvactor::kernels
