// Builder protocol: ubatch_work (a slice of the rank's current batch) -> metadata_ready, with the
// metadata of every layer in the builder's persistent output; wrong ubatch, stale seq and slices
// outside the batch are rejected naming the field.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/metadata/actor.hpp"
#include "actors/rank/step_state.hpp"
#include "actors/registry/assignment.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/recorder.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t step_seq = 0;

// Step 0 of two new requests: request 1 feeds 5 prompt tokens, request 2 feeds 3 (8 tokens).
// Group g of request r gets block 2 * r + g - 1 (distinct ids: groups share the pool).
step_plan two_request_plan() {
  step_plan p;
  p.seq = step_seq;
  p.epoch = 1;
  p.new_requests = {{1, 5, 4}, {2, 3, 4}};
  p.block_updates = {{1, 0, 0, {1}}, {1, 1, 0, {2}}, {2, 0, 0, {3}}, {2, 1, 0, {4}}};
  p.scheduled = {{1, 0, {10, 11, 12, 13, 14}, true}, {2, 0, {20, 21, 22}, true}};
  return p;
}

class BuilderProtocol : public deterministic_fixture {
protected:
  model_layout model = tiny_layout();
  std::shared_ptr<step_batch> batch = std::make_shared<step_batch>();
  std::shared_ptr<ubatch_output> output = std::make_shared<ubatch_output>();
  backend_assignment assignment;
  std::vector<group_geometry> geometry;
  recorder_handle rec = track(spawn_recorder(sys));
  builder_actor b0;

  BuilderProtocol() {
    auto groups = tiny_groups();
    auto reg = backend_registry::with_builtins();
    auto a = assign_backends(reg, model, groups, device_kind::cpu, "auto");
    if (!a) {
      ADD_FAILURE() << a.err().message;
      return;
    }
    assignment = *a;
    for (size_t g = 0; g < groups.size(); ++g)
      geometry.push_back({groups[g].spec.block_size, assignment.kernel_block_sizes[g], true});
    // The rank's batch for step 0, as the rank lays it out before it asks its builders.
    step_state steps(geometry, 64, 2048, 256, 16);
    auto plan = two_request_plan();
    if (auto rejected = steps.validate(plan)) {
      ADD_FAILURE() << rejected->err.message;
      return;
    }
    steps.apply(plan, *batch);
    b0 = spawn(builder, builder_setup{0, batch, output, assignment.attention_groups, geometry});
    run_all();
  }

  // The KV cache group whose attention groups hold `layer`.
  int64_t group_of(const std::string& layer) const {
    for (size_t g = 0; g < assignment.attention_groups.size(); ++g)
      for (const auto& a : assignment.attention_groups[g])
        if (std::find(a.layer_names.begin(), a.layer_names.end(), layer) != a.layer_names.end())
          return static_cast<int64_t>(g);
    ADD_FAILURE() << layer << " is in no attention group";
    return -1;
  }

  // rec -> b0: work; the reply stays in rec's mailbox.
  void send_work(const ubatch_work& w) {
    inject(rec.actor, b0, w);
    run_once(b0);
  }
};

TEST_F(BuilderProtocol, BuildsMetadataForEveryLayerOfATwoRequestStep) {
  ASSERT_EQ(batch->num_reqs(), 2);
  ASSERT_EQ(batch->num_tokens(), 8);
  send_work({step_seq, 0, 0, 8, 0, 2});
  auto ready = expect_reply<metadata_ready>(b0, rec.actor);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->seq, step_seq);
  EXPECT_EQ(ready->ubatch, 0);
  EXPECT_EQ(ready->num_reqs, 2);
  EXPECT_EQ(ready->num_tokens, 8);
  // The persistent output holds one metadata object per layer.
  EXPECT_EQ(output->seq, step_seq);
  EXPECT_EQ(output->token_start, 0);
  EXPECT_EQ(output->token_end, 8);
  EXPECT_EQ(output->num_reqs, 2);
  ASSERT_EQ(output->layers.size(), model.layers.size());
  for (const auto& layer : model.layers) {
    auto it = output->layers.find(layer.name);
    ASSERT_NE(it, output->layers.end()) << layer.name;
    const auto& m = it->second->common;
    EXPECT_EQ(m.num_reqs, 2) << layer.name;
    EXPECT_EQ(m.num_actual_tokens, 8) << layer.name;
    EXPECT_EQ(m.query_start_loc, (std::vector<int32_t>{0, 5, 8})) << layer.name;
    EXPECT_EQ(m.seq_lens, (std::vector<int32_t>{5, 3})) << layer.name;
    ASSERT_EQ(m.slot_mapping.size(), 8u) << layer.name << ": one slot per token, no padding";
    // Token 0 of request 1 and token 0 of request 2 land in slot 0 of their first blocks.
    const int64_t group = group_of(layer.name);
    EXPECT_EQ(m.slot_mapping[0], (2 * 1 + group - 1) * 16) << layer.name;
    EXPECT_EQ(m.slot_mapping[5], (2 * 2 + group - 1) * 16) << layer.name;
  }
}

TEST_F(BuilderProtocol, BuildsOnlyItsSliceOfTheStep) {
  send_work({step_seq, 0, 3, 8, 0, 2}); // request 1's last 2 tokens, request 2's 3
  auto ready = expect_reply<metadata_ready>(b0, rec.actor);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->num_reqs, 2);
  EXPECT_EQ(ready->num_tokens, 5);
  const auto& m = output->layers.at(model.layers[0].name)->common;
  EXPECT_EQ(m.query_start_loc, (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(m.seq_lens, (std::vector<int32_t>{5, 3}));
}

TEST_F(BuilderProtocol, RejectsWorkForAnotherUbatchNamingTheField) {
  send_work({step_seq, 1, 0, 8, 0, 2});
  auto err = expect_error(b0, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "ubatch_work: ubatch 1"));
  EXPECT_TRUE(output->layers.empty()) << "nothing was built";
}

TEST_F(BuilderProtocol, RejectsWorkForAStaleSeqNamingTheField) {
  send_work({step_seq + 1, 0, 0, 8, 0, 2});
  auto err = expect_error(b0, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "ubatch_work: seq 1"));
  EXPECT_THAT(message_of(*err), HasSubstr("step 0"));
  EXPECT_TRUE(output->layers.empty());
}

TEST_F(BuilderProtocol, RejectsASliceOutsideTheBatchNamingTheField) {
  send_work({step_seq, 0, 0, 9, 0, 2}); // 9 tokens of an 8-token batch
  auto err = expect_error(b0, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "ubatch_work: slice"));
  EXPECT_THAT(message_of(*err), HasSubstr("8 tokens and 2 requests"));
  send_work({step_seq, 0, 0, 8, 0, 3}); // 3 requests of a 2-request batch
  err = expect_error(b0, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "ubatch_work: slice"));
  EXPECT_TRUE(output->layers.empty());
}

} // namespace
} // namespace kvactor::test
