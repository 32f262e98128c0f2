// --chaos: a wrapper around any fabric whose links lose, repeat and delay the messages between
// the driver and each rank, both ways, by a seeded schedule (chaos_link). The driver's re-sends
// (step_deadlines::retransmit) and the ranks' memory of answered steps carry a run through them.
#pragma once

#include <memory>
#include <vector>

#include "actors/driver/fabric/rank_fabric.hpp"

namespace kvactor {

class chaos_fabric final : public rank_fabric {
public:
  /// Link ids 2i (to rank i) and 2i + 1 (from rank i): a seed names each link's faults.
  chaos_fabric(fabric_host& host, std::unique_ptr<rank_fabric> inner, const chaos_spec& spec,
               step_deadlines deadlines);
  void send(const delivery_ptr& d) override;
  void resend(const delivery_ptr& d, int32_t rank) override;
  link_counts faults() const override;

private:
  class linked_delivery;
  template <class Deliver>
  void through_link(chaos_link& link, Deliver deliver);

  std::unique_ptr<rank_fabric> inner_;
  std::vector<chaos_link> to_rank_, from_rank_; // [ranks]
};

} // namespace kvactor
