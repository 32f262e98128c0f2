// `kvactor replay --actor`: one actor alone against the trace, and divergences named by actor
// and field.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "cli_support.hpp"
#include "messages/runtime.hpp"
#include "messages/step.hpp"
#include "messages/trace.hpp"

using namespace kvactor::test;

namespace {

std::string record_run(const std::string& name, std::vector<std::string> extra = {}) {
  auto path = ::testing::TempDir() + name;
  std::vector<std::string> args{
      "run",           "--requests", "6", "--prompt-len", "8:40", "--output-len", "4:12",
      "--no-progress", "--seed",     "3", "--record",     path};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_cli(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return path;
}

// Copies a trace through `keep`, which may change a record, or return false to leave it out;
// returns the copy's path.
std::string rewrite(const std::string& path, const std::string& name,
                    const std::function<bool(kvactor::trace_record&)>& keep) {
  std::ifstream in(path, std::ios::binary);
  auto records = kvactor::trace_reader(in).read_all();
  EXPECT_TRUE(records) << records.err().message;
  auto copy = ::testing::TempDir() + name;
  std::ofstream out(copy, std::ios::binary);
  kvactor::trace_writer w(out);
  for (auto r : *records) {
    if (keep(r)) {
      EXPECT_TRUE(w.write(r.timestamp_ns, r.sender, r.receiver, r.type, r.payload));
    }
  }
  return copy;
}

// Copies a trace, letting `edit` change records until it reports a change.
std::string tamper(const std::string& path, const std::string& name,
                   const std::function<bool(kvactor::trace_record&)>& edit) {
  bool changed = false;
  auto copy = rewrite(path, name, [&](kvactor::trace_record& r) {
    if (!changed) changed = edit(r);
    return true;
  });
  EXPECT_TRUE(changed) << "nothing was tampered with";
  return copy;
}

} // namespace

TEST(ReplayActor, DriverAloneReproducesEveryStepPlanAndTheSummary) {
  auto path = record_run("driver.kvtrace");
  auto r = run_cli({"replay", path, "--actor", "driver", "--verify"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("replayed the driver against 1 stubbed rank(s)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("match the recording"), std::string::npos) << r.out;
  auto j = run_cli({"replay", path, "--actor", "driver", "--verify", "--json"});
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(j.json()["actor"], "driver");
  EXPECT_EQ(j.json()["stubbed_ranks"], 1);
  EXPECT_EQ(j.json()["verified"], true);
  EXPECT_EQ(j.json()["digest"].get<std::string>().size(), 16u);
}

TEST(ReplayActor, ARunWithPrefixCachingReplaysItsDriverAndItsRank) {
  // The llama fixture (full attention) with a 20-token shared prefix admitted over several steps:
  // later requests hit its first block; the recorded configuration carries the switch, so the
  // driver alone replays the same hits.
  const auto path = ::testing::TempDir() + "prefix.kvtrace";
  auto run =
      run_cli({"run", "--model", std::string(KVACTOR_SOURCE_DIR) + "/tests/data/transformers/llama",
               "--requests", "6", "--prompt-len", "24:40", "--output-len", "4:8",
               "--shared-prefix-len", "20", "--max-num-batched-tokens", "48",
               "--enable-prefix-caching", "--no-progress", "--seed", "3", "--record", path});
  ASSERT_EQ(run.code, 0) << run.err;
  ASSERT_NE(run.out.find("prompt tokens from the cache"), std::string::npos) << run.out;
  for (const char* actor : {"driver", "rank[0]"}) {
    auto r = run_cli({"replay", path, "--actor", actor, "--verify"});
    EXPECT_EQ(r.code, 0) << actor << ": " << r.out << r.err;
    EXPECT_NE(r.out.find("the recording"), std::string::npos) << actor << ": " << r.out;
  }
  auto all = run_cli({"replay", path, "--verify"});
  EXPECT_EQ(all.code, 0) << all.out << all.err;
}

TEST(ReplayActor, DriverAloneReportsTheFirstStepPlanThatDiffers) {
  auto path = record_run("driver_src.kvtrace");
  auto bad = tamper(path, "driver_tampered.kvtrace", [](kvactor::trace_record& r) {
    if (r.type != "kvactor::step_plan") return false;
    auto plan = kvactor::decode_record<kvactor::step_plan>(r);
    if (!plan || plan->seq != 4 || plan->scheduled.empty()) return false;
    plan->scheduled[0].num_computed_tokens += 1;
    r.payload = kvactor::encode(*plan);
    return true;
  });
  auto r = run_cli({"replay", bad, "--actor", "driver", "--verify"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("divergence at step 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("driver -> rank[0]: step_plan.scheduled[0].num_computed_tokens"),
            std::string::npos)
      << r.out;
}

TEST(ReplayActor, RankAloneAndGraphManagerAloneMatchTheRecording) {
  auto path = record_run("rank.kvtrace", {"--ubatches", "2"});
  auto rank = run_cli({"replay", path, "--actor", "rank[0]", "--verify"});
  ASSERT_EQ(rank.code, 0) << rank.out << rank.err;
  EXPECT_NE(rank.out.find("every builder and graph message matches"), std::string::npos)
      << rank.out;
  auto graphs = run_cli({"replay", path, "--actor", "cudagraph@rank[0]", "--verify"});
  ASSERT_EQ(graphs.code, 0) << graphs.out << graphs.err;
  EXPECT_NE(graphs.out.find("replayed cudagraph@rank[0]"), std::string::npos) << graphs.out;
}

TEST(ReplayActor, UnknownOrUnreplayableActorsAreClearErrors) {
  auto path = record_run("names.kvtrace");
  auto builder = run_cli({"replay", path, "--actor", "builder[0]@rank[0]"});
  EXPECT_EQ(builder.code, 2);
  EXPECT_NE(builder.err.find("replay --actor rank[0]"), std::string::npos) << builder.err;
  auto missing = run_cli({"replay", path, "--actor", "rank[5]"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("no actor 'rank[5]'"), std::string::npos) << missing.err;
  auto until = run_cli({"replay", path, "--actor", "driver", "--until-step", "2"});
  EXPECT_EQ(until.code, 2);
  EXPECT_NE(until.err.find("--until-step"), std::string::npos) << until.err;
}

// A cluster run's driver records what it exchanges with the ranks, not what the ranks exchange
// with their builders and graph managers in the nodes: as such a trace, a local one without those.
TEST(ReplayActor, AClusterRunReplaysItsDriverAndSaysWhyNotItsRanks) {
  auto local = record_run("local_tp2.kvtrace", {"--tensor-parallel-size", "2"});
  auto path = rewrite(local, "cluster_tp2.kvtrace", [](kvactor::trace_record& r) {
    return r.sender.find('@') == std::string::npos && r.receiver.find('@') == std::string::npos;
  });
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"replay", path, "--verify"},
        std::vector<std::string>{"replay", path, "--actor", "cudagraph@rank[0]"}}) {
    auto r = run_cli(args);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("its ranks ran in other processes"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--actor driver"), std::string::npos) << r.err;
  }
  auto driver = run_cli({"replay", path, "--actor", "driver", "--verify"});
  ASSERT_EQ(driver.code, 0) << driver.out << driver.err;
  // The driver replays against ranks that answer from the trace ("stubbed", replay's own word).
  EXPECT_NE(driver.out.find("replayed the driver against 2 stubbed rank(s)"), std::string::npos)
      << driver.out;
  EXPECT_NE(driver.out.find("match the recording"), std::string::npos) << driver.out;
}

TEST(ReplayActor, OneRankOfATensorParallelRunCannotReplayAlone) {
  auto path = record_run("tp2.kvtrace", {"--tensor-parallel-size", "2"});
  auto all = run_cli({"replay", path, "--verify"});
  ASSERT_EQ(all.code, 0) << all.out << all.err;
  EXPECT_NE(all.out.find("on 2 rank(s)"), std::string::npos) << all.out;
  auto one = run_cli({"replay", path, "--actor", "rank[1]"});
  EXPECT_EQ(one.code, 2);
  EXPECT_NE(one.err.find("2 tensor-parallel ranks"), std::string::npos) << one.err;
}

TEST(ReplayVerify, ATamperedMetadataDigestIsCaughtAtTheBuilder) {
  auto path = record_run("digest.kvtrace");
  auto bad = tamper(path, "digest_tampered.kvtrace", [](kvactor::trace_record& r) {
    if (r.type != "kvactor::metadata_ready") return false;
    auto m = kvactor::decode_record<kvactor::metadata_ready>(r);
    if (!m || m->seq != 2) return false;
    EXPECT_NE(m->digest, 0u) << "recording computes the metadata digest";
    m->digest ^= 1;
    r.payload = kvactor::encode(*m);
    return true;
  });
  auto r = run_cli({"replay", bad, "--verify"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("divergence at step 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("builder[0]@rank[0]: metadata_ready.digest"), std::string::npos) << r.out;
}
