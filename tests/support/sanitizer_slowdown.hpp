#pragma once
// How many times slower this build runs than a plain one. Tests scale their timing budgets (a
// step timeout, a bound on how long a diagnosis may take) by it, so that a sanitizer build
// (tests/sanitize.sh) checks the same behaviour without racing its own instrumentation. The
// scripts and ctest's limits take the same factors from tests/sanitize.sh (KVACTOR_TEST_SLOWDOWN).

#include <algorithm>
#include <cstdlib>

namespace kvactor::test {

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVACTOR_TSAN_BUILD 1
#endif
#if __has_feature(address_sanitizer)
#define KVACTOR_ASAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define KVACTOR_TSAN_BUILD 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KVACTOR_ASAN_BUILD 1
#endif

constexpr int sanitizer_slowdown() {
#if defined(KVACTOR_TSAN_BUILD)
  return 10;
#elif defined(KVACTOR_ASAN_BUILD)
  return 3;
#else
  return 1;
#endif
}

/// The slowdown to allow for at run time: this build's, or that of a tool around the process
/// (KVACTOR_TEST_SLOWDOWN: tests/sanitize.sh sets it for its builds, bench/device/sanitize.sh
/// for compute-sanitizer), whichever is larger. Bounds on how long a diagnosis may take scale by
/// it, and so do the time-outs a test sets where it checks what a time-out does rather than its
/// length (a collective that healthy ranks outlast under the tool would fire it by mistake).
/// Above 1, the slowest GPU tests do less of the same work (fewer prompts, tokens or requests).
inline int test_slowdown() {
  const char* v = std::getenv("KVACTOR_TEST_SLOWDOWN");
  return std::max(sanitizer_slowdown(), v != nullptr ? std::atoi(v) : 1);
}

/// Whether this run is slowed (a sanitizer build, or a tool around the process): the slowest
/// tests then do less of the same work.
inline bool slowed_run() {
  return test_slowdown() > 1;
}

} // namespace kvactor::test
