#include "actors/driver/kv_block_manager.hpp"

#include <set>

#include <gtest/gtest.h>

#include "tests/driver/driver_test_support.hpp"

namespace kvactor {
namespace {

using test::chunked_group;
using test::full_group;
using test::mamba_group;
using test::sliding_group;
using ids = std::vector<int32_t>;

TEST(KvBlockManager, AllocatesOneBlockPerBlockSizeTokensInEveryGroup) {
  block_pool pool(100);
  kv_block_manager m({full_group(16), full_group(4, "full.1")}, pool);
  EXPECT_EQ(m.blocks_needed(7, 17), 2 + 5);
  auto up = m.allocate(7, 0, 17);
  ASSERT_TRUE(up) << up.err().message;
  ASSERT_EQ(up->size(), 2u);
  EXPECT_EQ((*up)[0], (block_table_update{7, 0, 0, ids{1, 2}}));
  EXPECT_EQ((*up)[1], (block_table_update{7, 1, 0, ids{3, 4, 5, 6, 7}}));
  EXPECT_EQ(m.num_blocks_of(7), 7);
  EXPECT_EQ(m.blocks_needed(7, 17), 0);
  // Growing appends: the update starts at the first new entry.
  auto more = m.allocate(7, 17, 21);
  ASSERT_TRUE(more);
  ASSERT_EQ(more->size(), 1u);
  EXPECT_EQ((*more)[0], (block_table_update{7, 1, 5, ids{8}}));
}

TEST(KvBlockManager, NeverGivesOneBlockIdToTwoGroupsOrRequests) {
  block_pool pool(64);
  kv_block_manager m({full_group(4), sliding_group(4, 8), mamba_group(4)}, pool);
  for (uint64_t r = 1; r <= 3; ++r)
    ASSERT_TRUE(m.allocate(r, 0, 20));
  std::set<int32_t> seen;
  for (uint64_t r = 1; r <= 3; ++r)
    for (int32_t g = 0; g < 3; ++g)
      for (auto id : m.table_of(r, g))
        EXPECT_TRUE(seen.insert(id).second) << "block " << id << " owned twice";
  EXPECT_EQ(static_cast<int32_t>(seen.size()), pool.num_used());
}

TEST(KvBlockManager, SlidingWindowReleasesBlocksThatFellOutOfTheWindow) {
  block_pool pool(20);
  kv_block_manager m({sliding_group(4, 8)}, pool);
  ASSERT_TRUE(m.allocate(1, 0, 16)); // entries 0..3 = blocks 1..4
  EXPECT_EQ(pool.num_used(), 4);
  // 16 tokens computed, window 8: positions < 16 - 8 + 1 = 9 are never read again, so blocks
  // 0 (tokens 0-3) and 1 (4-7) go; block 2 (8-11) still holds token 9..11 which are live.
  auto up = m.allocate(1, 16, 17);
  ASSERT_TRUE(up) << up.err().message;
  ASSERT_EQ(up->size(), 2u);
  EXPECT_EQ((*up)[0], (block_table_update{1, 0, 0, ids{0, 0}}));
  EXPECT_EQ((*up)[1], (block_table_update{1, 0, 4, ids{5}}));
  EXPECT_EQ(m.table_of(1, 0), (ids{0, 0, 3, 4, 5}));
  EXPECT_EQ(pool.num_used(), 3);
  EXPECT_EQ(m.num_blocks_of(1), 3);
  // Nothing new falls out until num_computed - 7 reaches 12: no duplicate zero writes.
  auto quiet = m.allocate(1, 17, 18);
  ASSERT_TRUE(quiet);
  EXPECT_TRUE(quiet->empty());
  auto next = m.allocate(1, 19, 20);
  ASSERT_TRUE(next);
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ((*next)[0], (block_table_update{1, 0, 2, ids{0}}));
  EXPECT_EQ(m.free(1), 2);
  EXPECT_EQ(pool.num_used(), 0);
}

TEST(KvBlockManager, ReleasedWindowBlocksMakeRoomForTheNextOnes) {
  block_pool pool(5); // 4 usable
  kv_block_manager m({sliding_group(4, 4)}, pool);
  ASSERT_TRUE(m.allocate(1, 0, 16));
  EXPECT_EQ(pool.num_free(), 0);
  auto up = m.allocate(1, 16, 17); // releases 3 entries, needs 1
  ASSERT_TRUE(up) << up.err().message;
  EXPECT_EQ(m.table_of(1, 0), (ids{0, 0, 0, 4, 1}));
  EXPECT_EQ(pool.num_used(), 2);
}

TEST(KvBlockManager, ChunkedLocalReleasesBlocksBeforeTheCurrentChunk) {
  block_pool pool(20);
  kv_block_manager m({chunked_group(4, 8)}, pool);
  ASSERT_TRUE(m.allocate(1, 0, 12));
  auto up = m.allocate(1, 12, 13); // chunk [8, 16) is current: blocks 0 and 1 are dead
  ASSERT_TRUE(up);
  EXPECT_EQ(m.table_of(1, 0), (ids{0, 0, 3, 4}));
}

TEST(KvBlockManager, MambaGroupHoldsOneBlockForTheWholeRequest) {
  block_pool pool(10);
  kv_block_manager m({mamba_group(16)}, pool);
  auto up = m.allocate(3, 0, 100);
  ASSERT_TRUE(up);
  EXPECT_EQ(*up, (std::vector<block_table_update>{{3, 0, 0, ids{1}}}));
  auto later = m.allocate(3, 100, 500);
  ASSERT_TRUE(later);
  EXPECT_TRUE(later->empty());
  EXPECT_EQ(m.num_blocks_of(3), 1);
}

TEST(KvBlockManager, AllocationIsAllOrNothingAcrossGroups) {
  block_pool pool(6); // 5 usable
  kv_block_manager m({full_group(4), full_group(4, "full.1")}, pool);
  ASSERT_TRUE(m.allocate(1, 0, 4)); // 1 + 1
  auto fail = m.allocate(1, 4, 12); // 2 + 2 > 3 free
  ASSERT_FALSE(fail);
  EXPECT_EQ(fail.err().code, errc::insufficient_memory);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(m.num_blocks_of(1), 2);
  EXPECT_EQ(m.table_of(1, 0).size(), 1u);
  EXPECT_EQ(m.table_of(1, 1).size(), 1u);
  // A sliding window's release is not applied when the allocation fails either.
  block_pool small(6); // 5 usable
  kv_block_manager sw({sliding_group(4, 4), full_group(4)}, small);
  ASSERT_TRUE(sw.allocate(2, 0, 8)); // sliding {1, 2}, full {3, 4}
  // Entry 0 would be released (tokens < 5 are dead) but 4 blocks > 1 free + 1 released.
  EXPECT_FALSE(sw.allocate(2, 8, 16));
  EXPECT_EQ(sw.table_of(2, 0), (ids{1, 2}));
  EXPECT_EQ(small.num_used(), 4);
}

TEST(KvBlockManager, FreeReturnsEveryBlockOfTheRequest) {
  block_pool pool(50);
  kv_block_manager m({full_group(4), sliding_group(4, 4), mamba_group(4)}, pool);
  ASSERT_TRUE(m.allocate(1, 0, 10));
  ASSERT_TRUE(m.allocate(2, 0, 30));
  EXPECT_EQ(m.free(1), 3 + 3 + 1);
  EXPECT_EQ(m.num_blocks_of(1), 0);
  EXPECT_TRUE(m.table_of(1, 0).empty());
  EXPECT_EQ(m.free(1), 0);
  EXPECT_EQ(m.free(2), 8 + 8 + 1);
  EXPECT_EQ(pool.num_used(), 0);
}

TEST(KvBlockManager, PeakBlocksBoundsAWindowByWindowPlusOneChunk) {
  block_pool pool(10);
  kv_block_manager m({full_group(16), sliding_group(16, 64), mamba_group(16)}, pool);
  // full: 1000 tokens = 63 blocks; window: 64 - 1 + 32 = 95 tokens -> 6 + 1; mamba: 1.
  EXPECT_EQ(m.peak_blocks(1000, 32), 63 + 7 + 1);
  EXPECT_EQ(m.peak_blocks(20, 32), 2 + 2 + 1);
}

} // namespace
} // namespace kvactor
