// A flood must not flood the log too: at most `burst` lines per window about strangers (peers
// that failed or never finished the cookie proof), then one line that says how many were left
// out. What a peer that proved itself did wrong is always logged: that is the line an operator
// looks for. Shared by the middleman's guard and the step channel.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

namespace kvactor {

class rate_limited_log {
public:
  explicit rate_limited_log(std::string prefix) : prefix_(std::move(prefix)) {}

  void always(const std::string& line) { spdlog::warn("{}: {}", prefix_, line); }

  void warn(const std::string& line) {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now - window_ > std::chrono::seconds(10)) {
      if (dropped_ > 0) spdlog::warn("{}: {} more such lines left out", prefix_, dropped_);
      window_ = now;
      written_ = dropped_ = 0;
    }
    if (written_ < burst) {
      ++written_;
      spdlog::warn("{}: {}", prefix_, line);
    } else {
      ++dropped_;
    }
  }

private:
  static constexpr int burst = 20;
  std::string prefix_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point window_{};
  int written_ = 0;
  uint64_t dropped_ = 0;
};

} // namespace kvactor
