// The driver's diagnosis of a failed collective, read from the ranks' ledgers: the rank that
// diverged is named first with where it stands, then where the others wait, then silent ranks.
#include <gtest/gtest.h>

#include "actors/driver/collective_diagnosis.hpp"

namespace kvactor {
namespace {

collective_entry all_reduce(uint64_t seq, collective_status status, int64_t count = 8192) {
  return {seq, "all_reduce(sum)", "float32", count, count * 4, status};
}

rank_ledger answered(int32_t rank, std::vector<collective_entry> entries) {
  return {rank, true, std::move(entries), ""};
}

TEST(CollectiveDiagnosis, NamesTheRankOneCollectiveBehindAndWhereTheOthersWait) {
  const std::vector<collective_entry> waiting{all_reduce(37, collective_status::completed),
                                              all_reduce(38, collective_status::timed_out)};
  const std::vector<collective_entry> behind{all_reduce(36, collective_status::completed),
                                             all_reduce(37, collective_status::completed)};
  EXPECT_EQ(diagnose_collectives({answered(0, waiting), answered(1, behind), answered(2, waiting),
                                  answered(3, waiting)}),
            "rank 1 is at all_reduce(sum) #37 (8192 float32, completed) and has not entered #38; "
            "ranks 0, 2, 3 wait in all_reduce(sum) #38 (8192 float32)");
}

TEST(CollectiveDiagnosis, WithTwoRanksTheOneBehindIsTheOneThatDiverged) {
  EXPECT_EQ(diagnose_collectives({answered(0, {all_reduce(5, collective_status::aborted)}),
                                  answered(1, {all_reduce(4, collective_status::completed)})}),
            "rank 1 is at all_reduce(sum) #4 (8192 float32, completed) and has not entered #5; "
            "rank 0 waits in all_reduce(sum) #5 (8192 float32)");
}

TEST(CollectiveDiagnosis, RanksInDifferentCollectivesAtTheSameNumberAreNamed) {
  collective_entry bcast{6, "broadcast(root 0)", "int64", 1, 8, collective_status::failed};
  EXPECT_EQ(diagnose_collectives({answered(0, {all_reduce(6, collective_status::failed, 16)}),
                                  answered(1, {bcast}),
                                  answered(2, {all_reduce(6, collective_status::failed, 16)})}),
            "rank 1 waits in broadcast(root 0) #6 (1 int64); ranks 0, 2 wait in all_reduce(sum) "
            "#6 (16 float32)");
}

TEST(CollectiveDiagnosis, EveryRankInTheSameCollectiveMeansNoneDiverged) {
  EXPECT_EQ(diagnose_collectives({answered(0, {all_reduce(9, collective_status::timed_out)}),
                                  answered(1, {all_reduce(9, collective_status::aborted)})}),
            "every rank waits in all_reduce(sum) #9 (8192 float32): none diverged (the collective "
            "itself stalled, or a rank stopped inside it)");
}

TEST(CollectiveDiagnosis, ASilentRankIsReportedWithWhyAndAnEmptyLedgerSaysSo) {
  rank_ledger silent{1, false, {}, "no ledger within 1000 ms"};
  EXPECT_EQ(diagnose_collectives({answered(0, {all_reduce(3, collective_status::timed_out)}),
                                  silent, answered(2, {})}),
            "rank 2 has entered no collective; rank 0 waits in all_reduce(sum) #3 (8192 float32); "
            "rank 1 did not answer (no ledger within 1000 ms)");
  EXPECT_EQ(diagnose_collectives({silent}), "rank 1 did not answer (no ledger within 1000 ms)");
}

TEST(CollectiveDiagnosis, ABarrierHasNoElementCount) {
  collective_entry barrier{4, "barrier", "int64", 0, 0, collective_status::completed};
  EXPECT_EQ(diagnose_collectives(
                {answered(0, {barrier}),
                 answered(1, {barrier, all_reduce(5, collective_status::timed_out, 2)}),
                 answered(2, {barrier, all_reduce(5, collective_status::timed_out, 2)})}),
            "rank 0 is at barrier #4 (completed) and has not entered #5; ranks 1, 2 wait in "
            "all_reduce(sum) #5 (2 float32)");
}

TEST(CollectiveOutcomes, CountRanksWhoseLastCollectiveTimedOutOrFailedNotTheAbortedOrSilent) {
  const auto o = count_collective_outcomes(
      {answered(0, {all_reduce(9, collective_status::completed),
                    all_reduce(10, collective_status::timed_out)}),
       answered(1, {all_reduce(9, collective_status::completed)}),
       answered(2, {all_reduce(10, collective_status::timed_out)}),
       answered(3, {all_reduce(10, collective_status::aborted)}),
       answered(4, {all_reduce(10, collective_status::failed)}), answered(5, {}),
       rank_ledger{6, false, {}, "no answer within 1.0 s"}});
  EXPECT_EQ(o.timed_out, 2);
  EXPECT_EQ(o.failed, 1);
}

TEST(RootFailure, IsTheErrorOfARankWhoseCollectiveTimedOutThoughAnAbortArrivedFirst) {
  const std::vector<rank_ledger> ledgers{
      answered(0, {all_reduce(9, collective_status::completed),
                   all_reduce(10, collective_status::timed_out)}),
      answered(1, {all_reduce(9, collective_status::completed)})};
  EXPECT_EQ(root_failure({{1, "rank 1: aborted"}, {0, "rank 0: timed out"}}, ledgers),
            "rank 0: timed out");
  EXPECT_EQ(root_failure({{1, "rank 1: aborted"}, {0, "rank 0: failed"}},
                         {answered(0, {all_reduce(10, collective_status::failed)}),
                          answered(1, {all_reduce(10, collective_status::aborted)})}),
            "rank 0: failed");
}

TEST(RootFailure, IsTheFirstErrorWhenNoLedgerShowsATimeoutOrFailureAndEmptyWithoutErrors) {
  const std::vector<rank_ledger> ledgers{answered(0, {all_reduce(10, collective_status::aborted)}),
                                         answered(1, {}),
                                         rank_ledger{2, false, {}, "no answer within 1.0 s"}};
  EXPECT_EQ(root_failure({{2, "rank 2: gone"}, {1, "rank 1: aborted"}}, ledgers), "rank 2: gone");
  EXPECT_EQ(root_failure({{7, "rank 7: not in the group"}}, ledgers), "rank 7: not in the group")
      << "an error from a rank without a ledger is still quoted";
  EXPECT_EQ(root_failure({}, ledgers), "");
}

} // namespace
} // namespace kvactor
