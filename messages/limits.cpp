#include "messages/limits.hpp"

#include <fmt/format.h>

#include "messages/runtime.hpp"

namespace kvactor {

namespace {

error invalid(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

status check_counts(const rank_config& c) {
  for (auto ok : {check(static_cast<const parallel_settings&>(c), named_as::field),
                  check(static_cast<const cache_settings&>(c), named_as::field),
                  check(static_cast<const scheduler_limits&>(c), named_as::field),
                  check_setting(limits::num_ubatches, c.num_ubatches, named_as::field)})
    if (!ok) return ok;
  if (c.rank < 0 || c.rank >= c.tensor_parallel_size)
    return invalid(fmt::format("rank_config.rank: {} is outside [0, {}) (tensor_parallel_size)",
                               c.rank, c.tensor_parallel_size));
  return ok();
}

status check_memory_and_graphs(const rank_config& c) {
  if (c.kv_cache_memory < 0)
    return invalid(
        fmt::format("rank_config.kv_cache_memory: {} bytes is negative", c.kv_cache_memory));
  if (c.cudagraph_memory < 0)
    return invalid(
        fmt::format("rank_config.cudagraph_memory: {} bytes is negative", c.cudagraph_memory));
  if (to_string(c.device) == "unknown")
    return invalid(fmt::format("rank_config.device: {} is not a device (cpu or cuda)",
                               static_cast<int>(c.device)));
  if (to_string(c.cudagraph) == "unknown")
    return invalid(fmt::format("rank_config.cudagraph: {} is not a CUDA graph mode",
                               static_cast<int>(c.cudagraph)));
  for (auto s : c.cudagraph_capture_sizes)
    if (s < 1 || s > c.max_num_batched_tokens)
      return invalid(fmt::format("rank_config.cudagraph_capture_sizes: {} is outside [1, {}] "
                                 "(max_num_batched_tokens)",
                                 s, c.max_num_batched_tokens));
  if (c.model.empty()) return invalid("rank_config.model: empty (a path or a shipped name)");
  return ok();
}

} // namespace

status check_setting(const setting_range& range, int64_t value, named_as as) {
  if (value >= range.min && value <= range.max) return ok();
  const auto name = as == named_as::flag ? fmt::format("{}", range.flag)
                                         : fmt::format("rank_config.{}", range.field);
  return invalid(fmt::format("{}: {} is outside [{}, {}] ({})", name, value, range.min, range.max,
                             range.meaning));
}

status check_settings(std::initializer_list<setting_value> values, named_as as) {
  for (const auto& v : values)
    if (auto ok = check_setting(v.range, v.value, as); !ok) return ok;
  return ok();
}

status check_rank_config(const rank_config& c) {
  if (auto ok = check_counts(c); !ok) return ok;
  return check_memory_and_graphs(c);
}

} // namespace kvactor
