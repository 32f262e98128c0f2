// docs/vllm-semantics.md §1.6–1.8 and §4.2–4.3: backend resolution, attention groups, kernel block
// sizes, graph support.
#include <gtest/gtest.h>

#include "actors/registry/registry.hpp"

using namespace kvactor;

namespace {

backend_capabilities test_backend(std::string name, std::vector<block_size_constraint> sizes,
                                  graph_support support = graph_support::always,
                                  bool mismatch_ok = true) {
  backend_capabilities b;
  b.name = std::move(name);
  b.kernel_block_sizes = std::move(sizes);
  b.spec_kinds = {kv_cache_spec_kind::full, kv_cache_spec_kind::sliding_window};
  b.cudagraph_support = support;
  b.query_lens_mismatch_ok = mismatch_ok;
  return b;
}

attention_layer layer(std::string name, layer_kind kind = layer_kind::full) {
  attention_layer l;
  l.name = std::move(name);
  l.kind = kind;
  l.num_heads = 32;
  l.num_kv_heads = 8;
  l.head_size = l.head_size_v = 128;
  return l;
}

kv_cache_spec full16() {
  return full_attention_spec(16, 8, 128, dtype::bfloat16);
}

} // namespace

TEST(BackendRegistry, CpuLayersGetTheReferenceBackendAndGpuLayersThePagedOne) {
  auto r = backend_registry::with_builtins();
  EXPECT_EQ(*r.resolve(layer("a"), full16(), device_kind::cpu), "reference");
  EXPECT_EQ(*r.resolve(layer("a"), full16(), device_kind::cuda), "paged");
  EXPECT_EQ(*r.resolve(layer("m", layer_kind::mla), mla_spec(16, 576, dtype::bfloat16),
                       device_kind::cuda),
            "mla");
  auto state = mamba_spec(8192, {{16, 3}}, {dtype::bfloat16});
  EXPECT_EQ(*r.resolve(layer("s", layer_kind::mamba), state, device_kind::cuda), "state");
  EXPECT_EQ(*r.resolve(layer("s", layer_kind::mamba), state, device_kind::cuda, "paged"), "state");
}

TEST(BackendRegistry, PreferredBackendThatCannotServeALayerSaysWhy) {
  auto r = backend_registry::with_builtins();
  auto e = r.resolve(layer("model.layers.0"), full16(), device_kind::cpu, "paged");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.err().code, errc::unsupported);
  EXPECT_NE(e.err().message.find("needs a GPU"), std::string::npos);
  auto odd = full_attention_spec(16, 8, 72, dtype::bfloat16);
  auto e2 = r.resolve(layer("x"), odd, device_kind::cuda, "paged");
  ASSERT_FALSE(e2);
  EXPECT_NE(e2.err().message.find("head size 72"), std::string::npos);
}

TEST(BackendRegistry, UnknownPreferredBackendListsTheKnownOnes) {
  auto r = backend_registry::with_builtins();
  auto e = r.resolve(layer("a"), full16(), device_kind::cuda, "flash");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.err().code, errc::invalid_argument);
  EXPECT_NE(e.err().message.find("'flash'"), std::string::npos);
  EXPECT_NE(e.err().message.find("reference"), std::string::npos);
}

TEST(BackendRegistry, DuplicateOrNamelessBackendsAreRejected) {
  auto r = backend_registry::with_builtins();
  EXPECT_FALSE(r.add(test_backend("paged", {})));
  EXPECT_FALSE(r.add(test_backend("", {})));
  EXPECT_FALSE(r.add(test_backend("zero", {exactly(0)})));
  EXPECT_TRUE(r.add(test_backend("extra", {})));
}

TEST(BackendRegistry, SinkLayersNeedABackendWithSinks) {
  backend_registry r;
  ASSERT_TRUE(r.add(test_backend("nosinks", {})));
  auto l = layer("a");
  l.has_sinks = true;
  auto e = r.resolve(l, full16(), device_kind::cuda);
  ASSERT_FALSE(e);
  EXPECT_NE(e.err().message.find("sinks"), std::string::npos);
}

TEST(KernelBlockSize, ManagerSizeWinsWhenEveryBackendSupportsIt) {
  auto a = test_backend("a", {multiple_of(32)});
  auto b = test_backend("b", {exactly(64), multiple_of(16)});
  EXPECT_EQ(*select_common_block_size(128, {&a, &b}), 128);
}

TEST(KernelBlockSize, LargestCommonExactDivisorOtherwise) {
  auto a = test_backend("a", {exactly(128), exactly(64)});
  auto b = test_backend("b", {exactly(64), exactly(32)});
  EXPECT_EQ(*select_common_block_size(256, {&a, &b}), 64);
}

TEST(KernelBlockSize, NoCommonSizeIsAnErrorNamingTheBlockSize) {
  auto a = test_backend("a", {exactly(64)});
  auto b = test_backend("b", {multiple_of(16)});
  auto e = select_common_block_size(48, {&a, &b});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.err().code, errc::no_common_block_size);
  EXPECT_NE(e.err().message.find("48"), std::string::npos);
  EXPECT_EQ(*select_common_block_size(48, {}), 48);
}

TEST(AttentionGroups, KeyedByBackendSpecAndQueryHeads) {
  kv_cache_group g{{"l0", "l1", "l2", "l3"}, full16()};
  std::map<std::string, layer_binding> bind{
      {"l0", {"paged", 32}}, {"l1", {"paged", 32}}, {"l2", {"other", 32}}, {"l3", {"paged", 16}}};
  auto groups = build_attention_groups({g}, bind);
  ASSERT_TRUE(groups);
  ASSERT_EQ(groups->size(), 1u);
  const auto& list = groups->at(0);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].layer_names, (std::vector<std::string>{"l0", "l1"}));
  EXPECT_EQ(list[1].backend, "other");
  EXPECT_EQ(list[2].num_heads_q, 16);
}

TEST(AttentionGroups, UniformTypeGroupSplitsByPerLayerSpec) {
  auto w = uniform_type_from_specs({"a", "b"}, {full_attention_spec(16, 8, 128, dtype::bfloat16),
                                                full_attention_spec(16, 8, 64, dtype::bfloat16)});
  ASSERT_TRUE(w);
  auto groups =
      build_attention_groups({{{"a", "b"}, *w}}, {{"a", {"paged", 8}}, {"b", {"paged", 8}}});
  ASSERT_TRUE(groups);
  EXPECT_EQ(groups->at(0).size(), 2u);
  EXPECT_EQ(groups->at(0)[1].spec.head_size, 64);
}

TEST(AttentionGroups, LayerWithoutBindingIsAnError) {
  auto groups = build_attention_groups({{{"a"}, full16()}}, {});
  ASSERT_FALSE(groups);
  EXPECT_NE(groups.err().message.find("a"), std::string::npos);
}

TEST(KernelBlockSize, EncoderOnlyGroupsKeepTheirIndexWithNone) {
  auto r = backend_registry::with_builtins();
  std::vector<kv_cache_group> groups{{{"e"}, encoder_only_spec(16, 8, 128, dtype::bfloat16)},
                                     {{"d"}, full16()}};
  std::vector<std::vector<attention_group>> attn{{{"paged", {"e"}, groups[0].spec, 0, 8}},
                                                 {{"paged", {"d"}, groups[1].spec, 1, 8}}};
  auto sizes = kernel_block_sizes(groups, attn, r);
  ASSERT_TRUE(sizes);
  EXPECT_EQ(*sizes, (std::vector<int32_t>{0, 16}));
}

TEST(KernelBlockSize, FixedSizeBackendForcesItsSizeOrFails) {
  auto r = backend_registry::with_builtins();
  ASSERT_TRUE(r.add(test_backend("fixed64", {exactly(64)})));
  std::vector<kv_cache_group> groups{{{"a"}, full_attention_spec(128, 8, 128, dtype::bfloat16)}};
  std::vector<std::vector<attention_group>> attn{{{"fixed64", {"a"}, groups[0].spec, 0, 8}}};
  EXPECT_EQ(*kernel_block_sizes(groups, attn, r), std::vector<int32_t>{64});
  groups[0].spec.block_size = 16;
  EXPECT_FALSE(kernel_block_sizes(groups, attn, r));
}

namespace {

struct draft_fixture {
  backend_registry r;
  std::vector<std::vector<attention_group>> groups;
  draft_fixture() {
    (void)r.add(test_backend("_TargetBackend", {}, graph_support::always, true));
    (void)r.add(test_backend("_DraftBackend", {}, graph_support::uniform_batch, false));
    groups = {{{"_TargetBackend", {"target"}, full16(), 0, 8}},
              {{"_DraftBackend", {"draft"}, full16(), 1, 8}}};
  }
};

} // namespace

TEST(GraphSupport, WeakestGroupAndItsBackendWin) {
  draft_fixture f;
  auto info = attention_graph_support(f.groups, f.r);
  EXPECT_EQ(info.min_support, graph_support::uniform_batch);
  EXPECT_EQ(info.backend, "_DraftBackend");
}

TEST(GraphSupport, CheckedLayersSkipDisjointGroups) {
  draft_fixture f;
  std::set<std::string> checked{"target"};
  auto info = attention_graph_support(f.groups, f.r, &checked);
  EXPECT_EQ(info.min_support, graph_support::always);
  EXPECT_EQ(info.backend, "");
  EXPECT_EQ(query_lens_mismatch_unsupported_backend(f.groups, f.r, &checked), "");
  f.groups[1][0].layer_names.push_back("target");
  EXPECT_EQ(attention_graph_support(f.groups, f.r, &checked).min_support,
            graph_support::uniform_batch);
  EXPECT_EQ(query_lens_mismatch_unsupported_backend(f.groups, f.r, &checked), "_DraftBackend");
}

TEST(GraphSupport, NarrowKeepsTheFirstCulpritOnTies) {
  graph_support_info info;
  info = info.narrow(graph_support::uniform_batch, "a");
  info = info.narrow(graph_support::uniform_batch, "b");
  EXPECT_EQ(info.backend, "a");
  info = info.narrow(graph_support::always, "c");
  EXPECT_EQ(info.backend, "a");
}

TEST(SparseBlockSize, LargestDivisorEverySparseBackendSupports) {
  auto a = test_backend("a", {exactly(64)});
  auto b = test_backend("b", {exactly(64)});
  EXPECT_EQ(*resolve_sparse_block_size(true, 256, {&a, &b}), 64);
  auto c = test_backend("c", {exactly(32), exactly(64)});
  auto d = test_backend("d", {exactly(16), exactly(32)});
  EXPECT_EQ(*resolve_sparse_block_size(true, 64, {&c, &d}), 32);
  auto e = test_backend("e", {multiple_of(16)});
  auto f = test_backend("f", {exactly(32)});
  EXPECT_EQ(*resolve_sparse_block_size(true, 64, {&e, &f}), 32);
}

TEST(SparseBlockSize, NoSizeForEverySparseBackendIsAnError) {
  auto a = test_backend("a", {exactly(64)});
  auto b = test_backend("b", {exactly(32)});
  auto r = resolve_sparse_block_size(true, 64, {&a, &b});
  ASSERT_FALSE(r);
  EXPECT_NE(r.err().message.find("supported by every sparse backend"), std::string::npos);
}

TEST(SparseBlockSize, DisabledLeavesTheBlockSizeAlone) {
  auto a = test_backend("a", {exactly(64)});
  EXPECT_EQ(*resolve_sparse_block_size(false, 256, {&a}), 256);
}
