// Run-to-completion: random requests arrive over time, a fake model samples f(request, position),
// and a mirror of what a rank would hold checks every plan against the scheduler's own state.
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "actors/driver/scheduler.hpp"
#include "tests/driver/driver_test_support.hpp"
#include "tests/driver/scheduler_test_support.hpp"

namespace kvactor {
namespace {

using test::fake_done;
using test::fake_token;

// What a rank keeps per request: block tables and the tokens fed so far.
struct rank_mirror {
  std::map<uint64_t, std::vector<std::vector<int32_t>>> tables;
  std::map<uint64_t, std::vector<int32_t>> fed;

  void apply(const step_plan& p, size_t num_groups) {
    for (auto id : p.finished_requests) {
      EXPECT_EQ(tables.erase(id), 1u) << "finished request " << id << " unknown to the rank";
      fed.erase(id);
    }
    for (const auto& n : p.new_requests) {
      EXPECT_EQ(tables.count(n.request_id), 0u) << "request " << n.request_id << " sent twice";
      tables[n.request_id].resize(num_groups);
      fed[n.request_id];
    }
    for (const auto& u : p.block_updates) {
      ASSERT_EQ(tables.count(u.request_id), 1u);
      auto& t = tables[u.request_id].at(static_cast<size_t>(u.group_id));
      t.resize(std::max(t.size(), static_cast<size_t>(u.start) + u.block_ids.size()));
      std::copy(u.block_ids.begin(), u.block_ids.end(), t.begin() + u.start);
    }
    for (const auto& s : p.scheduled) {
      ASSERT_EQ(fed.count(s.request_id), 1u);
      auto& f = fed[s.request_id];
      EXPECT_EQ(static_cast<size_t>(s.num_computed_tokens), f.size()) << "gap in positions";
      f.insert(f.end(), s.token_ids.begin(), s.token_ids.end());
    }
  }
};

struct sim_result {
  int64_t steps = 0;
  int64_t preemptions = 0;
};

sim_result simulate(scheduler_config cfg, std::vector<kv_cache_group> groups, int64_t num_blocks,
                    uint32_t seed) {
  const size_t num_groups = groups.size();
  std::vector<kv_cache_spec> shapes;
  for (const auto& g : groups)
    shapes.push_back(g.spec);
  scheduler s(cfg, std::move(groups), num_blocks);
  std::mt19937 rng(seed);
  auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  struct spec {
    uint64_t id;
    std::vector<int32_t> prompt;
    int32_t max_output;
    int64_t arrival_step;
  };
  std::vector<spec> specs;
  for (int i = 0; i < 20; ++i) {
    spec r{100 + static_cast<uint64_t>(i) * 7, {}, uniform(1, 40), uniform(0, 30)};
    r.prompt.resize(static_cast<size_t>(uniform(1, 60)));
    for (auto& t : r.prompt)
      t = uniform(0, 31999);
    specs.push_back(std::move(r));
  }

  rank_mirror rank;
  std::map<uint64_t, int> times_finished;
  std::map<uint64_t, bool> was_finished;
  size_t next_arrival = 0;
  uint64_t seq = 1;
  for (; seq < 5000 && (next_arrival < specs.size() || s.has_work()); ++seq) {
    for (; next_arrival < specs.size(); ++next_arrival) {
      const auto& r = specs[next_arrival];
      if (r.arrival_step > static_cast<int64_t>(seq)) break;
      auto added = s.add_request(r.id, r.prompt, r.max_output);
      EXPECT_TRUE(added) << added.err().message;
    }
    auto plan = s.schedule(seq, 0);
    EXPECT_TRUE(plan) << plan.err().message;
    if (!plan) break;
    EXPECT_LE(test::num_scheduled_tokens(*plan), cfg.max_num_batched_tokens);
    EXPECT_LE(static_cast<int32_t>(plan->scheduled.size()), cfg.max_num_seqs);
    EXPECT_TRUE(
        std::is_partitioned(plan->scheduled.begin(), plan->scheduled.end(),
                            [](const scheduled_request& x) { return x.token_ids.size() == 1; }));
    rank.apply(*plan, num_groups);

    // The rank's tables equal the scheduler's, and no block id has two owners.
    std::set<int32_t> owned;
    for (const auto& [id, tables] : rank.tables)
      for (size_t g = 0; g < num_groups; ++g) {
        EXPECT_EQ(tables[g], s.blocks().table_of(id, static_cast<int32_t>(g))) << id;
        for (auto b : tables[g])
          if (b != null_block_id) {
            EXPECT_TRUE(owned.insert(b).second) << "block " << b;
          }
      }
    EXPECT_EQ(static_cast<int32_t>(owned.size()), s.pool().num_used());
    // Every fed token is the one the request has at that position; the KV fits its tables.
    for (const auto& x : plan->scheduled) {
      const auto* r = s.find(x.request_id);
      const auto& fed = rank.fed[x.request_id];
      for (size_t p = 0; p < fed.size(); ++p)
        EXPECT_EQ(fed[p], token_at(*r, static_cast<int32_t>(p))) << x.request_id << "@" << p;
      EXPECT_EQ(r->st, request_state::status::running);
      for (size_t g = 0; g < num_groups; ++g) {
        const auto& t = rank.tables[x.request_id][g];
        if (shapes[g].kind == kv_cache_spec_kind::mamba) {
          EXPECT_EQ(t, (std::vector<int32_t>{t.at(0)}));
          EXPECT_NE(t.at(0), null_block_id);
          continue;
        }
        // This step reads positions [lo, end): their blocks must be real ones.
        int64_t bs = shapes[g].block_size, end = static_cast<int64_t>(fed.size()), lo = 0;
        if (shapes[g].kind == kv_cache_spec_kind::sliding_window)
          lo = std::max<int64_t>(0, x.num_computed_tokens - shapes[g].sliding_window + 1);
        EXPECT_GE(static_cast<int64_t>(t.size()), (end + bs - 1) / bs) << "group " << g;
        for (int64_t b = lo / bs; b < std::min<int64_t>(t.size(), (end + bs - 1) / bs); ++b)
          EXPECT_NE(t[b], null_block_id) << "group " << g << " entry " << b;
      }
    }

    if (!plan->scheduled.empty()) {
      auto applied = s.apply(fake_done(*plan));
      EXPECT_TRUE(applied) << applied.err().message;
    }
    for (const auto& r : specs) {
      const auto* st = s.find(r.id);
      if (st == nullptr) continue;
      bool done = st->st == request_state::status::finished;
      if (done && !was_finished[r.id]) ++times_finished[r.id];
      EXPECT_TRUE(done || !was_finished[r.id]) << r.id << " left the finished state";
      was_finished[r.id] = done;
    }
  }
  EXPECT_FALSE(s.has_work()) << "did not converge within " << seq << " steps";
  auto flush = s.schedule(seq, 0);
  EXPECT_TRUE(flush);
  if (flush) rank.apply(*flush, num_groups);
  EXPECT_TRUE(rank.tables.empty()) << "ranks still hold " << rank.tables.size() << " requests";

  EXPECT_EQ(s.num_finished(), 20);
  EXPECT_EQ(s.num_failed(), 0);
  EXPECT_EQ(s.pool().num_used(), 0);
  for (const auto& r : specs) {
    const auto* st = s.find(r.id);
    EXPECT_EQ(st->st, request_state::status::finished) << r.id;
    EXPECT_EQ(times_finished[r.id], 1) << r.id;
    auto prompt_len = static_cast<int32_t>(r.prompt.size());
    auto expected_len = std::min<int64_t>(r.max_output, cfg.max_model_len - prompt_len);
    EXPECT_EQ(static_cast<int64_t>(st->output.size()), expected_len) << r.id;
    for (size_t k = 0; k < st->output.size(); ++k)
      EXPECT_EQ(st->output[k], fake_token(r.id, prompt_len + static_cast<int32_t>(k)));
  }
  EXPECT_EQ(s.request_order().size(), 20u);
  return {static_cast<int64_t>(seq), s.num_preemptions()};
}

TEST(SchedulerSimulation, TwentyRandomRequestsFinishOnceWithTheRightTokensAndThePoolEndsEmpty) {
  auto r = simulate({{8, 32, 80}, 1}, {test::full_group(4)}, 40, 7);
  EXPECT_GT(r.preemptions, 0) << "the pool was meant to be tight enough to preempt";
}

TEST(SchedulerSimulation, HybridGroupsShareOnePoolWithoutAliasingAndAllRequestsFinish) {
  auto r = simulate({{6, 24, 80}, 2},
                    {test::full_group(4), test::sliding_group(4, 8), test::mamba_group(4)}, 60, 11);
  EXPECT_GT(r.steps, 0);
}

TEST(SchedulerSimulation, AmplePoolNeverPreempts) {
  auto r = simulate({{16, 64, 80}, 1}, {test::full_group(16)}, 200, 3);
  EXPECT_EQ(r.preemptions, 0);
}

} // namespace
} // namespace kvactor
