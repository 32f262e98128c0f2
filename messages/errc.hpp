// Project error codes and the expected-style result used by the pure cores.
// CAF-free on purpose: the cores return kvactor::expected<T>; actor shells turn
// a kvactor::error into a caf::error with the same code and message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kvactor {

enum class errc : uint8_t {
  no_error = 0,
  /// A flag or field has a value outside its domain.
  invalid_argument,
  /// A file is not valid JSON / MessagePack, or has the wrong schema.
  parse_error,
  /// A model config names a model_type kvactor does not know.
  unknown_model_type,
  /// A required field is absent from a config or message.
  missing_field,
  /// Heads cannot be split over the requested tensor-parallel size.
  invalid_split,
  /// The budget cannot hold the KV cache one request needs.
  insufficient_memory,
  /// Specs that must agree (across layers, groups or ranks) do not.
  incompatible_specs,
  /// No kernel block size satisfies every backend of a group.
  no_common_block_size,
  /// A combination kvactor recognises but does not implement.
  unsupported,
  /// A file could not be read.
  io_error,
  /// A rank applied a step but could not execute it: the step's sequence number is consumed
  /// and its requests are lost (the driver fails them and moves on).
  step_failed,
  /// A collective between tensor-parallel ranks failed: it timed out, the ranks entered different
  /// collectives, or the communicator was aborted. Like step_failed, the step is consumed.
  collective_failed,
  /// A rank stopped or became unreachable (its node died, its link was cut): the run ends and
  /// every unfinished request is failed with the reason.
  rank_lost,
};

std::string_view to_string(errc x);

/// An error as a value: a code and a message that names the field and value at fault.
struct error {
  errc code = errc::no_error;
  std::string message;

  bool operator==(const error&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, error& x) {
  return f(x.code, x.message);
}

/// Holds either a T or an error. Minimal on purpose (std::expected is C++23).
template <class T>
class [[nodiscard]] expected {
public:
  expected(T value) : data_(std::move(value)) {}
  expected(error err) : data_(std::move(err)) {}

  explicit operator bool() const { return data_.index() == 0; }
  bool has_value() const { return data_.index() == 0; }

  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const error& err() const { return std::get<1>(data_); }

private:
  std::variant<T, error> data_;
};

/// Success without a value.
struct ok_t {
  bool operator==(const ok_t&) const = default;
};
using status = expected<ok_t>;
inline status ok() {
  return ok_t{};
}

inline error make_error(errc code, std::string message) {
  return error{code, std::move(message)};
}

} // namespace kvactor
