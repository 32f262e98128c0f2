#include "actors/driver/block_pool.hpp"

#include <algorithm>

#include <gtest/gtest.h>

namespace kvactor {
namespace {

TEST(BlockPool, NeverHandsOutTheNullBlock) {
  block_pool pool(5);
  EXPECT_EQ(pool.capacity(), 4);
  EXPECT_EQ(pool.num_free(), 4);
  auto ids = pool.allocate(4);
  ASSERT_TRUE(ids) << ids.err().message;
  EXPECT_EQ(*ids, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(std::count(ids->begin(), ids->end(), null_block_id), 0);
  EXPECT_FALSE(pool.allocate(1));
}

TEST(BlockPool, ReusesFreedBlocksInFifoOrder) {
  block_pool pool(6);
  auto a = pool.allocate(3); // 1 2 3; free queue: 4 5
  ASSERT_TRUE(a);
  ASSERT_TRUE(pool.free({3, 1})); // free queue: 4 5 3 1
  auto b = pool.allocate(4);
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, (std::vector<int32_t>{4, 5, 3, 1}));
}

TEST(BlockPool, AllocationIsAllOrNothing) {
  block_pool pool(4);
  ASSERT_TRUE(pool.allocate(2));
  auto too_many = pool.allocate(2);
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.err().code, errc::insufficient_memory);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.num_used(), 2);
  EXPECT_EQ(pool.allocate(-1).err().code, errc::invalid_argument);
  auto none = pool.allocate(0);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(BlockPool, DoubleFreeIsAnErrorAndFreesNothing) {
  block_pool pool(4);
  auto ids = pool.allocate(2);
  ASSERT_TRUE(ids);
  ASSERT_TRUE(pool.free({(*ids)[0]}));
  auto twice = pool.free({(*ids)[1], (*ids)[0]});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.err().code, errc::invalid_argument);
  EXPECT_NE(twice.err().message.find("double free"), std::string::npos);
  EXPECT_EQ(pool.num_used(), 1); // the valid id in the failed call stayed allocated
  EXPECT_FALSE(pool.free({(*ids)[1], (*ids)[1]}));
  EXPECT_EQ(pool.num_used(), 1);
}

TEST(BlockPool, FreeingTheNullBlockOrAnOutOfRangeIdIsAnError) {
  block_pool pool(4);
  ASSERT_TRUE(pool.allocate(3));
  EXPECT_NE(pool.free({0}).err().message.find("null block"), std::string::npos);
  EXPECT_NE(pool.free({4}).err().message.find("out of range"), std::string::npos);
  EXPECT_FALSE(pool.free({-1}));
  EXPECT_EQ(pool.num_used(), 3);
}

TEST(BlockPool, PeakUsedRemembersTheHighestUsage) {
  block_pool pool(10);
  auto a = pool.allocate(6);
  ASSERT_TRUE(a);
  ASSERT_TRUE(pool.free(*a));
  ASSERT_TRUE(pool.allocate(2));
  EXPECT_EQ(pool.num_used(), 2);
  EXPECT_EQ(pool.peak_used(), 6);
}

} // namespace
} // namespace kvactor
