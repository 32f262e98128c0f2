// One plan per shipped model config: the groups docs/vllm-semantics.md §3.4 prescribes for each
// architecture.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli_support.hpp"

using namespace kvactor::test;

namespace {

struct model_case {
  std::string name;
  int max_model_len;
  std::vector<std::string> kinds; // group kinds in group order
  std::string first_backend;
};

std::ostream& operator<<(std::ostream& os, const model_case& c) {
  return os << c.name;
}

std::vector<std::string> repeat(const std::string& kind, int n, std::vector<std::string> tail) {
  std::vector<std::string> out(static_cast<size_t>(n), kind);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

class PlanShippedModel : public ::testing::TestWithParam<model_case> {};

} // namespace

TEST_P(PlanShippedModel, FormsTheGroupsItsArchitectureNeeds) {
  const auto& c = GetParam();
  auto r = run_cli({"plan", "--model", c.name, "--kv-cache-memory", "40GiB", "--max-model-len",
                    std::to_string(c.max_model_len), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  std::vector<std::string> kinds;
  for (const auto& g : j["groups"])
    kinds.push_back(g["kind"]);
  EXPECT_EQ(kinds, c.kinds);
  EXPECT_EQ(j["groups"][0]["backend"], c.first_backend);
  // The 40 GiB budget in whole blocks; a model without a KV cache (encoder-only) allocates none.
  const auto bytes_per_block = j["bytes_per_block"].get<int64_t>();
  if (bytes_per_block > 0)
    EXPECT_EQ(j["num_blocks"].get<int64_t>(), (int64_t{40} << 30) / bytes_per_block);
  else
    EXPECT_TRUE(j["tensors"].empty()) << "no KV cache, no tensor";
  // Every layer that owns a cache has exactly one view, and no view lacks a cache.
  size_t cached_layers = 0;
  for (const auto& t : j["tensors"])
    cached_layers += t["layers"].size();
  EXPECT_EQ(cached_layers, j["views"].size());
  // The human report works for every model too.
  auto human = run_cli({"plan", "--model", c.name, "--kv-cache-memory", "40GiB", "--max-model-len",
                        std::to_string(c.max_model_len)});
  EXPECT_EQ(human.code, 0) << human.err;
}

INSTANTIATE_TEST_SUITE_P(
    DeployModels, PlanShippedModel,
    ::testing::Values(
        model_case{"llama-3.1-8b", 8192, {"full"}, "paged"},
        model_case{"llama-3.1-70b", 8192, {"full"}, "paged"},
        model_case{"mistral-7b-v0.1", 8192, {"sliding_window"}, "paged"},
        model_case{"qwen2.5-7b", 8192, {"full"}, "paged"},
        model_case{"qwen3-8b", 8192, {"full"}, "paged"},
        model_case{"phi-3-mini-4k-instruct", 4096, {"sliding_window"}, "paged"},
        model_case{"gemma-2-9b-it", 8192, {"sliding_window", "full"}, "paged"},
        model_case{"gemma-3-27b-it", 8192, repeat("sliding_window", 6, {"full"}), "paged"},
        model_case{"deepseek-v3", 8192, {"mla"}, "mla"},
        model_case{"gpt-oss-20b", 8192, {"sliding_window", "full"}, "paged"},
        // vLLM plans chunked local attention as full unless told otherwise (below).
        model_case{"llama-4-scout-17b-16e-instruct", 8192, {"full"}, "paged"},
        model_case{"qwen3-next-80b-a3b", 8192, repeat("mamba", 3, {"full"}), "state"},
        model_case{"ai21-jamba-1.5-mini", 8192, repeat("mamba", 7, {"full"}), "state"},
        model_case{"whisper-large-v3", 448, {"full", "cross_attention", "encoder_only"}, "paged"},
        model_case{"bert-base-uncased", 512, {"encoder_only"}, "paged"}),
    [](const auto& info) {
      auto n = info.param.name;
      std::replace_if(
          n.begin(), n.end(), [](char ch) { return !std::isalnum(ch); }, '_');
      return n;
    });

namespace {

// The bytes of one block id, worked out from each attention model's config by hand: 16 tokens
// x (K and V) x KV heads x head_dim x 2 bytes (bfloat16) per layer, times the layers that share
// one block id (all of them with one group; with hybrid groups, the largest group's layer count,
// as vLLM's hybrid allocator lays them out). MLA caches one latent of kv_lora_rank +
// qk_rope_head_dim per token instead of K and V.
struct block_bytes_case {
  std::string name;
  int max_model_len;
  int64_t bytes_per_block;
};

class PlanBlockBytes : public ::testing::TestWithParam<block_bytes_case> {};

std::ostream& operator<<(std::ostream& os, const block_bytes_case& c) {
  return os << c.name;
}

TEST_P(PlanBlockBytes, FollowFromTheModelsShape) {
  const auto& c = GetParam();
  auto j = run_cli({"plan", "--model", c.name, "--kv-cache-memory", "40GiB", "--max-model-len",
                    std::to_string(c.max_model_len), "--json"})
               .json();
  EXPECT_EQ(j["bytes_per_block"].get<int64_t>(), c.bytes_per_block);
}

constexpr int64_t page(int64_t kv_heads, int64_t head_dim) {
  return 16 * 2 * kv_heads * head_dim * 2;
}

} // namespace

INSTANTIATE_TEST_SUITE_P(
    DeployModels, PlanBlockBytes,
    ::testing::Values(
        block_bytes_case{"llama-3.1-8b", 8192, 32 * page(8, 128)},  // 32 layers, 1 group
        block_bytes_case{"llama-3.1-70b", 8192, 80 * page(8, 128)}, // 80 layers, 1 group
        block_bytes_case{"mistral-7b-v0.1", 8192, 32 * page(8, 128)},
        block_bytes_case{"qwen2.5-7b", 8192, 28 * page(4, 128)},
        block_bytes_case{"qwen3-8b", 8192, 36 * page(8, 128)},
        block_bytes_case{"gemma-2-9b-it", 8192, 21 * page(8, 256)},   // 42 layers in 2 groups
        block_bytes_case{"gemma-3-27b-it", 8192, 10 * page(16, 128)}, // groups of 10 (padded)
        block_bytes_case{"gpt-oss-20b", 8192, 12 * page(8, 64)},      // 24 layers in 2 groups
        block_bytes_case{"llama-4-scout-17b-16e-instruct", 8192, 48 * page(8, 128)}, // 1 group
        block_bytes_case{"deepseek-v3", 8192, 61 * 16 * (512 + 64) * 2}),            // MLA
    [](const auto& info) {
      auto n = info.param.name;
      std::replace_if(
          n.begin(), n.end(), [](char ch) { return !std::isalnum(ch); }, '_');
      return n;
    });

TEST(PlanHybrid, Gemma3SlidingGroupsPadToGroupsOfTen) {
  auto j = run_cli({"plan", "--model", "gemma-3-27b-it", "--kv-cache-memory", "40GiB",
                    "--max-model-len", "8192", "--json"})
               .json();
  EXPECT_EQ(j["groups"][0]["sliding_window"], 1024);
  EXPECT_EQ(j["groups"][0]["layers"][0], 0);
  EXPECT_EQ(j["groups"][6]["layers"].size(), 10u);
  EXPECT_EQ(j["groups"][6]["layers"][0], 5);
  // 10 layers x 16 heads... one block holds one page of each of 10 layers.
  EXPECT_EQ(j["bytes_per_block"], 10 * j["groups"][0]["page_size_bytes"].get<int64_t>());
  EXPECT_EQ(j["warnings"][0], "Add 8 padding layers, may waste at most 15.38% KV cache memory");
  // blocks per request: 8192/16 for full + 6 x (ceil((1023 + 2048)/16) + 1) for sliding groups.
  const double per_req = 512 + 6 * (192 + 1);
  EXPECT_NEAR(j["max_concurrency"].get<double>(), j["num_blocks"].get<double>() / per_req, 1e-9);
}

TEST(PlanHybrid, GptOssHasOneSlidingAndOneFullGroupOfTwelve) {
  auto j = run_cli({"plan", "--model", "gpt-oss-20b", "--kv-cache-memory", "20GiB",
                    "--max-model-len", "8192", "--json"})
               .json();
  ASSERT_EQ(j["groups"].size(), 2u);
  EXPECT_EQ(j["groups"][0]["sliding_window"], 128);
  EXPECT_EQ(j["groups"][0]["layers"],
            (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}));
  EXPECT_EQ(j["groups"][1]["layers"].size(), 12u);
  // Page: 16 tokens x 8 KV heads x (64 + 64) x 2 bytes; a block spans 12 layers.
  EXPECT_EQ(j["groups"][0]["page_size_bytes"], 32768);
  EXPECT_EQ(j["bytes_per_block"], 12 * 32768);
  EXPECT_EQ(j["num_blocks"], (int64_t{20} << 30) / (12 * 32768));
}

TEST(PlanHybrid, Qwen3NextAttentionBlocksGrowToHoldOneStatePage) {
  auto j = run_cli({"plan", "--model", "qwen3-next-80b-a3b", "--kv-cache-memory", "40GiB",
                    "--max-model-len", "8192", "--json"})
               .json();
  // State page 1,097,728 B / 2,048 B per attention token = 536 tokens -> 544 (multiple of 16).
  EXPECT_EQ(j["block_size"], 544);
  const auto& full = j["groups"][3];
  EXPECT_EQ(full["block_size"], 544);
  EXPECT_EQ(full["page_size_bytes"], 544 * 2048);
  EXPECT_EQ(j["groups"][0]["page_size_bytes"], 544 * 2048);
  EXPECT_EQ(j["groups"][0]["blocks_per_request"], 1);
}

TEST(PlanHybrid, DeepSeekMlaLimitsFullGraphsToDecode) {
  auto j = run_cli({"plan", "--model", "deepseek-v3", "--kv-cache-memory", "40GiB",
                    "--max-model-len", "8192", "--json"})
               .json();
  EXPECT_EQ(j["groups"][0]["page_size_bytes"], 16 * 576 * 2);
  EXPECT_EQ(j["cudagraph"]["min_graph_support"], "uniform_batch");
  EXPECT_EQ(j["cudagraph"]["min_graph_support_backend"], "mla");
  EXPECT_EQ(j["cudagraph"]["mode"], "full_and_piecewise");
  EXPECT_EQ(j["per_rank"][0]["num_kv_heads"], 1);
}

TEST(PlanHybrid, BertNeedsNoKvCache) {
  auto r = run_cli({"plan", "--model", "bert-base-uncased", "--kv-cache-memory", "1GiB"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("No KV cache needed"), std::string::npos);
  auto j = run_cli({"plan", "--model", "bert-base-uncased", "--kv-cache-memory", "1GiB", "--json"})
               .json();
  EXPECT_EQ(j["num_blocks"], 1);
  EXPECT_TRUE(j["tensors"].empty());
  EXPECT_TRUE(j["groups"][0]["kernel_block_size"].is_null());
}

TEST(PlanHybrid, KvSharingLayersAliasTheirTargetsAndMayFastPrefill) {
  auto model = std::string{KVACTOR_SOURCE_DIR} + "/tests/data/synthetic-gemma3n-kv-sharing.json";
  auto r = run_cli({"plan", "--model", model, "--kv-cache-memory", "4GiB", "--max-model-len",
                    "4096", "--kv-sharing-fast-prefill", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  ASSERT_FALSE(j["kv_sharing"].empty());
  EXPECT_EQ(j["fast_prefill_layers"].size(), j["kv_sharing"].size());
  for (const auto& [layer, target] : j["kv_sharing"].items()) {
    nlohmann::json lv, tv;
    for (const auto& v : j["views"]) {
      if (v["layer"] == layer) lv = v;
      if (v["layer"] == target) tv = v;
    }
    ASSERT_FALSE(lv.is_null()) << layer;
    EXPECT_EQ(lv["offset_bytes"], tv["offset_bytes"]) << layer;
  }
}

TEST(PlanHybrid, LongCatDualAttentionPlansBothModulesPerLayer) {
  auto model =
      std::string{KVACTOR_SOURCE_DIR} + "/tests/data/synthetic-longcat-flash-dual-attention.json";
  auto r = run_cli(
      {"plan", "--model", model, "--kv-cache-memory", "4GiB", "--max-model-len", "4096", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  ASSERT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["groups"][0]["kind"], "mla");
  // 4 layers of two modules each: every layer index twice, in order.
  EXPECT_EQ(j["groups"][0]["layers"], nlohmann::json::parse("[0, 0, 1, 1, 2, 2, 3, 3]"));
}

// vLLM turns its hybrid KV cache manager off for chunked local attention (Llama 4) unless
// VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1: one group of full-length caches, with the
// reason in the warnings; the flag plans the hybrid groups (3 chunked + 1 full, 12 layers each).
TEST(PlanChunkedLocal, Llama4PlansOneFullGroupAsVllmUnlessTheHybridPlanIsAllowed) {
  auto j = run_cli({"plan", "--model", "llama-4-scout-17b-16e-instruct", "--kv-cache-memory",
                    "40GiB", "--max-model-len", "8192", "--json"})
               .json();
  ASSERT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["groups"][0]["kind"], "full");
  EXPECT_EQ(j["groups"][0]["layers"].size(), 48u);
  bool warned = false;
  for (const auto& w : j["warnings"])
    warned = warned
             || w.get<std::string>().find("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE")
                    != std::string::npos;
  EXPECT_TRUE(warned) << j["warnings"];
  auto hybrid = run_cli({"plan", "--model", "llama-4-scout-17b-16e-instruct", "--kv-cache-memory",
                         "40GiB", "--max-model-len", "8192",
                         "--allow-chunked-local-attn-with-hybrid-kv-cache", "--json"})
                    .json();
  ASSERT_EQ(hybrid["groups"].size(), 4u);
  EXPECT_EQ(hybrid["groups"][0]["kind"], "chunked_local");
  EXPECT_EQ(hybrid["groups"][3]["kind"], "full");
  EXPECT_EQ(hybrid["bytes_per_block"].get<int64_t>(), 12 * page(8, 128));
}
