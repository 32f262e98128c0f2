// Checks the BASP frames a peer sends before CAF's middleman parses them. CAF 0.17's BASP instance
// trusts its peer: a 32-byte handshake header without payload dereferences a null buffer (the
// process dies), and a header may claim a 4 GiB payload that CAF then allocates. This guard sees
// the bytes first, as they arrive, and refuses the first frame that a well-behaved CAF peer would
// never send; the connection is then closed before the middleman reads a byte of it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

/// BASP's operations (caf::io::basp::message_type), as they appear on the wire.
enum class basp_operation : uint8_t {
  server_handshake = 0,
  client_handshake = 1,
  direct_message = 2,
  routed_message = 3,
  monitor_message = 4,
  down_message = 5,
  heartbeat = 6,
};

/// The big-endian integer at `p`, as BASP and CAF's binary format write integers.
template <class T>
T read_big_endian(const std::byte* p) {
  T x = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    x = static_cast<T>((x << 8) | static_cast<T>(std::to_integer<uint8_t>(p[i])));
  return x;
}

/// The operation's name as logs show it ("direct_message"), "unknown" for another value.
const char* basp_operation_name(uint8_t op);

/// A BASP header as sent: 32 bytes, big-endian.
struct basp_header {
  static constexpr size_t size = 32;
  uint8_t operation = 0;
  uint8_t padding1 = 0, padding2 = 0;
  uint8_t flags = 0;
  uint32_t payload_len = 0;
  uint64_t operation_data = 0;
  uint64_t source_actor = 0;
  uint64_t dest_actor = 0;
};

basp_header decode_basp_header(const std::array<std::byte, basp_header::size>& bytes);
std::array<std::byte, basp_header::size> encode_basp_header(const basp_header& h);

/// Which end of the connection this process is: the one that accepted it (the peer then speaks
/// first with a client handshake) or the one that connected (a server handshake comes first).
enum class connection_side : uint8_t { accepted, connected };

struct frame_limits {
  /// The largest payload any frame may claim (--max-message-bytes).
  uint64_t max_message_bytes = uint64_t{64} << 20;
  /// Handshakes carry a node id, application ids and an interface: a few KiB at most.
  uint64_t max_handshake_bytes = uint64_t{64} << 10;
};

/// The well-formedness rules for one header, given whether the peer has completed its handshake.
/// The error names the field, its value and the rule.
status check_basp_header(const basp_header& h, connection_side side, bool handshaken,
                         const frame_limits& limits);

/// Follows one connection's byte stream frame by frame.
class basp_frame_guard {
public:
  basp_frame_guard(connection_side side, frame_limits limits) : side_(side), limits_(limits) {}

  /// Takes the next `n` bytes the peer sent. The first refused header or payload makes this and
  /// every later call return the error. Bytes are kept only for one header and the first
  /// basp_payload_check_bytes of a message's payload, which is judged (basp_payload.hpp) before
  /// the call that brings its last byte returns, so CAF never decodes a refused payload.
  status feed(const std::byte* data, size_t n);

  /// The peer's handshake header has been accepted.
  bool handshaken() const { return handshaken_; }
  /// The frames whose headers were accepted so far.
  uint64_t frames() const { return frames_; }
  /// The refusal, once there is one.
  const error* refused() const { return refused_ ? &refusal_ : nullptr; }

private:
  status take_header();
  void take_payload(const std::byte* data, size_t n);
  status judge_payload();
  status refuse(error why);

  connection_side side_;
  frame_limits limits_;
  std::array<std::byte, basp_header::size> header_{};
  size_t header_fill_ = 0;
  uint64_t payload_left_ = 0;
  // The part of the current payload kept to judge it, and how much of it to keep (0: not judged).
  std::vector<std::byte> payload_;
  size_t payload_wanted_ = 0;
  basp_header payload_header_;
  uint64_t frames_ = 0;
  bool handshaken_ = false;
  bool refused_ = false;
  error refusal_;
};

} // namespace kvactor
