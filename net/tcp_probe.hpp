// A TCP connect with a deadline: tried before CAF's middleman connects (which waits as long as the
// kernel retries a SYN, about two minutes, when a node's link is cut before the connection), and
// the way the step channel's driver side connects.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <netdb.h>

#include "messages/errc.hpp"

namespace kvactor {

/// Connects to host:port and closes again; errc::io_error naming the address and the reason
/// (refused, unreachable, or no answer within `timeout`) when it cannot.
status tcp_probe(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);

/// The addresses of host:port for a stream socket (passive: to listen on; an empty host is every
/// interface); the error names the address and the resolver's reason.
using tcp_addresses = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;
expected<tcp_addresses> resolve_tcp(const std::string& host, uint16_t port, bool passive);

/// A connected socket to host:port (blocking again once connected), with the same deadline and
/// errors as tcp_probe; the caller owns the descriptor.
expected<int> tcp_connect(const std::string& host, uint16_t port,
                          std::chrono::milliseconds timeout);

} // namespace kvactor
