#include "model/config_reader.hpp"

#include <fmt/format.h>

namespace kvactor::model_detail {

namespace {

constexpr size_t max_dump_chars = 60;

std::string range_text(int64_t min, int64_t max) {
  if (max == int64_max || max == int32_max) {
    if (min == 1) return "a positive integer";
    if (min == 0) return "a non-negative integer";
    if (min == std::numeric_limits<int64_t>::min()) return "an integer";
  }
  if (max == int64_max) return fmt::format("an integer >= {}", min);
  return fmt::format("an integer in [{}, {}]", min, max);
}

} // namespace

std::string short_dump(const nlohmann::json& v) {
  // dump() with the replace handler cannot throw on invalid UTF-8.
  auto text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_dump_chars) {
    text.resize(max_dump_chars);
    text += "...";
  }
  return text;
}

config_reader::config_reader(const nlohmann::json& obj, std::string where, std::string model_type)
    : obj_(obj), where_(std::move(where)), model_type_(std::move(model_type)) {}

const nlohmann::json* config_reader::find(std::string_view key) const {
  if (!obj_.is_object()) return nullptr;
  auto it = obj_.find(std::string{key});
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

error config_reader::missing(std::string_view key) const {
  return make_error(errc::missing_field,
                    fmt::format("{}: missing from {} (model_type {})", key, where_, model_type_));
}

error config_reader::invalid(std::string_view key, std::string_view what) const {
  return make_error(errc::invalid_argument,
                    fmt::format("{}: {} (model_type {})", key, what, model_type_));
}

expected<int64_t> config_reader::integer_in(std::string_view key, const nlohmann::json& v,
                                            int64_t min, int64_t max) const {
  auto bad = [&] {
    return invalid(key, fmt::format("{} must be {}", short_dump(v), range_text(min, max)));
  };
  if (!v.is_number_integer()) return bad();
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(int64_max)) return bad();
  auto x = v.get<int64_t>();
  if (x < min || x > max) return bad();
  return x;
}

expected<int64_t> config_reader::positive(std::string_view key, int64_t max) const {
  const auto* v = find(key);
  if (v == nullptr) return missing(key);
  return integer_in(key, *v, 1, max);
}

expected<int64_t> config_reader::positive_or(std::string_view key, int64_t fallback,
                                             int64_t max) const {
  const auto* v = find(key);
  if (v == nullptr) return fallback;
  return integer_in(key, *v, 1, max);
}

expected<int64_t> config_reader::non_negative(std::string_view key, int64_t max) const {
  const auto* v = find(key);
  if (v == nullptr) return missing(key);
  return integer_in(key, *v, 0, max);
}

expected<int64_t> config_reader::non_negative_or(std::string_view key, int64_t fallback,
                                                 int64_t max) const {
  const auto* v = find(key);
  if (v == nullptr) return fallback;
  return integer_in(key, *v, 0, max);
}

expected<bool> config_reader::boolean_or(std::string_view key, bool fallback) const {
  const auto* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean())
    return invalid(key, fmt::format("{} must be true or false", short_dump(*v)));
  return v->get<bool>();
}

expected<std::vector<std::string>> config_reader::strings(std::string_view key) const {
  const auto* v = find(key);
  if (v == nullptr) return missing(key);
  if (!v->is_array())
    return invalid(key, fmt::format("{} must be a list of strings", short_dump(*v)));
  std::vector<std::string> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const auto& item = (*v)[i];
    if (!item.is_string())
      return invalid(fmt::format("{}[{}]", key, i),
                     fmt::format("{} must be a string", short_dump(item)));
    out.push_back(item.get<std::string>());
  }
  return out;
}

expected<std::vector<int64_t>> config_reader::integers(std::string_view key) const {
  const auto* v = find(key);
  if (v == nullptr) return missing(key);
  if (!v->is_array())
    return invalid(key, fmt::format("{} must be a list of integers", short_dump(*v)));
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    KVACTOR_MODEL_TRY(x, integer_in(fmt::format("{}[{}]", key, i), (*v)[i],
                                    std::numeric_limits<int64_t>::min(), int64_max));
    out.push_back(x);
  }
  return out;
}

expected<int64_t> split_evenly(std::string_view field, int64_t total, int32_t tp) {
  if (total % tp != 0)
    return make_error(
        errc::invalid_split,
        fmt::format("{}: {} is not divisible by --tensor-parallel-size {}", field, total, tp));
  return total / tp;
}

expected<int64_t> split_kv_heads(std::string_view field, int64_t total, int32_t tp) {
  if (total >= tp) return split_evenly(field, total, tp);
  // Fewer KV heads than ranks: each rank holds one replica, which only works out evenly when
  // every head is replicated the same number of times.
  if (tp % total != 0)
    return make_error(errc::invalid_split,
                      fmt::format("{}: {} does not divide --tensor-parallel-size {} (KV heads "
                                  "fewer than ranks are replicated, which needs an even split)",
                                  field, total, tp));
  return 1;
}

expected<int64_t> checked_mul(std::string_view what, int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    return make_error(errc::invalid_argument,
                      fmt::format("{}: {} x {} overflows a 64-bit integer", what, a, b));
  return out;
}

} // namespace kvactor::model_detail
