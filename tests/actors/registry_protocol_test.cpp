// Registry protocol: assign (layers + KV cache groups -> attention groups and kernel block sizes),
// backends, and the configuration error of a duplicate backend at spawn.
#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/registry/actor.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/recorder.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

using ::testing::HasSubstr;

class RegistryProtocol : public deterministic_fixture {
protected:
  registry_actor reg = spawn(registry, std::vector<backend_capabilities>{});
  recorder_handle rec = track(spawn_recorder(sys));
  model_layout model = tiny_layout();
  std::vector<kv_cache_group> groups = tiny_groups();

  RegistryProtocol() { run_all(); } // initialization of both actors
};

TEST_F(RegistryProtocol, AssignsReferenceAttentionGroupsAndKernelBlockSizesToKvactorTinyOnCpu) {
  ASSERT_EQ(groups.size(), 2u) << "kvactor-tiny: one sliding and one full group";
  inject(rec.actor, reg, atom::assign_v, model, groups, device_kind::cpu, std::string{"auto"});
  run_once(reg);
  auto a = expect_reply<backend_assignment>(reg, rec.actor);
  ASSERT_TRUE(a);
  // One list of attention groups per KV cache group, every layer of the group in it.
  ASSERT_EQ(a->attention_groups.size(), groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    ASSERT_EQ(a->attention_groups[g].size(), 1u);
    const auto& attn = a->attention_groups[g][0];
    EXPECT_EQ(attn.backend, "reference") << "paged needs a GPU";
    EXPECT_EQ(attn.kv_cache_group_id, static_cast<int32_t>(g));
    EXPECT_EQ(attn.num_heads_q, 4);
    EXPECT_EQ(attn.layer_names, groups[g].layer_names);
  }
  EXPECT_EQ(a->kernel_block_sizes, (std::vector<int32_t>{16, 16}));
  EXPECT_EQ(a->support.min_support, graph_support::never);
  EXPECT_EQ(a->support.backend, "reference");
  EXPECT_TRUE(expect_no_message(rec.actor));
}

TEST_F(RegistryProtocol, RejectsADeviceOutsideTheEnumNamingTheDeviceField) {
  // A hostile or corrupt message: the enum's byte holds no device.
  inject(rec.actor, reg, atom::assign_v, model, groups, static_cast<device_kind>(7),
         std::string{"auto"});
  run_once(reg);
  auto err = expect_error(reg, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "device:"));
  EXPECT_THAT(message_of(*err), HasSubstr("7 is not a device"));
}

TEST_F(RegistryProtocol, RejectsAnUnknownPreferredBackendNamingTheBackendField) {
  inject(rec.actor, reg, atom::assign_v, model, groups, device_kind::cpu,
         std::string{"flashinfer"});
  run_once(reg);
  auto err = expect_error(reg, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "--attention-backend:"));
  EXPECT_THAT(message_of(*err), HasSubstr("'flashinfer'"));
}

TEST_F(RegistryProtocol, ListsTheBuiltinBackends) {
  inject(rec.actor, reg, atom::backends_v);
  run_once(reg);
  auto list = expect_reply<std::vector<backend_capabilities>>(reg, rec.actor);
  ASSERT_TRUE(list);
  std::vector<std::string> names;
  for (const auto& b : *list)
    names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string>{"reference", "paged", "mla", "state"}));
}

TEST_F(RegistryProtocol, ListsATestBackendGivenAtSpawnAfterTheBuiltins) {
  backend_capabilities extra;
  extra.name = "test-backend";
  extra.spec_kinds = {kv_cache_spec_kind::full};
  auto reg2 = spawn(registry, std::vector<backend_capabilities>{extra});
  run_all();
  inject(rec.actor, reg2, atom::backends_v);
  run_once(reg2);
  auto list = expect_reply<std::vector<backend_capabilities>>(reg2, rec.actor);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 5u);
  EXPECT_EQ(list->back(), extra);
}

TEST_F(RegistryProtocol, QuitsWithAnErrorWhenSpawnedWithADuplicateBackend) {
  backend_capabilities dup;
  dup.name = "paged"; // a builtin name
  dup.spec_kinds = {kv_cache_spec_kind::full};
  auto bad = spawn(registry, std::vector<backend_capabilities>{dup});
  self->monitor(bad);
  run_all(); // initialization quits
  auto down = expect_down(bad);
  ASSERT_TRUE(down);
  EXPECT_TRUE(is_kvactor_error(down->reason, errc::invalid_argument, "backend name:"));
  EXPECT_THAT(message_of(down->reason), HasSubstr("'paged' is already registered"));
}

} // namespace
} // namespace kvactor::test
