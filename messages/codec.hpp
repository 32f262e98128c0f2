// MessagePack codec for every type with a CAF 0.17-style inspect(): the inspect() field list is
// the single schema, shared by CAF's binary serialization and this codec.
//
// Wire format, schema_version 1:
//   document = [type name, schema version, payload]      (the envelope, a 3-element array)
//   struct   = [field 0, field 1, ...]                    (inspect() order; annotations write
//   nothing) bool -> bool   integers, enums (underlying value) -> int   float -> float32   double
//   -> float64 std::string -> str   std::vector<T> -> array of T
// The type name is the caf::meta::type_name of the type's inspect() (e.g.
// "kvactor::kv_cache_spec"), or codec_name<T> for a type whose inspect() carries none.
//
// NOTE(codec): bump schema_version whenever a field is added, removed, reordered or changes type in
// any inspect() reachable from a message; decode() rejects every other version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>
#include <type_traits>
#include <vector>

#include "messages/errc.hpp"
#include "messages/msgpack_inspectors.hpp"
#include "messages/msgpack_reader.hpp"

namespace kvactor {

inline constexpr uint32_t schema_version = 13; // 2: metadata_ready.digest, 3: run_summary.error,
// 4: rank_config and cudagraph_request capture fields, cudagraph_captured, 5: device_kind for
// rank_config.device and node_info.device, rank_config.executor, collective_status,
// run_summary.error as an error, 6: sampling_params in request_spec and new_request,
// request_result.reason, 7: run_summary latency percentiles, 8: rank_ready.vocab_size,
// 9: phase_timing.ledger_bytes and device_used_bytes, 10: run_summary.prefix_hit_tokens,
// new_request.num_cached_tokens, rank_config.enable_prefix_caching, 11:
// run_summary.kv_blocks_held_at_end, 12: node_info.step_port, 13: sampling_params.logprobs,
// sampled_token.logprobs, request_result.logprobs, request_updates, request_abort

/// The envelope name of a type whose inspect() has no caf::meta::type_name annotation.
template <class T>
struct codec_name {
  static constexpr std::string_view value{};
};

/// kvactor::error keeps errc.hpp CAF-free, so its inspect() carries no annotation.
template <>
struct codec_name<error> {
  static constexpr std::string_view value = "kvactor::error";
};

namespace detail {

/// Records the type name of one inspect() call and touches no field.
struct type_name_probe {
  using result_type = void;
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;

  const char* name = nullptr;

  template <class... Ts>
  void operator()(Ts&&... xs) {
    name = annotated_name(xs...);
  }
};

/// The envelope name of `x`'s type: its inspect() annotation, else codec_name<T>.
template <class T>
std::string_view type_name_of(const T& x) {
  static_assert(inspectable<type_name_probe, T>, "kvactor codec: T needs an inspect() overload");
  type_name_probe probe;
  inspect(probe, const_cast<T&>(x)); // NOTE(codec): the probe only reads the annotations.
  return probe.name != nullptr ? std::string_view{probe.name} : codec_name<T>::value;
}

/// errc::parse_error "cannot decode <type>: <what>".
error decode_error(std::string_view type, std::string_view what);

/// The payload of an envelope that names `type` and carries schema_version, else the reason.
expected<msgpack_value> open_envelope(msgpack_value root, std::string_view type);

} // namespace detail

/// Envelope: msgpack array [type name (from inspect's type_name), schema_version, payload array].
template <class T>
std::vector<char> encode(const T& x) {
  detail::msgpack_writer out;
  out.array(3);
  out.string(detail::type_name_of(x));
  out.unsigned_integer(schema_version);
  detail::msgpack_packer packer{out};
  packer.apply(const_cast<T&>(x)); // NOTE(codec): a saving inspector only reads, as in CAF.
  return out.release();
}

namespace detail {

/// decode_into through msgpack-c's object tree: slower than decoding in place, but it names
/// what is wrong and where.
template <class T>
status decode_through_tree(const char* data, size_t size, std::string_view type, T& out) {
  try {
    auto doc = msgpack_document::parse(data, size);
    if (!doc) return decode_error(type, doc.err().message);
    auto payload = open_envelope(doc->root(), type);
    if (!payload) return payload.err();
    msgpack_unpacker unpacker{*payload};
    unpacker.apply(out);
    if (unpacker.failed()) return decode_error(type, unpacker.failure());
    return ok();
  } catch (const std::exception& e) { // bad_alloc; nothing else throws on this path
    return decode_error(type, e.what());
  }
}

} // namespace detail

/// Decodes what encode<T> wrote into `out`. A wrong type name or schema version, malformed or
/// truncated bytes, trailing bytes, a wrong field count or a field of the wrong type or range
/// all give errc::parse_error "cannot decode <type>: <position>: expected <what>, found <what>";
/// `out` is then unspecified. Field positions count from 0 in inspect() order. Never throws.
template <class T>
status decode_into(const char* data, size_t size, T& out) {
  auto type = detail::type_name_of(out);
  // Well-formed bytes decode in place; anything else decodes again through the tree, which says
  // what is wrong and where.
  try {
    if (detail::decode_in_place(data, size, type, schema_version, out)) return ok();
  } catch (const std::exception&) { // bad_alloc: the tree decoder reports it
  }
  return detail::decode_through_tree(data, size, type, out);
}

/// decode_into a fresh T. Not for T = kvactor::error (expected<error> cannot hold both sides);
/// use decode_into for it.
template <class T>
expected<T> decode(const char* data, size_t size) {
  static_assert(!std::is_same_v<T, error>, "use decode_into(data, size, err) for kvactor::error");
  T result{};
  if (auto st = decode_into(data, size, result); !st) return st.err();
  return result;
}

/// The type name an envelope carries, checking the envelope's shape and schema version only.
expected<std::string> envelope_type(const char* data, size_t size);

template <class T>
expected<T> decode(const std::vector<char>& bytes) {
  return decode<T>(bytes.data(), bytes.size());
}

} // namespace kvactor