// CAF serialization of every message type in an actor system configured by register_types
// (catches a type missing from messages/type_ids.hpp), and the kvactor error category.

// GCC 12 at -O3 reports a false -Wmaybe-uninitialized inside CAF 0.17's data_processor::fill_range
// (deserializing std::vector<enum>); the code is in system headers, the warning lands here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

#include "messages/caf_error.hpp"
#include "messages/register.hpp"
#include "messages/type_ids.hpp"
#include "tests/messages/samples.hpp"

namespace kvactor::test {
namespace {

struct kvactor_config : caf::actor_system_config {
  kvactor_config() { register_types(*this); }
};

/// Serializes `x` inside a caf::message, as CAF does for a remote send, and reads it into `out`.
template <class T>
caf::error caf_round_trip(caf::actor_system& sys, const T& x, T& out) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto msg = caf::make_message(x);
  if (auto err = sink(msg)) return err;
  caf::binary_deserializer source{sys, buf};
  caf::message read;
  if (auto err = source(read)) return err;
  // NOTE(caf 0.17.6): serializing an unregistered type prints "[ERROR]: cannot serialize
  // message ..." but returns no error; the bytes then read back as an empty message.
  if (read.size() != 1) return caf::make_error(caf::sec::unknown_type);
  if (!read.match_element<T>(0)) return caf::make_error(caf::sec::unexpected_message);
  out = read.get_as<T>(0);
  return caf::none;
}

template <class T>
class CafRoundTrip : public ::testing::Test {
protected:
  kvactor_config cfg;
  caf::actor_system sys{cfg};
};
TYPED_TEST_SUITE(CafRoundTrip, message_types, message_type_names);

TYPED_TEST(CafRoundTrip, PreservesEveryFieldThroughBinarySerialization) {
  auto x = sample<TypeParam>();
  TypeParam out{};
  auto err = caf_round_trip(this->sys, x, out);
  ASSERT_FALSE(err) << this->sys.render(err);
  EXPECT_EQ(out, x);
}

TYPED_TEST(CafRoundTrip, RegistersTheInspectTypeName) {
  // The name CAF puts on the wire is the one the codec puts into its envelope.
  const auto& name = this->sys.types().portable_name(0, &typeid(TypeParam));
  EXPECT_EQ(name, detail::type_name_of(TypeParam{}));
}

TEST(CafRoundTrip, FailsInASystemWithoutRegisterTypes) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  kv_cache_spec out;
  EXPECT_EQ(caf_round_trip(sys, sample<kv_cache_spec>(), out), caf::sec::unknown_type);
}

/// The element types whose std::vector is in the type-ID block.
using listed_types =
    ::testing::Types<attention_layer, kv_cache_spec, kv_cache_view, backend_capabilities,
                     attention_group, kv_cache_group, memory_entry, request_spec, collective_entry>;

template <class T>
class CafListRoundTrip : public CafRoundTrip<T> {};
TYPED_TEST_SUITE(CafListRoundTrip, listed_types, message_type_names);

TYPED_TEST(CafListRoundTrip, PreservesAVectorOfThem) {
  std::vector<TypeParam> xs{sample<TypeParam>(), TypeParam{}};
  std::vector<TypeParam> out;
  auto err = caf_round_trip(this->sys, xs, out);
  ASSERT_FALSE(err) << this->sys.render(err);
  EXPECT_EQ(out, xs);
}

// ---- the kvactor error category --------------------------------------------------------------

TEST(CafError, RendersErrcNameAndMessageThroughTheActorSystem) {
  kvactor_config cfg;
  caf::actor_system sys{cfg};
  auto text = sys.render(to_caf_error(error{errc::invalid_split, "x"}));
  EXPECT_NE(text.find("invalid_split"), std::string::npos) << text;
  EXPECT_EQ(text, "kvactor::invalid_split: x");
}

TEST(CafError, CarriesCodeCategoryAndMessage) {
  auto err = to_caf_error(error{errc::insufficient_memory, "need 2 GiB"});
  EXPECT_EQ(err.code(), static_cast<uint8_t>(errc::insufficient_memory));
  EXPECT_EQ(err.category(), errc_category);
  EXPECT_EQ(from_caf_error(err), (error{errc::insufficient_memory, "need 2 GiB"}));
  EXPECT_EQ(from_caf_error(to_caf_error(error{errc::unsupported, ""})),
            (error{errc::unsupported, ""}));
}

TEST(CafError, NoErrorIsTheEmptyCafError) {
  EXPECT_FALSE(to_caf_error(error{}));
  EXPECT_EQ(from_caf_error(caf::error{}), error{});
}

TEST(CafError, ForeignCategoryBecomesIoErrorNamingTheCause) {
  auto err = from_caf_error(caf::make_error(caf::sec::request_timeout));
  EXPECT_EQ(err.code, errc::io_error);
  EXPECT_NE(err.message.find("request_timeout"), std::string::npos) << err.message;
}

TEST(CafError, SurvivesBinarySerialization) {
  kvactor_config cfg;
  caf::actor_system sys{cfg};
  caf::error out;
  auto err = caf_round_trip(sys, to_caf_error(sample<error>()), out);
  ASSERT_FALSE(err) << sys.render(err);
  EXPECT_EQ(from_caf_error(out), sample<error>());
  EXPECT_EQ(sys.render(out), sys.render(to_caf_error(sample<error>())));
}

TEST(CafError, NamesTheRequestsItIsAbout) {
  const error rejected{errc::insufficient_memory, "no free KV cache blocks"};
  auto err = to_caf_error(rejected, {7, 9});
  EXPECT_EQ(err.code(), static_cast<uint8_t>(errc::insufficient_memory));
  EXPECT_EQ(err.category(), errc_category);
  EXPECT_EQ(request_ids_of(err), (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(from_caf_error(err), rejected);

  kvactor_config cfg;
  caf::actor_system sys{cfg};
  EXPECT_EQ(sys.render(err), "kvactor::insufficient_memory: no free KV cache blocks");
}

TEST(CafError, NamesNoRequestsUnlessGiven) {
  EXPECT_TRUE(request_ids_of(to_caf_error(sample<error>())).empty());
  EXPECT_TRUE(request_ids_of(to_caf_error(sample<error>(), {})).empty());
  EXPECT_TRUE(request_ids_of(caf::make_error(caf::sec::request_timeout)).empty());
  EXPECT_FALSE(to_caf_error(error{}, {7, 9})); // no_error stays the empty caf::error
}

// request_ids_of returns early for the empty caf::error: it never reads x.context(), whose
// precondition is x != none (reading it crashed with SIGSEGV before the early return).
TEST(CafError, EmptyErrorNamesNoRequests) {
  EXPECT_TRUE(request_ids_of(caf::error{}).empty());
}

// std::vector<uint64_t> is in the type-ID block (messages/type_ids.hpp), so the context
// (message, request ids) crosses a process boundary. Without it, CAF 0.17.6 prints "cannot
// serialize message" and the error arrives with an empty context, losing ids and message.
TEST(CafError, NamedRequestsSurviveBinarySerialization) {
  kvactor_config cfg;
  caf::actor_system sys{cfg};
  caf::error out;
  auto err = caf_round_trip(sys, to_caf_error(sample<error>(), {7, 9}), out);
  ASSERT_FALSE(err) << sys.render(err);
  EXPECT_EQ(request_ids_of(out), (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(from_caf_error(out), sample<error>());
}

} // namespace
} // namespace kvactor::test
