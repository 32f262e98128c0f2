// The `kvactor` command line: subcommands, flags and exit codes, callable from tests.
#pragma once

#include <ostream>

namespace kvactor {

/// Exit codes: 0 success (a run: every request finished); 2 bad input (a flag, a config, a file
/// or a budget), refused before any work; 1 anything else (a run: it ended with a request failed,
/// or its ranks failed); 128 + N when signal N (SIGINT 130, SIGTERM 143) stopped a run, which
/// still printed its summary.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_bad_input = 2;

/// Parses argv and runs the subcommand; writes results to `out`, one-line errors to `err`.
int kvactor_main(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

} // namespace kvactor
