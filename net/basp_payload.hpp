// Checks what CAF 0.17 would deserialize from a BASP payload before CAF sees a byte of it. CAF's
// decoder of a caf::config_value throws on a variant index it does not know ("invalid type
// found"), as does its decoder of a node id of the "uri" kind, and they throw inside CAF's BASP
// worker or multiplexer thread, where nothing catches it: the process terminates. A peer that
// holds the cookie (or a certificate of the CA) could send one: a config_value at the top of a
// message, nested in an error's context, a down or exit message's reason or a message inside a
// message, or held by CAF's settings and lists; a uri node id in a handshake, a monitor or down
// message, or an actor reference. kvactor never sends either, so the guard passes only the types
// it reads or knows to hold neither, and only CAF's default node ids.
#pragma once

#include <cstddef>

#include "net/frame_guard.hpp"

namespace kvactor {

/// The most bytes of one payload the guard keeps to judge it. What a check needs lies in the
/// first bytes: node ids, the forwarding stack, the message's type names and the elements before
/// an error or a nested message (legitimate errors and their contexts are short).
inline constexpr size_t basp_payload_check_bytes = size_t{64} << 10;

/// Whether frames of operation `op` carry a payload this check reads: all but heartbeats.
bool basp_payload_is_checked(basp_operation op);

/// Checks the payload of a frame of operation `op`, of which `data` holds the first `n` bytes;
/// `whole` says whether that is the whole payload or only its first basp_payload_check_bytes.
/// Refused, with the element named: a type other than those the check reads (integers, atoms,
/// strings, actor references, node ids, errors, down and exit messages, nested messages) or knows
/// to hold no variant and no message (kvactor's own types, a few of CAF's), a caf::config_value
/// and CAF's settings first among them; an error, down, exit or nested message after an element
/// whose end the check cannot see; node ids of another kind than CAF's default; nesting deeper
/// than four messages; a payload that ends inside what it declares, or that would need more than
/// the bytes kept to judge.
status check_basp_payload(basp_operation op, const std::byte* data, size_t n, bool whole);

} // namespace kvactor
