// A seeded fault schedule for one message link, for testing (`kvactor run --chaos SEED:RATE`):
// every message the link carries draws one fault, so that the protocol on both ends is exercised
// against messages lost, delivered twice, late, and (a late copy overtaken) out of order.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "messages/errc.hpp"

namespace kvactor {

struct chaos_spec {
  uint64_t seed = 0;
  double rate = 0.0;                           // probability that a message is disturbed, [0, 1]
  std::chrono::microseconds max_delay{10'000}; // a late message waits up to this long
};

/// "SEED:RATE" (e.g. 7:0.2); the error names the part at fault.
expected<chaos_spec> parse_chaos_spec(std::string_view text);

enum class link_fault : uint8_t {
  deliver,   // as sent
  drop,      // never arrives
  duplicate, // arrives now and once more after `delay`
  delay,     // arrives after `delay`
};

std::string_view to_string(link_fault f);

struct link_decision {
  link_fault fault = link_fault::deliver;
  std::chrono::microseconds delay{0};
};

struct link_counts {
  int64_t messages = 0, dropped = 0, duplicated = 0, delayed = 0;
};

/// What may befall a message on a link.
enum class link_kind : uint8_t {
  lossy,    // between processes, or standing in for them: lost, repeated or late
  lossless, // one process's mailboxes never lose or repeat a message: only late (and so reordered)
};

/// One direction of one link. The sequence of decisions depends only on (seed, link id), so a
/// seed names the faults each link suffers; when they land relative to other threads still varies.
class chaos_link {
public:
  chaos_link(const chaos_spec& spec, uint64_t link_id, link_kind kind = link_kind::lossy);

  /// The fault for the next message: with the spec's rate a message is disturbed; on a lossy
  /// link it is then dropped, duplicated or delayed with equal odds, on a lossless one delayed.
  link_decision next();

  const link_counts& counts() const { return counts_; }

private:
  uint64_t draw(); // splitmix64
  double uniform();

  chaos_spec spec_;
  link_kind kind_;
  uint64_t state_;
  link_counts counts_;
};

} // namespace kvactor
