#include "actors/driver/fabric/node_fabric.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/step_timeline.hpp"
#include "messages/caf_error.hpp"
#include "messages/codec.hpp"

namespace kvactor {

node_fabric::node_fabric(fabric_host& host, size_t num_ranks, std::vector<node_route> routes,
                         step_deadlines deadlines)
    : rank_fabric(host, num_ranks, deadlines), routes_(std::move(routes)) {}

node_step node_fabric::step_for(std::vector<char> plan, std::vector<int32_t> slots) const {
  return node_step{std::move(plan), std::move(slots), deadlines().relay_answer_within().count()};
}

void node_fabric::send(const delivery_ptr& d) {
  const auto plan = encode(d->plan()); // once for every node
  for (size_t n = 0; n < routes_.size(); ++n)
    send_to_node(d, n, step_for(plan, routes_[n].slots));
}

// One rank alone: a step to its node naming its slot only.
void node_fabric::resend(const delivery_ptr& d, int32_t rank) {
  for (size_t n = 0; n < routes_.size(); ++n) {
    const auto& ranks = routes_[n].ranks;
    const auto at = std::find(ranks.begin(), ranks.end(), rank);
    if (at == ranks.end()) continue;
    const auto slot = routes_[n].slots[static_cast<size_t>(at - ranks.begin())];
    request_node_step(d, n, step_for(encode(d->plan()), {slot}));
    return;
  }
}

void node_fabric::send_to_node(const delivery_ptr& d, size_t route, node_step step) {
  request_node_step(d, route, std::move(step));
}

void node_fabric::request_node_step(const delivery_ptr& d, size_t route, node_step step) {
  host_.request_node_step(
      routes_[route].node, std::move(step),
      [this, d, route](node_step_done& reply) { on_node_done(d, route, std::move(reply)); },
      [this, d, route](caf::error& e) {
        // The node itself failed (it stopped, or refused the step): each of its ranks did.
        for (auto r : routes_[route].ranks)
          d->on_failure(r, from_caf_error(e), request_ids_of(e));
      });
}

void node_fabric::on_node_done(const delivery_ptr& d, size_t route, node_step_done reply) {
  const auto& ranks = routes_[route].ranks;
  auto hosted = [&](int32_t r) { return std::find(ranks.begin(), ranks.end(), r) != ranks.end(); };
  for (auto& done : reply.done)
    if (hosted(done.rank)) d->on_done(done.rank, std::move(done));
  for (auto& r : reply.rejected)
    if (hosted(r.rank)) d->on_failure(r.rank, std::move(r.reason), std::move(r.request_ids));
  // The node waited its relay deadline for the silent ones: the driver's deadline has come too.
  if (!reply.silent.empty() && !d->settled()) d->on_deadline();
}

channel_fabric::channel_fabric(fabric_host& host, size_t num_ranks, std::vector<node_route> routes,
                               step_deadlines deadlines, std::shared_ptr<node_step_channel> channel)
    : node_fabric(host, num_ranks, std::move(routes), deadlines), channel_(std::move(channel)) {}

void channel_fabric::send(const delivery_ptr& d) {
  current_ = d;
  on_channel_.assign(routes_.size(), false);
  node_fabric::send(d);
}

void channel_fabric::send_to_node(const delivery_ptr& d, size_t route, node_step step) {
  if (channel_->open(route)) {
    if (auto sent = channel_->send(route, d->plan().seq, step); sent) {
      on_channel_[route] = true;
      return;
    } else {
      spdlog::warn("driver: route {}: step channel: {}; steps go through the middleman", route,
                   sent.err().message);
    }
  }
  request_node_step(d, route, std::move(step));
}

// What node `route`'s step channel says about the step last sent. A lost channel's step goes
// again through the middleman, which answers it or reports the node's loss as before.
void channel_fabric::on_channel_event(node_channel_event& e) {
  step_timeline::mark(e.seq, e.route, step_point::driver_answer);
  const auto n = static_cast<size_t>(e.route);
  if (e.kind == channel_event_kind::lost)
    spdlog::warn("driver: route {}: step channel closed ({}); steps go through the middleman", n,
                 e.why.message);
  if (!current_ || n >= on_channel_.size() || !on_channel_[n]) return;
  if (current_->settled()) {
    keep_late_failures(n, e);
    return;
  }
  if (e.kind != channel_event_kind::lost && e.seq != current_->plan().seq) return; // given up
  on_channel_[n] = false;
  switch (e.kind) {
  case channel_event_kind::answer: on_node_done(current_, n, std::move(e.answer)); return;
  case channel_event_kind::refusal:
    for (auto r : routes_[n].ranks)
      current_->on_failure(r, e.why, {});
    return;
  case channel_event_kind::lost:
    request_node_step(current_, n, step_for(encode(current_->plan()), routes_[n].slots));
    return;
  }
}

// An answer to a settled step: a step whose collective failed is being diagnosed, and its ranks'
// late errors join those the diagnosis quotes (the timed-out rank's may be among them).
void channel_fabric::keep_late_failures(size_t route, node_channel_event& e) {
  if (e.kind != channel_event_kind::answer || e.seq != current_->plan().seq) return;
  on_channel_[route] = false;
  on_node_done(current_, route, std::move(e.answer));
}

} // namespace kvactor
