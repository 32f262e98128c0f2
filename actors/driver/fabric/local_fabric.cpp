#include "actors/driver/fabric/local_fabric.hpp"

#include "messages/caf_error.hpp"

namespace kvactor {

local_fabric::local_fabric(fabric_host& host, std::vector<rank_actor> ranks,
                           step_deadlines deadlines)
    : rank_fabric(host, ranks.size(), deadlines), ranks_(std::move(ranks)) {}

void local_fabric::send(const delivery_ptr& d) {
  for (size_t i = 0; i < ranks_.size(); ++i)
    resend(d, static_cast<int32_t>(i));
}

void local_fabric::resend(const delivery_ptr& d, int32_t rank) {
  host_.request_step(
      ranks_[static_cast<size_t>(rank)], d->message(),
      [d, rank](step_done& done) { d->on_done(rank, std::move(done)); },
      [d, rank](caf::error& e) { d->on_failure(rank, from_caf_error(e), request_ids_of(e)); });
}

} // namespace kvactor
