// The cluster cookie: a secret every kvactor process of one user on one machine shares, so that
// their connections can prove it (peer_auth) without TLS. Like Erlang's ~/.erlang.cookie: created
// on first use with 256 random bits, readable by its owner only, and refused when others can read
// it.
#pragma once

#include <string>

#include "messages/errc.hpp"

namespace kvactor {

/// $KVACTOR_COOKIE_FILE, else $HOME/.kvactor/cookie; an error when neither is set.
expected<std::string> cookie_path();

/// Reads the cookie at `path`, creating it (and its directory, mode 0700) when missing; creation
/// is atomic, so processes starting together agree on one cookie. Errors name the file: group- or
/// world-readable, unreadable, or too short to be a secret.
expected<std::string> load_or_create_cookie(const std::string& path);

/// cookie_path() then load_or_create_cookie().
expected<std::string> machine_cookie();

} // namespace kvactor
