// The rank's start-up steps on their own: the communicator check, the KV cache request, binding
// the allocated views to the stack's layers, group geometry, and what the graph manager is asked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "actors/rank/startup.hpp"

using namespace kvactor;
using ::testing::HasSubstr;

namespace {

rank_config config(int32_t rank = 0, int32_t tp = 1) {
  rank_config c;
  c.rank = rank;
  c.tensor_parallel_size = tp;
  c.block_size = 16;
  c.max_num_batched_tokens = 512;
  c.max_num_seqs = 32;
  c.kv_cache_memory = 1 << 20;
  c.num_gpu_blocks_override = 12;
  return c;
}

model_layout three_layers() {
  model_layout m;
  m.max_position_embeddings = 4096;
  for (const char* name : {"l0", "l1", "l2"}) {
    attention_layer l;
    l.name = name;
    m.layers.push_back(l);
  }
  return m;
}

kv_cache_group group(std::vector<std::string> layers, int32_t block_size,
                     kv_cache_spec_kind kind = kv_cache_spec_kind::full) {
  kv_cache_group g;
  g.layer_names = std::move(layers);
  g.spec.kind = kind;
  g.spec.block_size = block_size;
  return g;
}

} // namespace

TEST(RankStartup, AcceptsACommunicatorThatHoldsTheConfiguredRankAndSize) {
  EXPECT_TRUE(check_communicator(config(1, 2), 1, 2));
}

TEST(RankStartup, RefusesACommunicatorOfAnotherSizeNamingTensorParallelSize) {
  auto ok = check_communicator(config(0, 2), 0, 4);
  ASSERT_FALSE(ok);
  EXPECT_EQ(ok.err().code, errc::invalid_argument);
  EXPECT_THAT(ok.err().message, HasSubstr("tensor_parallel_size: 2 ranks"));
  EXPECT_THAT(ok.err().message, HasSubstr("joins 4"));
}

TEST(RankStartup, RefusesACommunicatorOfAnotherRankNamingTheRank) {
  auto ok = check_communicator(config(1, 2), 0, 2);
  ASSERT_FALSE(ok);
  EXPECT_THAT(ok.err().message, HasSubstr("rank: the driver configures rank 1"));
  EXPECT_THAT(ok.err().message, HasSubstr("holds rank 0"));
}

TEST(RankStartup, KvPlanRequestTakesTheModelsLengthWhenNoneIsConfigured) {
  auto req = kv_plan_request_for(config(), three_layers());
  EXPECT_EQ(req.limits.max_model_len, 4096);
  EXPECT_EQ(req.limits.max_in_flight_tokens, 512);
  EXPECT_EQ(req.block_size, 16);
  EXPECT_EQ(req.available_bytes, 1 << 20);
  EXPECT_EQ(req.num_gpu_blocks_override, 12);
  auto c = config();
  c.max_model_len = 1000;
  EXPECT_EQ(kv_plan_request_for(c, three_layers()).limits.max_model_len, 1000);
}

TEST(RankStartup, BindsEachLayerToItsViewAndGroupLeavingLayersWithoutAViewEmpty) {
  std::vector<std::byte> memory(4096);
  kv_cache_view v0;
  v0.layer = "l0";
  v0.shape = {2, 1, 16, 16}; // [blocks, heads, tokens, K+V elements]
  v0.strides = {256, 256, 16, 1};
  auto v2 = v0;
  v2.layer = "l2";
  v2.offset_bytes = 2048;
  auto groups = std::vector{group({"l0", "l1"}, 16), group({"l2"}, 32)};
  auto bound = bind_layers(three_layers(), groups, {v0, v2}, memory.data());
  ASSERT_TRUE(bound) << bound.err().message;
  EXPECT_EQ(bound->layer_names, (std::vector<std::string>{"l0", "l1", "l2"}));
  EXPECT_EQ(bound->layer_group, (std::vector<int32_t>{0, 0, 1}));
  ASSERT_EQ(bound->views.size(), 3u);
  EXPECT_EQ(bound->views[0].base, static_cast<void*>(memory.data()));
  EXPECT_EQ(bound->views[1].base, nullptr) << "l1 has no view: it stays empty";
  EXPECT_EQ(bound->views[2].base, static_cast<void*>(memory.data() + 2048));
  EXPECT_EQ(bound->views[2].num_blocks, 2);
}

TEST(RankStartup, GeometryTakesTheKernelBlockSizeOrTheManagersAndStateGroupsAreNotPositional) {
  auto geo = group_geometries(
      {group({"a"}, 16), group({"b"}, 32), group({"m"}, 64, kv_cache_spec_kind::mamba)}, {8, 0, 0});
  ASSERT_EQ(geo.size(), 3u);
  EXPECT_EQ(geo[0].block_size, 16);
  EXPECT_EQ(geo[0].kernel_block_size, 8);
  EXPECT_TRUE(geo[0].positional);
  EXPECT_EQ(geo[1].kernel_block_size, 32) << "0: no kernel block size, the manager's";
  EXPECT_FALSE(geo[2].positional);
}

TEST(RankStartup, BuildersGetTheAttentionGroupsOfThePlannedGroupsOnly) {
  backend_assignment a;
  a.attention_groups.resize(3);
  a.attention_groups[0].push_back({});
  a.attention_groups[2].push_back({}); // an encoder-only group without memory
  EXPECT_EQ(builder_attention_groups(a, 2).size(), 2u);
  EXPECT_EQ(builder_attention_groups(a, 5).size(), 3u);
}

TEST(RankStartup, GpuRanksAskForGraphsTensorParallelOnesIncluded) {
  auto c = config();
  c.cudagraph = cudagraph_mode::piecewise;
  c.cudagraph_capture_sizes = {1, 2, 4};
  c.cudagraph_lazy = true;
  c.cudagraph_memory = 1234;
  graph_support_info support;
  support.min_support = graph_support::always;
  auto one = cudagraph_request_for(c, support, 99, true);
  EXPECT_EQ(one.requested, cudagraph_mode::piecewise);
  EXPECT_EQ(one.support, support);
  EXPECT_EQ(one.capture_sizes, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(one.num_blocks, 99);
  EXPECT_TRUE(one.gpu);
  EXPECT_TRUE(one.lazy);
  EXPECT_EQ(one.memory_cap, 1234);
  EXPECT_EQ(one.max_num_seqs, 32);
  EXPECT_EQ(one.max_num_batched_tokens, 512);
  EXPECT_TRUE(one.not_capturable.empty());
  EXPECT_TRUE(cudagraph_request_for(config(0, 2), support, 99, true).not_capturable.empty())
      << "tensor-parallel GPU ranks capture their all-reduces into the graphs";
}

TEST(RankStartup, GraphSetupCoversTheLargestGraphAndTheWidestBlockTable) {
  cudagraph_plan plan;
  plan.capture_sizes = {1, 2, 8, 64};
  auto setup = graph_setup_for(plan, {0, 1, 0}, 16, {5, 12});
  EXPECT_EQ(setup.layer_group, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(setup.max_reqs, 16);
  EXPECT_EQ(setup.max_tokens, 64);
  EXPECT_EQ(setup.max_width, 12);
}
