// The ingress's counts as /metrics reads them: the ingress actor publishes them after each
// message it handles, an HTTP thread reads a copy (pure: no CAF).
#pragma once

#include <mutex>

#include "actors/ingress/ingress_core.hpp"

namespace kvactor {

class counts_board {
public:
  void publish(const openai::ingress_counts& c) {
    std::lock_guard lock(mu_);
    counts_ = c;
  }
  openai::ingress_counts read() const {
    std::lock_guard lock(mu_);
    return counts_;
  }

private:
  mutable std::mutex mu_;
  openai::ingress_counts counts_; // GUARDED_BY(mu_)
};

} // namespace kvactor
