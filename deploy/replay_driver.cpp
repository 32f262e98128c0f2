#include "deploy/replay_driver.hpp"

#include <mutex>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "actors/driver/actor.hpp"
#include "actors/runtime_config.hpp"
#include "deploy/cli.hpp"
#include "deploy/message_diff.hpp"
#include "messages/caf_error.hpp"
#include "messages/register.hpp"

namespace kvactor {

namespace {

// The first divergence any stub saw (stubs run on the actor system's threads).
class divergence_log {
public:
  void report(std::string what) {
    std::lock_guard<std::mutex> guard(mu_);
    if (first_.empty()) first_ = std::move(what);
  }
  std::string first() const {
    std::lock_guard<std::mutex> guard(mu_);
    return first_;
  }
  bool any() const { return !first().empty(); }

private:
  mutable std::mutex mu_;
  std::string first_;
};

struct stub_setup {
  const recorded_rank* rank = nullptr;
  int index = 0;
  std::shared_ptr<divergence_log> log;
};

struct stub_state {
  stub_setup setup;
  size_t next_step = 0;
  static inline const char* name = "kvactor.replay_stub_rank";
  stub_state() = default;
};

caf::error diverged_error(const std::string& what) {
  return to_caf_error(make_error(errc::invalid_argument, "replay diverged: " + what));
}

rank_actor::behavior_type stub_rank(rank_actor::stateful_pointer<stub_state> self,
                                    stub_setup setup) {
  self->state.setup = std::move(setup);
  return {
      [self](atom::configure, const rank_config& cfg) -> caf::result<rank_plan> {
        const auto& s = self->state.setup;
        if (auto d = diff_messages(s.rank->config, cfg); !d.empty()) {
          auto what = fmt::format("start-up, driver -> rank[{}]: {}", s.index, d);
          s.log->report(what);
          return diverged_error(what);
        }
        return s.rank->plan;
      },
      [self](atom::allocate, int64_t num_blocks) -> caf::result<rank_ready> {
        const auto& s = self->state.setup;
        if (num_blocks != s.rank->ready.num_blocks) {
          auto what = fmt::format("start-up, driver -> rank[{}]: allocate: recorded {} blocks, "
                                  "replayed {}",
                                  s.index, s.rank->ready.num_blocks, num_blocks);
          s.log->report(what);
          return diverged_error(what);
        }
        return s.rank->ready;
      },
      [self](const step_plan& plan) -> caf::result<step_done> {
        auto& st = self->state;
        const auto& s = st.setup;
        if (st.next_step >= s.rank->steps.size()) {
          auto what = fmt::format("step {}, driver -> rank[{}]: a step_plan the recording does "
                                  "not have (it ends after {} steps)",
                                  plan.seq, s.index, s.rank->steps.size());
          s.log->report(what);
          return diverged_error(what);
        }
        const auto& want = s.rank->steps[st.next_step++];
        if (auto d = diff_messages(want.plan, plan); !d.empty()) {
          auto what = fmt::format("step {} (trace record {}), driver -> rank[{}]: {}",
                                  want.plan.seq, want.record, s.index, d);
          s.log->report(what);
          return diverged_error(what);
        }
        if (want.done) return *want.done;
        if (want.rejected) return to_caf_error(want.rejected->reason, want.rejected->request_ids);
        auto what = fmt::format("step {} (trace record {}): the recording has no reply from "
                                "rank[{}]",
                                want.plan.seq, want.record, s.index);
        s.log->report(what);
        return diverged_error(what);
      },
      [](atom::ledger) -> std::vector<memory_entry> { return {}; },
      [](atom::unique_id, int32_t, uint64_t) -> caf::result<communicator_id> {
        return diverged_error("the driver asked a stub rank for an NCCL id: replay runs no NCCL");
      },
      [](atom::join, const communicator_id&, int32_t) -> caf::result<int32_t> {
        return diverged_error("the driver asked a stub rank to join NCCL: replay runs no NCCL");
      },
      [](atom::collectives) -> std::vector<collective_entry> { return {}; },
  };
}

// An error line on `err` (and {"error": ...} on `out` with --json); `code` returned.
int report_error(const replay_flags& flags, const std::string& message, int code, std::ostream& out,
                 std::ostream& err) {
  fmt::print(err, "kvactor replay: error: {}\n", message);
  if (flags.json) out << nlohmann::json{{"error", message}}.dump() << '\n';
  return code;
}

} // namespace

int replay_driver(const replay_flags& flags, const recorded_run& run, std::ostream& out,
                  std::ostream& err) {
  if (!run.summary)
    return report_error(
        flags, fmt::format("{}: no run_summary: the recorded run did not finish", flags.file),
        exit_bad_input, out, err);
  caf::actor_system_config cfg;
  register_types(cfg);
  configure_step_latency(cfg);
  caf::actor_system sys{cfg};
  auto log = std::make_shared<divergence_log>();
  std::vector<rank_actor> ranks;
  std::vector<rank_config> configs;
  for (size_t i = 0; i < run.ranks.size(); ++i) {
    ranks.push_back(sys.spawn(stub_rank, stub_setup{&run.ranks[i], static_cast<int>(i), log}));
    configs.push_back(run.ranks[i].config);
  }
  auto drv = sys.spawn(driver, driver_setup{ranks, configs, 1, {}, nullptr});
  caf::scoped_actor self{sys};
  std::string failure;
  run_summary summary;
  auto on_error = [&](caf::error& e) { failure = from_caf_error(e).message; };
  self->request(drv, caf::infinite, atom::start_v)
      .receive([](std::vector<rank_ready>&) {}, on_error);
  if (failure.empty())
    self->request(drv, caf::infinite, atom::submit_v, run.requests)
        .receive([](int64_t) {}, on_error);
  if (failure.empty())
    self->request(drv, caf::infinite, atom::run_v)
        .receive([&](run_summary& s) { summary = std::move(s); }, on_error);
  self->send_exit(drv, caf::exit_reason::user_shutdown);
  for (auto& r : ranks)
    self->send_exit(r, caf::exit_reason::user_shutdown);
  const bool timed = std::any_of(run.requests.begin(), run.requests.end(),
                                 [](const request_spec& r) { return r.arrival_ns > 0; });
  const auto note = timed ? " (note: requests arrived over time in this run, so the driver's "
                            "schedule also depends on timing)"
                          : "";
  if (flags.verify) {
    std::string what = log->first();
    if (what.empty() && !failure.empty()) what = "the driver failed: " + failure;
    if (what.empty())
      if (auto d = diff_messages(*run.summary, summary); !d.empty())
        what = "end of run, driver -> client: " + d;
    if (!what.empty()) {
      if (flags.json)
        out << nlohmann::json{{"schema", "kvactor.replay/1"},
                              {"actor", "driver"},
                              {"verified", false},
                              {"divergence", {{"what", what + note}}}}
                   .dump()
            << '\n';
      else
        fmt::print(out, "divergence at {}{}\n", what, note);
      return exit_failure;
    }
  } else if (!failure.empty()) {
    return report_error(flags, failure, exit_failure, out, err);
  }
  size_t steps = 0;
  for (const auto& r : run.ranks)
    steps += r.steps.size();
  if (flags.json) {
    out << nlohmann::json{{"schema", "kvactor.replay/1"},
                          {"actor", "driver"},
                          {"stubbed_ranks", run.ranks.size()},
                          {"step_plans", steps},
                          {"digest", summary.output_digest},
                          {"verified", flags.verify},
                          {"divergence", nullptr}}
               .dump()
        << '\n';
    return exit_ok;
  }
  fmt::print(out, "replayed the driver against {} stubbed rank(s): {} step plan(s){}, digest {}\n",
             run.ranks.size(), steps,
             flags.verify ? " and the run summary match the recording" : "", summary.output_digest);
  return exit_ok;
}

} // namespace kvactor
