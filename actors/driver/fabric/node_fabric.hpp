// Ranks behind node processes (cluster mode): a step goes once to each node, as the plan's bytes
// encoded once, and the node relays it to the ranks it hosts and answers for all of them
// (node_step_done). node_fabric sends through CAF's middleman; channel_fabric sends on each
// node's step channel while it is open and falls back to the middleman when it is not.
#pragma once

#include <memory>
#include <vector>

#include "actors/driver/fabric/rank_fabric.hpp"
#include "actors/driver/node_channel.hpp"

namespace kvactor {

/// One node and the ranks it hosts for this run.
struct node_route {
  node_actor node;
  std::vector<int32_t> ranks; // rank indices
  std::vector<int32_t> slots; // [ranks]: the node's slot of each
};

class node_fabric : public rank_fabric {
public:
  node_fabric(fabric_host& host, size_t num_ranks, std::vector<node_route> routes,
              step_deadlines deadlines);
  void send(const delivery_ptr& d) override;
  void resend(const delivery_ptr& d, int32_t rank) override;

protected:
  /// Node `route`'s step, for all the ranks it hosts (slots: theirs).
  virtual void send_to_node(const delivery_ptr& d, size_t route, node_step step);
  /// Through the middleman: the node's one answer comes back for all of its ranks.
  void request_node_step(const delivery_ptr& d, size_t route, node_step step);
  /// A node's answer, entered rank by rank as if each had answered itself. Answers for ranks the
  /// node does not host for this run are ignored (they stay silent).
  void on_node_done(const delivery_ptr& d, size_t route, node_step_done reply);
  node_step step_for(std::vector<char> plan, std::vector<int32_t> slots) const;

  std::vector<node_route> routes_;
};

class channel_fabric final : public node_fabric {
public:
  channel_fabric(fabric_host& host, size_t num_ranks, std::vector<node_route> routes,
                 step_deadlines deadlines, std::shared_ptr<node_step_channel> channel);
  void send(const delivery_ptr& d) override;
  void on_channel_event(node_channel_event& e) override;

private:
  void send_to_node(const delivery_ptr& d, size_t route, node_step step) override;
  void keep_late_failures(size_t route, node_channel_event& e);

  std::shared_ptr<node_step_channel> channel_;
  delivery_ptr current_;         // the step last sent
  std::vector<bool> on_channel_; // [routes]: sent on the route's channel, not yet answered
};

} // namespace kvactor
