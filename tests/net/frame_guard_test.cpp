// The BASP frame guard: what a well-behaved CAF peer sends passes, split at any byte; each frame
// CAF 0.17 would crash on or allocate without bound is refused with the field and value named.
#include "net/frame_guard.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kvactor {
namespace {

using bytes = std::vector<std::byte>;

// What a handshake's payload starts with, as CAF 0.17 writes it: the sender's node id (the
// default kind: an atom, a process id, a host id); a server's then lists no application ids,
// names actor 7 and no interface. The check reads nothing after that.
bytes handshake_start(uint8_t operation) {
  bytes b{std::byte{0},    std::byte{0},    std::byte{0x3e}, std::byte{0x9a},
          std::byte{0xab}, std::byte{0x9b}, std::byte{0xac}, std::byte{0x79}};
  b.resize(b.size() + 4 + 20, std::byte{0x11});
  if (operation == 0) {
    b.push_back(std::byte{0});
    b.resize(b.size() + 7, std::byte{0});
    b.push_back(std::byte{7});
    b.push_back(std::byte{0});
  }
  return b;
}

// Header `h` and `payload` bytes: a handshake's start, then filler.
void append(bytes& out, const basp_header& h, size_t payload = 0) {
  const auto head = encode_basp_header(h);
  const size_t at = out.size();
  out.resize(at + head.size() + payload, std::byte{0x5a});
  std::copy(head.begin(), head.end(), out.begin() + static_cast<std::ptrdiff_t>(at));
  if (h.operation > 1 || payload == 0) return;
  const auto start = handshake_start(h.operation);
  std::copy_n(start.begin(), std::min(start.size(), payload),
              out.begin() + static_cast<std::ptrdiff_t>(at + head.size()));
}

void append(bytes& out, basp_header h, const bytes& payload) {
  h.payload_len = static_cast<uint32_t>(payload.size());
  append(out, h);
  out.insert(out.end(), payload.begin(), payload.end());
}

// A direct message's payload as CAF 0.17 writes it: no forwarding stack, a type number of 0, the
// type names ("@<>+@str..."); the elements follow.
bytes message_head(const std::string& names) {
  bytes b{std::byte{0}, std::byte{0}, std::byte{0}, static_cast<std::byte>(names.size())};
  for (char c : names)
    b.push_back(static_cast<std::byte>(c));
  return b;
}
// A string element of `n` bytes: its length as CAF's varbyte, then the bytes.
void append_string(bytes& b, size_t n) {
  size_t len = n;
  for (; len >= 0x80; len >>= 7)
    b.push_back(static_cast<std::byte>(0x80 | (len & 0x7f)));
  b.push_back(static_cast<std::byte>(len));
  b.resize(b.size() + n, std::byte{'x'});
}
bytes string_message(size_t n) {
  auto b = message_head("@<>+@str");
  append_string(b, n);
  return b;
}

basp_header client_handshake(uint32_t payload, uint8_t flags = 0) {
  return {1, 0, 0, flags, payload, 0, 0, 0};
}
basp_header server_handshake(uint32_t payload) {
  return {0, 0, 0, 0, payload, 3, 0, 0};
}
basp_header direct_message(uint32_t payload) {
  return {2, 0, 0, 0, payload, 7, 11, 42};
}
basp_header heartbeat() {
  return {6, 0, 0, 0, 0, 0, 0, 0};
}

status feed(basp_frame_guard& g, const bytes& b) {
  return g.feed(b.data(), b.size());
}

std::string refusal(connection_side side, const basp_header& h, bool after_handshake = true,
                    frame_limits limits = {}) {
  basp_frame_guard g(side, limits);
  bytes b;
  if (after_handshake)
    append(b, side == connection_side::accepted ? client_handshake(48) : server_handshake(48), 48);
  append(b, h);
  auto fed = feed(g, b);
  return fed ? "" : fed.err().message;
}

TEST(FrameGuard, HeadersAreBigEndianAsCafWritesThem) {
  // The first 32 bytes of the server handshake a CAF 0.17 node sent on loopback.
  std::array<std::byte, 32> wire{};
  wire[7] = std::byte{0xe3};  // payload_len 227
  wire[15] = std::byte{0x03}; // operation_data: BASP version 3
  const auto h = decode_basp_header(wire);
  EXPECT_EQ(h.operation, 0);
  EXPECT_EQ(h.payload_len, 227u);
  EXPECT_EQ(h.operation_data, 3u);
  EXPECT_EQ(encode_basp_header(h), wire);
  basp_frame_guard g(connection_side::connected, {});
  EXPECT_TRUE(g.feed(wire.data(), wire.size()));
  EXPECT_TRUE(g.handshaken());
}

TEST(FrameGuard, ACafConversationPassesSplitAtEveryChunkSize) {
  bytes b;
  append(b, client_handshake(60), 60);
  append(b, direct_message(0), string_message(986));
  append(b, heartbeat());
  append(b, client_handshake(60, 0x02), 60); // CAF repeats it to select the connection
  append(b, direct_message(0), message_head("@<>"));
  for (size_t chunk = 1; chunk <= 70; ++chunk) {
    basp_frame_guard g(connection_side::accepted, {});
    for (size_t at = 0; at < b.size(); at += chunk)
      ASSERT_TRUE(g.feed(b.data() + at, std::min(chunk, b.size() - at))) << "chunk " << chunk;
    EXPECT_EQ(g.frames(), 5u) << "chunk " << chunk;
    EXPECT_TRUE(g.handshaken());
  }
}

TEST(FrameGuard, AConfigValueIsRefusedBeforeCafGetsItsLastByte) {
  // "@<>+@config_value" holding variant index 0x20, which CAF 0.17's decoder throws on.
  bytes payload{std::byte{0}, std::byte{0}, std::byte{0}, std::byte{17}};
  for (char c : std::string("@<>+@config_value"))
    payload.push_back(static_cast<std::byte>(c));
  payload.push_back(std::byte{0x20});
  bytes b;
  append(b, client_handshake(40), 40);
  append(b, direct_message(0), payload);
  basp_frame_guard g(connection_side::accepted, {});
  for (size_t at = 0; at + 1 < b.size(); ++at)
    ASSERT_TRUE(g.feed(&b[at], 1)) << "byte " << at;
  const auto last = g.feed(&b.back(), 1);
  ASSERT_FALSE(last);
  EXPECT_NE(last.err().message.find("direct_message frame refused: a message carries a "
                                    "@config_value"),
            std::string::npos)
      << last.err().message;
}

TEST(FrameGuard, APayloadLongerThanWhatTheGuardKeepsIsJudgedByItsFirstBytes) {
  bytes b;
  append(b, client_handshake(40), 40);
  append(b, direct_message(0), string_message(200'000)); // one string: nothing after it to check
  basp_frame_guard g(connection_side::accepted, {});
  EXPECT_TRUE(feed(g, b));
  // The same string before an error, which lies past the bytes the guard keeps: refused.
  auto payload = message_head("@<>+@str+@error");
  append_string(payload, 200'000);
  const bytes empty_error(1 + 8, std::byte{0});
  payload.insert(payload.end(), empty_error.begin(), empty_error.end());
  const auto context = message_head("@<>");
  payload.insert(payload.end(), context.begin() + 1, context.end()); // no forwarding stack
  bytes c;
  append(c, client_handshake(40), 40);
  append(c, direct_message(0), payload);
  basp_frame_guard h(connection_side::accepted, {});
  const auto fed = feed(h, c);
  ASSERT_FALSE(fed);
  EXPECT_NE(fed.err().message.find("a @error follows a @str, whose end the guard cannot see"),
            std::string::npos)
      << fed.err().message;
}

TEST(FrameGuard, AHandshakeWithoutPayloadIsRefusedOnBothSides) {
  // The 32-byte frames that made CAF 0.17 dereference a null payload.
  EXPECT_NE(refusal(connection_side::accepted, client_handshake(0), false)
                .find("payload_len 0: a handshake carries a payload"),
            std::string::npos);
  EXPECT_NE(refusal(connection_side::connected, server_handshake(0), false)
                .find("payload_len 0: a handshake carries a payload"),
            std::string::npos);
}

TEST(FrameGuard, APayloadAboveTheBoundIsRefusedFromItsHeader) {
  const auto why = refusal(connection_side::accepted, direct_message(0xffffffffu));
  EXPECT_NE(why.find("payload_len 4294967295 bytes is larger than the bound of 67108864 bytes "
                     "(--max-message-bytes)"),
            std::string::npos)
      << why;
  frame_limits small;
  small.max_message_bytes = 1000;
  EXPECT_EQ(refusal(connection_side::accepted, direct_message(1000), true, small), "");
  EXPECT_NE(refusal(connection_side::accepted, direct_message(1001), true, small), "");
}

TEST(FrameGuard, HandshakesHaveTheirOwnSmallBound) {
  const auto why = refusal(connection_side::accepted, client_handshake(1 << 20), false);
  EXPECT_NE(why.find("larger than a handshake's bound of 65536 bytes"), std::string::npos) << why;
}

TEST(FrameGuard, NothingButTheHandshakeComesFirst) {
  for (const auto& h : {direct_message(8), heartbeat(), basp_header{4, 0, 0, 0, 8, 0, 0, 0}}) {
    const auto why = refusal(connection_side::accepted, h, false);
    EXPECT_NE(why.find("the peer has not sent its handshake yet"), std::string::npos) << why;
  }
}

TEST(FrameGuard, EachSideRefusesTheOthersHandshake) {
  EXPECT_NE(refusal(connection_side::accepted, server_handshake(40), false)
                .find("a peer that connected to us sent a server handshake"),
            std::string::npos);
  EXPECT_NE(refusal(connection_side::connected, client_handshake(40), false)
                .find("the peer we connected to sent a client handshake"),
            std::string::npos);
}

TEST(FrameGuard, MalformedHeadersAreRefusedNamingTheField) {
  const std::vector<std::pair<basp_header, std::string>> cases = {
      {{0x7f, 0, 0, 0, 0, 0, 0, 0}, "operation 0x7f is not a BASP operation"},
      {{2, 1, 0, 0, 8, 0, 0, 42}, "padding bytes are 0x01 0x00, not zero"},
      {{2, 0, 0, 0x80, 8, 0, 0, 42}, "flags 0x80 set bits BASP does not define"},
      {{2, 0, 0, 0, 8, 0, 0, 0}, "dest_actor 0: a message needs a receiver"},
      {{3, 0, 0, 0, 0, 0, 0, 42}, "payload_len 0: a message carries a payload"},
      {{4, 0, 0, 0, 8, 9, 0, 0}, "operation_data is not 0"},
      {{5, 0, 0, 0, 8, 0, 0, 3}, "source_actor 0 / dest_actor 3"},
      {{6, 0, 0, 0, 4, 0, 0, 0}, "a heartbeat carries nothing but its operation"},
      {{2, 0, 0, 0, 8, 0x3000000000000007, 0, 42}, "message category downstream is a CAF stream"},
      {{3, 0, 0, 0, 8, 0xa000000000000001, 0, 42}, "message category upstream is a CAF stream"},
      {{0, 0, 0, 0, 40, 0, 0, 0}, "a peer that connected to us sent a server handshake"},
      {{1, 0, 0, 0, 40, 0, 5, 0}, "source_actor 5 / dest_actor 0: a client handshake"},
  };
  for (const auto& [h, expected] : cases) {
    const auto why = refusal(connection_side::accepted, h);
    EXPECT_NE(why.find(expected), std::string::npos) << "got: " << why;
  }
}

TEST(FrameGuard, OnceRefusedEveryLaterFeedFails) {
  basp_frame_guard g(connection_side::accepted, {});
  bytes b;
  append(b, direct_message(8));
  EXPECT_FALSE(feed(g, b));
  ASSERT_NE(g.refused(), nullptr);
  bytes good;
  append(good, client_handshake(40), 40);
  EXPECT_FALSE(feed(g, good));
  EXPECT_EQ(g.frames(), 0u);
}

TEST(FrameGuard, RandomBytesAreRefusedOrWaitedForNeverMisread) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    bytes b(1 + rng() % 200);
    for (auto& x : b)
      x = static_cast<std::byte>(rng());
    basp_frame_guard g(trial % 2 ? connection_side::accepted : connection_side::connected, {});
    const bool passed = static_cast<bool>(feed(g, b));
    // Passing random bytes means every header among them was one CAF handles safely.
    if (passed && g.frames() > 0) {
      EXPECT_TRUE(g.handshaken());
    }
    if (!passed) {
      EXPECT_NE(g.refused(), nullptr);
    }
  }
}

} // namespace
} // namespace kvactor
