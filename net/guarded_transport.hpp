// kvactor's way onto the network: CAF's middleman (BASP over TCP, or over TLS with CAF's OpenSSL
// sessions) behind a guard. Every connection's bytes pass a basp_frame_guard before the middleman
// parses them, and connections that have not finished their handshake are bounded in time and
// number (connection_watch). CAF 0.17's BASP instance trusts its peers: without this, one crafted
// 32-byte frame crashes the process that listens (`kvactor node`, or a run's --inject-port).
//
// It plugs into CAF the way CAF's OpenSSL module does: its own middleman actor on the shared BASP
// broker, making the broker's doormen (listening sockets) and scribes (connections), so the
// broker, the routing and the failure detection (heartbeats, monitors) stay CAF's.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/fwd.hpp>

#include "messages/errc.hpp"
#include "net/connection_watch.hpp"
#include "net/frame_guard.hpp"

namespace kvactor {

struct transport_limits {
  frame_limits frames;
  watch_limits connections;
};

/// --max-message-bytes (a byte size: 64MiB, 1GB, ...) as limits: the bound must hold a
/// handshake and fit BASP's 32-bit payload length; the error names the flag and the value.
expected<transport_limits> transport_limits_from(std::string_view max_message_bytes);

/// The default of --max-message-bytes.
inline constexpr const char* default_max_message_bytes = "64MiB";

/// How peers prove who they are before any BASP byte: mutual TLS (CAF's OpenSSL module with the
/// certificate, key and CA in the config) or, without TLS, the cluster cookie (peer_auth).
struct transport_auth {
  bool tls = false;
  std::string cookie; // without TLS: the shared secret (machine_cookie())
};

/// TLS when `tls`, else the machine's cluster cookie (created on first use); the error names the
/// cookie file and what is wrong with it.
expected<transport_auth> transport_auth_for(bool tls);

struct transport_counts {
  uint64_t refused_frames = 0;   // connections closed for a frame the guard refused
  uint64_t oversized_frames = 0; // of which: a payload above --max-message-bytes
  uint64_t refused_auth = 0;     // connections closed before BASP: no or a wrong cookie proof
  watch_counts connections;
};

struct transport_context;

class guarded_transport {
public:
  /// Without TLS, `auth.cookie` must hold the cluster cookie (std::invalid_argument otherwise).
  guarded_transport(caf::actor_system& sys, transport_limits limits, transport_auth auth);
  ~guarded_transport();
  guarded_transport(const guarded_transport&) = delete;
  guarded_transport& operator=(const guarded_transport&) = delete;

  /// Listens on host:port (0: any) for peers of `whom`; the bound port.
  expected<uint16_t> publish(const caf::strong_actor_ptr& whom, std::set<std::string> interface,
                             uint16_t port, const std::string& host);

  template <class Handle>
  expected<uint16_t> publish(const Handle& whom, uint16_t port, const std::string& host) {
    return publish(caf::actor_cast<caf::strong_actor_ptr>(whom), sys_.message_types(whom), port,
                   host);
  }

  /// Connects to the actor published at host:port; it must speak `interface`. A peer that has
  /// not answered the handshake within `within` (0: no limit) is an error.
  expected<caf::strong_actor_ptr> connect(const std::string& host, uint16_t port,
                                          const std::set<std::string>& interface,
                                          std::chrono::milliseconds within = {});

  template <class Handle>
  expected<Handle> remote_actor(const std::string& host, uint16_t port,
                                std::chrono::milliseconds within = {}) {
    auto found = connect(host, port, sys_.message_types<Handle>(), within);
    if (!found) return found.err();
    return caf::actor_cast<Handle>(std::move(*found));
  }

  transport_counts counts() const;
  caf::actor_system& system() const { return sys_; }
  /// How peers authenticate and the bounds on what they send (the step channel shares them).
  const transport_auth& auth() const;
  const transport_limits& limits() const;

private:
  caf::actor_system& sys_;
  std::shared_ptr<transport_context> context_;
  caf::actor middleman_;
};

} // namespace kvactor
