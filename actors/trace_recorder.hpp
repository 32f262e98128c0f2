// Records actor messages into a trace file (messages/trace.hpp) as actors deliver them. Shared by
// the driver and the ranks of one process; thread-safe because they record from several threads
// (the scheduler's workers, and the own threads of detached ranks).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "messages/trace.hpp"

namespace kvactor {

class trace_recorder {
public:
  explicit trace_recorder(std::ostream& out)
      : writer_(std::in_place, out), start_(std::chrono::steady_clock::now()) {}

  /// Keeps the records in memory for take() (replay observes its actors this way).
  trace_recorder() : start_(std::chrono::steady_clock::now()) {}

  template <class T>
  void record(const std::string& sender, const std::string& receiver, const T& message) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start_)
                        .count();
    std::lock_guard<std::mutex> guard(mu_);
    if (!writer_) {
      kept_.push_back({count_++, ns, sender, receiver, std::string{detail::type_name_of(message)},
                       encode(message)});
      return;
    }
    if (auto ok = writer_->write_message(ns, sender, receiver, message); !ok && failure_.empty())
      failure_ = ok.err().message;
  }

  /// The records kept in memory since the last take() (none when writing to a stream).
  std::vector<trace_record> take() {
    std::lock_guard<std::mutex> guard(mu_);
    return std::exchange(kept_, {});
  }

  /// The first write error, empty if none (a full disk must not stop the run, but is reported).
  std::string failure() const {
    std::lock_guard<std::mutex> guard(mu_);
    return failure_;
  }

  uint64_t count() const {
    std::lock_guard<std::mutex> guard(mu_);
    return writer_ ? writer_->count() : count_;
  }

private:
  mutable std::mutex mu_;
  std::optional<trace_writer> writer_;
  std::vector<trace_record> kept_;
  uint64_t count_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::string failure_;
};

} // namespace kvactor
