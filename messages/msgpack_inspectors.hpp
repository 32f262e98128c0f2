// The two MessagePack inspectors of the codec (messages/codec.hpp) and the small msgpack-c
// wrappers they write to and read from. An inspector follows CAF 0.17's inspect() protocol
// (result_type, reads_state/writes_state, operator()(annotations and fields...)), so every
// message type's single inspect() drives CAF serialization and this codec alike.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/meta/annotation.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/save_callback.hpp>
#include <caf/meta/type_name.hpp>

#include "messages/errc.hpp"

namespace kvactor::detail {

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

template <class T>
inline constexpr bool is_annotation_v = caf::meta::is_annotation<std::remove_cvref_t<T>>::value;

template <class T>
inline constexpr bool is_callback_v = caf::meta::is_load_callback<std::remove_cvref_t<T>>::value
                                      || caf::meta::is_save_callback<std::remove_cvref_t<T>>::value;

/// Number of fields an inspect() call passes (annotations excluded).
template <class... Ts>
inline constexpr size_t field_count_v = (size_t{0} + ... + (is_annotation_v<Ts> ? 0 : 1));

template <class>
inline constexpr bool always_false_v = false;

template <class Inspector, class T>
concept inspectable = requires(Inspector& f, T& x) {
  inspect(f, x);
};

/// An enum with an ADL to_string(E); the vocabulary names out-of-range values "unknown".
template <class E>
concept named_enum = requires(E x) {
  { to_string(x) } -> std::convertible_to<std::string_view>;
};

/// The first caf::meta::type_name among `xs`, or nullptr.
template <class... Ts>
const char* annotated_name(const Ts&... xs) {
  const char* name = nullptr;
  (
      [&] {
        if constexpr (std::is_same_v<Ts, caf::meta::type_name_t>)
          if (name == nullptr) name = xs.value;
      }(),
      ...);
  return name;
}

/// How a decoder fills a vector of `n` elements: it grows with the elements read, never to the
/// length the header claims. A forged length over nils (or, in place, over the bytes left) would
/// otherwise cost sizeof(element) of memory per element before the first one failed to read.
template <class V>
void start_vector(V& x, size_t n) {
  constexpr size_t max_reserved = 256;
  x.clear();
  x.reserve(std::min(n, max_reserved));
}

/// Appends one element that `read(element&)` fills (vector<bool> yields proxies: a bool goes
/// through a local).
template <class V, class Read>
void append_element(V& x, Read&& read) {
  if constexpr (std::is_same_v<typename V::value_type, bool>) {
    bool element = false;
    read(element);
    x.push_back(element);
  } else {
    read(x.emplace_back());
  }
}

/// Appends MessagePack values to a byte vector (msgpack-c stays inside codec.cpp).
class msgpack_writer {
public:
  /// Throws std::length_error above 2^32 - 1 elements (the MessagePack limit).
  void array(size_t n);
  void boolean(bool x);
  void integer(int64_t x);
  void unsigned_integer(uint64_t x);
  void float32(float x);
  void float64(double x);
  /// Throws std::length_error above 2^32 - 1 bytes.
  void string(std::string_view x);
  /// The bytes written so far; leaves the writer empty.
  std::vector<char> release() { return std::move(buf_); }

private:
  std::vector<char> buf_;
};

/// A read-only view of one parsed MessagePack value; valid while its msgpack_document lives.
class msgpack_value {
public:
  enum class kind : uint8_t {
    nil,
    boolean,
    positive_integer,
    negative_integer,
    float32,
    float64,
    string,
    binary,
    array,
    map,
    ext,
  };

  msgpack_value() = default;
  explicit msgpack_value(const void* obj) : obj_(obj) {}

  kind type() const;
  bool boolean() const;                     // REQUIRES: type() == boolean
  uint64_t positive_integer() const;        // REQUIRES: type() == positive_integer
  int64_t negative_integer() const;         // REQUIRES: type() == negative_integer
  double floating() const;                  // REQUIRES: type() is float32 or float64
  std::string_view string() const;          // REQUIRES: type() == string
  size_t size() const;                      // REQUIRES: type() == array
  msgpack_value operator[](size_t i) const; // REQUIRES: type() == array, i < size()
  /// What this value is, for error messages: `integer 300`, `string "abc"`, `array of 3`.
  std::string describe() const;

private:
  const void* obj_ = nullptr; // const msgpack::object*
};

/// Exactly one parsed MessagePack value and the memory it lives in.
class msgpack_document {
public:
  /// Fails (with the reason, not yet prefixed by a type name) on truncated or malformed bytes,
  /// trailing bytes, or lengths larger than the input could hold. Never throws.
  static expected<msgpack_document> parse(const char* data, size_t size);

  msgpack_document(msgpack_document&&) noexcept;
  msgpack_document& operator=(msgpack_document&&) noexcept;
  ~msgpack_document();

  msgpack_value root() const;

private:
  struct impl;
  explicit msgpack_document(impl* ptr) : impl_(ptr) {}
  impl* impl_;
};

/// The inspector that writes a value (CAF 0.17 inspect() protocol; a saving inspector).
class msgpack_packer {
public:
  using result_type = void;
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;

  explicit msgpack_packer(msgpack_writer& out) : out_(out) {}

  /// Called by inspect(): writes the fields as one array; annotations write nothing.
  template <class... Ts>
  void operator()(Ts&&... xs) {
    static_assert(!(is_callback_v<Ts> || ...),
                  "kvactor codec: meta::load_callback/save_callback are not supported");
    out_.array(field_count_v<Ts...>);
    (field(xs), ...);
  }

  template <class T>
  void apply(T& x) {
    using V = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<V, bool>) {
      out_.boolean(x);
    } else if constexpr (std::is_enum_v<V>) {
      auto raw = static_cast<std::underlying_type_t<V>>(x);
      apply(raw);
    } else if constexpr (std::is_integral_v<V> && std::is_signed_v<V>) {
      out_.integer(static_cast<int64_t>(x));
    } else if constexpr (std::is_integral_v<V>) {
      out_.unsigned_integer(static_cast<uint64_t>(x));
    } else if constexpr (std::is_same_v<V, float>) {
      out_.float32(x);
    } else if constexpr (std::is_same_v<V, double>) {
      out_.float64(x);
    } else if constexpr (std::is_same_v<V, std::string>) {
      out_.string(x);
    } else if constexpr (is_vector<V>::value) {
      out_.array(x.size());
      if constexpr (std::is_same_v<typename V::value_type, bool>) {
        for (bool element : x) // vector<bool> yields proxies
          apply(element);
      } else {
        for (auto& element : x)
          apply(element);
      }
    } else if constexpr (inspectable<msgpack_packer, V>) {
      inspect(*this, const_cast<V&>(x));
    } else {
      static_assert(always_false_v<V>, "kvactor codec: unsupported field type");
    }
  }

private:
  template <class T>
  void field(T& x) {
    if constexpr (!is_annotation_v<T>) apply(x);
  }

  msgpack_writer& out_;
};

/// The inspector that reads a value (a loading inspector). Strict: array lengths must equal the
/// field count, integers must fit the target type, enums must be named values. The first
/// mismatch stops reading; failure() then says where and what.
class msgpack_unpacker {
public:
  using result_type = void;
  static constexpr bool reads_state = false;
  static constexpr bool writes_state = true;

  explicit msgpack_unpacker(msgpack_value value) : cur_(value) {}

  /// Called by inspect(): reads the fields from one array of exactly that many elements.
  template <class... Ts>
  void operator()(Ts&&... xs) {
    static_assert(!(is_callback_v<Ts> || ...),
                  "kvactor codec: meta::load_callback/save_callback are not supported");
    if (failed()) return;
    auto node = cur_;
    if (!expect_array(field_count_v<Ts...>, annotated_name(xs...))) return;
    size_t index = 0;
    (field(node, index, xs), ...);
  }

  template <class T>
  void apply(T& x) {
    using kind = msgpack_value::kind;
    if (failed()) return;
    if constexpr (std::is_same_v<T, bool>) {
      if (cur_.type() != kind::boolean) return fail("bool");
      x = cur_.boolean();
    } else if constexpr (std::is_enum_v<T>) {
      std::underlying_type_t<T> raw{};
      if (!read_integer(raw, "an enum value")) return;
      x = static_cast<T>(raw);
      if constexpr (named_enum<T>) {
        if (std::string_view{to_string(x)} == "unknown") return fail("a named enum value");
      }
    } else if constexpr (std::is_integral_v<T>) {
      read_integer(x, integer_label<T>());
    } else if constexpr (std::is_floating_point_v<T>) {
      // An integer is accepted too: JSON messages (kvactor inject) write 2.0 as 2.
      if (cur_.type() == kind::positive_integer)
        x = static_cast<T>(cur_.positive_integer());
      else if (cur_.type() == kind::negative_integer)
        x = static_cast<T>(cur_.negative_integer());
      else if (cur_.type() != kind::float32 && cur_.type() != kind::float64)
        return fail(std::is_same_v<T, float> ? "float" : "double");
      else
        x = static_cast<T>(cur_.floating());
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (cur_.type() != kind::string) return fail("a string");
      x = std::string{cur_.string()};
    } else if constexpr (is_vector<T>::value) {
      if (cur_.type() != kind::array) return fail("an array");
      auto node = cur_;
      auto n = node.size();
      start_vector(x, n);
      for (size_t i = 0; i < n && !failed(); ++i) {
        path_.push_back({false, i});
        cur_ = node[i];
        append_element(x, [this](auto& element) { apply(element); });
        path_.pop_back();
      }
    } else if constexpr (inspectable<msgpack_unpacker, T>) {
      inspect(*this, x);
    } else {
      static_assert(always_false_v<T>, "kvactor codec: unsupported field type");
    }
  }

  bool failed() const { return !failure_.empty(); }

  /// Where and what, e.g. `field 2, element 1, field 1: expected int32_t, found string "x"`.
  const std::string& failure() const { return failure_; }

private:
  struct step {
    bool is_field; // else a vector element
    size_t index;
  };

  template <class T>
  void field(msgpack_value node, size_t& index, T& x) {
    if constexpr (!is_annotation_v<T>) {
      if (failed()) return;
      path_.push_back({true, index});
      cur_ = node[index];
      apply(x);
      path_.pop_back();
      ++index;
    }
  }

  template <class T>
  bool read_integer(T& x, const char* label) {
    using kind = msgpack_value::kind;
    if (cur_.type() == kind::positive_integer) {
      auto v = cur_.positive_integer();
      if (v <= static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        x = static_cast<T>(v);
        return true;
      }
    } else if (cur_.type() == kind::negative_integer) {
      auto v = cur_.negative_integer();
      if constexpr (std::is_signed_v<T>) {
        if (v >= static_cast<int64_t>(std::numeric_limits<T>::min())) {
          x = static_cast<T>(v);
          return true;
        }
      }
    }
    fail(label);
    return false;
  }

  template <class T>
  static const char* integer_label() {
    constexpr bool s = std::is_signed_v<T>;
    switch (sizeof(T)) {
    case 1: return s ? "int8_t" : "uint8_t";
    case 2: return s ? "int16_t" : "uint16_t";
    case 4: return s ? "int32_t" : "uint32_t";
    default: return s ? "int64_t" : "uint64_t";
    }
  }

  /// Checks that the current value is an array of `n` elements (a struct named `name`).
  bool expect_array(size_t n, const char* name);
  /// Records `<path>: expected <what>, found <current value>`.
  void fail(std::string_view what);

  msgpack_value cur_;
  std::vector<step> path_;
  std::string failure_;
};

} // namespace kvactor::detail
