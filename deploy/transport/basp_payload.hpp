// Checks what CAF 0.17 would deserialize from a BASP payload before CAF sees a byte of it. CAF's
// decoder of a caf::config_value throws on a variant index it does not know ("invalid type
// found"), and it throws inside CAF's BASP worker or multiplexer thread, where nothing catches it:
// the process terminates. A peer that holds the cookie (or a certificate of the CA) could send
// one, at the top of a message or nested in an error's context, a down or exit message's reason,
// or a message inside a message. kvactor never sends one, so the guard refuses every payload that
// holds one, or that cannot be shown not to.
#pragma once

#include <cstddef>

#include "deploy/transport/frame_guard.hpp"

namespace kvactor {

/// The most bytes of one payload the guard keeps to judge it. What a check needs lies in the
/// first bytes: node ids, the forwarding stack, the message's type names and the elements before
/// an error or a nested message (legitimate errors and their contexts are short).
inline constexpr size_t basp_payload_check_bytes = size_t{64} << 10;

/// Whether frames of operation `op` carry a payload this check reads: direct, routed and down
/// messages (handshakes and monitor messages hold only node ids, strings and actor ids).
bool basp_payload_is_checked(basp_operation op);

/// Checks the payload of a direct, routed or down message frame, of which `data` holds the first
/// `n` bytes; `whole` says whether that is the whole payload or only its first
/// basp_payload_check_bytes. Refused, with the element named: a caf::config_value anywhere; a CAF
/// stream message; an error, a down or exit message or a nested message that follows an element
/// whose size the check does not know (kvactor's own types: they hold none of these); node ids
/// other than CAF's default kind; nesting deeper than four messages; a payload that ends inside
/// what it declares, or that would need more than the bytes kept to judge.
status check_basp_payload(basp_operation op, const std::byte* data, size_t n, bool whole);

} // namespace kvactor
