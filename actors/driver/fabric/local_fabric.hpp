// Ranks the driver sends every step to itself: rank actors in this process, or remote rank
// handles CAF's middleman carries. Every rank gets the same shared message.
#pragma once

#include <vector>

#include "actors/driver/fabric/rank_fabric.hpp"

namespace kvactor {

class local_fabric final : public rank_fabric {
public:
  local_fabric(fabric_host& host, std::vector<rank_actor> ranks, step_deadlines deadlines);
  void send(const delivery_ptr& d) override;
  void resend(const delivery_ptr& d, int32_t rank) override;

private:
  std::vector<rank_actor> ranks_;
};

} // namespace kvactor
