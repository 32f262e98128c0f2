// Mutual TLS for the step channel, with the files the middleman's TLS uses (--tls-cert, --tls-key,
// --tls-ca): each side presents its certificate, and the peer's must chain to the CA. A node off
// loopback requires TLS, so this is what lets steps between machines skip the middleman too.
#pragma once

#include <memory>
#include <string>

#include "messages/errc.hpp"

struct ssl_ctx_st;

namespace kvactor {

class step_tls {
public:
  /// A context for the accepting (`server`) or the connecting side; the error names the file
  /// that could not be loaded and OpenSSL's reason.
  static expected<std::shared_ptr<step_tls>> make(const std::string& cert, const std::string& key,
                                                  const std::string& ca, bool server);
  ~step_tls();
  step_tls(const step_tls&) = delete;
  step_tls& operator=(const step_tls&) = delete;

  ssl_ctx_st* context() const { return ctx_; }

private:
  explicit step_tls(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
};

/// OpenSSL's reason for the last failure on this thread ("" when there is none).
std::string last_tls_error();

} // namespace kvactor
