#include "actors/driver/arrival_queue.hpp"

#include <gtest/gtest.h>

#include "tests/driver/driver_test_support.hpp"

namespace kvactor {
namespace {

using test::full_group;

request_spec spec(uint64_t id, int64_t arrival_ns) {
  return {id, {1, 2, 3}, 2, arrival_ns, {}};
}

scheduler a_scheduler() {
  return scheduler({{4, 64, 1000}, 1}, {full_group(4)}, 100);
}

TEST(ArrivalQueue, AdmitsOnlyTheRequestsDueInArrivalOrder) {
  arrival_queue q;
  ASSERT_TRUE(q.submit({spec(1, 300), spec(2, 100), spec(3, 200)}, 0));
  auto s = a_scheduler();
  request_latencies lat;
  q.admit_due(250, s, lat);
  EXPECT_EQ(s.request_order(), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(q.next_arrival_ns(), 300);
  q.admit_due(300, s, lat);
  EXPECT_EQ(s.request_order(), (std::vector<uint64_t>{2, 3, 1}));
  EXPECT_FALSE(q.next_arrival_ns()) << "every request admitted";
}

TEST(ArrivalQueue, ARequestSubmittedDuringTheRunArrivesNowNotInThePast) {
  arrival_queue q;
  ASSERT_TRUE(q.submit({spec(1, 0)}, 0));
  auto s = a_scheduler();
  request_latencies lat;
  q.admit_due(10, s, lat);
  ASSERT_TRUE(q.submit({spec(2, 5)}, 1000));
  EXPECT_EQ(q.next_arrival_ns(), 1000);
}

TEST(ArrivalQueue, ARequestIdSubmittedTwiceIsRefusedNamingItAndNothingIsQueued) {
  arrival_queue q;
  ASSERT_TRUE(q.submit({spec(1, 0)}, 0));
  auto again = q.submit({spec(2, 0), spec(1, 0)}, 0);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.err().message, "submit: request_id 1 is submitted twice");
  EXPECT_EQ(q.size(), 1);
  EXPECT_FALSE(q.submitted(2));
}

TEST(ArrivalQueue, AdmitAllHandsOverTheRequestsNotYetDue) {
  arrival_queue q;
  ASSERT_TRUE(q.submit({spec(1, 0), spec(2, 1'000'000)}, 0));
  auto s = a_scheduler();
  q.admit_all(s);
  EXPECT_EQ(s.request_order(), (std::vector<uint64_t>{1, 2}));
  EXPECT_FALSE(q.next_arrival_ns());
}

TEST(ArrivalQueue, AForgottenIdIsNoLongerKeptButStillCounted) {
  arrival_queue q;
  ASSERT_TRUE(q.submit({spec(1, 0), spec(2, 0)}, 0));
  q.forget(1);
  EXPECT_FALSE(q.submitted(1));
  EXPECT_TRUE(q.submitted(2));
  EXPECT_EQ(q.size(), 2);
}

} // namespace
} // namespace kvactor
