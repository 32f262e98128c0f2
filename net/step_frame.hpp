// The step channel's wire format (pure: no sockets). In cluster mode a step goes from the driver to
// each node, and the node's gathered answer comes back, on a TCP connection of their own beside
// CAF's middleman: no broker, multiplexer or BASP worker between the socket and the code that
// waits for it. Frames, all integers big-endian:
//
//   frame  = length (u32, of what follows) | kind (u8) | version (u8) | body
//   step    (driver -> node): seq (u64) | slot count (u32) | slots (i32 each) |
//                             answer_within_ms (i64) | plan
//   answer  (node -> driver): node_step_done in kvactor's codec (messages/codec.hpp)
//   refusal (node -> driver): seq (u64) | the error in kvactor's codec (the node refused the step
//                             as a whole: a slot without a rank, a plan that does not decode)
//
// The plan is the step_plan's codec bytes, encoded once by the driver for every node and carried
// as they are, so a step frame costs one copy of the plan and no per-field walk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "messages/errc.hpp"
#include "messages/node.hpp"

namespace kvactor {

enum class step_frame_kind : uint8_t { step = 1, answer = 2, refusal = 3 };

inline constexpr uint8_t step_frame_version = 1;
/// length, kind, version.
inline constexpr size_t step_frame_header = 6;

/// The frame of `step`, for the step of sequence number `seq` (driver -> node).
std::vector<char> step_frame(uint64_t seq, const node_step& step);
/// The frame of `done` (node -> driver).
std::vector<char> answer_frame(const node_step_done& done);
/// The frame of the node's refusal of step `seq` (node -> driver).
std::vector<char> refusal_frame(uint64_t seq, const error& why);

/// One frame off the wire: its kind and body (after the version byte).
struct step_frame_body {
  step_frame_kind kind = step_frame_kind::step;
  std::vector<char> body;
};

struct sequenced_step {
  uint64_t seq = 0;
  node_step step;
};

struct step_refusal {
  uint64_t seq = 0;
  error why;
};

/// The step a frame of kind step carries; the error names what is malformed.
expected<sequenced_step> read_step(const std::vector<char>& body);
/// The answer a frame of kind answer carries.
expected<node_step_done> read_answer(const std::vector<char>& body);
/// The refusal a frame of kind refusal carries.
expected<step_refusal> read_refusal(const std::vector<char>& body);

/// Cuts a connection's byte stream into frames. A length above `max_frame_bytes`, an unknown kind
/// or another version is refused as soon as the header is in, before its body is kept; after a
/// refusal every call returns it again (the caller closes the connection).
class step_frame_reader {
public:
  explicit step_frame_reader(uint64_t max_frame_bytes) : max_(max_frame_bytes) {}

  /// Takes the next `n` bytes the peer sent; complete frames are then ready for next().
  status feed(const char* data, size_t n);
  /// The oldest complete frame, if any.
  std::optional<step_frame_body> next();

private:
  /// The header at `head` (step_frame_header bytes): its length, or why it is refused.
  status check_header(const char* head, uint32_t& length) const;

  uint64_t max_;
  std::vector<char> buf_; // bytes not yet cut into frames
  std::vector<step_frame_body> ready_;
  size_t taken_ = 0; // of ready_
  std::optional<error> refused_;
};

} // namespace kvactor
