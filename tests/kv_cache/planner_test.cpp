// docs/vllm-semantics.md §10 "Single-worker configs", "Multi-worker" and "Capacity / estimation"
// cases, and the §3.8 Llama-3-8B worked numbers.
#include <gtest/gtest.h>

#include "actors/kv_cache/planner.hpp"
#include "helpers.hpp"

using namespace kvactor;
using namespace kvactor::test;

namespace {

kv_plan_options options(int64_t max_model_len = 16) {
  kv_plan_options opt;
  opt.limits = limits_of(max_model_len);
  return opt;
}

kv_plan plan_one(const layer_spec_list& specs, int64_t mem, kv_plan_options opt = options()) {
  auto p = plan_kv_cache({specs}, {mem}, opt);
  EXPECT_TRUE(p) << (p ? "" : p.err().message);
  return p ? *p : kv_plan{};
}

layer_spec_list llama_layers(int32_t heads = 8, dtype dt = dtype::bfloat16) {
  layer_spec_list out;
  for (int i = 0; i < 32; ++i)
    out.push_back({"model.layers." + std::to_string(i) + ".self_attn.attn",
                   full_attention_spec(16, heads, 128, dt)});
  return out;
}

constexpr int64_t gib = int64_t{1} << 30;

} // namespace

TEST(KvPlanner, TwoFullLayersShareOneGroupAndOneTensor) {
  auto p = plan_one(layers({full(), full()}), 2 * 32 * p0);
  const auto& cfg = p.per_rank.at(0);
  EXPECT_EQ(cfg.num_blocks, 32);
  ASSERT_EQ(cfg.groups.size(), 1u);
  ASSERT_EQ(cfg.tensors.size(), 1u);
  EXPECT_EQ(cfg.tensors[0].size, 2 * 32 * p0);
  EXPECT_EQ(cfg.tensors[0].layers, (std::vector<std::string>{"layer_1", "layer_2"}));
  EXPECT_EQ(cfg.tensors[0].layer_stride, 32 * p0);
  EXPECT_EQ(cfg.tensors[0].block_stride, p0);
  EXPECT_EQ(cfg.tensors[0].offset, 0);
}

TEST(KvPlanner, TwoSlidingLayersFormOneSlidingGroup) {
  auto cfg = plan_one(layers({sw(), sw()}), 2 * 32 * p0).per_rank.at(0);
  EXPECT_EQ(cfg.num_blocks, 32);
  ASSERT_EQ(cfg.groups.size(), 1u);
  EXPECT_EQ(cfg.groups[0].spec.kind, kv_cache_spec_kind::sliding_window);
}

TEST(KvPlanner, HybridManagerDisabledTurnsWindowIntoFullAttention) {
  auto opt = options();
  opt.grouping.disable_hybrid = true;
  auto p = plan_one(layers({full(), sw(1)}), 2 * 32 * p0, opt);
  const auto& cfg = p.per_rank.at(0);
  EXPECT_EQ(cfg.num_blocks, 32);
  ASSERT_EQ(cfg.groups.size(), 1u);
  EXPECT_EQ(cfg.groups[0].spec, full(2, 64, 1));
  EXPECT_FALSE(p.warnings.empty());
}

TEST(KvPlanner, HybridFullAndSlidingGetOneGroupEachAndAliasOneAllocation) {
  auto cfg = plan_one(layers({full(), sw(1)}), 2 * 32 * p0).per_rank.at(0);
  EXPECT_EQ(cfg.num_blocks, 64);
  ASSERT_EQ(cfg.groups.size(), 2u);
  EXPECT_EQ(cfg.groups[0].layer_names, std::vector<std::string>{"layer_1"});
  EXPECT_EQ(cfg.groups[1].layer_names, std::vector<std::string>{"layer_2"});
  ASSERT_EQ(cfg.tensors.size(), 2u);
  for (const auto& t : cfg.tensors) {
    EXPECT_EQ(t.size, 64 * p0);
    EXPECT_EQ(t.offset, 0);
  }
}

TEST(KvPlanner, HybridSlidingWindowSharesOnePool) {
  auto cfg = plan_one(layers({full(), full(), sw(), sw(), sw(), sw()}), 2 * 32 * p0).per_rank.at(0);
  EXPECT_EQ(cfg.num_blocks, 32);
  ASSERT_EQ(cfg.groups.size(), 3u);
  EXPECT_EQ(cfg.groups[0].layer_names, (std::vector<std::string>{"layer_1", "layer_2"}));
  EXPECT_EQ(cfg.groups[1].layer_names, (std::vector<std::string>{"layer_3", "layer_5"}));
  EXPECT_EQ(cfg.groups[2].layer_names, (std::vector<std::string>{"layer_4", "layer_6"}));
  // Layer i of every group shares bytes: {L1, L3, L4} and {L2, L5, L6} (Era A's shared_by).
  for (const auto& t : cfg.tensors) {
    EXPECT_EQ(t.size, 2 * 32 * p0);
    EXPECT_EQ(t.offset, 0);
    EXPECT_EQ(t.layer_stride, 32 * p0);
  }
}

TEST(KvPlanner, DifferentHeadSizesFormOneUniformTypeGroup) {
  auto cfg = plan_one(layers({full(2, 128), full(2, 64)}), 3 * 32 * p0).per_rank.at(0);
  EXPECT_EQ(cfg.num_blocks, 32);
  ASSERT_EQ(cfg.groups.size(), 1u);
  EXPECT_EQ(cfg.groups[0].spec.kind, kv_cache_spec_kind::uniform_type);
  ASSERT_EQ(cfg.tensors.size(), 2u);
  EXPECT_EQ(cfg.tensors[0].layers, std::vector<std::string>{"layer_1"});
  EXPECT_EQ(cfg.tensors[0].layer_stride, 2 * 32 * p0);
  EXPECT_EQ(cfg.tensors[1].offset, 2 * 32 * p0);
  EXPECT_EQ(cfg.tensors[1].layer_stride, 32 * p0);
  EXPECT_EQ(cfg.tensors[0].size, 3 * 32 * p0);
}

TEST(KvPlanner, BlockOverrideWinsOverMemory) {
  auto opt = options();
  opt.num_gpu_blocks_override = 16;
  auto p = plan_one(layers({full(), full()}), 2 * 32 * p0, opt);
  EXPECT_EQ(p.per_rank.at(0).num_blocks, 16);
  EXPECT_EQ(p.per_rank.at(0).tensors.at(0).size, 2 * 16 * p0);
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_EQ(p.warnings.back(), "Overriding num_gpu_blocks=32 with num_gpu_blocks_override=16");
}

TEST(KvPlanner, AttentionFreeModelKeepsOnlyTheNullBlock) {
  auto p = plan_one({}, 0);
  const auto& cfg = p.per_rank.at(0);
  EXPECT_EQ(cfg.num_blocks, 1);
  EXPECT_TRUE(cfg.tensors.empty());
  EXPECT_TRUE(cfg.groups.empty());
}

TEST(KvPlanner, EqualRanksGetEqualBlocks) {
  auto specs = layers({full(), full()});
  auto p = plan_kv_cache({specs, specs}, {2 * 10 * p0, 2 * 10 * p0}, options());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->per_rank[0].num_blocks, 10);
  EXPECT_EQ(p->per_rank[1].num_blocks, 10);
}

TEST(KvPlanner, RanksTakeTheMinimumBlockCount) {
  auto specs = layers({full(), full()});
  auto p = plan_kv_cache({specs, specs}, {2 * 20 * p0, 2 * 10 * p0}, options());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->planned_blocks, (std::vector<int64_t>{20, 10}));
  EXPECT_EQ(p->per_rank[0].num_blocks, 10);
  EXPECT_EQ(p->per_rank[0].tensors[0].size, 2 * 10 * p0);
  EXPECT_EQ(p->per_rank[1].num_blocks, 10);
}

TEST(KvPlanner, SameLayerWithDifferentSpecsOnTwoRanksIsAnError) {
  auto p = plan_kv_cache({layers({full(2)}), layers({full(4)})}, {32 * p0, 32 * p0}, options());
  ASSERT_FALSE(p);
  EXPECT_EQ(p.err().code, errc::incompatible_specs);
  EXPECT_NE(p.err().message.find("layer_1"), std::string::npos);
}

TEST(KvPlanner, ZeroOrNegativeBudgetIsAnError) {
  for (int64_t mem : {int64_t{0}, int64_t{-5}}) {
    auto p = plan_kv_cache({layers({full()})}, {mem}, options());
    ASSERT_FALSE(p);
    EXPECT_EQ(p.err().code, errc::insufficient_memory);
  }
}

TEST(KvCapacity, ConcurrencyDividesBlocksBySumOverGroups) {
  auto lim = limits_of(16384, 1024);
  auto f = full_attention_spec(16, 32, 128, dtype::float16);
  auto s = sliding_window_spec(16, 32, 128, dtype::float16, 1024);
  kv_cache_config cfg;
  cfg.groups = {{{"a"}, f}};
  cfg.num_blocks = 1536;
  EXPECT_DOUBLE_EQ(kv_capacity(cfg, lim).max_concurrency, 1.5);
  cfg.groups = {{{"a"}, s}};
  cfg.num_blocks = 387;
  EXPECT_DOUBLE_EQ(kv_capacity(cfg, lim).max_concurrency, 3.0);
  cfg.groups = {{{"a"}, f}, {{"b"}, s}};
  cfg.num_blocks = 3459;
  EXPECT_DOUBLE_EQ(kv_capacity(cfg, lim).max_concurrency, 3.0);
}

TEST(KvCapacity, EstimatedMaxModelLenIsCappedByTheConfiguredLength) {
  layer_spec_list specs;
  for (int i = 0; i < 32; ++i)
    specs.push_back({std::to_string(i), full_attention_spec(16, 32, 128, dtype::float16)});
  EXPECT_EQ(estimate_max_model_len(specs, limits_of(16385), 8 * gib), 16384);
  EXPECT_EQ(estimate_max_model_len(specs, limits_of(16383), 8 * gib), 16383);
  EXPECT_EQ(estimate_max_model_len(specs, limits_of(16383), 1000), 0);
}

struct llama_row {
  int64_t bytes;
  int64_t max_model_len;
  int64_t blocks;
  double concurrency;
  int64_t tokens;
};

class LlamaWorkedNumbers : public ::testing::TestWithParam<llama_row> {};

TEST_P(LlamaWorkedNumbers, BlocksConcurrencyAndTokensMatchTheSpecTable) {
  auto row = GetParam();
  auto p = plan_one(llama_layers(), row.bytes, options(row.max_model_len));
  const auto& cfg = p.per_rank.at(0);
  EXPECT_EQ(cfg.num_blocks, row.blocks);
  auto cap = kv_capacity(cfg, options(row.max_model_len).limits);
  EXPECT_NEAR(cap.max_concurrency, row.concurrency, 1e-9);
  EXPECT_EQ(cap.tokens, row.tokens);
}

INSTANTIATE_TEST_SUITE_P(Spec38, LlamaWorkedNumbers,
                         ::testing::Values(llama_row{20 * gib, 8192, 10240, 20.0, 163840},
                                           llama_row{10 * gib, 8192, 5120, 10.0, 81920},
                                           llama_row{50'000'000'000, 8192, 23841, 46.564453125,
                                                     381456},
                                           llama_row{70 * gib + gib / 2, 8192, 36096, 70.5, 577536},
                                           llama_row{20 * gib, 8000, 10240, 20.48, 163840},
                                           llama_row{20 * gib, 131072, 10240, 1.25, 163840}));

TEST(KvPlanner, OneGiBIsTooSmallForOneLlamaRequestOnceTheNullBlockIsReserved) {
  auto p = plan_kv_cache({llama_layers()}, {gib}, options(8192));
  ASSERT_FALSE(p);
  EXPECT_EQ(p.err().code, errc::insufficient_memory);
  EXPECT_NE(p.err().message.find("max seq len (8192)"), std::string::npos);
  EXPECT_NE(p.err().message.find("estimated maximum model length is 8176"), std::string::npos);
}

TEST(KvPlanner, TensorParallelHalvesThePageAndKeepsBlocksPerRank) {
  auto specs = llama_layers(4);
  auto p = plan_kv_cache({specs, specs}, {10 * gib, 10 * gib}, options(8192));
  ASSERT_TRUE(p);
  EXPECT_EQ(bytes_per_block(p->per_rank[0].groups), 1 << 20);
  EXPECT_EQ(p->per_rank[0].num_blocks, 10240);
  EXPECT_EQ(p->per_rank[1].num_blocks, 10240);
}

TEST(KvPlanner, Fp8KvCacheDoublesBlocks) {
  auto p = plan_one(llama_layers(8, dtype::fp8_e4m3), 20 * gib, options(8192));
  EXPECT_EQ(p.per_rank.at(0).num_blocks, 20480);
  EXPECT_EQ(kv_capacity(p.per_rank[0], options(8192).limits).tokens, 327680);
}

TEST(KvPlanner, OverrideOfAThousandBlocksLogsTheProfiledCount) {
  auto opt = options(8192);
  opt.num_gpu_blocks_override = 1000;
  auto p = plan_one(llama_layers(), 20 * gib, opt);
  EXPECT_EQ(p.per_rank.at(0).num_blocks, 1000);
  EXPECT_EQ(p.warnings.back(), "Overriding num_gpu_blocks=10240 with num_gpu_blocks_override=1000");
}
