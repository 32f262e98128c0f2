#include "tests/support/mock_rank.hpp"

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "messages/caf_error.hpp"

namespace kvactor::test {

namespace {

using mock_ptr = rank_actor::pointer;

caf::error unexpected(mock_rank_log& log, const std::string& what) {
  ++log.unexpected;
  ADD_FAILURE() << "mock rank: unexpected " << what;
  return to_caf_error(make_error(errc::unsupported, "mock rank: unexpected " + what));
}

rank_actor::behavior_type mock_rank(mock_ptr self, std::shared_ptr<mock_rank_script> script,
                                    std::shared_ptr<mock_rank_log> log) {
  self->set_default_handler(
      [log](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
        return unexpected(*log, "message " + to_string(x.content()));
      });
  return {
      [self, script, log](atom::configure, const rank_config& cfg) -> caf::result<rank_plan> {
        log->configures.push_back(cfg);
        if (script->die_on_configure) {
          auto promise = self->make_response_promise<rank_plan>();
          self->quit(script->die_on_configure);
          return promise;
        }
        if (!script->on_configure) return unexpected(*log, "configure");
        return script->on_configure(cfg);
      },
      [script, log](atom::allocate, int64_t n) -> caf::result<rank_ready> {
        log->allocates.push_back(n);
        if (!script->on_allocate) return unexpected(*log, "allocate");
        return script->on_allocate(n);
      },
      [self, script, log](const step_plan& plan) -> caf::result<step_done> {
        log->steps.push_back(plan);
        if (!script->on_step) return unexpected(*log, "step_plan");
        auto out = script->on_step(plan);
        switch (out.what) {
        case step_outcome::kind::reply: return std::move(out.done);
        case step_outcome::kind::reject: return std::move(out.err);
        case step_outcome::kind::die: break;
        case step_outcome::kind::ignore: return self->make_response_promise<step_done>();
        }
        // Quit without replying: the request stays unanswered, as with a crashed rank.
        auto promise = self->make_response_promise<step_done>();
        self->quit(std::move(out.exit));
        return promise;
      },
      [log](atom::ledger) -> caf::result<std::vector<memory_entry>> {
        return unexpected(*log, "ledger");
      },
      [log](atom::unique_id, int32_t, uint64_t) -> caf::result<communicator_id> {
        return unexpected(*log, "unique_id");
      },
      [log](atom::join, const communicator_id&, int32_t) -> caf::result<int32_t> {
        return unexpected(*log, "join");
      },
      [script, log](atom::collectives) -> caf::result<std::vector<collective_entry>> {
        if (!script->on_collectives) return unexpected(*log, "collectives");
        ++log->collectives;
        return script->on_collectives();
      },
  };
}

} // namespace

mock_rank_handle spawn_mock_rank(caf::actor_system& sys, mock_rank_script script) {
  auto log = std::make_shared<mock_rank_log>();
  auto actor = sys.spawn(mock_rank, std::make_shared<mock_rank_script>(std::move(script)), log);
  return {std::move(actor), std::move(log)};
}

kv_cache_group mock_group() {
  return {{"model.layers.0.self_attn.attn"}, full_attention_spec(16, 2, 32, dtype::bfloat16)};
}

rank_plan mock_plan(int32_t rank, int64_t num_blocks) {
  rank_plan p;
  p.rank = rank;
  p.kv.config.num_blocks = num_blocks;
  p.kv.config.groups = {mock_group()};
  p.backends.kernel_block_sizes = {16};
  p.phases = {{"mock configure", 0, 0}};
  return p;
}

int32_t mock_token(uint64_t request_id, uint64_t seq) {
  return static_cast<int32_t>((request_id * 31 + seq * 7) % 512);
}

step_done mock_done(const step_plan& plan, int32_t rank) {
  step_done d;
  d.seq = plan.seq;
  d.epoch = plan.epoch;
  d.rank = rank;
  for (const auto& s : plan.scheduled)
    if (s.sample) d.sampled.push_back({s.request_id, mock_token(s.request_id, plan.seq)});
  return d;
}

mock_rank_script canned_rank(int32_t rank, int64_t planned_blocks) {
  mock_rank_script s;
  s.on_configure = [rank, planned_blocks](const rank_config&) {
    return mock_plan(rank, planned_blocks);
  };
  s.on_allocate = [rank](int64_t n) {
    rank_ready r;
    r.rank = rank;
    r.num_blocks = n;
    return r;
  };
  s.on_step = [rank](const step_plan& plan) { return step_outcome::reply(mock_done(plan, rank)); };
  return s;
}

} // namespace kvactor::test
