// Every error code, one by one: its name, and each way a code travels (the caf::error an actor
// returns, that error's binary serialization, the actor system's rendering, MessagePack). The
// test counts errc's enumerators by itself, so a code added to errc without a row in
// `every_code` below fails ErrcCoverage.EveryEnumeratorHasARowHere.

// GCC 12 at -O3 reports a false -Wmaybe-uninitialized inside CAF 0.17's data_processor::fill_range
// (deserializing std::vector<enum>); the code is in system headers, the warning lands here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/error.hpp>

#include "messages/caf_error.hpp"
#include "messages/codec.hpp"
#include "messages/errc.hpp"
#include "messages/register.hpp"

namespace kvactor::test {
namespace {

struct named_code {
  errc code;
  std::string_view name;
};

// One row per enumerator, in declaration order (the value is the row's index).
constexpr named_code every_code[] = {
    {errc::no_error, "no_error"},
    {errc::invalid_argument, "invalid_argument"},
    {errc::parse_error, "parse_error"},
    {errc::unknown_model_type, "unknown_model_type"},
    {errc::missing_field, "missing_field"},
    {errc::invalid_split, "invalid_split"},
    {errc::insufficient_memory, "insufficient_memory"},
    {errc::incompatible_specs, "incompatible_specs"},
    {errc::no_common_block_size, "no_common_block_size"},
    {errc::unsupported, "unsupported"},
    {errc::io_error, "io_error"},
    {errc::step_failed, "step_failed"},
    {errc::collective_failed, "collective_failed"},
    {errc::rank_lost, "rank_lost"},
};

// Whether V is one of errc's enumerators, read off the compiler's name for this function: GCC and
// Clang spell an enumerator "V = kvactor::errc::parse_error" and any other value
// "V = (kvactor::errc)13". This sees the enum itself, not to_string or the table above.
template <errc V>
constexpr bool is_enumerator() {
  constexpr std::string_view self = __PRETTY_FUNCTION__;
  constexpr auto at = self.rfind("V = ");
  return at != std::string_view::npos && self[at + 4] != '(';
}
// The detection itself is checked, so that a compiler spelling it differently cannot make the
// count below silently 0 or 256.
static_assert(is_enumerator<errc::collective_failed>());
static_assert(!is_enumerator<static_cast<errc>(200)>());

template <size_t... I>
constexpr size_t count_enumerators(std::index_sequence<I...>) {
  return (size_t{0} + ... + size_t{is_enumerator<static_cast<errc>(I)>()});
}
// errc's underlying type is uint8_t: every value it can hold is looked at.
constexpr size_t enumerator_count = count_enumerators(std::make_index_sequence<256>{});

struct kvactor_config : caf::actor_system_config {
  kvactor_config() { register_types(*this); }
};

/// `x` through CAF's binary serializer and back, as an error crosses a process boundary.
caf::error binary_round_trip(caf::actor_system& sys, const caf::error& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto copy = x;
  EXPECT_FALSE(sink(copy));
  caf::binary_deserializer source{sys, buf};
  caf::error out;
  EXPECT_FALSE(source(out));
  return out;
}

TEST(ErrcCoverage, EveryEnumeratorHasARowHere) {
  EXPECT_EQ(std::size(every_code), enumerator_count)
      << "errc has " << enumerator_count << " enumerators and this test covers "
      << std::size(every_code) << ": add the new code's row to every_code";
  for (size_t i = 0; i < std::size(every_code); ++i)
    EXPECT_EQ(static_cast<size_t>(every_code[i].code), i)
        << every_code[i].name << ": rows follow errc's declaration order, from 0 without gaps";
}

TEST(Errc, EveryCodeHasItsOwnName) {
  std::set<std::string_view> names;
  for (const auto& [code, name] : every_code) {
    EXPECT_EQ(to_string(code), name);
    EXPECT_TRUE(names.insert(to_string(code)).second) << name << " is named twice";
  }
}

TEST(Errc, AValueOutsideTheEnumIsNamedUnknown) {
  EXPECT_EQ(to_string(static_cast<errc>(enumerator_count)), "unknown");
  EXPECT_EQ(to_string(static_cast<errc>(255)), "unknown");
}

TEST(Errc, NoErrorIsTheEmptyCafErrorBothWays) {
  EXPECT_FALSE(to_caf_error(error{errc::no_error, "ignored"}));
  EXPECT_FALSE(to_caf_error(error{errc::no_error, "ignored"}, {7, 9}));
  EXPECT_EQ(from_caf_error(caf::error{}), error{});
}

TEST(Errc, EveryCodeSurvivesTheCafErrorWithAndWithoutMessageAndRequests) {
  for (const auto& [code, name] : every_code) {
    if (code == errc::no_error) continue;
    const error with{code, "budget 2 GiB"};
    const error without{code, ""};
    const auto a = to_caf_error(with);
    EXPECT_EQ(a.code(), static_cast<uint8_t>(code)) << name;
    EXPECT_EQ(a.category(), errc_category) << name;
    EXPECT_EQ(from_caf_error(a), with) << name;
    EXPECT_EQ(from_caf_error(to_caf_error(without)), without) << name;
    const auto b = to_caf_error(with, {7, 9});
    EXPECT_EQ(request_ids_of(b), (std::vector<uint64_t>{7, 9})) << name;
    EXPECT_EQ(from_caf_error(b), with) << name;
  }
}

TEST(Errc, EveryCodeRendersAsKvactorNameAndMessage) {
  kvactor_config cfg;
  caf::actor_system sys{cfg};
  for (const auto& [code, name] : every_code) {
    if (code == errc::no_error) continue;
    EXPECT_EQ(sys.render(to_caf_error(error{code, "x"})), "kvactor::" + std::string{name} + ": x");
    EXPECT_EQ(sys.render(to_caf_error(error{code, ""})), "kvactor::" + std::string{name});
  }
}

TEST(Errc, EveryCodeSurvivesCafBinarySerialization) {
  kvactor_config cfg;
  caf::actor_system sys{cfg};
  for (const auto& [code, name] : every_code) {
    const error x{code, code == errc::no_error ? "" : "node 10.0.0.2:7401"};
    auto out = binary_round_trip(sys, to_caf_error(x, {3}));
    EXPECT_EQ(from_caf_error(out), x) << name;
    if (code != errc::no_error) {
      EXPECT_EQ(request_ids_of(out), (std::vector<uint64_t>{3})) << name;
    }
  }
}

TEST(Errc, EveryCodeSurvivesMessagePack) {
  for (const auto& [code, name] : every_code) {
    const error x{code, "field 'block_size'"};
    const auto bytes = encode(x);
    error out;
    auto st = decode_into(bytes.data(), bytes.size(), out);
    ASSERT_TRUE(st) << name << ": " << st.err().message;
    EXPECT_EQ(out, x) << name;
  }
}

TEST(Errc, MessagePackRefusesACodeOutsideTheEnum) {
  const auto bytes = encode(error{static_cast<errc>(enumerator_count), "x"});
  error out;
  auto st = decode_into(bytes.data(), bytes.size(), out);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.err().code, errc::parse_error);
  EXPECT_NE(st.err().message.find("a named enum value"), std::string::npos) << st.err().message;
}

} // namespace
} // namespace kvactor::test
