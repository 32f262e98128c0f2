#include "deploy/replay_command.hpp"
#include "actors/spawn_plain.hpp"

#include <algorithm>
#include <fstream>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "actors/cudagraph/actor.hpp"
#include "actors/rank/actor.hpp"
#include "actors/rank/group.hpp"
#include "actors/runtime_config.hpp"
#include "deploy/cli.hpp"
#include "deploy/message_diff.hpp"
#include "deploy/recorded_run.hpp"
#include "deploy/replay_driver.hpp"
#include "messages/caf_error.hpp"
#include "messages/register.hpp"

namespace kvactor {

namespace {

std::string short_type(const std::string& type) {
  return type.substr(type.rfind(':') + 1);
}

// A rank's exchanges with its children, in a canonical order: builders of one step run in
// parallel, so their replies may be recorded in either order.
std::vector<trace_record> canonical(std::vector<trace_record> xs) {
  std::stable_sort(xs.begin(), xs.end(), [](const trace_record& a, const trace_record& b) {
    return std::tie(a.sender, a.receiver, a.type) < std::tie(b.sender, b.receiver, b.type);
  });
  return xs;
}

// First difference between the recorded and the replayed inner messages of one rank's step:
// "actor: field: ..." or empty.
std::string diff_inner(const std::vector<trace_record>& want,
                       const std::vector<trace_record>& got) {
  auto a = canonical(want), b = canonical(got);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i >= a.size())
      return fmt::format("{}: replay sent an extra {} to {}", b[i].sender, short_type(b[i].type),
                         b[i].receiver);
    if (i >= b.size())
      return fmt::format("{}: recorded {} to {}, replay sent nothing", a[i].sender,
                         short_type(a[i].type), a[i].receiver);
    if (a[i].sender != b[i].sender || a[i].receiver != b[i].receiver || a[i].type != b[i].type)
      return fmt::format("{}: recorded {} to {}, replay sent {} to {}", a[i].sender,
                         short_type(a[i].type), a[i].receiver, short_type(b[i].type),
                         b[i].receiver);
    if (auto d = diff_envelopes(a[i].payload, b[i].payload); !d.empty())
      return fmt::format("{}: {}", a[i].sender, d);
  }
  return {};
}

struct replay_context {
  const replay_flags& flags;
  std::ostream& out;
  std::ostream& err;
  int bad(const std::string& message) const {
    fmt::print(err, "kvactor replay: error: {}\n", message);
    if (flags.json) out << nlohmann::json{{"error", message}}.dump() << '\n';
    return exit_bad_input;
  }
  int diverged(uint64_t seq, uint64_t record, const std::string& what) const {
    if (flags.json)
      out << nlohmann::json{{"schema", "kvactor.replay/1"},
                            {"verified", false},
                            {"divergence", {{"step", seq}, {"record", record}, {"what", what}}}}
                 .dump()
          << '\n';
    else
      fmt::print(out, "divergence at step {} (trace record {}), {}\n", seq, record, what);
    return exit_failure;
  }
  // The end of a replay that did not diverge: what was replayed, and whether it was compared.
  int done(nlohmann::json what, const std::string& line) const {
    if (!flags.json) {
      fmt::print(out, "{}\n", line);
      return exit_ok;
    }
    what["schema"] = "kvactor.replay/1";
    what["verified"] = flags.verify;
    what["divergence"] = nullptr;
    out << what.dump() << '\n';
    return exit_ok;
  }
};

// The ranks a replay rebuilds, `which` of the recording (all of them, or one of a single-rank
// trace), with what they say to their children observed.
struct replayed_ranks {
  const replay_context& cx;
  const recorded_run& run;
  std::vector<int> which;
  std::shared_ptr<trace_recorder> observed;
  std::vector<rank_actor> ranks;
  caf::scoped_actor& self;

  int world() const { return static_cast<int>(which.size()); }
  const recorded_rank& rec(int i) const {
    return run.ranks[static_cast<size_t>(which[static_cast<size_t>(i)])];
  }
  // Index of a rank in `which`; a rank outside it counts as the last.
  size_t index_of(int32_t rank) const {
    const auto i = std::find(which.begin(), which.end(), rank) - which.begin();
    return static_cast<size_t>(std::min<std::ptrdiff_t>(i, world() - 1));
  }
};

// Every replayed rank must have received as many step plans as the first.
std::optional<int> check_step_counts(const replay_context& cx, const recorded_run& run,
                                     const std::vector<int>& which) {
  const auto& first = run.ranks[static_cast<size_t>(which[0])];
  for (int r : which)
    if (run.ranks[static_cast<size_t>(r)].steps.size() != first.steps.size())
      return cx.bad(fmt::format("rank {} received {} step plans, rank {} {}", r,
                                run.ranks[static_cast<size_t>(r)].steps.size(), which[0],
                                first.steps.size()));
  return std::nullopt;
}

// A start-up reply of rank index i: its failure, or (with --verify) its difference.
std::optional<int> startup_outcome(const replayed_ranks& g, int i, const std::string& failure,
                                   const std::string& diff) {
  const int r = g.which[static_cast<size_t>(i)];
  if (!failure.empty()) return g.cx.bad(fmt::format("start-up of rank {}: {}", r, failure));
  if (g.cx.flags.verify && !diff.empty())
    return g.cx.diverged(0, 0, fmt::format("start-up, rank[{}]: {}", r, diff));
  return std::nullopt;
}

// Start-up, as the driver did it: configure every rank, then allocate every rank.
std::optional<int> replay_startup(replayed_ranks& g) {
  for (int i = 0; i < g.world(); ++i) {
    std::string failure, diff;
    g.self
        ->request(g.ranks[static_cast<size_t>(i)], caf::infinite, atom::configure_v,
                  g.rec(i).config)
        .receive([&](rank_plan& p) { diff = diff_messages(g.rec(i).plan, p); },
                 [&](caf::error& e) { failure = from_caf_error(e).message; });
    if (auto code = startup_outcome(g, i, failure, diff)) return code;
  }
  // Every rank gets its allocate before any reply is awaited: TP ranks agree on the block count
  // in a collective.
  for (int i = 0; i < g.world(); ++i)
    g.self->send(g.ranks[static_cast<size_t>(i)], atom::allocate_v, g.rec(i).ready.num_blocks);
  std::vector<bool> allocated(static_cast<size_t>(g.world()), false);
  for (int answered = 0; answered < g.world(); ++answered) {
    std::string failure, diff;
    // Errors carry no rank: give one to the first rank still without a reply.
    auto i =
        static_cast<int>(std::find(allocated.begin(), allocated.end(), false) - allocated.begin());
    g.self->receive(
        [&](rank_ready& x) {
          i = static_cast<int>(g.index_of(x.rank));
          diff = diff_messages(g.rec(i).ready, x);
        },
        [&](caf::error& e) { failure = from_caf_error(e).message; });
    allocated[static_cast<size_t>(i)] = true;
    if (auto code = startup_outcome(g, i, failure, diff)) return code;
  }
  (void)g.observed->take(); // the graph manager's plan is compared by rank_ready.graphs
  return std::nullopt;
}

// Every rank's answer to one replayed step.
struct step_answers {
  std::vector<std::optional<step_done>> done;
  std::vector<std::optional<step_rejected>> rejected;
};

// Sends step s to every rank before awaiting any reply (TP ranks meet in the all-reduce).
step_answers replay_step(replayed_ranks& g, size_t s, uint64_t seq) {
  for (int i = 0; i < g.world(); ++i)
    g.self->send(g.ranks[static_cast<size_t>(i)], g.rec(i).steps[s].plan);
  step_answers a{std::vector<std::optional<step_done>>(static_cast<size_t>(g.world())),
                 std::vector<std::optional<step_rejected>>(static_cast<size_t>(g.world()))};
  for (int n = 0; n < g.world(); ++n)
    g.self->receive(
        [&](step_done& d) { a.done[g.index_of(d.rank)] = std::move(d); },
        [&](caf::error& e) {
          // Errors carry no rank: give it to the first rank still without a reply.
          for (size_t i = 0; i < a.done.size(); ++i)
            if (!a.done[i] && !a.rejected[i]) {
              a.rejected[i] = step_rejected{seq, g.which[i], from_caf_error(e), request_ids_of(e)};
              break;
            }
        });
  return a;
}

// The recorded answer of rank index i to step s against the replayed one; empty when equal.
std::string diff_answer(const recorded_step& want, const std::optional<step_done>& got_done,
                        const std::optional<step_rejected>& got_rejected) {
  if (want.done && got_done) return diff_messages(*want.done, *got_done);
  if (want.rejected && got_rejected) return diff_messages(*want.rejected, *got_rejected);
  if (want.done)
    return fmt::format("recorded step_done, replay refused the step: {}",
                       got_rejected ? got_rejected->reason.message : "no reply");
  if (want.rejected)
    return fmt::format("recorded a refusal ({}), replay answered step_done",
                       want.rejected->reason.message);
  return {};
}

// --verify: each rank's messages to its children and its answer, against the recording.
std::optional<int> verify_step(replayed_ranks& g, size_t s, uint64_t seq, const step_answers& a) {
  auto inner = g.observed->take();
  for (int i = 0; i < g.world(); ++i) {
    const auto& want = g.rec(i).steps[s];
    const int r = g.which[static_cast<size_t>(i)];
    std::vector<trace_record> mine;
    for (auto& x : inner)
      if (owner_rank(x.sender) == r || owner_rank(x.receiver) == r) mine.push_back(x);
    if (auto d = diff_inner(want.inner, mine); !d.empty())
      return g.cx.diverged(seq, want.record, d);
    const auto u = static_cast<size_t>(i);
    if (auto d = diff_answer(want, a.done[u], a.rejected[u]); !d.empty())
      return g.cx.diverged(seq, want.record, fmt::format("rank[{}]: {}", r, d));
  }
  return std::nullopt;
}

// Rebuilds ranks `which` (all of them, or one of a single-rank trace) and re-delivers their steps.
int replay_ranks(const replay_context& cx, const recorded_run& run, std::vector<int> which) {
  if (auto code = check_step_counts(cx, run, which)) return *code;
  caf::actor_system_config cfg;
  register_types(cfg);
  configure_step_latency(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  replayed_ranks g{cx, run, std::move(which), std::make_shared<trace_recorder>(), {}, self};
  rank_group_options group;
  group.world = g.world();
  group.recorder = g.observed;
  group.metadata_digest = true;
  g.ranks = spawn_rank_group(sys, group);
  struct stopper {
    caf::scoped_actor& self;
    std::vector<rank_actor>& ranks;
    ~stopper() {
      for (auto& h : ranks)
        self->send_exit(h, caf::exit_reason::user_shutdown);
    }
  } stop{self, g.ranks};
  if (auto code = replay_startup(g)) return *code;
  const auto& steps0 = g.rec(0).steps;
  size_t replayed = 0;
  for (size_t s = 0; s < steps0.size(); ++s) {
    const auto seq = steps0[s].plan.seq;
    if (cx.flags.until_step && seq > *cx.flags.until_step) break;
    const auto answers = replay_step(g, s, seq);
    ++replayed;
    if (!cx.flags.verify) {
      (void)g.observed->take();
      continue;
    }
    if (auto code = verify_step(g, s, seq, answers)) return *code;
  }
  return cx.done({{"steps", replayed}, {"ranks", g.world()}},
                 fmt::format("replayed {} step(s) on {} rank(s){}", replayed, g.world(),
                             cx.flags.verify ? ": every reply and every builder and graph message "
                                               "matches the recording"
                                             : ""));
}

// The graph manager alone: its plan from the recorded request, the captures the rank reported,
// then every recorded dispatch, asked again with the batch shape of the step's plan, and every
// lazy capture reported between steps, in recording order.
int replay_cudagraph(const replay_context& cx, const recorded_rank& rank, int index) {
  if (!rank.graph_request || !rank.graph_plan)
    return cx.bad(fmt::format("cudagraph@rank[{}]: the trace has no cudagraph_request and "
                              "cudagraph_plan for it",
                              index));
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  auto graphs = sys.spawn(plain<&cudagraph>, nullptr);
  caf::scoped_actor self{sys};
  struct stopper {
    caf::scoped_actor& self;
    cudagraph_actor& h;
    ~stopper() { self->send_exit(h, caf::exit_reason::user_shutdown); }
  } stop{self, graphs};
  const auto name = fmt::format("cudagraph@rank[{}]", index);
  std::string failure, diff;
  self->request(graphs, caf::infinite, atom::plan_v, *rank.graph_request)
      .receive([&](cudagraph_plan& p) { diff = diff_messages(*rank.graph_plan, p); },
               [&](caf::error& e) { failure = from_caf_error(e).message; });
  if (!failure.empty()) return cx.bad(fmt::format("{}: plan: {}", name, failure));
  if (cx.flags.verify && !diff.empty())
    return cx.diverged(0, 0, fmt::format("start-up, {}: {}", name, diff));
  auto report = [&](const cudagraph_captured& c) {
    self->request(graphs, caf::infinite, c)
        .receive([](int64_t) {}, [&](caf::error& e) { failure = from_caf_error(e).message; });
    return failure.empty();
  };
  for (const auto& c : rank.startup_captures)
    if (!report(c)) return cx.bad(fmt::format("{}: cudagraph_captured: {}", name, failure));
  size_t dispatches = 0;
  for (const auto& step : rank.steps) {
    if (cx.flags.until_step && step.plan.seq > *cx.flags.until_step) break;
    int32_t reqs = 0, tokens = 0, max_q = 0;
    for (const auto& s : step.plan.scheduled) {
      ++reqs;
      tokens += static_cast<int32_t>(s.token_ids.size());
      max_q = std::max(max_q, static_cast<int32_t>(s.token_ids.size()));
    }
    const int32_t uniform = max_q == 1 && reqs > 0 && tokens == reqs ? 1 : 0;
    for (const auto& r : step.inner) {
      if (r.receiver == name && r.type == "kvactor::cudagraph_captured") {
        auto c = decode_record<cudagraph_captured>(r);
        if (!c) return cx.bad(c.err().message);
        if (!report(*c))
          return cx.diverged(step.plan.seq, r.index,
                             fmt::format("{}: cudagraph_captured: {}", name, failure));
        continue;
      }
      if (r.sender != name || r.type != "kvactor::batch_descriptor") continue;
      std::vector<char> got;
      self->request(graphs, caf::infinite, atom::dispatch_v, reqs, tokens, uniform)
          .receive([&](batch_descriptor& d) { got = encode(d); },
                   [&](caf::error& e) { failure = from_caf_error(e).message; });
      if (!failure.empty())
        return cx.diverged(step.plan.seq, r.index, fmt::format("{}: dispatch: {}", name, failure));
      ++dispatches;
      if (cx.flags.verify)
        if (auto d = diff_envelopes(r.payload, got); !d.empty())
          return cx.diverged(step.plan.seq, r.index, fmt::format("{}: {}", name, d));
    }
  }
  return cx.done({{"actor", name}, {"dispatches", dispatches}},
                 fmt::format("replayed {}: its plan and {} dispatch(es){}", name, dispatches,
                             cx.flags.verify ? " match the recording" : ""));
}

// Whether the trace holds the ranks' side: a rank recorded in this process asks its graph manager
// for a plan at start-up and gives its builders work at every step. A cluster run's driver records
// none of that, its ranks having run in node processes.
bool ranks_recorded(const recorded_run& run) {
  for (const auto& rank : run.ranks) {
    if (rank.graph_request) return true;
    for (const auto& step : rank.steps)
      if (!step.inner.empty()) return true;
  }
  return run.ranks.empty();
}

} // namespace

int run_replay(const replay_flags& flags, std::ostream& out, std::ostream& err) {
  replay_context cx{flags, out, err};
  std::ifstream in(flags.file, std::ios::binary);
  if (!in) return cx.bad(fmt::format("{}: cannot open the file", flags.file));
  auto records = trace_reader(in).read_all();
  if (!records) return cx.bad(fmt::format("{}: {}", flags.file, records.err().message));
  auto run = read_recorded_run(*records);
  if (!run) return cx.bad(fmt::format("{}: {}", flags.file, run.err().message));
  const auto world = static_cast<int>(run->ranks.size());
  if (flags.actor != "driver" && !ranks_recorded(*run))
    return cx.bad(
        fmt::format("{}: its ranks ran in other processes (a cluster run: the trace holds "
                    "the driver's side only); replay the driver alone: --actor driver",
                    flags.file));
  if (flags.actor.empty()) {
    std::vector<int> all(static_cast<size_t>(world));
    for (int i = 0; i < world; ++i)
      all[static_cast<size_t>(i)] = i;
    return replay_ranks(cx, *run, all);
  }
  if (flags.actor == "driver") {
    if (flags.until_step) return cx.bad("--until-step: the driver is replayed over the whole run");
    return replay_driver(cx.flags, *run, out, err);
  }
  const int owner = owner_rank(flags.actor);
  if (owner < 0 || owner >= world)
    return cx.bad(fmt::format("--actor: no actor '{}' in this trace (expected driver, rank[0..{}] "
                              "or cudagraph@rank[N])",
                              flags.actor, world - 1));
  const auto& rank = run->ranks[static_cast<size_t>(owner)];
  if (flags.actor.rfind("cudagraph@", 0) == 0) return replay_cudagraph(cx, rank, owner);
  if (flags.actor.rfind("builder[", 0) == 0)
    return cx.bad(fmt::format("--actor {}: a builder reads its rank's step batch from shared "
                              "memory, not from messages; replay --actor rank[{}] (its builders "
                              "are checked with it)",
                              flags.actor, owner));
  if (flags.actor.find('@') != std::string::npos)
    return cx.bad(fmt::format("--actor: no actor '{}' in this trace", flags.actor));
  if (world > 1)
    return cx.bad(fmt::format("--actor {}: this trace has {} tensor-parallel ranks, which all take "
                              "part in every all-reduce; replay them together (no --actor)",
                              flags.actor, world));
  return replay_ranks(cx, *run, {owner});
}

} // namespace kvactor
