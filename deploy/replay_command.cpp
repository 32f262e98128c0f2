#include "deploy/replay_command.hpp"

#include <fstream>
#include <map>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include "actors/rank/actor.hpp"
#include "actors/runtime_config.hpp"
#include "deploy/cli.hpp"
#include "messages/caf_error.hpp"
#include "messages/register.hpp"
#include "messages/trace.hpp"

namespace kvactor {

namespace {

// "rank[3]" -> 3; -1 for anything else.
int rank_index(const std::string& name) {
  if (name.rfind("rank[", 0) != 0 || name.back() != ']') return -1;
  try {
    return std::stoi(name.substr(5, name.size() - 6));
  } catch (const std::exception&) {
    return -1;
  }
}

// One recorded step for one rank: the plan and the reply that followed it (none: rejected).
struct recorded_step {
  uint64_t record = 0;
  step_plan plan;
  std::optional<step_done> done;
};

std::string compare(const step_done& want, const step_done& got) {
  if (want.seq != got.seq)
    return fmt::format("step_done.seq: recorded {}, replayed {}", want.seq, got.seq);
  if (want.sampled.size() != got.sampled.size())
    return fmt::format("step_done.sampled: recorded {} tokens, replayed {}", want.sampled.size(),
                       got.sampled.size());
  for (size_t i = 0; i < want.sampled.size(); ++i) {
    if (want.sampled[i].request_id != got.sampled[i].request_id)
      return fmt::format("step_done.sampled[{}].request_id: recorded {}, replayed {}", i,
                         want.sampled[i].request_id, got.sampled[i].request_id);
    if (want.sampled[i].token != got.sampled[i].token)
      return fmt::format("step_done.sampled[{}].token (request {}): recorded {}, replayed {}", i,
                         want.sampled[i].request_id, want.sampled[i].token, got.sampled[i].token);
  }
  if (want.executed.mode != got.executed.mode)
    return fmt::format("step_done.executed.mode: recorded {}, replayed {}",
                       to_string(want.executed.mode), to_string(got.executed.mode));
  return {};
}

} // namespace

int run_replay(const replay_flags& flags, std::ostream& out, std::ostream& err) {
  auto bad = [&](const std::string& message) {
    fmt::print(err, "kvactor replay: error: {}\n", message);
    return exit_bad_input;
  };
  std::ifstream in(flags.file, std::ios::binary);
  if (!in) return bad(fmt::format("{}: cannot open the file", flags.file));
  auto records = trace_reader(in).read_all();
  if (!records) return bad(fmt::format("{}: {}", flags.file, records.err().message));
  // Start-up messages and, per rank, the steps in recording order.
  std::map<int, rank_config> configs;
  std::map<int, int64_t> blocks;
  std::map<int, std::vector<recorded_step>> steps;
  for (const auto& r : *records) {
    const int to = rank_index(r.receiver);
    const int from = rank_index(r.sender);
    if (r.type == "kvactor::rank_config" && to >= 0) {
      auto c = decode_record<rank_config>(r);
      if (!c) return bad(c.err().message);
      configs[to] = *c;
    } else if (r.type == "kvactor::rank_ready" && from >= 0) {
      auto x = decode_record<rank_ready>(r);
      if (!x) return bad(x.err().message);
      blocks[from] = x->num_blocks;
    } else if (r.type == "kvactor::step_plan" && to >= 0) {
      auto p = decode_record<step_plan>(r);
      if (!p) return bad(p.err().message);
      steps[to].push_back({r.index, std::move(*p), std::nullopt});
    } else if (r.type == "kvactor::step_done" && from >= 0 && r.receiver == "driver") {
      auto d = decode_record<step_done>(r);
      if (!d) return bad(d.err().message);
      auto& list = steps[from];
      if (list.empty() || list.back().plan.seq != d->seq || list.back().done)
        return bad(fmt::format("trace record {}: a step_done for seq {} without its step_plan",
                               r.index, d->seq));
      list.back().done = std::move(*d);
    }
  }
  if (configs.empty())
    return bad(fmt::format("{}: no rank_config records: not a run trace", flags.file));
  const auto world = static_cast<int>(configs.size());
  for (int r = 0; r < world; ++r) {
    if (configs.count(r) == 0 || blocks.count(r) == 0)
      return bad(fmt::format("{}: rank {} has no recorded start-up (rank_config / rank_ready)",
                             flags.file, r));
    if (steps[r].size() != steps[0].size())
      return bad(fmt::format("{}: rank {} received {} step plans, rank 0 {}", flags.file, r,
                             steps[r].size(), steps[0].size()));
  }

  caf::actor_system_config cfg;
  register_types(cfg);
  configure_step_latency(cfg);
  caf::actor_system sys{cfg};
  std::vector<rank_actor> ranks;
  auto comm = world > 1 ? std::make_shared<kernels::host_communicator>(world) : nullptr;
  for (int r = 0; r < world; ++r)
    ranks.push_back(world > 1 ? sys.spawn<caf::detached>(rank_with, rank_runtime{comm, nullptr})
                              : sys.spawn(rank_with, rank_runtime{}));
  caf::scoped_actor self{sys};
  auto shutdown = [&] {
    for (auto& h : ranks)
      self->send_exit(h, caf::exit_reason::user_shutdown);
  };
  // Start-up, as the driver did it.
  std::string failure;
  for (int r = 0; r < world && failure.empty(); ++r)
    self->request(ranks[static_cast<size_t>(r)], caf::infinite, atom::configure_v, configs[r])
        .receive([](rank_plan&) {}, [&](caf::error& e) { failure = from_caf_error(e).message; });
  for (int r = 0; r < world && failure.empty(); ++r)
    self->request(ranks[static_cast<size_t>(r)], caf::infinite, atom::allocate_v, blocks[r])
        .receive([](rank_ready&) {}, [&](caf::error& e) { failure = from_caf_error(e).message; });
  if (!failure.empty()) {
    shutdown();
    return bad(fmt::format("start-up: {}", failure));
  }
  size_t replayed = 0;
  for (size_t i = 0; i < steps[0].size(); ++i) {
    const auto seq = steps[0][i].plan.seq;
    if (flags.until_step && seq > *flags.until_step) break;
    // Every rank gets its plan before any reply is awaited: TP ranks meet in the all-reduce.
    std::vector<std::optional<step_done>> got(static_cast<size_t>(world));
    std::vector<std::string> errors(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r)
      self->send(ranks[static_cast<size_t>(r)], steps[r][i].plan);
    for (int n = 0; n < world; ++n)
      self->receive([&](step_done& d) { got[static_cast<size_t>(d.rank)] = std::move(d); },
                    [&](caf::error& e) { errors[0] = from_caf_error(e).message; });
    ++replayed;
    if (!flags.verify) continue;
    for (int r = 0; r < world; ++r) {
      const auto& want = steps[r][i].done;
      const auto& have = got[static_cast<size_t>(r)];
      std::string diff;
      if (want && !have)
        diff = fmt::format("recorded a step_done, replay was rejected: {}",
                           errors[0].empty() ? "no reply" : errors[0]);
      else if (!want && have)
        diff = "recorded a rejection, replay answered step_done";
      else if (want && have)
        diff = compare(*want, *have);
      if (!diff.empty()) {
        fmt::print(out, "divergence at step {} (trace record {}), rank[{}], step_done: {}\n", seq,
                   steps[r][i].record, r, diff);
        shutdown();
        return exit_failure;
      }
    }
  }
  shutdown();
  fmt::print(out, "replayed {} step(s) on {} rank(s){}\n", replayed, world,
             flags.verify ? ": every reply matches the recording" : "");
  return exit_ok;
}

} // namespace kvactor
