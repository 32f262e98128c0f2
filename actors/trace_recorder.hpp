// Records actor messages into a trace file (messages/trace.hpp) as actors deliver them. Shared by
// the driver and the ranks of one process; thread-safe because detached ranks record too.
#pragma once

#include <chrono>
#include <mutex>
#include <ostream>
#include <string>

#include "messages/trace.hpp"

namespace kvactor {

class trace_recorder {
public:
  explicit trace_recorder(std::ostream& out)
      : writer_(out), start_(std::chrono::steady_clock::now()) {}

  template <class T>
  void record(const std::string& sender, const std::string& receiver, const T& message) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start_)
                        .count();
    std::lock_guard<std::mutex> guard(mu_);
    if (auto ok = writer_.write_message(ns, sender, receiver, message); !ok && failure_.empty())
      failure_ = ok.err().message;
  }

  /// The first write error, empty if none (a full disk must not stop the run, but is reported).
  std::string failure() const {
    std::lock_guard<std::mutex> guard(mu_);
    return failure_;
  }

  uint64_t count() const {
    std::lock_guard<std::mutex> guard(mu_);
    return writer_.count();
  }

private:
  mutable std::mutex mu_;
  trace_writer writer_;
  std::chrono::steady_clock::time_point start_;
  std::string failure_;
};

} // namespace kvactor
