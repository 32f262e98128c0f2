#include "net/peer_auth.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace kvactor {

namespace {

constexpr std::array<char, peer_auth::magic_size> magic = {'k', 'v', 'a', 'u', 't', 'h', '/', '1'};

void append(std::vector<std::byte>& out, const void* p, size_t n) {
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

bool has_magic(const std::vector<std::byte>& in) {
  return std::memcmp(in.data(), magic.data(), magic.size()) == 0;
}

error not_kvactor() {
  return make_error(errc::invalid_argument,
                    "the peer does not speak kvactor's authenticated transport (no 'kvauth/1' "
                    "greeting): not kvactor, or a kvactor of another version");
}

error wrong_cookie(const char* who) {
  return make_error(errc::invalid_argument,
                    std::string(who)
                        + " proof does not match this machine's cluster cookie "
                          "(KVACTOR_COOKIE_FILE, default ~/.kvactor/cookie): another "
                          "user, or another cookie");
}

} // namespace

std::array<std::byte, peer_auth::mac_size> auth_mac(const std::string& key, std::string_view label,
                                                    const peer_auth::nonce& a,
                                                    const peer_auth::nonce& b) {
  std::vector<unsigned char> msg(label.begin(), label.end());
  msg.insert(msg.end(), reinterpret_cast<const unsigned char*>(a.data()),
             reinterpret_cast<const unsigned char*>(a.data()) + a.size());
  msg.insert(msg.end(), reinterpret_cast<const unsigned char*>(b.data()),
             reinterpret_cast<const unsigned char*>(b.data()) + b.size());
  std::array<std::byte, peer_auth::mac_size> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(),
       reinterpret_cast<unsigned char*>(out.data()), &len);
  return out;
}

peer_auth::nonce peer_auth::random_nonce() {
  nonce n{};
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1)
    throw std::runtime_error("peer_auth: OpenSSL's RAND_bytes failed");
  return n;
}

peer_auth::peer_auth(connection_side side, std::string cookie, nonce mine)
    : side_(side), cookie_(std::move(cookie)), mine_(mine),
      stage_(side == connection_side::accepted ? stage::client_proof : stage::server_hello) {
  if (side_ == connection_side::accepted) {
    append(out_, magic.data(), magic.size());
    append(out_, mine_.data(), mine_.size());
  }
}

std::vector<std::byte> peer_auth::take_output() {
  return std::exchange(out_, {});
}

size_t peer_auth::wanted() const {
  switch (stage_) {
  case stage::server_hello: return magic_size + nonce_size - in_.size();
  case stage::client_proof: return magic_size + nonce_size + mac_size - in_.size();
  case stage::server_proof: return mac_size - in_.size();
  default: return 0;
  }
}

status peer_auth::feed(const std::byte* data, size_t n) {
  if (stage_ == stage::failed || stage_ == stage::done || n > wanted())
    return make_error(errc::invalid_argument, "peer_auth: bytes fed beyond what the peer owes");
  append(in_, data, n);
  const bool greeting = stage_ != stage::server_proof;
  if (greeting && in_.size() >= magic_size && !has_magic(in_)) {
    stage_ = stage::failed; // refuse at the eighth byte, not after a whole message
    return not_kvactor();
  }
  if (wanted() > 0) return ok();
  auto taken = take_message();
  in_.clear();
  if (!taken) stage_ = stage::failed;
  return taken;
}

status peer_auth::take_message() {
  switch (stage_) {
  case stage::server_hello: return take_server_hello();
  case stage::client_proof: return take_client_proof();
  default: return take_server_proof();
  }
}

status peer_auth::take_server_hello() {
  if (!has_magic(in_)) return not_kvactor();
  std::memcpy(theirs_.data(), in_.data() + magic_size, nonce_size);
  append(out_, magic.data(), magic.size());
  append(out_, mine_.data(), mine_.size());
  const auto mac = auth_mac(cookie_, "kvactor-client", theirs_, mine_);
  append(out_, mac.data(), mac.size());
  stage_ = stage::server_proof;
  return ok();
}

status peer_auth::take_client_proof() {
  if (!has_magic(in_)) return not_kvactor();
  std::memcpy(theirs_.data(), in_.data() + magic_size, nonce_size);
  const auto expected = auth_mac(cookie_, "kvactor-client", mine_, theirs_);
  if (CRYPTO_memcmp(expected.data(), in_.data() + magic_size + nonce_size, mac_size) != 0)
    return wrong_cookie("the connecting peer's");
  const auto mac = auth_mac(cookie_, "kvactor-server", theirs_, mine_);
  append(out_, mac.data(), mac.size());
  stage_ = stage::done;
  return ok();
}

status peer_auth::take_server_proof() {
  const auto expected = auth_mac(cookie_, "kvactor-server", mine_, theirs_);
  if (CRYPTO_memcmp(expected.data(), in_.data(), mac_size) != 0)
    return wrong_cookie("the listening peer's");
  stage_ = stage::done;
  return ok();
}

} // namespace kvactor
