// The driver gathers every rank's collective ledger when a collective failed.
#include <memory>

#include <caf/all.hpp>
#include <fmt/format.h>

#include "actors/driver/driver_parts.hpp"
#include "messages/caf_error.hpp"

namespace kvactor::driver_detail {

void gather_ledgers(driver_self self, std::chrono::milliseconds within,
                    std::function<void(std::vector<rank_ledger>)> then) {
  const auto& ranks = self->state.setup.ranks;
  struct gather {
    std::vector<rank_ledger> ledgers;
    size_t pending;
    std::function<void(std::vector<rank_ledger>)> then;
  };
  auto g = std::make_shared<gather>(gather{{}, ranks.size(), std::move(then)});
  g->ledgers.resize(ranks.size());
  auto one_done = [g] {
    if (--g->pending == 0) g->then(std::move(g->ledgers));
  };
  for (size_t i = 0; i < ranks.size(); ++i) {
    g->ledgers[i].rank = static_cast<int32_t>(i);
    self->request(ranks[i], within, atom::collectives_v)
        .then(
            [g, i, one_done](std::vector<collective_entry>& entries) {
              g->ledgers[i].answered = true;
              g->ledgers[i].entries = std::move(entries);
              one_done();
            },
            [g, i, one_done, within](caf::error& e) {
              g->ledgers[i].no_answer =
                  e == caf::sec::request_timeout ? fmt::format(
                      "no ledger within {} ms: stuck outside its collectives?", within.count())
                                                 : from_caf_error(e).message;
              one_done();
            });
  }
}

} // namespace kvactor::driver_detail
