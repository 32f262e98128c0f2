#include "actors/driver/kv_budget.hpp"

#include <cmath>

#include <fmt/format.h>

namespace kvactor {

expected<int64_t> gpu_kv_cache_budget(const gpu_memory_use& gpu) {
  const auto requested =
      static_cast<int64_t>(std::ceil(static_cast<double>(gpu.total_bytes) * gpu.utilization));
  const int64_t budget = requested - gpu.in_use_bytes - gpu.non_kv_bytes;
  if (budget <= 0)
    return make_error(errc::insufficient_memory,
                      fmt::format("--gpu-memory-utilization {}: {} of {} bytes, less {} bytes in "
                                  "use and {} bytes for weights, activations and CUDA graphs, "
                                  "leave no KV cache memory",
                                  gpu.utilization, requested, gpu.total_bytes, gpu.in_use_bytes,
                                  gpu.non_kv_bytes));
  return budget;
}

expected<std::vector<int64_t>> per_rank_budgets(const std::vector<int64_t>& values, size_t ranks) {
  if (values.size() == 1) return std::vector<int64_t>(ranks, values.front());
  if (values.size() != ranks)
    return make_error(errc::invalid_argument,
                      fmt::format("--kv-cache-memory: {} values for {} ranks (give one value, or "
                                  "one per rank)",
                                  values.size(), ranks));
  return values;
}

} // namespace kvactor
