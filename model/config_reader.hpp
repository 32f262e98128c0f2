// Internal to the model loader: typed access to the fields of one config object, with errors
// that name the field, the value and the model_type. Never throws.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/errc.hpp"

/// Binds `var` to the value of the expected<T> `expr`, or returns its error from the enclosing
/// function (whose return type is any expected<U>).
#define KVACTOR_MODEL_TRY(var, expr)                                                               \
  auto var##_or_error = (expr);                                                                    \
  if (!var##_or_error) return var##_or_error.err();                                                \
  auto var = std::move(*var##_or_error)

namespace kvactor::model_detail {

constexpr int64_t int32_max = std::numeric_limits<int32_t>::max();
constexpr int64_t int64_max = std::numeric_limits<int64_t>::max();
/// Bounds layer counts so that a corrupt config cannot make us allocate without limit.
constexpr int64_t max_layers = 1 << 16;
/// Bounds a head's width (the widest real ones are 256, MLA's 576) so that page sizes stay far
/// from overflow.
constexpr int64_t max_head_dim = 1 << 12;

class config_reader {
public:
  /// REQUIRES: `obj` is a JSON object that outlives the reader.
  /// `where` names the object in messages ("config", "text_config").
  config_reader(const nlohmann::json& obj, std::string where, std::string model_type);

  const std::string& model_type() const { return model_type_; }

  /// The field, or nullptr when it is absent or null (null means "not set" in HF configs).
  const nlohmann::json* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  /// An integer in [1, max]: missing_field when absent, invalid_argument otherwise.
  expected<int64_t> positive(std::string_view key, int64_t max = int32_max) const;
  /// As positive(), but `fallback` when absent.
  expected<int64_t> positive_or(std::string_view key, int64_t fallback,
                                int64_t max = int32_max) const;
  /// An integer in [0, max]; missing_field when absent.
  expected<int64_t> non_negative(std::string_view key, int64_t max = int32_max) const;
  /// As non_negative(), but `fallback` when absent.
  expected<int64_t> non_negative_or(std::string_view key, int64_t fallback,
                                    int64_t max = int32_max) const;
  expected<bool> boolean_or(std::string_view key, bool fallback) const;
  /// A list of strings; missing_field when absent.
  expected<std::vector<std::string>> strings(std::string_view key) const;
  /// A list of integers; missing_field when absent.
  expected<std::vector<int64_t>> integers(std::string_view key) const;

  /// missing_field: "<key>: missing from <where> (model_type <t>)".
  error missing(std::string_view key) const;
  /// invalid_argument: "<key>: <what> (model_type <t>)".
  error invalid(std::string_view key, std::string_view what) const;

private:
  expected<int64_t> integer_in(std::string_view key, const nlohmann::json& v, int64_t min,
                               int64_t max) const;

  const nlohmann::json& obj_;
  std::string where_;
  std::string model_type_;
};

/// A JSON value for a message, cut to a readable length.
std::string short_dump(const nlohmann::json& v);

/// total / tp; invalid_split "<field>: <total> is not divisible by --tensor-parallel-size <tp>".
expected<int64_t> split_evenly(std::string_view field, int64_t total, int32_t tp);

/// KV heads of one rank: total / tp when total >= tp, else 1 (replicated, needs tp % total == 0).
expected<int64_t> split_kv_heads(std::string_view field, int64_t total, int32_t tp);

/// a * b, or invalid_argument naming `what` when the product overflows int64.
expected<int64_t> checked_mul(std::string_view what, int64_t a, int64_t b);

} // namespace kvactor::model_detail
