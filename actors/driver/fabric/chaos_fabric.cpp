#include "actors/driver/fabric/chaos_fabric.hpp"

namespace kvactor {

// The inner fabric's answers for one rank, through the link from that rank.
class chaos_fabric::linked_delivery final : public step_delivery {
public:
  linked_delivery(chaos_fabric& fabric, delivery_ptr outer)
      : step_delivery(*outer, 0), fabric_(fabric), outer_(std::move(outer)) {}
  void on_done(int32_t rank, step_done done) override {
    fabric_.through_link(fabric_.from_rank_[static_cast<size_t>(rank)],
                         [d = outer_, rank, done = std::move(done)]() mutable {
                           d->on_done(rank, std::move(done));
                         });
  }
  void on_failure(int32_t rank, error err, std::vector<uint64_t> ids) override {
    fabric_.through_link(fabric_.from_rank_[static_cast<size_t>(rank)],
                         [d = outer_, rank, err = std::move(err), ids = std::move(ids)] {
                           d->on_failure(rank, err, ids);
                         });
  }
  bool settled() const override { return outer_->settled(); }
  std::vector<int32_t> silent() const override { return outer_->silent(); }
  void on_deadline() override { outer_->on_deadline(); }

private:
  chaos_fabric& fabric_;
  delivery_ptr outer_;
};

chaos_fabric::chaos_fabric(fabric_host& host, std::unique_ptr<rank_fabric> inner,
                           const chaos_spec& spec, step_deadlines deadlines)
    : rank_fabric(host, inner->num_ranks(), deadlines), inner_(std::move(inner)) {
  for (size_t i = 0; i < num_ranks(); ++i) {
    to_rank_.emplace_back(spec, 2 * i);
    from_rank_.emplace_back(spec, 2 * i + 1);
  }
}

// What the link does to one message: `deliver` runs now, twice, later or never.
template <class Deliver>
void chaos_fabric::through_link(chaos_link& link, Deliver deliver) {
  const auto d = link.next();
  switch (d.fault) {
  case link_fault::deliver: deliver(); return;
  case link_fault::drop: return;
  case link_fault::duplicate:
    host_.after(d.delay, deliver); // the later copy first: `deliver` may move what it holds
    deliver();
    return;
  case link_fault::delay: host_.after(d.delay, std::move(deliver)); return;
  }
}

void chaos_fabric::send(const delivery_ptr& d) {
  for (size_t i = 0; i < num_ranks(); ++i)
    resend(d, static_cast<int32_t>(i));
}

void chaos_fabric::resend(const delivery_ptr& d, int32_t rank) {
  auto linked = std::make_shared<linked_delivery>(*this, d);
  through_link(to_rank_[static_cast<size_t>(rank)],
               [this, linked, rank] { inner_->resend(linked, rank); });
}

link_counts chaos_fabric::faults() const {
  link_counts sum;
  for (const auto* links : {&to_rank_, &from_rank_})
    for (const auto& l : *links) {
      sum.messages += l.counts().messages;
      sum.dropped += l.counts().dropped;
      sum.duplicated += l.counts().duplicated;
      sum.delayed += l.counts().delayed;
    }
  return sum;
}

} // namespace kvactor
