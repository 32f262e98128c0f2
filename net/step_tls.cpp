#include "net/step_tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <fmt/format.h>

namespace kvactor {

std::string last_tls_error() {
  std::string out;
  while (const auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

expected<std::shared_ptr<step_tls>> step_tls::make(const std::string& cert, const std::string& key,
                                                   const std::string& ca, bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return make_error(errc::io_error, "step channel: TLS: " + last_tls_error());
  std::shared_ptr<step_tls> out{new step_tls(ctx)};
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  auto failed = [](const char* flag, const std::string& file) {
    return make_error(errc::io_error,
                      fmt::format("step channel: {} {}: {}", flag, file, last_tls_error()));
  };
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) return failed("--tls-cert", cert);
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1
      || SSL_CTX_check_private_key(ctx) != 1)
    return failed("--tls-key", key);
  if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1) return failed("--tls-ca", ca);
  // Both ways: a peer without a certificate of the CA is refused in the handshake.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return out;
}

step_tls::~step_tls() {
  SSL_CTX_free(ctx_);
}

} // namespace kvactor
