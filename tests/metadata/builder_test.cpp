#include "actors/metadata/builder.hpp"

#include <gtest/gtest.h>

namespace kvactor {
namespace {

using ints = std::vector<int32_t>;

// What one build call saw.
struct build_call {
  int32_t common_prefix_len = -1;
  bool for_capture = false;
  common_attention_metadata common;
};

// Records every call into a log the test keeps; builds reference metadata.
class recording_builder final : public metadata_builder {
public:
  explicit recording_builder(std::vector<build_call>* log) : log_(log) {}

  std::shared_ptr<const backend_metadata> build(int32_t common_prefix_len,
                                                const common_attention_metadata& m) override {
    log_->push_back({common_prefix_len, false, m});
    return reference_builder{"recording"}.build(common_prefix_len, m);
  }

  std::shared_ptr<const backend_metadata>
  build_for_cudagraph_capture(const common_attention_metadata& m) override {
    log_->push_back({0, true, m});
    return reference_builder{"recording"}.build(0, m);
  }

private:
  std::vector<build_call>* log_;
};

attention_group group(int32_t kv_group, std::vector<std::string> layers) {
  attention_group g;
  g.backend = "reference";
  g.layer_names = std::move(layers);
  g.kv_cache_group_id = kv_group;
  return g;
}

// Case 56's inputs: 2 requests (2 and 3 tokens), per group a one-column table.
attention_inputs case56_inputs() {
  attention_inputs in;
  in.query_start_loc = {0, 2, 5};
  in.seq_lens = {8, 16};
  in.num_reqs = 2;
  in.num_tokens = 5;
  in.max_query_len = 3;
  in.max_seq_len = 16;
  in.groups = {{{4, 7}, 1, {64, 65, 112, 113, 114}}, {{9, 3}, 1, {144, 145, 48, 49, 50}}};
  return in;
}

struct fixture : ::testing::Test {
  std::vector<std::vector<attention_group>> groups{{group(0, {"layer0"})}, {group(1, {"layer1"})}};
  std::vector<build_call> log0;
  std::vector<build_call> log1;
  builder_table builders;

  fixture() {
    builders.resize(2);
    builders[0].resize(1);
    builders[1].resize(1);
    builders[0][0].push_back(std::make_unique<recording_builder>(&log0));
    builders[1][0].push_back(std::make_unique<recording_builder>(&log1));
  }

  std::string error_of(const attention_inputs& in) {
    auto r = build_attention_metadata(groups, builders, in);
    return r ? std::string{} : r.err().message;
  }
};

using BuildAttentionMetadata = fixture;

TEST_F(BuildAttentionMetadata, EveryGroupBuildsOnceForItsLayers) {
  // Case 56.
  auto r = build_attention_metadata(groups, builders, case56_inputs());
  ASSERT_TRUE(r) << r.err().message;
  ASSERT_EQ(r->size(), 2u);
  ASSERT_TRUE(r->count("layer0") && r->count("layer1"));
  for (const auto* log : {&log0, &log1}) {
    ASSERT_EQ(log->size(), 1u);
    const auto& call = log->front();
    EXPECT_EQ(call.common_prefix_len, 0);
    EXPECT_FALSE(call.for_capture);
    EXPECT_EQ(call.common.num_reqs, 2);
    EXPECT_EQ(call.common.num_actual_tokens, 5);
    EXPECT_EQ(call.common.query_start_loc, (ints{0, 2, 5}));
    EXPECT_EQ(call.common.seq_lens, (ints{8, 16}));
    EXPECT_EQ(call.common.max_query_len, 3);
  }
  EXPECT_EQ(log0[0].common.block_table, (ints{4, 7}));
  EXPECT_EQ(log1[0].common.slot_mapping, (std::vector<int64_t>{144, 145, 48, 49, 50}));
  EXPECT_EQ(r->at("layer1")->common.block_table, (ints{9, 3}));
}

TEST_F(BuildAttentionMetadata, LayersOfOneAttentionGroupShareOneObject) {
  groups[0][0].layer_names = {"layer0", "layer2", "layer4"};
  auto r = build_attention_metadata(groups, builders, case56_inputs());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size(), 4u);
  EXPECT_EQ(r->at("layer0").get(), r->at("layer2").get());
  EXPECT_EQ(r->at("layer0").get(), r->at("layer4").get());
  EXPECT_NE(r->at("layer0").get(), r->at("layer1").get());
  EXPECT_EQ(log0.size(), 1u);
}

TEST_F(BuildAttentionMetadata, CaptureUsesTheCaptureEntryPoint) {
  auto in = case56_inputs();
  in.for_cudagraph_capture = true;
  ASSERT_TRUE(build_attention_metadata(groups, builders, in));
  ASSERT_EQ(log0.size(), 1u);
  EXPECT_TRUE(log0[0].for_capture);
}

TEST_F(BuildAttentionMetadata, InputsAreTruncatedToTheRequestCount) {
  auto in = case56_inputs();
  in.query_start_loc = {0, 2, 5, 5, 5}; // persistent buffers hold more rows
  in.seq_lens = {8, 16, 0, 0};
  in.is_prefilling = {true, false, false, false};
  in.groups[0].block_table = {4, 7, 0, 0};
  ASSERT_TRUE(build_attention_metadata(groups, builders, in));
  EXPECT_EQ(log0[0].common.query_start_loc, (ints{0, 2, 5}));
  EXPECT_EQ(log0[0].common.seq_lens, (ints{8, 16}));
  EXPECT_EQ(log0[0].common.block_table, (ints{4, 7}));
  EXPECT_EQ(log0[0].common.is_prefilling, (std::vector<bool>{true, false}));
}

TEST_F(BuildAttentionMetadata, CausalIsPerGroupAndDefaultsToTrue) {
  auto in = case56_inputs();
  in.causal = {{1, false}};
  ASSERT_TRUE(build_attention_metadata(groups, builders, in));
  EXPECT_TRUE(log0[0].common.causal);
  EXPECT_FALSE(log1[0].common.causal);
}

TEST_F(BuildAttentionMetadata, FastPrefillFieldsReachTheCommonMetadata) {
  auto in = case56_inputs();
  in.fast_prefill = fast_prefill_metadata{{1, 4, 4, 4}, 2, 1};
  ASSERT_TRUE(build_attention_metadata(groups, builders, in));
  EXPECT_EQ(log0[0].common.logits_indices_padded, (ints{1, 4, 4, 4}));
  EXPECT_EQ(log0[0].common.num_logits_indices, 2);
  EXPECT_EQ(log0[0].common.max_logits_per_req, 1);
}

TEST_F(BuildAttentionMetadata, EachUbatchUsesItsOwnBuilder) {
  std::vector<build_call> second;
  builders[0][0].push_back(std::make_unique<recording_builder>(&second));
  builders[1][0].push_back(std::make_unique<reference_builder>());
  auto in = case56_inputs();
  in.ubatch_idx = 1;
  auto r = build_attention_metadata(groups, builders, in);
  ASSERT_TRUE(r);
  EXPECT_TRUE(log0.empty());
  EXPECT_EQ(second.size(), 1u);
  EXPECT_EQ(r->at("layer1")->backend, "reference");
}

TEST_F(BuildAttentionMetadata, KvCacheGroupWithoutAttentionGroupsIsSkipped) {
  groups.push_back({});
  builders.emplace_back();
  auto in = case56_inputs();
  in.groups.push_back({});
  auto r = build_attention_metadata(groups, builders, in);
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->size(), 2u);
}

TEST_F(BuildAttentionMetadata, RejectsUbatchIdxOutOfRange) {
  auto in = case56_inputs();
  in.ubatch_idx = 1;
  EXPECT_NE(error_of(in).find("ubatch_idx: 1 out of range"), std::string::npos) << error_of(in);
  in.ubatch_idx = -1;
  EXPECT_NE(error_of(in).find("ubatch_idx: -1"), std::string::npos);
  EXPECT_TRUE(log0.empty());
}

TEST_F(BuildAttentionMetadata, RejectsMismatchedSizesWithoutCallingAnyBuilder) {
  auto in = case56_inputs();
  in.seq_lens = {8};
  EXPECT_NE(error_of(in).find("seq_lens: 1 entries"), std::string::npos);
  in = case56_inputs();
  in.query_start_loc = {0, 2};
  EXPECT_NE(error_of(in).find("query_start_loc: 2 entries"), std::string::npos);
  in = case56_inputs();
  in.groups.pop_back();
  EXPECT_NE(error_of(in).find("groups: 1 block tables"), std::string::npos);
  in = case56_inputs();
  in.groups[1].block_table = {9};
  EXPECT_NE(error_of(in).find("groups[1].block_table: 1 entries"), std::string::npos);
  in = case56_inputs();
  in.groups[1].slot_mapping = {1, 2, 3};
  EXPECT_NE(error_of(in).find("KV cache group 1: slot_mapping: 3 entries"), std::string::npos)
      << error_of(in);
  in = case56_inputs();
  in.num_tokens = 4;
  EXPECT_NE(error_of(in).find("exceeds num_actual_tokens 4"), std::string::npos);
  EXPECT_TRUE(log0.empty());
  EXPECT_TRUE(log1.empty());
}

TEST_F(BuildAttentionMetadata, RejectsABuilderTableThatDoesNotMatchTheGroups) {
  builders[1].emplace_back();
  EXPECT_NE(error_of(case56_inputs()).find("builders[1]: 2 attention groups"), std::string::npos);
  builders[1].pop_back();
  builders[1][0][0].reset();
  EXPECT_NE(error_of(case56_inputs()).find("builders[1][0][0]: no builder"), std::string::npos);
  builders.pop_back();
  EXPECT_NE(error_of(case56_inputs()).find("builders: 1 KV cache groups"), std::string::npos);
}

TEST_F(BuildAttentionMetadata, RejectsALayerInTwoAttentionGroups) {
  groups[1][0].layer_names = {"layer0"};
  EXPECT_NE(error_of(case56_inputs()).find("layer 'layer0' is in two attention groups"),
            std::string::npos);
}

TEST(ReferenceBuilder, CopiesTheCommonMetadata) {
  common_attention_metadata m;
  m.num_reqs = 1;
  m.num_actual_tokens = 1;
  m.query_start_loc = {0, 1};
  m.seq_lens = {4};
  m.slot_mapping = {3};
  reference_builder b;
  auto md = b.build(0, m);
  ASSERT_TRUE(md);
  EXPECT_EQ(md->backend, "reference");
  EXPECT_EQ(md->common, m);
  EXPECT_EQ(b.build_for_cudagraph_capture(m)->common, m);
}

} // namespace
} // namespace kvactor
