// Request latencies: TTFT from the arrival (queueing included), TPOT between first and last token
// over the tokens after the first, end-to-end to the last token; nearest-rank percentiles over the
// requests that produced a token.
#include "actors/driver/latency.hpp"

#include <gtest/gtest.h>

namespace kvactor {
namespace {

TEST(RequestLatencies, MeasureFromArrivalToFirstAndBetweenTokens) {
  request_latencies l;
  l.arrived(1, 0.0);
  l.arrived(2, 0.5);
  l.arrived(3, 1.0); // never gets a token: not counted
  l.token(1, 0.1);   // TTFT 100 ms
  l.token(1, 0.3);
  l.token(1, 0.5);  // TPOT (0.5 - 0.1) / 2 = 200 ms, end-to-end 500 ms
  l.token(2, 0.55); // TTFT 50 ms, one token: no TPOT
  l.token(9, 0.6);  // unknown: ignored
  const auto s = l.summarize();
  EXPECT_NEAR(s.ttft_ms_p50, 50.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms_p99, 100.0, 1e-9);
  EXPECT_NEAR(s.tpot_ms_p50, 200.0, 1e-9);
  EXPECT_NEAR(s.tpot_ms_p99, 200.0, 1e-9);
  EXPECT_NEAR(s.e2e_ms_p50, 50.0, 1e-9);
  EXPECT_NEAR(s.e2e_ms_p99, 500.0, 1e-9);
}

TEST(RequestLatencies, NothingMeasuredIsZeroNotGarbage) {
  const auto s = request_latencies{}.summarize();
  EXPECT_EQ(s.ttft_ms_p99, 0.0);
  EXPECT_EQ(s.tpot_ms_p50, 0.0);
}

TEST(RequestLatencies, ARetiredRequestIsForgottenButStillCountsInTheSummary) {
  request_latencies l;
  l.arrived(1, 0.0);
  l.token(1, 0.1);
  l.token(1, 0.3);
  l.retire(1);
  EXPECT_EQ(l.timing(1).tokens, 0) << "forgotten";
  l.token(1, 0.4); // a late token of a forgotten request: ignored
  const auto s = l.summarize();
  EXPECT_NEAR(s.ttft_ms_p50, 100.0, 1e-9);
  EXPECT_NEAR(s.tpot_ms_p50, 200.0, 1e-9);
  EXPECT_NEAR(s.e2e_ms_p99, 300.0, 1e-9);
}

TEST(RequestLatencies, OnlyTheMostRecentRetiredRequestsAreKept) {
  request_latencies l;
  const size_t n = request_latencies::max_retired + 10;
  for (size_t i = 0; i < n; ++i) {
    l.arrived(i, 0.0);
    l.token(i, i < 10 ? 9.0 : 0.001); // the ten oldest are slow
    l.retire(i);
  }
  EXPECT_NEAR(l.summarize().ttft_ms_p99, 1.0, 1e-9) << "the oldest ten were overwritten";
}

} // namespace
} // namespace kvactor
