// The driver's start-up: [NCCL ranks: a communicator id from rank 0, every rank joins it], every
// rank configures and plans, the minimum planned block count goes to every rank's allocate.
#include <algorithm>
#include <memory>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/driver/driver_parts.hpp"
#include "messages/caf_error.hpp"

namespace kvactor::driver_detail {

namespace {

// The start promise is answered once: by the last allocate, the first failure, or a rank's death.
template <class T>
void deliver_start(driver_self self, T&& x) {
  auto& st = self->state;
  if (st.phase != driver_phase::starting) return;
  st.phase = st.sched ? driver_phase::ready : driver_phase::created;
  st.owed.start.deliver(std::forward<T>(x));
}

// The ranks' KV cache groups and the block count they agreed on.
struct kv_pool {
  std::vector<kv_cache_group> groups;
  int64_t num_blocks = 0;
};

void allocate_all(driver_self self, std::shared_ptr<bool> failed, kv_pool kv) {
  auto& st = self->state;
  const auto n = st.setup.ranks.size();
  auto readies = std::make_shared<std::vector<rank_ready>>();
  for (const auto& r : st.setup.ranks)
    self->request(r, caf::infinite, atom::allocate_v, kv.num_blocks)
        .then(
            [self, readies, failed, n, kv](rank_ready& ready) mutable {
              if (self->state.setup.recorder)
                self->state.setup.recorder->record(rank_name(ready.rank), "driver", ready);
              readies->push_back(std::move(ready));
              if (*failed || readies->size() < n) return;
              auto& st = self->state;
              scheduler_config cfg;
              take<scheduler_limits>(cfg, st.setup.configs[0]);
              cfg.num_ubatches = st.setup.configs[0].num_ubatches;
              cfg.vocab_size = readies->front().vocab_size;
              cfg.enable_prefix_caching = st.setup.configs[0].enable_prefix_caching;
              if (auto ok = scheduler::validate(cfg, kv.groups, kv.num_blocks); !ok) {
                deliver_start(self, to_caf_error(ok.err()));
                return;
              }
              st.sched = std::make_unique<scheduler>(cfg, kv.groups, kv.num_blocks);
              std::sort(readies->begin(), readies->end(),
                        [](const auto& a, const auto& b) { return a.rank < b.rank; });
              deliver_start(self, std::move(*readies));
            },
            [self, failed](caf::error& e) mutable {
              if (!*failed) deliver_start(self, std::move(e));
              *failed = true;
            });
}

void configure_all(driver_self self, std::shared_ptr<bool> failed) {
  auto& st = self->state;
  auto plans = std::make_shared<std::vector<rank_plan>>();
  const auto n = st.setup.ranks.size();
  for (size_t i = 0; i < n; ++i) {
    const auto name = rank_name(static_cast<int64_t>(i));
    if (st.setup.recorder) st.setup.recorder->record("driver", name, st.setup.configs[i]);
    self->request(st.setup.ranks[i], caf::infinite, atom::configure_v, st.setup.configs[i])
        .then(
            [self, plans, failed, n, name](rank_plan& p) mutable {
              if (self->state.setup.recorder) self->state.setup.recorder->record(name, "driver", p);
              plans->push_back(std::move(p));
              if (*failed || plans->size() < n) return;
              // The minimum over ranks, so that the scheduler sees one pool; every rank checks
              // it against the minimum the ranks agree on among themselves.
              int64_t min_blocks = plans->front().kv.config.num_blocks;
              for (const auto& x : *plans)
                min_blocks = std::min(min_blocks, x.kv.config.num_blocks);
              spdlog::info("driver: {} rank(s) planned; common block count {}", n, min_blocks);
              allocate_all(self, failed, kv_pool{plans->front().kv.config.groups, min_blocks});
            },
            [self, failed](caf::error& e) mutable {
              if (!*failed) deliver_start(self, std::move(e));
              *failed = true;
            });
  }
}

// NCCL: rank 0 creates the communicator id, the driver hands it to every rank, and they join
// together (each bounded by its collective timeout); then configure.
void bootstrap_communicator(driver_self self, std::shared_ptr<bool> failed) {
  auto& st = self->state;
  const auto n = st.setup.ranks.size();
  self->request(st.setup.ranks[0], caf::infinite, atom::unique_id_v, static_cast<int32_t>(n),
                st.setup.epoch)
      .then(
          [self, failed, n](communicator_id& id) mutable {
            auto& st = self->state;
            auto joined = std::make_shared<size_t>(0);
            for (size_t i = 0; i < n; ++i) {
              if (st.setup.recorder)
                st.setup.recorder->record("driver", rank_name(static_cast<int64_t>(i)), id);
              self->request(st.setup.ranks[i], caf::infinite, atom::join_v, id,
                            static_cast<int32_t>(i))
                  .then(
                      [self, failed, joined, n](int32_t) mutable {
                        if (*failed || ++*joined < n) return;
                        spdlog::info("driver: {} rank(s) joined their communicator", n);
                        configure_all(self, failed);
                      },
                      [self, failed](caf::error& e) mutable {
                        if (!*failed) deliver_start(self, std::move(e));
                        *failed = true;
                      });
            }
          },
          [self, failed](caf::error& e) mutable {
            if (!*failed) deliver_start(self, std::move(e));
            *failed = true;
          });
}

} // namespace

caf::result<std::vector<rank_ready>> start_ranks(driver_self self) {
  auto& st = self->state;
  if (st.setup.ranks.empty() || st.setup.ranks.size() != st.setup.configs.size())
    return to_caf_error(make_error(errc::invalid_argument,
                                   fmt::format("ranks: {} handles for {} configs",
                                               st.setup.ranks.size(), st.setup.configs.size())));
  if (st.phase != driver_phase::created)
    return to_caf_error(
        make_error(errc::invalid_argument,
                   "start: the ranks are already started (or starting); a driver starts once"));
  st.owed.start = self->make_response_promise<std::vector<rank_ready>>();
  st.phase = driver_phase::starting;
  auto failed = std::make_shared<bool>(false);
  if (st.setup.bootstrap_communicator)
    bootstrap_communicator(self, failed);
  else
    configure_all(self, failed);
  return st.owed.start;
}

} // namespace kvactor::driver_detail
