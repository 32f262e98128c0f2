// kv_cache protocol: plan (the rank's own budget) -> allocate (the common block count) -> views;
// the ledger; allocate out of order or beyond the plan.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/kv_cache/actor.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/recorder.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

using ::testing::HasSubstr;

const std::vector<int32_t> tiny_kernel_block_sizes{16, 16};

class KvCacheProtocol : public deterministic_fixture {
protected:
  std::shared_ptr<kv_cache_allocator> allocator = std::make_shared<kv_cache_allocator>();
  kv_cache_actor kv = spawn(kv_cache, allocator);
  recorder_handle rec = track(spawn_recorder(sys));

  KvCacheProtocol() { run_all(); }

  // rec -> kv: plan; kv -> rec: kv_local_plan.
  std::optional<kv_local_plan> plan() {
    inject(rec.actor, kv, atom::plan_v, tiny_layout(), tiny_plan_request());
    run_once(kv);
    return expect_reply<kv_local_plan>(kv, rec.actor);
  }
};

TEST_F(KvCacheProtocol, PlansKvactorTinyWithinTheBudget) {
  auto p = plan();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->available_bytes, tiny_kv_cache_memory);
  EXPECT_EQ(p->config.num_blocks, tiny_expected_blocks()) << "8 MiB in 16 KiB blocks";
  ASSERT_EQ(p->config.groups.size(), 2u) << "a sliding and a full group";
  // One backing allocation: every tensor reports its size, the groups alias it.
  ASSERT_FALSE(p->config.tensors.empty());
  for (const auto& t : p->config.tensors)
    EXPECT_EQ(t.size, p->config.tensors.front().size);
  // Two tensors (one per layer position in a group); each reports the one backing allocation,
  // which is the whole budget: 512 blocks of 16 KiB.
  EXPECT_EQ(p->config.tensors.size(), 2u);
  EXPECT_EQ(p->config.tensors.front().size, tiny_expected_blocks() * tiny_block_bytes());
  EXPECT_EQ(p->config.tensors.front().size, tiny_kv_cache_memory);
}

TEST_F(KvCacheProtocol, AllocatesThePlannedBlocksAndReturnsAViewPerLayer) {
  auto p = plan();
  ASSERT_TRUE(p);
  const int64_t n = p->config.num_blocks / 2; // the minimum over ranks may be smaller
  inject(rec.actor, kv, atom::allocate_v, n, tiny_kernel_block_sizes);
  run_once(kv);
  auto a = expect_reply<kv_allocation>(kv, rec.actor);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->num_blocks, n);
  EXPECT_EQ(a->bytes, n * tiny_block_bytes()) << "the agreed blocks, not the planned budget";
  EXPECT_NE(allocator->base(), nullptr);
  std::vector<std::string> layers;
  for (const auto& v : a->views) {
    layers.push_back(v.layer);
    ASSERT_EQ(v.shape.size(), 4u) << v.layer;
    EXPECT_EQ(v.shape[0], n) << v.layer << ": [blocks, heads, states, content]";
    EXPECT_EQ(v.shape[1], 2) << v.layer << ": 2 KV heads";
  }
  std::vector<std::string> expected;
  for (const auto& l : tiny_layout().layers)
    expected.push_back(l.name);
  EXPECT_THAT(layers, ::testing::UnorderedElementsAreArray(expected));
}

TEST_F(KvCacheProtocol, LedgerReportsTheAllocation) {
  ASSERT_TRUE(plan());
  inject(rec.actor, kv, atom::ledger_v);
  run_once(kv);
  auto before = expect_reply<std::vector<memory_entry>>(kv, rec.actor);
  ASSERT_TRUE(before);
  EXPECT_EQ(*before, (std::vector<memory_entry>{{"kv_cache", 0}}));

  inject(rec.actor, kv, atom::allocate_v, int64_t{64}, tiny_kernel_block_sizes);
  run_once(kv);
  auto a = expect_reply<kv_allocation>(kv, rec.actor);
  ASSERT_TRUE(a);
  inject(rec.actor, kv, atom::ledger_v);
  run_once(kv);
  auto after = expect_reply<std::vector<memory_entry>>(kv, rec.actor);
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, (std::vector<memory_entry>{{"kv_cache", a->bytes}}));
}

TEST_F(KvCacheProtocol, RejectsAllocateBeforePlan) {
  inject(rec.actor, kv, atom::allocate_v, int64_t{8}, tiny_kernel_block_sizes);
  run_once(kv);
  auto err = expect_error(kv, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "allocate:"));
  EXPECT_EQ(allocator->base(), nullptr);
}

TEST_F(KvCacheProtocol, RejectsAllocatingMoreBlocksThanPlannedNamingNumBlocks) {
  auto p = plan();
  ASSERT_TRUE(p);
  inject(rec.actor, kv, atom::allocate_v, p->config.num_blocks + 1, tiny_kernel_block_sizes);
  run_once(kv);
  auto err = expect_error(kv, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "num_blocks:"));
  EXPECT_THAT(message_of(*err), HasSubstr(std::to_string(p->config.num_blocks + 1)));
  EXPECT_EQ(allocator->base(), nullptr);
  // The plan still stands: the planned count itself can be allocated.
  inject(rec.actor, kv, atom::allocate_v, p->config.num_blocks, tiny_kernel_block_sizes);
  run_once(kv);
  auto a = expect_reply<kv_allocation>(kv, rec.actor);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->num_blocks, p->config.num_blocks);
}

} // namespace
} // namespace kvactor::test
