#include "actors/metadata/builder.hpp"

#include <gtest/gtest.h>

#include "views.hpp"

namespace kvactor {
namespace {

using ints = std::vector<int32_t>;
using longs = std::vector<int64_t>;
using test::vec;

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

// docs/vllm-semantics.md §10 case 56's inputs: 2 requests (2 and 3 tokens), per group a
// one-column table. Owns the block tables, slot mappings and positions `in` views (the rank's
// persistent buffers); neither copyable nor movable, since a copy's views would still point at
// the original's vectors.
struct case56 {
  std::vector<ints> block_tables{{4, 7}, {9, 3}};
  std::vector<longs> slot_mappings{{64, 65, 112, 113, 114}, {144, 145, 48, 49, 50}};
  longs positions{6, 7, 13, 14, 15};
  attention_inputs in;

  case56() {
    in.query_start_loc = {0, 2, 5};
    in.seq_lens = {8, 16};
    in.num_reqs = 2;
    in.num_tokens = 5;
    in.max_query_len = 3;
    in.max_seq_len = 16;
    in.groups.resize(block_tables.size());
    for (size_t g = 0; g < in.groups.size(); ++g)
      in.groups[g].width = 1;
    rebind();
  }
  case56(const case56&) = delete;
  case56& operator=(const case56&) = delete;

  /// Points the views at the vectors again; call after resizing or reassigning one.
  void rebind() {
    for (size_t g = 0; g < block_tables.size(); ++g) {
      in.groups[g].block_table = block_tables[g];
      in.groups[g].slot_mapping = slot_mappings[g];
    }
  }
};

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
  // docs/vllm-semantics.md §10 case 56.
  case56 c;
  auto r = build_attention_metadata(groups, builders, c.in);
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
  EXPECT_EQ(vec(log0[0].common.block_table), (ints{4, 7}));
  EXPECT_EQ(vec(log1[0].common.slot_mapping), (longs{144, 145, 48, 49, 50}));
  EXPECT_EQ(vec(r->at("layer1")->common.block_table), (ints{9, 3}));
}

TEST_F(BuildAttentionMetadata, CommonMetadataViewsTheCallersBuffersWithoutCopying) {
  // The point of the views: a build copies no block table, slot mapping or positions, so the
  // metadata keeps the persistent buffers' addresses (what a CUDA graph replays).
  case56 c;
  c.in.positions = c.positions;
  auto r = build_attention_metadata(groups, builders, c.in);
  ASSERT_TRUE(r) << r.err().message;
  for (size_t g = 0; g < 2; ++g) {
    const auto& common = r->at(g == 0 ? "layer0" : "layer1")->common;
    EXPECT_EQ(common.block_table.data(), c.block_tables[g].data()) << "group " << g;
    EXPECT_EQ(common.block_table.size(), 2u);
    EXPECT_EQ(common.slot_mapping.data(), c.slot_mappings[g].data()) << "group " << g;
    EXPECT_EQ(common.positions.data(), c.positions.data()) << "group " << g;
    EXPECT_EQ(vec(common.positions), (longs{6, 7, 13, 14, 15}));
  }
  EXPECT_EQ(log0[0].common.block_table.data(), c.block_tables[0].data());
  // Writing the buffer (the next step) shows through the views: nothing was copied.
  c.block_tables[0][1] = 42;
  EXPECT_EQ(vec(r->at("layer0")->common.block_table_row(1)), ints{42});
}

TEST_F(BuildAttentionMetadata, LayersOfOneAttentionGroupShareOneObject) {
  groups[0][0].layer_names = {"layer0", "layer2", "layer4"};
  case56 c;
  auto r = build_attention_metadata(groups, builders, c.in);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size(), 4u);
  EXPECT_EQ(r->at("layer0").get(), r->at("layer2").get());
  EXPECT_EQ(r->at("layer0").get(), r->at("layer4").get());
  EXPECT_NE(r->at("layer0").get(), r->at("layer1").get());
  EXPECT_EQ(log0.size(), 1u);
}

TEST_F(BuildAttentionMetadata, CaptureUsesTheCaptureEntryPoint) {
  case56 c;
  c.in.for_cudagraph_capture = true;
  ASSERT_TRUE(build_attention_metadata(groups, builders, c.in));
  ASSERT_EQ(log0.size(), 1u);
  EXPECT_TRUE(log0[0].for_capture);
}

TEST_F(BuildAttentionMetadata, InputsAreTruncatedToTheRequestCount) {
  case56 c;
  c.in.query_start_loc = {0, 2, 5, 5, 5}; // persistent buffers hold more rows
  c.in.seq_lens = {8, 16, 0, 0};
  c.in.is_prefilling = {true, false, false, false};
  c.block_tables[0] = {4, 7, 0, 0};
  c.rebind();
  ASSERT_TRUE(build_attention_metadata(groups, builders, c.in));
  EXPECT_EQ(log0[0].common.query_start_loc, (ints{0, 2, 5}));
  EXPECT_EQ(log0[0].common.seq_lens, (ints{8, 16}));
  EXPECT_EQ(vec(log0[0].common.block_table), (ints{4, 7}));
  EXPECT_EQ(log0[0].common.block_table.data(), c.block_tables[0].data()); // the leading rows
  EXPECT_EQ(log0[0].common.is_prefilling, (std::vector<bool>{true, false}));
}

TEST_F(BuildAttentionMetadata, CausalIsPerGroupAndDefaultsToTrue) {
  case56 c;
  c.in.causal = {{1, false}};
  ASSERT_TRUE(build_attention_metadata(groups, builders, c.in));
  EXPECT_TRUE(log0[0].common.causal);
  EXPECT_FALSE(log1[0].common.causal);
}

TEST_F(BuildAttentionMetadata, FastPrefillFieldsReachTheCommonMetadata) {
  case56 c;
  c.in.fast_prefill = fast_prefill_metadata{{1, 4, 4, 4}, 2, 1};
  ASSERT_TRUE(build_attention_metadata(groups, builders, c.in));
  EXPECT_EQ(log0[0].common.logits_indices_padded, (ints{1, 4, 4, 4}));
  EXPECT_EQ(log0[0].common.num_logits_indices, 2);
  EXPECT_EQ(log0[0].common.max_logits_per_req, 1);
}

TEST_F(BuildAttentionMetadata, EachUbatchUsesItsOwnBuilder) {
  std::vector<build_call> second;
  builders[0][0].push_back(std::make_unique<recording_builder>(&second));
  builders[1][0].push_back(std::make_unique<reference_builder>());
  case56 c;
  c.in.ubatch_idx = 1;
  auto r = build_attention_metadata(groups, builders, c.in);
  ASSERT_TRUE(r);
  EXPECT_TRUE(log0.empty());
  EXPECT_EQ(second.size(), 1u);
  EXPECT_EQ(r->at("layer1")->backend, "reference");
}

TEST_F(BuildAttentionMetadata, KvCacheGroupWithoutAttentionGroupsIsSkipped) {
  groups.push_back({});
  builders.emplace_back();
  case56 c;
  c.in.groups.push_back({}); // empty views: nothing is read for a group without attention groups
  auto r = build_attention_metadata(groups, builders, c.in);
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->size(), 2u);
}

TEST_F(BuildAttentionMetadata, RejectsUbatchIdxOutOfRange) {
  case56 c;
  c.in.ubatch_idx = 1;
  EXPECT_NE(error_of(c.in).find("ubatch_idx: 1 out of range"), std::string::npos) << error_of(c.in);
  c.in.ubatch_idx = -1;
  EXPECT_NE(error_of(c.in).find("ubatch_idx: -1"), std::string::npos);
  EXPECT_TRUE(log0.empty());
}

TEST_F(BuildAttentionMetadata, RejectsMismatchedSizesWithoutCallingAnyBuilder) {
  {
    case56 c;
    c.in.seq_lens = {8};
    EXPECT_NE(error_of(c.in).find("seq_lens: 1 entries"), std::string::npos);
  }
  {
    case56 c;
    c.in.query_start_loc = {0, 2};
    EXPECT_NE(error_of(c.in).find("query_start_loc: 2 entries"), std::string::npos);
  }
  {
    case56 c;
    c.in.groups.pop_back();
    EXPECT_NE(error_of(c.in).find("groups: 1 block tables"), std::string::npos);
  }
  {
    case56 c;
    c.block_tables[1] = {9};
    c.rebind();
    EXPECT_NE(error_of(c.in).find("groups[1].block_table: 1 entries"), std::string::npos);
  }
  {
    case56 c;
    c.slot_mappings[1] = {1, 2, 3};
    c.rebind();
    EXPECT_NE(error_of(c.in).find("KV cache group 1: slot_mapping: 3 entries"), std::string::npos)
        << error_of(c.in);
  }
  {
    case56 c;
    c.in.positions = std::span<const int64_t>{c.positions}.first(4);
    EXPECT_NE(error_of(c.in).find("KV cache group 0: positions: 4 entries"), std::string::npos)
        << error_of(c.in);
  }
  {
    case56 c;
    c.in.num_tokens = 4;
    EXPECT_NE(error_of(c.in).find("exceeds num_actual_tokens 4"), std::string::npos);
  }
  EXPECT_TRUE(log0.empty());
  EXPECT_TRUE(log1.empty());
}

TEST_F(BuildAttentionMetadata, RejectsABuilderTableThatDoesNotMatchTheGroups) {
  builders[1].emplace_back();
  EXPECT_NE(error_of(case56{}.in).find("builders[1]: 2 attention groups"), std::string::npos);
  builders[1].pop_back();
  builders[1][0][0].reset();
  EXPECT_NE(error_of(case56{}.in).find("builders[1][0][0]: no builder"), std::string::npos);
  builders.pop_back();
  EXPECT_NE(error_of(case56{}.in).find("builders: 1 KV cache groups"), std::string::npos);
}

TEST_F(BuildAttentionMetadata, RejectsALayerInTwoAttentionGroups) {
  groups[1][0].layer_names = {"layer0"};
  EXPECT_NE(error_of(case56{}.in).find("layer 'layer0' is in two attention groups"),
            std::string::npos);
}

TEST(ReferenceBuilder, CopiesTheCommonMetadata) {
  common_attention_metadata m;
  m.num_reqs = 1;
  m.num_actual_tokens = 1;
  m.query_start_loc = {0, 1};
  m.seq_lens = {4};
  longs slots{3};
  m.slot_mapping = slots;
  reference_builder b;
  auto md = b.build(0, m);
  ASSERT_TRUE(md);
  EXPECT_EQ(md->backend, "reference");
  EXPECT_EQ(md->common, m);
  EXPECT_EQ(md->common.slot_mapping.data(), slots.data()); // the view, not the values
  EXPECT_EQ(b.build_for_cudagraph_capture(m)->common, m);
}

} // namespace
} // namespace kvactor
