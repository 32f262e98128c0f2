// The MessagePack codec: round trips of every message type, and strict rejection of bad input.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include "messages/codec.hpp"
#include "tests/messages/samples.hpp"

namespace kvactor::test {
namespace {

/// Packs each top-level field of `x` on its own, to compare values field by field.
struct field_encoder {
  using result_type = void;
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;

  std::vector<std::vector<char>> fields;

  template <class... Ts>
  void operator()(Ts&&... xs) {
    (one(xs), ...);
  }

  template <class T>
  void one(T& x) {
    if constexpr (!detail::is_annotation_v<T>) {
      detail::msgpack_writer out;
      detail::msgpack_packer packer{out};
      packer.apply(x);
      fields.push_back(out.release());
    }
  }
};

template <class T>
std::vector<std::vector<char>> encoded_fields(T x) {
  field_encoder f;
  inspect(f, x);
  return f.fields;
}

/// Re-encodes `bytes` after `edit` changed the parsed envelope (root = [name, version, payload]).
std::vector<char> tamper(const std::vector<char>& bytes,
                         const std::function<void(msgpack::object&, msgpack::zone&)>& edit) {
  auto handle = msgpack::unpack(bytes.data(), bytes.size());
  msgpack::object root = handle.get();
  edit(root, *handle.zone());
  msgpack::sbuffer buf;
  msgpack::pack(buf, root);
  return {buf.data(), buf.data() + buf.size()};
}

msgpack::object& payload(msgpack::object& root) {
  return root.via.array.ptr[2];
}

msgpack::object& field(msgpack::object& array, size_t i) {
  return array.via.array.ptr[i];
}

template <class T>
std::string decode_failure(const std::vector<char>& bytes) {
  auto result = decode<T>(bytes);
  if (result) return "decoded without error";
  EXPECT_EQ(result.err().code, errc::parse_error);
  return result.err().message;
}

// ---- every message type ------------------------------------------------------------------

template <class T>
class Samples : public ::testing::Test {};
TYPED_TEST_SUITE(Samples, message_types, message_type_names);

TYPED_TEST(Samples, SetEveryFieldToANonDefaultValue) {
  auto set = encoded_fields(sample<TypeParam>());
  auto defaults = encoded_fields(TypeParam{});
  ASSERT_EQ(set.size(), defaults.size());
  for (size_t i = 0; i < set.size(); ++i)
    EXPECT_NE(set[i], defaults[i]) << "field " << i << " of the sample has its default value";
}

template <class T>
class CodecRoundTrip : public ::testing::Test {};
TYPED_TEST_SUITE(CodecRoundTrip, message_types, message_type_names);

TYPED_TEST(CodecRoundTrip, PreservesEveryField) {
  auto x = sample<TypeParam>();
  auto bytes = encode(x);
  TypeParam decoded{};
  auto st = decode_into(bytes.data(), bytes.size(), decoded);
  ASSERT_TRUE(st) << st.err().message;
  EXPECT_EQ(decoded, x);
}

TYPED_TEST(CodecRoundTrip, PreservesDefaultValues) {
  auto bytes = encode(TypeParam{});
  auto decoded = sample<TypeParam>();
  auto st = decode_into(bytes.data(), bytes.size(), decoded);
  ASSERT_TRUE(st) << st.err().message;
  EXPECT_EQ(decoded, TypeParam{});
}

TYPED_TEST(CodecRoundTrip, WritesTheInspectTypeNameAndSchemaVersion) {
  auto bytes = encode(sample<TypeParam>());
  auto handle = msgpack::unpack(bytes.data(), bytes.size());
  const auto& root = handle.get();
  ASSERT_EQ(root.type, msgpack::type::ARRAY);
  ASSERT_EQ(root.via.array.size, 3u);
  auto name = root.via.array.ptr[0].template as<std::string>();
  EXPECT_EQ(name.rfind("kvactor::", 0), 0u) << name;
  EXPECT_EQ(name, detail::type_name_of(TypeParam{}));
  EXPECT_EQ(root.via.array.ptr[1].template as<uint32_t>(), schema_version);
  EXPECT_EQ(root.via.array.ptr[2].type, msgpack::type::ARRAY);
}

// ---- the fast path: decoding in place -----------------------------------------------------

/// The process's peak resident memory so far.
int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

template <class T>
bool decodes_in_place(const std::vector<char>& bytes, size_t size, T& out) {
  return detail::decode_in_place(bytes.data(), size, detail::type_name_of(out), schema_version,
                                 out);
}

TYPED_TEST(CodecRoundTrip, DecodesInPlaceWithoutTheTree) {
  auto x = sample<TypeParam>();
  auto bytes = encode(x);
  TypeParam decoded{};
  ASSERT_TRUE(decodes_in_place(bytes, bytes.size(), decoded));
  EXPECT_EQ(decoded, x);
}

TYPED_TEST(CodecRoundTrip, LeavesEveryTruncationToTheTree) {
  auto bytes = encode(sample<TypeParam>());
  for (size_t n = 0; n < bytes.size(); ++n) {
    TypeParam out{};
    ASSERT_FALSE(decodes_in_place(bytes, n, out)) << "a prefix of " << n << " bytes";
  }
}

TYPED_TEST(CodecRoundTrip, RejectsEveryTruncation) {
  auto bytes = encode(sample<TypeParam>());
  for (size_t n = 0; n < bytes.size(); ++n) {
    TypeParam out{};
    auto st = decode_into(bytes.data(), n, out);
    ASSERT_FALSE(st) << "decoded a prefix of " << n << " of " << bytes.size() << " bytes";
    EXPECT_EQ(st.err().code, errc::parse_error);
  }
}

// ---- the shapes the planner produces -----------------------------------------------------

TEST(Codec, RoundTripsUniformTypeSpecWithNestedLayerSpecs) {
  auto wrapped = uniform_type_from_specs(
      {"model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"},
      {full_attention_spec(16, 8, 128, dtype::bfloat16), mla_spec(16, 576, dtype::bfloat16)});
  ASSERT_TRUE(wrapped) << wrapped.err().message;
  ASSERT_EQ(wrapped->layer_specs.size(), 2u);
  auto decoded = decode<kv_cache_spec>(encode(*wrapped));
  ASSERT_TRUE(decoded) << decoded.err().message;
  EXPECT_EQ(*decoded, *wrapped);
  EXPECT_EQ(decoded->layer_specs[1].kind, kv_cache_spec_kind::mla);
}

TEST(Codec, RoundTripsMambaSpecWithStateShapes) {
  auto spec = mamba_spec(16, {{4, 2048}, {2048, 16}, {}}, {dtype::bfloat16, dtype::float32},
                         mamba_cache_mode::align);
  auto decoded = decode<kv_cache_spec>(encode(spec));
  ASSERT_TRUE(decoded) << decoded.err().message;
  EXPECT_EQ(*decoded, spec);
  EXPECT_EQ(decoded->state_shapes[1], (std::vector<int64_t>{2048, 16}));
}

TEST(Codec, RoundTripsExtremeIntegersAndDoubles) {
  kv_cache_tensor t{INT64_MAX, {}, INT64_MIN, -1, 0};
  auto decoded = decode<kv_cache_tensor>(encode(t));
  ASSERT_TRUE(decoded) << decoded.err().message;
  EXPECT_EQ(*decoded, t);
  kv_cache_capacity c{-7, 1e300};
  auto cap = decode<kv_cache_capacity>(encode(c));
  ASSERT_TRUE(cap) << cap.err().message;
  EXPECT_EQ(*cap, c);
}

TEST(Codec, KeepsIntegralAndNegativeZeroDoublesAsFloats) {
  for (double d : {0.0, -0.0, 2.0, -3.0, 1e19}) {
    auto decoded = decode<kv_cache_capacity>(encode(kv_cache_capacity{1, d}));
    ASSERT_TRUE(decoded) << d << ": " << decoded.err().message;
    EXPECT_EQ(decoded->max_concurrency, d);
    EXPECT_EQ(std::signbit(decoded->max_concurrency), std::signbit(d)) << d;
  }
}

TEST(Codec, WritesSmallIntegersCompactly) {
  // ["kvactor::block_size_constraint", 3, [16, true]]: 1 + (1 + 30) + 1 + (1 + 1 + 1) bytes.
  EXPECT_EQ(encode(multiple_of(16)).size(), 36u);
}

// ---- bad input -----------------------------------------------------------------------------

TEST(Codec, RejectsWrongTypeName) {
  auto msg = decode_failure<kv_cache_group>(encode(sample<kv_cache_tensor>()));
  EXPECT_NE(msg.find("cannot decode kvactor::kv_cache_group"), std::string::npos) << msg;
  EXPECT_NE(msg.find("envelope names type kvactor::kv_cache_tensor"), std::string::npos) << msg;
}

TEST(Codec, RejectsWrongSchemaVersion) {
  auto bytes = tamper(encode(sample<kv_cache_group>()), [](msgpack::object& root, msgpack::zone&) {
    field(root, 1) = msgpack::object{1u};
  });
  auto msg = decode_failure<kv_cache_group>(bytes);
  EXPECT_NE(
      msg.find("expected schema version " + std::to_string(schema_version) + ", found integer 1"),
      std::string::npos)
      << msg;
}

TEST(Codec, RejectsMissingSchemaVersion) {
  auto bytes = tamper(encode(sample<kv_cache_group>()), [](msgpack::object& root, msgpack::zone&) {
    field(root, 1) = msgpack::object{};
  });
  auto msg = decode_failure<kv_cache_group>(bytes);
  EXPECT_NE(msg.find("expected schema version " + std::to_string(schema_version) + ", found nil"),
            std::string::npos)
      << msg;
}

TEST(Codec, RejectsAnEnvelopeThatIsNotAThreeElementArray) {
  auto bytes = tamper(encode(sample<memory_limits>()),
                      [](msgpack::object& root, msgpack::zone&) { root.via.array.size = 2; });
  auto msg = decode_failure<memory_limits>(bytes);
  EXPECT_NE(msg.find("expected an envelope"), std::string::npos) << msg;
  EXPECT_NE(msg.find("found array of 2"), std::string::npos) << msg;
}

TEST(Codec, RejectsMissingField) {
  auto bytes =
      tamper(encode(sample<block_size_constraint>()),
             [](msgpack::object& root, msgpack::zone&) { payload(root).via.array.size = 1; });
  auto msg = decode_failure<block_size_constraint>(bytes);
  EXPECT_NE(msg.find("payload: expected an array of 2 fields (kvactor::block_size_constraint), "
                     "found array of 1"),
            std::string::npos)
      << msg;
}

TEST(Codec, RejectsExtraField) {
  auto bytes = tamper(encode(sample<block_size_constraint>()), [](msgpack::object& root,
                                                                  msgpack::zone& zone) {
    auto& p = payload(root);
    auto* grown = static_cast<msgpack::object*>(zone.allocate_align(3 * sizeof(msgpack::object)));
    grown[0] = p.via.array.ptr[0];
    grown[1] = p.via.array.ptr[1];
    grown[2] = msgpack::object{7};
    p.via.array.ptr = grown;
    p.via.array.size = 3;
  });
  auto msg = decode_failure<block_size_constraint>(bytes);
  EXPECT_NE(msg.find("expected an array of 2 fields"), std::string::npos) << msg;
  EXPECT_NE(msg.find("found array of 3"), std::string::npos) << msg;
}

TEST(Codec, RejectsIntegerThatDoesNotFitTheFieldAndNamesIt) {
  auto bytes = tamper(encode(sample<memory_limits>()), [](msgpack::object& root, msgpack::zone&) {
    field(payload(root), 3) = msgpack::object{uint64_t{1} << 31}; // dcp_size is int32_t
  });
  auto msg = decode_failure<memory_limits>(bytes);
  EXPECT_NE(msg.find("cannot decode kvactor::memory_limits: field 3: expected int32_t, found "
                     "integer 2147483648"),
            std::string::npos)
      << msg;
}

TEST(Codec, RejectsFieldOfTheWrongType) {
  auto bytes =
      tamper(encode(sample<kv_cache_view>()), [](msgpack::object& root, msgpack::zone& zone) {
        field(payload(root), 4) = msgpack::object{std::string{"1024"}, zone}; // offset_bytes
      });
  auto msg = decode_failure<kv_cache_view>(bytes);
  EXPECT_NE(msg.find("field 4: expected int64_t, found string \"1024\""), std::string::npos) << msg;
}

TEST(Codec, RejectsEnumValueWithoutAName) {
  for (int64_t raw : {6, 255, 256, -1}) { // dtype has 6 values
    auto bytes =
        tamper(encode(sample<kv_cache_view>()), [raw](msgpack::object& root, msgpack::zone&) {
          field(payload(root), 1) = msgpack::object{raw}; // element_type
        });
    auto msg = decode_failure<kv_cache_view>(bytes);
    EXPECT_NE(msg.find("field 1: expected a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("enum value, found integer " + std::to_string(raw)), std::string::npos)
        << msg;
  }
}

TEST(Codec, NamesThePathToANestedMismatch) {
  // kv_cache_config field 2 = groups, element 1, field 1 = spec, field 1 = block_size.
  auto bytes = tamper(encode(sample<kv_cache_config>()), [](msgpack::object& root, msgpack::zone&) {
    auto& group = field(field(payload(root), 2), 1);
    field(field(group, 1), 1) = msgpack::object{true};
  });
  auto msg = decode_failure<kv_cache_config>(bytes);
  EXPECT_NE(msg.find("cannot decode kvactor::kv_cache_config: field 2, element 1, field 1, "
                     "field 1: expected int32_t, found bool true"),
            std::string::npos)
      << msg;
}

TEST(Codec, RejectsTrailingBytes) {
  auto bytes = encode(sample<memory_limits>());
  bytes.push_back(static_cast<char>(0xc0)); // nil
  auto msg = decode_failure<memory_limits>(bytes);
  EXPECT_NE(msg.find("1 trailing bytes"), std::string::npos) << msg;
}

TEST(Codec, RejectsMalformedBytes) {
  std::vector<char> bytes{static_cast<char>(0xc1)}; // a byte MessagePack never uses
  auto msg = decode_failure<memory_limits>(bytes);
  EXPECT_NE(msg.find("cannot decode kvactor::memory_limits: malformed MessagePack"),
            std::string::npos)
      << msg;
}

TEST(Codec, RejectsTruncatedBytesSayingSo) {
  auto bytes = encode(sample<kv_cache_config>());
  bytes.resize(bytes.size() / 2);
  auto msg = decode_failure<kv_cache_config>(bytes);
  EXPECT_NE(msg.find("truncated MessagePack"), std::string::npos) << msg;
}

TEST(Codec, RejectsLengthsLargerThanTheInput) {
  // An array header claiming 2^32 - 1 elements, followed by nothing.
  std::vector<char> bytes{static_cast<char>(0xdd), static_cast<char>(0xff), static_cast<char>(0xff),
                          static_cast<char>(0xff), static_cast<char>(0xff)};
  auto result = decode<kv_cache_config>(bytes);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.err().code, errc::parse_error);
}

/// A kv_cache_spec whose layer_specs holds one spec, whose layer_specs holds one spec, ...
/// `depth` times.
std::vector<char> nested_spec(int depth) {
  detail::msgpack_writer w;
  detail::msgpack_packer p{w};
  kv_cache_spec empty;
  p.apply(empty);
  auto spec_bytes = w.release(); // [kind, ..., layer_names = [], layer_specs = []]
  EXPECT_EQ(spec_bytes.back(), static_cast<char>(0x90)); // layer_specs: fixarray of 0
  std::vector<char> open(spec_bytes.begin(), spec_bytes.end() - 1);
  open.push_back(static_cast<char>(0x91)); // layer_specs: fixarray of 1, the next spec follows
  auto envelope = encode(empty);           // [name, version, spec_bytes]
  std::vector<char> bytes(envelope.begin(), envelope.end() - static_cast<long>(spec_bytes.size()));
  for (int i = 0; i < depth; ++i)
    bytes.insert(bytes.end(), open.begin(), open.end());
  bytes.insert(bytes.end(), spec_bytes.begin(), spec_bytes.end());
  return bytes;
}

TEST(Codec, RejectsNestingDeeperThanTheLimitWithoutRecursingIntoIt) {
  auto shallow = decode<kv_cache_spec>(nested_spec(3));
  ASSERT_TRUE(shallow) << shallow.err().message;
  EXPECT_EQ(shallow->layer_specs.at(0).layer_specs.at(0).layer_specs.size(), 1u);

  auto deep = decode<kv_cache_spec>(nested_spec(100000));
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.err().code, errc::parse_error);
  EXPECT_NE(deep.err().message.find("exceeds limits"), std::string::npos) << deep.err().message;
}

TEST(Codec, NeverThrowsOnCorruptedInput) {
  auto bytes = encode(sample<kv_cache_config>());
  size_t decoded = 0;
  size_t rejected = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned mask : {0x01u, 0x10u, 0x80u, 0xffu}) {
      auto corrupt = bytes;
      corrupt[i] = static_cast<char>(static_cast<unsigned char>(corrupt[i]) ^ mask);
      EXPECT_NO_THROW({
        auto result = decode<kv_cache_config>(corrupt);
        if (result)
          ++decoded;
        else if (result.err().code == errc::parse_error)
          ++rejected;
      }) << "byte "
         << i << " mask " << mask;
    }
  }
  EXPECT_EQ(decoded + rejected, bytes.size() * 4);
  EXPECT_GT(rejected, 0u);
}

// Whatever the fast path accepts, the tree decoder accepts with the same value: a flaw the fast
// path missed would otherwise go unreported.
template <class T>
void expect_agreement_on_every_corruption(const T& x) {
  auto bytes = encode(x);
  size_t in_place = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned mask : {0x01u, 0x02u, 0x10u, 0x40u, 0x80u, 0xffu}) {
      auto corrupt = bytes;
      corrupt[i] = static_cast<char>(static_cast<unsigned char>(corrupt[i]) ^ mask);
      T fast{};
      if (!decodes_in_place(corrupt, corrupt.size(), fast)) continue;
      ++in_place;
      T tree{};
      auto st = detail::decode_through_tree(corrupt.data(), corrupt.size(),
                                            detail::type_name_of(tree), tree);
      ASSERT_TRUE(st) << "byte " << i << " mask " << mask << ": " << st.err().message;
      EXPECT_EQ(encode(fast), encode(tree)) << "byte " << i << " mask " << mask; // NaN != NaN
    }
  }
  EXPECT_GT(in_place, 0u); // some flips only change a value
}

TEST(CodecInPlace, AgreesWithTheTreeOnEverySingleByteCorruption) {
  expect_agreement_on_every_corruption(sample<step_plan>());
  expect_agreement_on_every_corruption(sample<node_step_done>());
  expect_agreement_on_every_corruption(sample<kv_cache_config>());
  expect_agreement_on_every_corruption(sample<rank_config>());
}

TEST(CodecInPlace, LeavesNestingBeyondItsDepthToTheTree) {
  auto shallow = nested_spec(14); // 31 arrays deep: within the fast path's 32
  kv_cache_spec in_place;
  EXPECT_TRUE(decodes_in_place(shallow, shallow.size(), in_place));
  auto bytes = nested_spec(20); // ~43 arrays deep: within the tree's 64, beyond the fast path's 32
  kv_cache_spec out;
  EXPECT_FALSE(decodes_in_place(bytes, bytes.size(), out));
  auto decoded = decode<kv_cache_spec>(bytes);
  ASSERT_TRUE(decoded) << decoded.err().message;
  EXPECT_EQ(decoded->layer_specs.at(0).layer_specs.size(), 1u);
}

TEST(CodecInPlace, RefusesAnArrayLongerThanTheBytesLeft) {
  auto bytes = encode(sample<node_step_done>());
  auto tree = decode<node_step_done>(bytes);
  ASSERT_TRUE(tree);
  // node_step_done.silent is the payload's last field: claim 2^32 - 1 elements for it.
  auto forged = encode(node_step_done{tree->seq, tree->done, tree->rejected, {}});
  ASSERT_EQ(forged.back(), static_cast<char>(0x90));
  forged.back() = static_cast<char>(0xdd);
  forged.insert(forged.end(), 4, static_cast<char>(0xff));
  node_step_done out;
  EXPECT_FALSE(decodes_in_place(forged, forged.size(), out));
  EXPECT_FALSE(decode<node_step_done>(forged));
}

/// A node_step_done whose `done` holds `n` nils where step_done arrays belong.
std::vector<char> nils_for_steps(size_t n) {
  auto bytes = encode(node_step_done{7, {}, {}, {}});
  // node_step_done.done, the payload's second field: fixarray of 0 -> array32 of n.
  const auto at = bytes.size() - 3;
  EXPECT_EQ(bytes[at], static_cast<char>(0x90));
  std::vector<char> forged(bytes.begin(), bytes.begin() + static_cast<long>(at));
  forged.push_back(static_cast<char>(0xdd));
  for (int shift = 24; shift >= 0; shift -= 8)
    forged.push_back(static_cast<char>((n >> shift) & 0xff));
  forged.resize(forged.size() + n, static_cast<char>(0xc0));
  forged.insert(forged.end(), bytes.end() - 2, bytes.end()); // rejected, silent: empty
  return forged;
}

// A length header may claim as many elements as there are bytes left. Sized from it, the vector
// would take sizeof(step_done) bytes per input byte (~100x the input) before its first element
// failed to read. (Peak memory only grows, so a test that ran before with a higher peak can hide
// a regression here, never fake one.)
TEST(CodecInPlace, ClaimsNoMemoryForElementsItCannotRead) {
  const auto forged = nils_for_steps(size_t{8} << 20);
  const auto before = peak_rss_bytes();
  node_step_done out;
  EXPECT_FALSE(decodes_in_place(forged, forged.size(), out));
  EXPECT_LT(peak_rss_bytes() - before, int64_t{64} << 20); // ~800 MiB sized from the header
}

// The tree holds 24 bytes per nil (msgpack-c's objects); the vector must not add ~100 more. The
// tree's own peak is measured first: a sanitizer's shadow memory multiplies both.
TEST(Codec, ClaimsNoMemoryForElementsItCannotRead) {
  const auto forged = nils_for_steps(size_t{1} << 20);
  const auto before = peak_rss_bytes();
  ASSERT_TRUE(detail::msgpack_document::parse(forged.data(), forged.size()));
  const auto tree = peak_rss_bytes() - before;
  node_step_done out;
  auto st =
      detail::decode_through_tree(forged.data(), forged.size(), detail::type_name_of(out), out);
  ASSERT_FALSE(st);
  EXPECT_NE(st.err().message.find("field 1, element 0: expected an array of"), std::string::npos)
      << st.err().message;
  // ~4x the tree's peak again if sized from the header; ~nothing more when grown.
  EXPECT_LT(peak_rss_bytes() - before, 2 * tree + (int64_t{8} << 20)) << "the tree alone: " << tree;
}

TEST(CodecInPlace, ReadsEveryIntegerFormatAsMsgpackCDoes) {
  struct sample_bytes {
    std::vector<unsigned char> bytes;
    bool negative;
    uint64_t u;
    int64_t i;
  };
  const std::vector<sample_bytes> cases{
      {{0x05}, false, 5, 0},
      {{0xff}, true, 0, -1},
      {{0xcc, 0xff}, false, 255, 0},
      {{0xcd, 0x01, 0x00}, false, 256, 0},
      {{0xce, 0xff, 0xff, 0xff, 0xff}, false, 4294967295u, 0},
      {{0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false, UINT64_MAX, 0},
      {{0xd0, 0x05}, false, 5, 0}, // a signed format with a positive value is positive
      {{0xd0, 0x80}, true, 0, -128},
      {{0xd0, 0xff}, true, 0, -1},
      {{0xd1, 0x7f, 0xff}, false, 32767, 0},
      {{0xd1, 0x80, 0x00}, true, 0, -32768},
      {{0xd2, 0x00, 0x00, 0x01, 0x00}, false, 256, 0},
      {{0xd2, 0xff, 0xff, 0xff, 0xfe}, true, 0, -2},
      {{0xd3, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false, INT64_MAX, 0},
      {{0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}, true, 0, INT64_MIN},
  };
  for (const auto& c : cases) {
    std::vector<char> bytes(c.bytes.begin(), c.bytes.end());
    detail::msgpack_reader in{bytes.data(), bytes.size()};
    detail::msgpack_int v;
    ASSERT_TRUE(in.integer(v)) << static_cast<int>(c.bytes[0]);
    EXPECT_TRUE(in.at_end());
    auto handle = msgpack::unpack(bytes.data(), bytes.size());
    EXPECT_EQ(v.negative, handle.get().type == msgpack::type::NEGATIVE_INTEGER);
    EXPECT_EQ(v.negative, c.negative);
    EXPECT_EQ(v.negative ? static_cast<uint64_t>(v.i) : v.u,
              c.negative ? static_cast<uint64_t>(c.i) : c.u);
    for (size_t n = 0; n < bytes.size(); ++n) { // every truncation is refused
      detail::msgpack_reader part{bytes.data(), n};
      EXPECT_FALSE(part.integer(v)) << static_cast<int>(c.bytes[0]) << " cut at " << n;
    }
  }
}

} // namespace
} // namespace kvactor::test
