// Proof that a peer holds this machine's cluster cookie, exchanged before any BASP byte. CAF 0.17
// trusts every peer that speaks BASP: one that does can send any actor any message (an exit
// message to a rank, a stream message that crashes CAF), so on connections without TLS both sides
// first prove they know a shared secret, the way Erlang nodes prove their cookie:
//
//   accepting side  -> "kvauth/1" + server nonce (32 bytes)
//   connecting side -> "kvauth/1" + client nonce + HMAC-SHA256(cookie, "kvactor-client" | sn | cn)
//   accepting side  -> HMAC-SHA256(cookie, "kvactor-server" | cn | sn)
//
// Fresh nonces on both sides make a recorded exchange useless for a later connection. Pure: the
// caller moves the bytes.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "messages/errc.hpp"
#include "net/frame_guard.hpp"

namespace kvactor {

class peer_auth {
public:
  static constexpr size_t magic_size = 8;
  static constexpr size_t nonce_size = 32;
  static constexpr size_t mac_size = 32;
  using nonce = std::array<std::byte, nonce_size>;

  /// `mine`: this side's fresh random nonce (random_nonce() outside tests).
  peer_auth(connection_side side, std::string cookie, nonce mine);

  /// Bytes to send now (the caller sends them in order, before anything else).
  std::vector<std::byte> take_output();
  /// How many bytes the peer owes next; 0 once it has proven itself (or failed).
  size_t wanted() const;
  /// The next `n` <= wanted() bytes from the peer. The error says what did not match.
  status feed(const std::byte* data, size_t n);
  bool done() const { return stage_ == stage::done; }

  static nonce random_nonce();

private:
  enum class stage { server_hello, client_proof, server_proof, done, failed };
  status take_message();
  status take_server_hello();
  status take_client_proof();
  status take_server_proof();

  connection_side side_;
  std::string cookie_;
  nonce mine_;
  nonce theirs_{};
  stage stage_;
  std::vector<std::byte> in_, out_;
};

/// HMAC-SHA256 of `label` | a | b under `key`.
std::array<std::byte, peer_auth::mac_size> auth_mac(const std::string& key, std::string_view label,
                                                    const peer_auth::nonce& a,
                                                    const peer_auth::nonce& b);

} // namespace kvactor
