// The codec's fast path (codec.hpp): reads MessagePack where it lies, with no object tree and no
// allocation but the decoded value's own (grown as elements are read). It answers only yes or no.
// On no, the codec decodes the same bytes again through msgpack-c's tree, which finds the reason;
// so this reader must accept nothing the tree decoder refuses, and may refuse more (it does:
// shallower nesting, and arrays no longer than the bytes left). A cluster node decodes every step's
// plan this way, and the driver every node's answer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "messages/msgpack_inspectors.hpp"

namespace kvactor::detail {

/// One MessagePack integer as msgpack-c gives it: a value below zero is `negative` (in `i`),
/// every other one is positive (in `u`), whichever format carried it.
struct msgpack_int {
  bool negative = false;
  uint64_t u = 0;
  int64_t i = 0;
};

/// A cursor over MessagePack bytes. Each read checks the bounds and the format byte, and moves
/// past the value only when it is what was asked for.
class msgpack_reader {
public:
  msgpack_reader(const char* data, size_t size)
      : p_(reinterpret_cast<const uint8_t*>(data)), end_(p_ + size) {}

  bool at_end() const { return p_ == end_; }

  /// An array header whose length fits the bytes left (each element takes one at least).
  bool array(size_t& n) {
    // fixarray 0x90-0x9f, array16 0xdc, array32 0xdd (no 8-bit form)
    return length({0x90, 0x0f}, 0, 0xdc, 0xdd, n);
  }

  bool boolean(bool& x) {
    if (p_ == end_ || (*p_ != 0xc2 && *p_ != 0xc3)) return false;
    x = *p_++ == 0xc3;
    return true;
  }

  bool is_integer() const {
    if (p_ == end_) return false;
    const uint8_t b = *p_;
    return b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xd3);
  }

  bool integer(msgpack_int& x) {
    if (p_ == end_) return false;
    const uint8_t b = *p_;
    if (b <= 0x7f) return ++p_, set_unsigned(x, b);
    if (b >= 0xe0) return ++p_, set_signed(x, static_cast<int8_t>(b));
    switch (b) {
    case 0xcc: return unsigned_of<uint8_t>(x);
    case 0xcd: return unsigned_of<uint16_t>(x);
    case 0xce: return unsigned_of<uint32_t>(x);
    case 0xcf: return unsigned_of<uint64_t>(x);
    case 0xd0: return signed_of<uint8_t, int8_t>(x);
    case 0xd1: return signed_of<uint16_t, int16_t>(x);
    case 0xd2: return signed_of<uint32_t, int32_t>(x);
    case 0xd3: return signed_of<uint64_t, int64_t>(x);
    default: return false;
    }
  }

  /// A float32 or float64, as the double msgpack-c keeps it in.
  bool floating(double& x) {
    if (p_ == end_) return false;
    uint64_t bits = 0;
    if (*p_ == 0xca) {
      if (!sized<uint32_t>(bits)) return false;
      float f = 0;
      auto narrow = static_cast<uint32_t>(bits);
      std::memcpy(&f, &narrow, sizeof f);
      x = static_cast<double>(f);
      return true;
    }
    if (*p_ != 0xcb || !sized<uint64_t>(bits)) return false;
    std::memcpy(&x, &bits, sizeof x);
    return true;
  }

  /// A str (not a bin); the view points into the input.
  bool string(std::string_view& x) {
    size_t len = 0;
    if (!length({0xa0, 0x1f}, 0xd9, 0xda, 0xdb, len)) return false; // fixstr, str8/16/32
    x = {reinterpret_cast<const char*>(p_), len};
    p_ += len;
    return true;
  }

private:
  /// The format bytes whose low bits are the length: `first` up to `first | mask`.
  struct fixed_form {
    uint8_t first;
    uint8_t mask;
  };

  /// A length header: the fixed form, or a format byte followed by an 8-, 16- or 32-bit length
  /// (`with8` 0: no 8-bit form). The length must fit the bytes left.
  bool length(fixed_form fixed, uint8_t with8, uint8_t with16, uint8_t with32, size_t& n) {
    if (p_ == end_) return false;
    const uint8_t b = *p_;
    uint64_t len = 0;
    if (b >= fixed.first && b <= (fixed.first | fixed.mask)) {
      len = b & fixed.mask;
      ++p_;
    } else if (!(with8 != 0 && b == with8 ? sized<uint8_t>(len)
                 : b == with16            ? sized<uint16_t>(len)
                                          : b == with32 && sized<uint32_t>(len))) {
      return false;
    }
    if (len > static_cast<uint64_t>(end_ - p_)) return false;
    n = static_cast<size_t>(len);
    return true;
  }

  /// Skips the format byte and reads a big-endian U after it.
  template <class U>
  bool sized(uint64_t& x) {
    if (static_cast<size_t>(end_ - p_) < 1 + sizeof(U)) return false;
    uint64_t v = 0;
    for (size_t k = 1; k <= sizeof(U); ++k)
      v = (v << 8) | p_[k];
    p_ += 1 + sizeof(U);
    x = v;
    return true;
  }

  template <class U>
  bool unsigned_of(msgpack_int& x) {
    uint64_t v = 0;
    return sized<U>(v) && set_unsigned(x, v);
  }

  template <class U, class S>
  bool signed_of(msgpack_int& x) {
    uint64_t v = 0;
    return sized<U>(v) && set_signed(x, static_cast<S>(static_cast<U>(v)));
  }

  static bool set_unsigned(msgpack_int& x, uint64_t v) {
    x = {false, v, 0};
    return true;
  }

  static bool set_signed(msgpack_int& x, int64_t v) {
    x = v < 0 ? msgpack_int{true, 0, v} : msgpack_int{false, static_cast<uint64_t>(v), 0};
    return true;
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

/// The loading inspector of the fast path: the same rules as msgpack_unpacker (exact field
/// counts, integers that fit, named enum values), without the path and message it keeps for
/// errors. The first mismatch stops it; failed() is then true.
class msgpack_stream_unpacker {
public:
  using result_type = void;
  static constexpr bool reads_state = false;
  static constexpr bool writes_state = true;
  /// Nesting deeper than this is left to the tree decoder, which allows 64 (codec.cpp).
  static constexpr int max_depth = 32;

  explicit msgpack_stream_unpacker(msgpack_reader& in) : in_(in) {}

  template <class... Ts>
  void operator()(Ts&&... xs) {
    size_t n = 0;
    if (failed_ || !enter() || !in_.array(n) || n != field_count_v<Ts...>) return fail();
    (field(xs), ...);
    --depth_;
  }

  template <class T>
  void apply(T& x) {
    if (failed_) return;
    if constexpr (std::is_same_v<T, bool>) {
      if (!in_.boolean(x)) fail();
    } else if constexpr (std::is_enum_v<T>) {
      read_enum(x);
    } else if constexpr (std::is_integral_v<T>) {
      read_integer(x);
    } else if constexpr (std::is_floating_point_v<T>) {
      read_floating(x);
    } else if constexpr (std::is_same_v<T, std::string>) {
      std::string_view s;
      if (!in_.string(s)) return fail();
      x.assign(s.data(), s.size());
    } else if constexpr (is_vector<T>::value) {
      read_vector(x);
    } else if constexpr (inspectable<msgpack_stream_unpacker, T>) {
      inspect(*this, x);
    } else {
      static_assert(always_false_v<T>, "kvactor codec: unsupported field type");
    }
  }

  bool failed() const { return failed_; }

  /// Counts the envelope's array, so that the depth here is never below msgpack-c's.
  bool enter() { return ++depth_ <= max_depth; }

private:
  template <class T>
  void field(T& x) {
    if constexpr (!is_annotation_v<T>) apply(x);
  }

  template <class T>
  void read_integer(T& x) {
    msgpack_int v;
    if (!in_.integer(v)) return fail();
    if (!v.negative) {
      if (v.u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return fail();
      x = static_cast<T>(v.u);
    } else if constexpr (std::is_signed_v<T>) {
      if (v.i < static_cast<int64_t>(std::numeric_limits<T>::min())) return fail();
      x = static_cast<T>(v.i);
    } else {
      fail();
    }
  }

  template <class E>
  void read_enum(E& x) {
    std::underlying_type_t<E> raw{};
    read_integer(raw);
    if (failed_) return;
    x = static_cast<E>(raw);
    if constexpr (named_enum<E>) {
      if (std::string_view{to_string(x)} == "unknown") fail();
    }
  }

  /// As the tree decoder: an integer is a number too (JSON writes 2.0 as 2).
  template <class T>
  void read_floating(T& x) {
    if (in_.is_integer()) {
      msgpack_int v;
      if (!in_.integer(v)) return fail(); // truncated
      x = v.negative ? static_cast<T>(v.i) : static_cast<T>(v.u);
      return;
    }
    double d = 0;
    if (!in_.floating(d)) return fail();
    x = static_cast<T>(d);
  }

  template <class V>
  void read_vector(V& x) {
    size_t n = 0;
    if (!enter() || !in_.array(n)) return fail();
    start_vector(x, n); // grown as elements are read (msgpack_inspectors.hpp)
    for (size_t i = 0; i < n && !failed_; ++i)
      append_element(x, [this](auto& element) { apply(element); });
    --depth_;
  }

  void fail() { failed_ = true; }

  msgpack_reader& in_;
  int depth_ = 0;
  bool failed_ = false;
};

/// Decodes encode<T>'s bytes in place: the envelope names `type` and carries `version`, the
/// payload fills `out`, and no byte is left. False at the first thing the tree decoder could
/// refuse; `out` is then unspecified.
template <class T>
bool decode_in_place(const char* data, size_t size, std::string_view type, uint32_t version,
                     T& out) {
  msgpack_reader in{data, size};
  msgpack_stream_unpacker unpacker{in};
  size_t n = 0;
  std::string_view name;
  msgpack_int v;
  if (!unpacker.enter() || !in.array(n) || n != 3 || !in.string(name) || name != type
      || !in.integer(v) || v.negative || v.u != version)
    return false;
  unpacker.apply(out);
  return !unpacker.failed() && in.at_end();
}

} // namespace kvactor::detail
