// The cookie proof: two sides with one cookie clear each other whatever the chunking; a wrong
// cookie, a greeting that is not kvactor's, or a proof recorded from another connection is
// refused, and says why.
#include "net/peer_auth.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace kvactor {
namespace {

const std::string cookie = "0123456789abcdef0123456789abcdef";

peer_auth::nonce nonce_of(uint8_t x) {
  peer_auth::nonce n{};
  n.fill(std::byte{x});
  return n;
}

// Moves bytes between the two sides `chunk` at a time until neither owes anything; the first
// refusal, if any.
status converse(peer_auth& server, peer_auth& client, size_t chunk) {
  std::vector<std::byte> to_client = server.take_output(), to_server;
  for (int round = 0; round < 10 && !(server.done() && client.done()); ++round) {
    while (!to_client.empty() && client.wanted() > 0) {
      const size_t n = std::min({chunk, to_client.size(), client.wanted()});
      if (auto fed = client.feed(to_client.data(), n); !fed) return fed;
      to_client.erase(to_client.begin(), to_client.begin() + static_cast<std::ptrdiff_t>(n));
    }
    auto c = client.take_output();
    to_server.insert(to_server.end(), c.begin(), c.end());
    while (!to_server.empty() && server.wanted() > 0) {
      const size_t n = std::min({chunk, to_server.size(), server.wanted()});
      if (auto fed = server.feed(to_server.data(), n); !fed) return fed;
      to_server.erase(to_server.begin(), to_server.begin() + static_cast<std::ptrdiff_t>(n));
    }
    auto s = server.take_output();
    to_client.insert(to_client.end(), s.begin(), s.end());
  }
  return ok();
}

TEST(PeerAuth, OneCookieClearsBothSidesWhateverTheChunking) {
  for (size_t chunk : {1u, 3u, 7u, 32u, 100u}) {
    peer_auth server(connection_side::accepted, cookie, nonce_of(1));
    peer_auth client(connection_side::connected, cookie, nonce_of(2));
    ASSERT_TRUE(converse(server, client, chunk)) << "chunk " << chunk;
    EXPECT_TRUE(server.done());
    EXPECT_TRUE(client.done());
    EXPECT_EQ(server.wanted(), 0u);
  }
}

TEST(PeerAuth, TheListenerRefusesAProofMadeWithAnotherCookie) {
  peer_auth server(connection_side::accepted, cookie, nonce_of(1));
  peer_auth client(connection_side::connected, "another-cookie-of-another-user", nonce_of(2));
  auto talked = converse(server, client, 64);
  ASSERT_FALSE(talked);
  EXPECT_NE(talked.err().message.find("the connecting peer's proof does not match this "
                                      "machine's cluster cookie"),
            std::string::npos)
      << talked.err().message;
  EXPECT_FALSE(server.done());
}

TEST(PeerAuth, TheConnectingSideRefusesAListenerWithoutTheCookie) {
  // A listener that greets correctly but cannot prove the cookie.
  peer_auth impostor(connection_side::accepted, "not-the-cookie-at-all-0000", nonce_of(1));
  peer_auth client(connection_side::connected, cookie, nonce_of(2));
  auto greeting = impostor.take_output();
  ASSERT_TRUE(client.feed(greeting.data(), greeting.size()));
  auto proof = client.take_output();
  // The impostor refuses the proof; were it to answer anyway, with its own key:
  (void)impostor.feed(proof.data(), proof.size());
  const auto forged =
      auth_mac("not-the-cookie-at-all-0000", "kvactor-server", nonce_of(2), nonce_of(1));
  auto answered = client.feed(forged.data(), forged.size());
  ASSERT_FALSE(answered);
  EXPECT_NE(answered.err().message.find("the listening peer's proof does not match"),
            std::string::npos);
}

TEST(PeerAuth, AProofRecordedFromAnotherConnectionIsRefused) {
  peer_auth first_server(connection_side::accepted, cookie, nonce_of(1));
  peer_auth client(connection_side::connected, cookie, nonce_of(2));
  auto greeting = first_server.take_output();
  ASSERT_TRUE(client.feed(greeting.data(), greeting.size()));
  const auto recorded = client.take_output();
  peer_auth second_server(connection_side::accepted, cookie, nonce_of(3)); // a fresh nonce
  auto replayed = second_server.feed(recorded.data(), recorded.size());
  EXPECT_FALSE(replayed);
}

TEST(PeerAuth, AGreetingThatIsNotKvactorsIsRefusedAtItsEighthByte) {
  peer_auth server(connection_side::accepted, cookie, nonce_of(1));
  const std::string basp(8, '\0'); // what a CAF peer sends first
  ASSERT_TRUE(server.feed(reinterpret_cast<const std::byte*>(basp.data()), 7));
  auto fed = server.feed(reinterpret_cast<const std::byte*>(basp.data()) + 7, 1);
  ASSERT_FALSE(fed);
  EXPECT_NE(fed.err().message.find("does not speak kvactor's authenticated transport"),
            std::string::npos);
  EXPECT_EQ(server.wanted(), 0u);
}

TEST(PeerAuth, NoncesAreFreshEachTime) {
  EXPECT_NE(peer_auth::random_nonce(), peer_auth::random_nonce());
}

} // namespace
} // namespace kvactor
