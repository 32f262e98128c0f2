#include "actors/driver/block_pool.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <set>

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

// ---------------------------------------------------------------------------------------------
// Prefix caching

block_hash chain(std::initializer_list<std::vector<int32_t>> blocks, uint64_t salt = 0) {
  block_hash h;
  for (const auto& b : blocks)
    h = hash_block(h, b, salt);
  return h;
}

TEST(BlockHash, ChainsThePrefixTheTokensAndTheSalt) {
  const std::vector<int32_t> a{1, 2, 3, 4}, b{1, 2, 3, 5};
  EXPECT_EQ(chain({a, b}), chain({a, b}));
  EXPECT_NE(chain({a, b}), chain({b, b})) << "the same block after another prefix";
  EXPECT_NE(chain({a}), chain({b}));
  EXPECT_NE(chain({a}), chain({a}, 1)) << "another KV cache group or model";
  EXPECT_NE(chain({a}), chain({{1, 2, 3}})) << "a shorter block";
  EXPECT_NE(chain({a}), block_hash{});
}

TEST(BlockPool, ARegisteredBlockOutlivesItsLastFreeAndAHitTakesItBack) {
  block_pool pool(5); // 4 usable
  auto ids = pool.allocate(2);
  ASSERT_TRUE(ids);
  const block_hash h = chain({{7, 7}});
  ASSERT_TRUE(pool.cache((*ids)[0], h));
  ASSERT_TRUE(pool.free(*ids));
  EXPECT_EQ(pool.num_free(), 4) << "a registered free block still counts as free";
  EXPECT_EQ(pool.find_cached(h), (*ids)[0]);
  ASSERT_TRUE(pool.touch((*ids)[0]));
  EXPECT_EQ(pool.ref_count((*ids)[0]), 1);
  EXPECT_EQ(pool.num_free(), 3);
  const auto queue = pool.free_queue();
  EXPECT_EQ(std::count(queue.begin(), queue.end(), (*ids)[0]), 0) << "taken out of the queue";
}

TEST(BlockPool, AllocationEvictsTheLeastRecentlyFreedRegistrationFirst) {
  block_pool pool(4); // 3 usable: 1 2 3
  auto ids = pool.allocate(3);
  ASSERT_TRUE(ids);
  const block_hash h1 = chain({{1}}), h2 = chain({{2}});
  ASSERT_TRUE(pool.cache(1, h1));
  ASSERT_TRUE(pool.cache(2, h2));
  ASSERT_TRUE(pool.free({2, 1, 3})); // queue: 2 1 3
  auto one = pool.allocate(1);
  ASSERT_TRUE(one);
  EXPECT_EQ(*one, std::vector<int32_t>{2});
  EXPECT_FALSE(pool.find_cached(h2)) << "evicted by the allocation";
  EXPECT_EQ(pool.find_cached(h1), 1) << "still cached";
  EXPECT_EQ(pool.num_evicted(), 1);
  EXPECT_EQ(pool.num_cached(), 1);
}

TEST(BlockPool, OneBlockServesManyRequestsUntilTheLastLetsGo) {
  block_pool pool(3);
  auto ids = pool.allocate(1);
  ASSERT_TRUE(ids);
  const int32_t id = (*ids)[0];
  ASSERT_TRUE(pool.cache(id, chain({{4, 2}})));
  ASSERT_TRUE(pool.touch(id));
  ASSERT_TRUE(pool.touch(id));
  EXPECT_EQ(pool.ref_count(id), 3);
  ASSERT_TRUE(pool.free({id, id}));
  EXPECT_EQ(pool.ref_count(id), 1);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_NE(pool.free({id, id}).err().message.find("double free"), std::string::npos)
      << "two drops of its one reference";
  EXPECT_EQ(pool.ref_count(id), 1) << "the failed call changed nothing";
  ASSERT_TRUE(pool.free({id}));
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockPool, TheSameContentsTwiceKeepTheFirstBlock) {
  block_pool pool(4);
  auto ids = pool.allocate(2);
  ASSERT_TRUE(ids);
  const block_hash h = chain({{9}});
  ASSERT_TRUE(pool.cache((*ids)[0], h));
  ASSERT_TRUE(pool.cache((*ids)[1], h)); // two requests computed the same block
  EXPECT_EQ(pool.find_cached(h), (*ids)[0]);
  EXPECT_EQ(pool.num_cached(), 1);
}

TEST(BlockPool, TouchAndCacheRefuseBlocksTheyCannotServe) {
  block_pool pool(4);
  auto ids = pool.allocate(1);
  ASSERT_TRUE(ids);
  EXPECT_NE(pool.touch((*ids)[0]).err().message.find("holds no cached prefix"), std::string::npos);
  EXPECT_NE(pool.cache(3, chain({{1}})).err().message.find("not allocated"), std::string::npos);
  EXPECT_NE(pool.touch(0).err().message.find("null block"), std::string::npos);
  EXPECT_NE(pool.cache(7, chain({{1}})).err().message.find("out of range"), std::string::npos);
}

// Random requests that allocate, register, hit and free blocks against a model of who holds
// what: reference counts equal the holdings, the free queue is exactly the unreferenced blocks,
// every registration maps back to its block, and no block is ever handed out while held.
TEST(BlockPool, RandomRequestsKeepReferenceCountsQueueAndRegistrationsConsistent) {
  constexpr int32_t num_blocks = 40;
  block_pool pool(num_blocks);
  std::mt19937 rng(7);
  std::map<int, std::vector<int32_t>> holders; // request -> ids it holds (a hit adds one)
  std::map<int32_t, block_hash> registered;    // what the model expects find_cached to know
  int next_request = 0;
  auto check = [&] {
    std::vector<int32_t> held(num_blocks, 0);
    for (const auto& [r, ids] : holders)
      for (auto id : ids)
        ++held[static_cast<size_t>(id)];
    const auto queue = pool.free_queue();
    const std::set<int32_t> queued(queue.begin(), queue.end());
    ASSERT_EQ(queued.size(), queue.size()) << "a block queued twice";
    for (int32_t id = 1; id < num_blocks; ++id) {
      ASSERT_EQ(pool.ref_count(id), held[static_cast<size_t>(id)]) << "block " << id;
      ASSERT_EQ(queued.contains(id), held[static_cast<size_t>(id)] == 0) << "block " << id;
    }
    ASSERT_EQ(pool.num_free(), static_cast<int32_t>(queue.size()));
    for (const auto& [id, h] : registered)
      ASSERT_EQ(pool.find_cached(h), id);
    ASSERT_EQ(pool.num_cached(), static_cast<int32_t>(registered.size()));
  };
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 3);
    if (op == 0) { // a request allocates 1-4 blocks and registers some of them
      const auto n = static_cast<int32_t>(1 + rng() % 4);
      auto ids = pool.allocate(n);
      if (!ids) {
        ASSERT_EQ(ids.err().code, errc::insufficient_memory);
        ASSERT_LT(pool.num_free(), n);
        continue;
      }
      for (auto id : *ids) {
        ASSERT_EQ(std::count_if(holders.begin(), holders.end(),
                                [&](const auto& h) {
                                  return std::count(h.second.begin(), h.second.end(), id) > 0;
                                }),
                  0)
            << "block " << id << " handed out while held";
        registered.erase(id); // evicted, if it was registered
        if (rng() % 2 == 0) {
          const block_hash h = hash_block({}, std::vector<int32_t>{int32_t(rng() % 64)}, 0);
          ASSERT_TRUE(pool.cache(id, h));
          if (std::none_of(registered.begin(), registered.end(),
                           [&](const auto& e) { return e.second == h; }))
            registered[id] = h;
        }
      }
      holders[next_request++] = *ids;
    } else if (op == 1 && !registered.empty()) { // a hit on a registered block
      auto it = registered.begin();
      std::advance(it, static_cast<long>(rng() % registered.size()));
      ASSERT_EQ(pool.find_cached(it->second), it->first);
      ASSERT_TRUE(pool.touch(it->first));
      holders[next_request++] = {it->first};
    } else if (!holders.empty()) { // a request finishes
      auto it = holders.begin();
      std::advance(it, static_cast<long>(rng() % holders.size()));
      ASSERT_TRUE(pool.free(it->second));
      holders.erase(it);
    }
    check();
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(pool.num_evicted(), 0) << "the run never evicted: too few allocations";
}

} // namespace
} // namespace kvactor
