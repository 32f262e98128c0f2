// The signal watch a run installs: the first SIGINT or SIGTERM is reported once, to whoever asks;
// a second ends the process at once with 128 + the signal; the watch's end restores the handlers.
// Each case runs in a child process, which the signals may end.
#include <gtest/gtest.h>

#include <csignal>
#include <future>

#include <sys/wait.h>
#include <unistd.h>

#include "deploy/interrupt.hpp"

namespace kvactor::test {
namespace {

// Runs `body` in a child process; its exit status (or -signal when a signal killed it).
template <class F>
int in_child(F body) {
  const pid_t child = fork();
  if (child == 0) _exit(body());
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

TEST(InterruptWatch, TheFirstSignalIsReportedOnceAndASecondExitsAtOnceWith128PlusIt) {
  const int code = in_child([] {
    interrupt_watch watch;
    std::promise<int> first;
    watch.on_interrupt([&first](int sig) { first.set_value(sig); });
    raise(SIGINT);
    if (first.get_future().get() != SIGINT) return 3; // waits for the report
    if (watch.signal() != SIGINT) return 4;
    raise(SIGTERM); // the second: the process ends here
    return 5;
  });
  EXPECT_EQ(code, 128 + SIGTERM);
}

TEST(InterruptWatch, ASignalBeforeAnyoneAskedIsReportedWhenSomeoneDoes) {
  const int code = in_child([] {
    interrupt_watch watch;
    std::promise<void> seen;
    watch.on_interrupt([&seen](int) { seen.set_value(); });
    raise(SIGTERM);
    seen.get_future().get();
    std::promise<int> late;
    watch.on_interrupt([&late](int sig) { late.set_value(sig); });
    return late.get_future().get() == SIGTERM ? 0 : 6;
  });
  EXPECT_EQ(code, 0);
}

TEST(InterruptWatch, ItsEndRestoresTheHandlersThatWereThere) {
  const int code = in_child([] {
    std::signal(SIGINT, SIG_IGN);
    { interrupt_watch watch; }
    struct sigaction now {};
    sigaction(SIGINT, nullptr, &now);
    return now.sa_handler == SIG_IGN ? 0 : 7;
  });
  EXPECT_EQ(code, 0);
}

} // namespace
} // namespace kvactor::test
