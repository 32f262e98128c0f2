// The BASP payload check against CAF 0.17's own encoder: every payload CAF writes for what kvactor
// and CAF send passes; a caf::config_value anywhere (its decoder terminates the process on a bad
// variant index), at the top, in an error's context, in a down or exit reason or in a nested
// message, CAF's settings and lists that hold them, and node ids of another kind are refused
// naming them, as is what cannot be checked.
#include "net/basp_payload.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/all.hpp>

#include "messages/caf_error.hpp"
#include "messages/register.hpp"
#include "messages/step.hpp"

namespace kvactor {
namespace {

struct caf_encoder {
  struct config : caf::actor_system_config {
    config() {
      register_types(*this);
      load<caf::io::middleman>();
    }
  };
  config cfg;
  caf::actor_system sys{cfg};
  // The ignored nullptr: CAF 0.17 binds a null reference for a spawn without arguments.
  caf::actor someone = sys.spawn([](std::nullptr_t) {}, nullptr);

  // What CAF writes after a direct message's header: the forwarding stack, then the message.
  std::vector<std::byte> direct(const caf::message& msg, bool with_stage = false) {
    std::vector<caf::strong_actor_ptr> stages;
    if (with_stage) stages.push_back(caf::actor_cast<caf::strong_actor_ptr>(someone));
    return encode(stages, msg);
  }
  // A routed message's: the source and destination nodes first.
  std::vector<std::byte> routed(const caf::message& msg) {
    std::vector<caf::strong_actor_ptr> stages;
    auto node = sys.node();
    return encode(node, node, stages, msg);
  }
  // A down message's: the two nodes and the reason.
  std::vector<std::byte> down(const caf::error& reason) {
    auto node = sys.node();
    return encode(node, node, reason);
  }

  template <class... Ts>
  std::vector<std::byte> encode(Ts&&... xs) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    EXPECT_FALSE(sink(xs...));
    std::vector<std::byte> out(buf.size());
    std::memcpy(out.data(), buf.data(), buf.size());
    return out;
  }
};

std::string check(basp_operation op, const std::vector<std::byte>& payload, bool whole = true) {
  auto checked = check_basp_payload(op, payload.data(), payload.size(), whole);
  return checked ? "" : checked.err().message;
}

// Refused by its name: a well-formed one as much as one whose variant index would make CAF throw.
caf::config_value bad_config_value() {
  return caf::config_value{int64_t{5}};
}

caf::error error_carrying(caf::message context) {
  return caf::error{3, caf::atom("kvactor"), std::move(context)};
}

TEST(BaspPayload, EveryPayloadCafWritesForWhatKvactorSendsPasses) {
  caf_encoder caf;
  const error failure = make_error(errc::step_failed, "rank 1: out of memory");
  const std::vector<caf::message> messages = {
      caf::make_message(caf::atom("ping"), std::string("hello"), int32_t{3}),
      caf::make_message(to_caf_error(failure)),
      caf::make_message(to_caf_error(failure, {7, 8, 9})),
      caf::make_message(caf::error{}),
      caf::make_message(caf::make_error(caf::sec::request_timeout)),
      caf::make_message(caf::down_msg{caf.someone.address(), caf::error{}}),
      caf::make_message(
          caf::exit_msg{caf.someone.address(), caf::make_error(caf::exit_reason::kill)}),
      caf::make_message(caf.someone, caf.sys.node()),
      caf::make_message(caf::atom("link"), caf::actor_cast<caf::strong_actor_ptr>(caf.someone)),
      // Each sized element followed by an error: a size read wrong would misread the error.
      caf::make_message(std::vector<std::string>{"a", "bc"}, caf::error{}),
      caf::make_message(true, caf::error{}, 1.5f, caf::error{}, 2.5, caf::error{}),
      caf::make_message(caf::duration{caf::time_unit::seconds, 3}, caf::error{}),
      caf::make_message(int8_t{1}, int16_t{2}, int32_t{3}, int64_t{4}, caf::error{}),
      caf::make_message(uint8_t{1}, uint16_t{2}, uint32_t{3}, uint64_t{4}, caf::error{}),
      caf::make_message(caf::atom("x"), caf::timespan{5}, caf::error{}),
      caf::make_message(caf.sys.node(), caf.someone, caf.someone.address(), caf::error{}),
      caf::make_message(step_rejected{4, 1, failure, {11, 12}}),
      caf::make_message(step_rejected{4, 1, failure, {}}, int32_t{2}),
      caf::make_message(),
  };
  for (const auto& msg : messages) {
    EXPECT_EQ(check(basp_operation::direct_message, caf.direct(msg)), "") << to_string(msg);
    EXPECT_EQ(check(basp_operation::direct_message, caf.direct(msg, true)), "") << to_string(msg);
    EXPECT_EQ(check(basp_operation::routed_message, caf.routed(msg)), "") << to_string(msg);
  }
  EXPECT_EQ(check(basp_operation::down_message, caf.down(caf::error{})), "");
  EXPECT_EQ(check(basp_operation::down_message, caf.down(to_caf_error(failure, {1}))), "");
}

TEST(BaspPayload, HandshakesAndMonitorMessagesAsCafWritesThemPass) {
  caf_encoder caf;
  auto node = caf.sys.node();
  std::vector<std::string> apps{"generic-caf-app"};
  uint64_t actor = 7;
  std::set<std::string> interface { "caf::replies_to<@str>::with<@i32>" };
  EXPECT_EQ(check(basp_operation::server_handshake, caf.encode(node, apps, actor, interface)), "");
  EXPECT_EQ(check(basp_operation::client_handshake, caf.encode(node)), "");
  EXPECT_EQ(check(basp_operation::monitor_message, caf.encode(node, node)), "");
}

TEST(BaspPayload, ANodeIdOfAnotherKindIsRefusedInEveryOperation) {
  // atom("uri"): CAF 0.17 decodes its host as a variant, and throws on a bad index.
  const std::vector<std::byte> uri_node = {std::byte{0},    std::byte{0},    std::byte{0},
                                           std::byte{0},    std::byte{0},    std::byte{0x3f},
                                           std::byte{0xad}, std::byte{0xee}, std::byte{0x20}};
  for (auto op : {basp_operation::server_handshake, basp_operation::client_handshake,
                  basp_operation::monitor_message, basp_operation::down_message,
                  basp_operation::routed_message}) {
    const auto why = check(op, uri_node);
    EXPECT_NE(why.find("a node id of kind 0x00000000003fadee"), std::string::npos) << why;
  }
}

TEST(BaspPayload, AConfigValueIsRefusedWhereverItIs) {
  caf_encoder caf;
  const auto value = caf::make_message(bad_config_value());
  const std::vector<caf::message> carriers = {
      value,
      caf::make_message(int32_t{1}, bad_config_value()),
      caf::make_message(error_carrying(value)),
      caf::make_message(caf::down_msg{caf.someone.address(), error_carrying(value)}),
      caf::make_message(caf::exit_msg{caf.someone.address(), error_carrying(value)}),
      caf::make_message(std::string("x"), error_carrying(caf::make_message(error_carrying(value)))),
      caf::make_message(step_rejected{}, bad_config_value()),
  };
  for (const auto& msg : carriers) {
    for (const auto& why : {check(basp_operation::direct_message, caf.direct(msg)),
                            check(basp_operation::routed_message, caf.routed(msg))}) {
      EXPECT_NE(why.find("carries a @config_value, a type kvactor never sends"), std::string::npos)
          << to_string(msg) << ": " << why;
    }
  }
  const auto why = check(basp_operation::down_message, caf.down(error_carrying(value)));
  EXPECT_NE(why.find("down_message frame refused: a message carries a @config_value"),
            std::string::npos)
      << why;
}

TEST(BaspPayload, CafsSettingsAndListsThatMayHoldOneAreRefusedByName) {
  // Registered by every CAF 0.17 actor system: each holds config_values or messages, unread.
  for (const std::string name :
       {"settings", "std::vector<@config_value>", "dictionary<@config_value>",
        "std::vector<@message>", "@group", "some::other_type"}) {
    const std::string names = "@<>+" + name;
    std::vector<std::byte> payload{std::byte{0}, std::byte{0}, std::byte{0},
                                   static_cast<std::byte>(names.size())};
    for (char c : names)
      payload.push_back(static_cast<std::byte>(c));
    payload.push_back(std::byte{1});
    const auto why = check(basp_operation::direct_message, payload);
    EXPECT_NE(why.find("a message carries a " + name + ", a type kvactor never sends"),
              std::string::npos)
        << why;
  }
}

TEST(BaspPayload, AMessageHolderAfterAnElementOfUnknownSizeIsRefused) {
  caf_encoder caf;
  const auto why = check(basp_operation::direct_message,
                         caf.direct(caf::make_message(step_rejected{}, caf::error{})));
  EXPECT_NE(why.find("a @error follows a kvactor::step_rejected, whose end the guard cannot see"),
            std::string::npos)
      << why;
}

TEST(BaspPayload, MessagesNestedMoreThanFourDeepAreRefused) {
  caf_encoder caf;
  auto msg = caf::make_message(int32_t{1});
  for (int depth = 0; depth < 4; ++depth)
    msg = caf::make_message(error_carrying(msg));
  EXPECT_EQ(check(basp_operation::direct_message, caf.direct(msg)), "");
  msg = caf::make_message(error_carrying(msg));
  const auto why = check(basp_operation::direct_message, caf.direct(msg));
  EXPECT_NE(why.find("messages nested more than 4 deep"), std::string::npos) << why;
}

TEST(BaspPayload, APayloadCutShortIsRefusedAtEveryLength) {
  caf_encoder caf;
  const auto whole = caf.direct(caf::make_message(
      caf::atom("ok"), std::string("text"), caf::down_msg{caf.someone.address(), caf::error{}}));
  ASSERT_EQ(check(basp_operation::direct_message, whole), "");
  for (size_t n = 0; n < whole.size(); ++n) {
    const std::vector<std::byte> cut(whole.begin(), whole.begin() + static_cast<ptrdiff_t>(n));
    const auto why = check(basp_operation::direct_message, cut);
    EXPECT_NE(why.find("the payload ends inside"), std::string::npos) << n << ": " << why;
    // As the first bytes of a longer payload, every cut leaves a part the check cannot see:
    // a node id, a name list, or the down message after a cut atom or string.
    const auto prefix = check(basp_operation::direct_message, cut, false);
    EXPECT_TRUE(prefix.find("lies past the first 65536 bytes") != std::string::npos
                || prefix.find("a @down follows a ") != std::string::npos)
        << n << ": " << prefix;
  }
}

TEST(BaspPayload, WhatCafNeverWritesIsRefusedNamingIt) {
  const auto bytes_of = [](std::initializer_list<int> xs) {
    std::vector<std::byte> out;
    for (int x : xs)
      out.push_back(static_cast<std::byte>(x));
    return out;
  };
  // The stack (empty), a type number, then "@<>+@downstream_msg" (19 bytes).
  auto stream = bytes_of({0, 0, 0, 19});
  for (char c : std::string("@<>+@downstream_msg"))
    stream.push_back(static_cast<std::byte>(c));
  const std::vector<std::pair<std::vector<std::byte>, std::string>> cases = {
      {stream, "carries a @downstream_msg, a type kvactor never sends"},
      {bytes_of({0, 0, 7, 3, '@', '<', '>'}), "a message's type number is 7"},
      {bytes_of({0, 0, 0, 3, 'a', 'b', 'c'}), "do not start with \"@<>\""},
      {bytes_of({1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0x3f, 0xad, 0xee}),
       "a node id of kind 0x00000000003fadee"},
      {bytes_of({0x80, 0x80, 0x80, 0x80, 0x80, 0x01}), "a length of more than 5 bytes"},
  };
  for (const auto& [payload, expected] : cases) {
    const auto why = check(basp_operation::direct_message, payload);
    EXPECT_NE(why.find(expected), std::string::npos) << "got: " << why;
  }
}

} // namespace
} // namespace kvactor
