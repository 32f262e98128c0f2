// The msgpack-c side of the codec (codec.hpp, msgpack_inspectors.hpp): writing, parsing,
// describing values, error messages.
#include "messages/codec.hpp"

#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <msgpack.hpp>

namespace kvactor::detail {

namespace {

/// msgpack::packer's Stream: appends to the writer's vector.
struct byte_sink {
  std::vector<char>* out;
  void write(const char* data, size_t size) { out->insert(out->end(), data, data + size); }
};

uint32_t checked_length(size_t n, const char* what) {
  if (n > std::numeric_limits<uint32_t>::max())
    throw std::length_error(fmt::format("MessagePack {} of {} elements exceeds 2^32 - 1", what, n));
  return static_cast<uint32_t>(n);
}

const msgpack::object& obj(const void* ptr) {
  return *static_cast<const msgpack::object*>(ptr);
}

} // namespace

// ---- msgpack_writer ------------------------------------------------------------------------

void msgpack_writer::array(size_t n) {
  byte_sink sink{&buf_};
  msgpack::packer<byte_sink>{sink}.pack_array(checked_length(n, "array"));
}

void msgpack_writer::boolean(bool x) {
  byte_sink sink{&buf_};
  msgpack::packer<byte_sink> pk{sink};
  if (x)
    pk.pack_true();
  else
    pk.pack_false();
}

void msgpack_writer::integer(int64_t x) {
  byte_sink sink{&buf_};
  msgpack::packer<byte_sink>{sink}.pack_int64(x); // smallest encoding that holds x
}

void msgpack_writer::unsigned_integer(uint64_t x) {
  byte_sink sink{&buf_};
  msgpack::packer<byte_sink>{sink}.pack_uint64(x);
}

// NOTE(codec): msgpack-c 4.x pack_float/pack_double write integral values as integers (and
// -0.0 as 0); the codec writes float32/float64 bytes itself so that a float field stays a float.
void msgpack_writer::float32(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  buf_.push_back(static_cast<char>(0xca));
  for (int shift = 24; shift >= 0; shift -= 8)
    buf_.push_back(static_cast<char>((bits >> shift) & 0xff));
}

void msgpack_writer::float64(double x) {
  uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  buf_.push_back(static_cast<char>(0xcb));
  for (int shift = 56; shift >= 0; shift -= 8)
    buf_.push_back(static_cast<char>((bits >> shift) & 0xff));
}

void msgpack_writer::string(std::string_view x) {
  byte_sink sink{&buf_};
  msgpack::packer<byte_sink> pk{sink};
  auto n = checked_length(x.size(), "string");
  pk.pack_str(n);
  pk.pack_str_body(x.data(), n);
}

// ---- msgpack_value -------------------------------------------------------------------------

msgpack_value::kind msgpack_value::type() const {
  switch (obj(obj_).type) {
  case msgpack::type::NIL: return kind::nil;
  case msgpack::type::BOOLEAN: return kind::boolean;
  case msgpack::type::POSITIVE_INTEGER: return kind::positive_integer;
  case msgpack::type::NEGATIVE_INTEGER: return kind::negative_integer;
  case msgpack::type::FLOAT32: return kind::float32;
  case msgpack::type::FLOAT64: return kind::float64;
  case msgpack::type::STR: return kind::string;
  case msgpack::type::BIN: return kind::binary;
  case msgpack::type::ARRAY: return kind::array;
  case msgpack::type::MAP: return kind::map;
  case msgpack::type::EXT: return kind::ext;
  }
  return kind::nil;
}

bool msgpack_value::boolean() const {
  return obj(obj_).via.boolean;
}

uint64_t msgpack_value::positive_integer() const {
  return obj(obj_).via.u64;
}

int64_t msgpack_value::negative_integer() const {
  return obj(obj_).via.i64;
}

double msgpack_value::floating() const {
  return obj(obj_).via.f64;
}

std::string_view msgpack_value::string() const {
  const auto& s = obj(obj_).via.str;
  return {s.ptr, s.size};
}

size_t msgpack_value::size() const {
  return obj(obj_).via.array.size;
}

msgpack_value msgpack_value::operator[](size_t i) const {
  return msgpack_value{obj(obj_).via.array.ptr + i};
}

std::string msgpack_value::describe() const {
  constexpr size_t max_shown = 40;
  const auto& o = obj(obj_);
  switch (type()) {
  case kind::nil: return "nil";
  case kind::boolean: return o.via.boolean ? "bool true" : "bool false";
  case kind::positive_integer: return fmt::format("integer {}", o.via.u64);
  case kind::negative_integer: return fmt::format("integer {}", o.via.i64);
  case kind::float32:
  case kind::float64: return fmt::format("float {}", o.via.f64);
  case kind::string: {
    auto s = string();
    if (s.size() <= max_shown) return fmt::format("string \"{}\"", s);
    return fmt::format("string \"{}...\" ({} bytes)", s.substr(0, max_shown), s.size());
  }
  case kind::binary: return fmt::format("binary of {} bytes", o.via.bin.size);
  case kind::array: return fmt::format("array of {}", o.via.array.size);
  case kind::map: return fmt::format("map of {}", o.via.map.size);
  case kind::ext: return fmt::format("ext of {} bytes", o.via.ext.size);
  }
  return "unknown value";
}

// ---- msgpack_document ----------------------------------------------------------------------

struct msgpack_document::impl {
  msgpack::object_handle handle;
};

expected<msgpack_document> msgpack_document::parse(const char* data, size_t size) {
  // Every element takes at least one byte, so no honest length exceeds the input size; the
  // limits keep a forged header from allocating more than the input could describe. The depth
  // bound also bounds the unpacker's recursion through nested kv_cache_spec.layer_specs.
  constexpr size_t max_depth = 64;
  msgpack::unpack_limit limit{size, size, size, size, size, max_depth};
  try {
    size_t offset = 0;
    auto handle = msgpack::unpack(data, size, offset, nullptr, nullptr, limit);
    if (offset != size)
      return make_error(errc::parse_error,
                        fmt::format("{} trailing bytes after the envelope", size - offset));
    return msgpack_document{new impl{std::move(handle)}};
  } catch (const msgpack::insufficient_bytes&) {
    return make_error(errc::parse_error, fmt::format("truncated MessagePack ({} bytes)", size));
  } catch (const msgpack::size_overflow& e) {
    return make_error(errc::parse_error, fmt::format("MessagePack exceeds limits: {}", e.what()));
  } catch (const std::exception& e) {
    return make_error(errc::parse_error, fmt::format("malformed MessagePack: {}", e.what()));
  }
}

msgpack_document::msgpack_document(msgpack_document&& other) noexcept : impl_(other.impl_) {
  other.impl_ = nullptr;
}

msgpack_document& msgpack_document::operator=(msgpack_document&& other) noexcept {
  if (this != &other) {
    delete impl_;
    impl_ = other.impl_;
    other.impl_ = nullptr;
  }
  return *this;
}

msgpack_document::~msgpack_document() {
  delete impl_;
}

msgpack_value msgpack_document::root() const {
  return msgpack_value{&impl_->handle.get()};
}

// ---- envelope and errors -------------------------------------------------------------------

error decode_error(std::string_view type, std::string_view what) {
  return make_error(errc::parse_error, fmt::format("cannot decode {}: {}", type, what));
}

expected<msgpack_value> open_envelope(msgpack_value root, std::string_view type) {
  using kind = msgpack_value::kind;
  if (root.type() != kind::array || root.size() != 3)
    return decode_error(type, fmt::format("expected an envelope [type name, schema version, "
                                          "payload], found {}",
                                          root.describe()));
  auto name = root[0];
  if (name.type() != kind::string)
    return decode_error(type,
                        fmt::format("envelope: expected a type name, found {}", name.describe()));
  if (name.string() != type)
    return decode_error(type, fmt::format("envelope names type {}", name.string()));
  auto version = root[1];
  if (version.type() != kind::positive_integer || version.positive_integer() != schema_version)
    return decode_error(type, fmt::format("envelope: expected schema version {}, found {}",
                                          schema_version, version.describe()));
  return root[2];
}

// ---- msgpack_unpacker ----------------------------------------------------------------------

bool msgpack_unpacker::expect_array(size_t n, const char* name) {
  if (cur_.type() == msgpack_value::kind::array && cur_.size() == n) return true;
  if (name != nullptr)
    fail(fmt::format("an array of {} fields ({})", n, name));
  else
    fail(fmt::format("an array of {} fields", n));
  return false;
}

void msgpack_unpacker::fail(std::string_view what) {
  std::string where;
  for (const auto& s : path_) {
    if (!where.empty()) where += ", ";
    where += fmt::format("{} {}", s.is_field ? "field" : "element", s.index);
  }
  if (where.empty()) where = "payload";
  failure_ = fmt::format("{}: expected {}, found {}", where, what, cur_.describe());
}

} // namespace kvactor::detail

namespace kvactor {

expected<std::string> envelope_type(const char* data, size_t size) {
  using kind = detail::msgpack_value::kind;
  try {
    auto doc = detail::msgpack_document::parse(data, size);
    if (!doc) return make_error(errc::parse_error, "message: " + doc.err().message);
    auto root = doc->root();
    if (root.type() != kind::array || root.size() != 3 || root[0].type() != kind::string)
      return make_error(errc::parse_error,
                        fmt::format("message: expected an envelope [type name, schema version, "
                                    "payload], found {}",
                                    root.describe()));
    auto name = std::string{root[0].string()};
    auto version = root[1];
    if (version.type() != kind::positive_integer || version.positive_integer() != schema_version)
      return make_error(errc::parse_error,
                        fmt::format("message {}: expected schema version {}, found {}", name,
                                    schema_version, version.describe()));
    return name;
  } catch (const std::exception& e) {
    return make_error(errc::parse_error, fmt::format("message: {}", e.what()));
  }
}

} // namespace kvactor
