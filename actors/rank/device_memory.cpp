#include "actors/rank/device_memory.hpp"

#include "kvactor/kernels/device_runtime.h"

namespace kvactor {

kv_memory_factory device_kv_memory(int32_t ordinal) {
  struct device_memory final : kv_memory {
    std::unique_ptr<kernels::device_buffer> buffer;
    std::byte* data() const override { return static_cast<std::byte*>(buffer->data()); }
    const char* where() const override { return "device"; }
  };
  return [ordinal](int64_t bytes) -> expected<std::unique_ptr<kv_memory>> {
    std::string why;
    if (!kernels::select_gpu(ordinal, &why)) return make_error(errc::io_error, why);
    auto buffer = kernels::device_buffer::allocate(bytes, &why);
    if (!buffer) return make_error(errc::insufficient_memory, why);
    auto m = std::make_unique<device_memory>();
    m->buffer = std::move(buffer);
    return std::unique_ptr<kv_memory>(std::move(m));
  };
}

} // namespace kvactor
