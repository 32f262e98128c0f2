// The rank fabric's contract, run against every fabric: ranks the driver sends to itself, ranks
// behind nodes (through the middleman), behind nodes with step channels, and behind --chaos
// links. A step delivered to two ranks comes back rank by rank: each rank's step_done, or its
// failure with the requests it names; a silent rank is named at the step timeout; a rank that is
// gone is reported failed, not waited for; a rank that missed the step gets it again until it
// answers. The nodes and channels here are scripted stand-ins speaking the node protocol (the
// real node's relay has its own tests); the ranks are mock ranks.
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/driver/fabric/actor_host.hpp"
#include "actors/driver/fabric/chaos_fabric.hpp"
#include "actors/driver/fabric/local_fabric.hpp"
#include "actors/driver/fabric/node_fabric.hpp"
#include "messages/caf_error.hpp"
#include "messages/codec.hpp"
#include "tests/support/mock_rank.hpp"
#include "tests/support/real_system_fixture.hpp"

namespace kvactor::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

enum class fabric_kind { local, nodes, channel, chaos };

std::string name_of(fabric_kind k) {
  switch (k) {
  case fabric_kind::local: return "local";
  case fabric_kind::nodes: return "nodes";
  case fabric_kind::channel: return "channel";
  case fabric_kind::chaos: return "chaos";
  }
  return "?";
}

/// How a rank treats the steps it gets.
enum class rank_mode {
  reply,  // answers every copy
  reject, // rejects every copy, naming request 7
  silent, // never answers
  gone,   // stopped before the step was sent
  late,   // misses the first copy (as if lost), answers the next
};

constexpr uint64_t rejected_request = 7;
constexpr auto step_timeout = 400ms;

/// What rank `rank` in `mode` answers to copy `copy` (0 first) of `plan`: nothing when silent.
struct rank_answer {
  std::optional<step_done> done;
  error failure;
};

std::optional<rank_answer> answer_of(rank_mode mode, int32_t rank, const step_plan& plan,
                                     int copy) {
  switch (mode) {
  case rank_mode::reply: return rank_answer{mock_done(plan, rank), {}};
  case rank_mode::reject:
    return rank_answer{std::nullopt, make_error(errc::invalid_argument, "rank refuses request 7")};
  case rank_mode::late:
    if (copy == 0) return std::nullopt;
    return rank_answer{mock_done(plan, rank), {}};
  case rank_mode::silent:
  case rank_mode::gone: return std::nullopt;
  }
  return std::nullopt;
}

/// What the test's step heard, rank by rank: the first answer of each, as the driver keeps it.
struct heard {
  std::mutex m;
  std::condition_variable cv;
  std::map<int32_t, step_done> done;
  std::map<int32_t, error> failed;
  std::map<int32_t, std::vector<uint64_t>> failed_requests;
  std::optional<std::vector<int32_t>> silent_at_deadline;
  steady::time_point deadline_at;
  bool closed = false;
};

class test_delivery final : public step_delivery {
public:
  test_delivery(step_plan plan, std::shared_ptr<heard> h, size_t ranks)
      : step_delivery(std::move(plan)), h_(std::move(h)), ranks_(ranks) {}
  void on_done(int32_t rank, step_done done) override {
    std::lock_guard lock(h_->m);
    if (!h_->closed && !answered(rank)) h_->done.emplace(rank, std::move(done));
    h_->cv.notify_all();
  }
  void on_failure(int32_t rank, error err, std::vector<uint64_t> ids) override {
    std::lock_guard lock(h_->m);
    if (!h_->closed && !answered(rank)) {
      h_->failed.emplace(rank, std::move(err));
      h_->failed_requests.emplace(rank, std::move(ids));
    }
    h_->cv.notify_all();
  }
  bool settled() const override {
    std::lock_guard lock(h_->m);
    return h_->closed || h_->done.size() + h_->failed.size() == ranks_;
  }
  std::vector<int32_t> silent() const override {
    std::lock_guard lock(h_->m);
    return silent_locked();
  }
  void on_deadline() override {
    std::lock_guard lock(h_->m);
    h_->silent_at_deadline = silent_locked();
    h_->deadline_at = steady::now();
    h_->closed = true;
    h_->cv.notify_all();
  }

private:
  bool answered(int32_t r) const { return h_->done.count(r) + h_->failed.count(r) > 0; }
  std::vector<int32_t> silent_locked() const {
    std::vector<int32_t> out;
    for (size_t r = 0; r < ranks_; ++r)
      if (!answered(static_cast<int32_t>(r))) out.push_back(static_cast<int32_t>(r));
    return out;
  }
  std::shared_ptr<heard> h_;
  size_t ranks_;
};

using make_fabric_fn = std::function<std::unique_ptr<rank_fabric>(fabric_host&)>;

// The actor a fabric works for: it delivers each step_plan it gets, fires the fabric's timers
// and hands it channel events, as the driver does.
caf::behavior fabric_owner(caf::event_based_actor* self, make_fabric_fn make,
                           std::shared_ptr<heard> h) {
  auto host = std::make_shared<actor_host<caf::event_based_actor>>(self);
  std::shared_ptr<rank_fabric> fabric = make(*host);
  return {
      [host, fabric, h](step_plan& plan) {
        fabric->deliver(std::make_shared<test_delivery>(std::move(plan), h, fabric->num_ranks()),
                        {});
      },
      [host](atom::timer, uint64_t id) { host->fire(id); },
      [fabric](node_channel_event& e) { fabric->on_channel_event(e); },
  };
}

// A node speaking the node protocol for the ranks of `modes` at its slots: it answers a
// node_step for the slots it names, and (as the real node does) reports silent ranks once the
// step's answer_within has passed. A late rank's first copy is lost without a word.
node_step_done node_answer(const node_step& step, const std::vector<rank_mode>& modes,
                           const std::vector<int32_t>& ranks, std::map<int32_t, int>& copies) {
  const auto plan = decode<step_plan>(step.plan);
  node_step_done out;
  out.seq = plan->seq;
  for (auto slot : step.slots) {
    const auto rank = ranks[static_cast<size_t>(slot)];
    const auto mode = modes[static_cast<size_t>(rank)];
    auto a = answer_of(mode, rank, *plan, copies[rank]++);
    if (!a) {
      if (mode == rank_mode::silent) out.silent.push_back(rank);
      continue;
    }
    if (a->done)
      out.done.push_back(*a->done);
    else
      out.rejected.push_back({plan->seq, rank, a->failure, {rejected_request}});
  }
  return out;
}

caf::behavior scripted_node(caf::event_based_actor* self, std::vector<rank_mode> modes,
                            std::vector<int32_t> ranks) {
  struct owed {
    std::map<int32_t, int> copies;
    std::map<uint64_t, std::pair<caf::typed_response_promise<node_step_done>, node_step_done>>
        late; // answers naming silent ranks, due at answer_within
    uint64_t next = 0;
  };
  auto o = std::make_shared<owed>();
  return {
      [self, modes, ranks, o](node_step& step) -> caf::result<node_step_done> {
        auto answer = node_answer(step, modes, ranks, o->copies);
        if (answer.silent.empty()) return answer;
        auto rp = self->make_response_promise<node_step_done>();
        o->late.emplace(++o->next, std::make_pair(rp, std::move(answer)));
        self->delayed_send(self, std::chrono::milliseconds(step.answer_within_ms), atom::timer_v,
                           o->next);
        return rp;
      },
      [o](atom::timer, uint64_t id) {
        auto it = o->late.find(id);
        if (it == o->late.end()) return;
        it->second.first.deliver(std::move(it->second.second));
        o->late.erase(it);
      },
  };
}

// Step channels to the scripted nodes: an open channel answers on the driver's (the owner's)
// mailbox as the node's reader thread would; a gone node's channel is closed.
class scripted_channels final : public node_step_channel {
public:
  scripted_channels(std::vector<rank_mode> modes, std::vector<std::vector<int32_t>> routes)
      : modes_(std::move(modes)), routes_(std::move(routes)) {}
  caf::actor owner;
  bool open(size_t route) const override {
    for (auto r : routes_[route])
      if (modes_[static_cast<size_t>(r)] == rank_mode::gone) return false;
    return true;
  }
  status send(size_t route, uint64_t seq, const node_step& step) override {
    node_channel_event e;
    e.route = static_cast<int32_t>(route);
    e.seq = seq;
    e.answer = node_answer(step, modes_, routes_[route], copies_);
    const auto wait =
        e.answer.silent.empty() ? 0ms : std::chrono::milliseconds(step.answer_within_ms);
    caf::delayed_anon_send(owner, wait, std::move(e));
    return ok();
  }

private:
  std::vector<rank_mode> modes_;
  std::vector<std::vector<int32_t>> routes_;
  std::map<int32_t, int> copies_;
};

class RankFabricContract : public real_system_fixture,
                           public ::testing::WithParamInterface<fabric_kind> {
protected:
  // Delivers one step to two ranks in `modes` through the fabric under test and returns what it
  // heard once `until` holds (or 20 s passed: a test failure).
  std::shared_ptr<heard> deliver(std::vector<rank_mode> modes, bool retransmit,
                                 std::function<bool(const heard&)> until) {
    auto h = std::make_shared<heard>();
    step_deadlines deadlines;
    deadlines.step_timeout = step_timeout;
    deadlines.retransmit = retransmit || GetParam() == fabric_kind::chaos;
    auto owner = spawn(fabric_owner, fabric_for(modes, deadlines), h);
    if (channels_) channels_->owner = owner;
    stop_gone_ranks(modes);
    sent_at_ = steady::now();
    caf::anon_send(owner, a_plan());
    std::unique_lock lock(h->m);
    EXPECT_TRUE(h->cv.wait_for(lock, 20s, [&] { return until(*h); }))
        << name_of(GetParam()) << ": the step's answers never came";
    return h;
  }

  steady::time_point sent_at_;

private:
  static step_plan a_plan() {
    step_plan p;
    p.seq = 3;
    p.epoch = 1;
    p.scheduled.push_back({rejected_request, 4, {42}, true});
    return p;
  }

  make_fabric_fn fabric_for(const std::vector<rank_mode>& modes, step_deadlines d) {
    switch (GetParam()) {
    case fabric_kind::local: return local(modes, d);
    case fabric_kind::chaos: {
      auto inner = local(modes, d);
      return [inner, d](fabric_host& host) -> std::unique_ptr<rank_fabric> {
        return std::make_unique<chaos_fabric>(host, inner(host), chaos_spec{11, 0.3, 5ms}, d);
      };
    }
    case fabric_kind::nodes:
    case fabric_kind::channel: return behind_nodes(modes, d);
    }
    return {};
  }

  make_fabric_fn local(const std::vector<rank_mode>& modes, step_deadlines d) {
    std::vector<rank_actor> ranks;
    for (size_t r = 0; r < modes.size(); ++r)
      ranks.push_back(mock_rank(modes[r], static_cast<int32_t>(r)));
    return [ranks, d](fabric_host& host) -> std::unique_ptr<rank_fabric> {
      return std::make_unique<local_fabric>(host, ranks, d);
    };
  }

  rank_actor mock_rank(rank_mode mode, int32_t rank) {
    mock_rank_script s;
    auto copies = std::make_shared<int>(0);
    s.on_step = [mode, rank, copies](const step_plan& plan) {
      auto a = answer_of(mode, rank, plan, (*copies)++);
      if (!a) return step_outcome::ignore();
      if (a->done) return step_outcome::reply(*a->done);
      return step_outcome::reject(to_caf_error(a->failure, {rejected_request}));
    };
    auto h = spawn_mock_rank(sys, std::move(s));
    stoppable_[rank] = caf::actor_cast<caf::actor>(h.actor);
    kill_at_end_.push_back(stoppable_[rank]);
    return h.actor;
  }

  // One node per rank, so that a gone rank is a gone node.
  make_fabric_fn behind_nodes(const std::vector<rank_mode>& modes, step_deadlines d) {
    std::vector<node_route> routes;
    std::vector<std::vector<int32_t>> hosted;
    for (size_t r = 0; r < modes.size(); ++r) {
      const auto rank = static_cast<int32_t>(r);
      auto node = spawn(scripted_node, modes, std::vector<int32_t>{rank});
      stoppable_[rank] = node;
      routes.push_back({caf::actor_cast<node_actor>(node), {rank}, {0}});
      hosted.push_back({rank});
    }
    if (GetParam() == fabric_kind::nodes)
      return [routes, d, n = modes.size()](fabric_host& host) -> std::unique_ptr<rank_fabric> {
        return std::make_unique<node_fabric>(host, n, routes, d);
      };
    channels_ = std::make_shared<scripted_channels>(modes, hosted);
    return [routes, d, n = modes.size(),
            ch = channels_](fabric_host& host) -> std::unique_ptr<rank_fabric> {
      return std::make_unique<channel_fabric>(host, n, routes, d, ch);
    };
  }

  // A gone rank (or its node) is stopped, and known to be, before the step is sent.
  void stop_gone_ranks(const std::vector<rank_mode>& modes) {
    for (size_t r = 0; r < modes.size(); ++r) {
      if (modes[r] != rank_mode::gone) continue;
      auto a = stoppable_[static_cast<int32_t>(r)];
      self->monitor(a);
      caf::anon_send_exit(a, caf::exit_reason::kill);
      self->receive([](const caf::down_msg&) {});
    }
  }

  std::map<int32_t, caf::actor> stoppable_;
  std::vector<caf::actor> kill_at_end_;
  std::shared_ptr<scripted_channels> channels_;

public:
  ~RankFabricContract() override {
    for (auto& a : kill_at_end_)
      caf::anon_send_exit(a, caf::exit_reason::kill);
  }
};

bool both_answered(const heard& h) {
  return h.done.size() + h.failed.size() == 2;
}

TEST_P(RankFabricContract, EveryRankAnswersTheStepItWasSent) {
  auto h = deliver({rank_mode::reply, rank_mode::reply}, false, both_answered);
  ASSERT_EQ(h->done.size(), 2u);
  for (int32_t r : {0, 1}) {
    EXPECT_EQ(h->done.at(r).rank, r);
    EXPECT_EQ(h->done.at(r).seq, 3u);
    ASSERT_EQ(h->done.at(r).sampled.size(), 1u) << "the plan's one sampled request";
    EXPECT_EQ(h->done.at(r).sampled[0].request_id, rejected_request);
  }
  EXPECT_TRUE(h->failed.empty());
  EXPECT_FALSE(h->silent_at_deadline);
}

TEST_P(RankFabricContract, ARankThatRejectsIsReportedByRankWithTheRequestsItNames) {
  auto h = deliver({rank_mode::reply, rank_mode::reject}, false, both_answered);
  EXPECT_EQ(h->done.count(0), 1u);
  ASSERT_EQ(h->failed.count(1), 1u);
  EXPECT_EQ(h->failed.at(1).code, errc::invalid_argument);
  EXPECT_EQ(h->failed.at(1).message, "rank refuses request 7");
  EXPECT_EQ(h->failed_requests.at(1), std::vector<uint64_t>{rejected_request});
}

TEST_P(RankFabricContract, ASilentRankIsNamedOnceTheStepTimeoutHasRun) {
  auto h = deliver({rank_mode::reply, rank_mode::silent}, false,
                   [](const heard& x) { return x.silent_at_deadline.has_value(); });
  ASSERT_TRUE(h->silent_at_deadline);
  EXPECT_EQ(*h->silent_at_deadline, std::vector<int32_t>{1});
  EXPECT_EQ(h->done.count(0), 1u) << "the other rank's answer came first";
  // Nodes report their silent ranks at nine tenths of the step timeout (step_deadlines).
  EXPECT_GE(h->deadline_at - sent_at_, step_timeout * 9 / 10);
}

TEST_P(RankFabricContract, ARankThatIsGoneIsReportedFailedNotWaitedFor) {
  auto h = deliver({rank_mode::reply, rank_mode::gone}, false, both_answered);
  EXPECT_EQ(h->done.count(0), 1u);
  ASSERT_EQ(h->failed.count(1), 1u);
  EXPECT_FALSE(h->failed.at(1).message.empty());
  EXPECT_FALSE(h->silent_at_deadline) << "reported at once, not at the step timeout";
}

TEST_P(RankFabricContract, ARankThatMissedTheStepGetsItAgainUntilItAnswers) {
  auto h = deliver({rank_mode::reply, rank_mode::late}, true, both_answered);
  EXPECT_EQ(h->done.count(0), 1u);
  ASSERT_EQ(h->done.count(1), 1u) << "the second copy was answered";
  EXPECT_EQ(h->done.at(1).seq, 3u);
  EXPECT_FALSE(h->silent_at_deadline);
}

INSTANTIATE_TEST_SUITE_P(EveryFabric, RankFabricContract,
                         ::testing::Values(fabric_kind::local, fabric_kind::nodes,
                                           fabric_kind::channel, fabric_kind::chaos),
                         [](const auto& info) { return name_of(info.param); });

} // namespace
} // namespace kvactor::test
