// Conversions between kvactor::error (the pure cores' error value) and caf::error (what actor
// handlers return and what crosses process boundaries).
#pragma once

#include <caf/atom.hpp>
#include <caf/error.hpp>

#include <cstdint>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

/// The caf::error category of kvactor::errc codes (rendered by the renderer register_types adds).
inline constexpr caf::atom_value errc_category = caf::atom("kvactor");

/// caf::error{code, "kvactor", (message)}; the message is the context's only element, and a
/// message-less error has an empty context. errc::no_error gives the empty caf::error (none).
caf::error to_caf_error(const error& x);

/// The same, naming the requests the error is about (context: message, request ids), so that the
/// driver can fail exactly those requests when a rank rejects a step.
caf::error to_caf_error(const error& x, const std::vector<uint64_t>& request_ids);

/// The request ids an error names (empty when it names none).
std::vector<uint64_t> request_ids_of(const caf::error& x);

/// Inverse of to_caf_error for the "kvactor" category; the empty caf::error gives
/// errc::no_error. An error of another category (a caf::sec such as request_timeout, a remote
/// failure) gives errc::io_error with the message "<category>: <code> <context>".
/// NOTE(from_caf_error): errc has no code for foreign errors yet; io_error is the closest.
error from_caf_error(const caf::error& x);

} // namespace kvactor
