// attention_stack_cuda's errors as values: creation rejects configs and options by name before any
// CUDA call (so those tests need no GPU); forward and sample reject bad arguments by name before
// enqueuing anything, and the stack still works afterwards.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "stack_cuda_support.hpp"

namespace kvactor::kernels::gpu_test {
namespace {

void expect_rejected(const cuda_status& s, const std::string& needle) {
  EXPECT_FALSE(s.ok()) << "accepted; expected a failure naming " << needle;
  EXPECT_EQ(s.code(), cudaErrorInvalidValue) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

void expect_create_rejected(
    const std::function<void(stack_config&, attention_stack_cuda_options&)>& mutate,
    const std::string& needle) {
  stack_config cfg = small_config();
  attention_stack_cuda_options opt;
  opt.max_tokens = 64;
  mutate(cfg, opt);
  attention_stack_cuda_created c = attention_stack_cuda::create(cfg, opt);
  expect_rejected(c.status, needle);
  EXPECT_EQ(c.stack, nullptr);
}

TEST(attention_stack_cuda_checks, create_rejects_configs_and_options_by_name) {
  using cfg_t = stack_config&;
  using opt_t = attention_stack_cuda_options&;
  expect_create_rejected([](cfg_t, opt_t o) { o.max_tokens = 0; }, "options.max_tokens: 0");
  expect_create_rejected([](cfg_t, opt_t o) { o.dtype = element_type::f32; }, "options.dtype: f32");
  expect_create_rejected([](cfg_t, opt_t o) { o.max_sample_rows = -1; },
                         "options.max_sample_rows: -1");
  expect_create_rejected([](cfg_t c, opt_t) { c.tp_rank = 1; }, "stack_config.tp_rank: 1");
  expect_create_rejected([](cfg_t c, opt_t) { c.layers[1].sliding_window = 0; },
                         "layers[1].sliding_window: 0");
  expect_create_rejected(
      [](cfg_t c, opt_t) {
        c.layers[0].head_size = 96;
        c.layers[4].head_size = 96;
      },
      "layers[0].head_size: 96 is not supported");
  expect_create_rejected([](cfg_t c, opt_t) { c.layers[2].head_size_v = 64; },
                         "layers[2].head_size_v: 64 is not supported");
  expect_create_rejected(
      [](cfg_t c, opt_t) {
        c = mla_config();
        c.layers[0].head_size = 512;
        c.layers[0].head_size_v = 448;
        c.layers[2] = c.layers[1];
      },
      "layers[0]: MLA head_size 512");
}

TEST(attention_stack_cuda_checks, forward_and_sample_reject_bad_arguments_by_name) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const stack_config cfg = small_config();
  const attention_stack cpu(cfg);
  const auto gpu = create_or_fail(cfg, 64);
  ASSERT_NE(gpu, nullptr);
  test::stack_cache host(cpu, 16, 16, element_type::bf16);
  const device_cache dev(cpu, host);
  test::block_pool pool(16, 1);
  std::vector<test::sequence> seqs(2);
  seqs[0].tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  seqs[1].tokens = {2, 7};
  const test::step_batch b = test::schedule({&seqs[0], &seqs[1]}, {8, 2}, pool, 16, 2);
  const device_batch db(b, cfg.layers.size());
  device_array<float> hidden(64 * 256);

  using step_t = device_step&;
  using kv_t = std::vector<kv_view>&;
  const auto expect_forward_rejected = [&](const std::function<void(step_t, kv_t)>& mutate,
                                           const std::string& needle) {
    device_step step = db.step;
    std::vector<kv_view> kv = dev.views;
    mutate(step, kv);
    expect_rejected(gpu->forward(step, kv, {}, hidden.get()), needle);
  };
  expect_forward_rejected([](step_t s, kv_t) { s.num_tokens = 65; },
                          "step.num_tokens: 65 exceeds max_tokens 64");
  expect_forward_rejected([](step_t s, kv_t) { s.num_tokens = -1; },
                          "step.num_tokens: -1 is negative");
  expect_forward_rejected([](step_t s, kv_t) { s.layers.pop_back(); },
                          "step.layers: 4 entries for 5 layers");
  expect_forward_rejected([](step_t, kv_t kv) { kv.pop_back(); }, "kv: 4 views for 5 layers");
  expect_forward_rejected([](step_t s, kv_t) { s.token_ids = nullptr; }, "step.token_ids: is null");
  expect_forward_rejected([](step_t s, kv_t) { s.positions = nullptr; }, "step.positions: is null");
  expect_forward_rejected([](step_t, kv_t kv) { kv[1].type = element_type::f16; },
                          "kv[1].type: f16 differs from the stack's bf16");
  expect_forward_rejected([](step_t, kv_t kv) { kv[2].base = nullptr; },
                          "layer 2: kv_write_cuda: view.base: is null");
  expect_forward_rejected([](step_t s, kv_t) { s.layers[0].slot_mapping = nullptr; },
                          "layer 0: kv_write_cuda: slot_mapping");
  expect_forward_rejected([](step_t s, kv_t) { s.layers[3].query_start_loc = nullptr; },
                          "layer 3: paged_attention_cuda: query_start_loc: is null");
  expect_forward_rejected([](step_t s, kv_t) { s.layers[1].width = 0; },
                          "layer 1: paged_attention_cuda: width: 0");
  expect_rejected(gpu->forward(db.step, dev.views, {}, nullptr), "hidden: is null");

  std::vector<int32_t> tokens;
  expect_rejected(gpu->sample(nullptr, {0}, tokens), "sample: hidden: is null");
  expect_rejected(gpu->sample(hidden.get(), {0, -3}, tokens), "rows[1]: -3 is negative");

  // Nothing was enqueued: the stack still runs the step, and the device has no error.
  ASSERT_CUDA_OK(gpu->forward(db.step, dev.views, {}, hidden.get()));
  ASSERT_CUDA_OK(gpu->sample(hidden.get(), {7, 9}, tokens));
  EXPECT_EQ(tokens.size(), 2u);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(attention_stack_cuda_checks, forward_needs_an_all_reduce_on_a_tensor_parallel_rank) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const stack_config cfg = small_config(2, 0);
  const auto gpu = create_or_fail(cfg, 16);
  ASSERT_NE(gpu, nullptr);
  device_step step;
  step.layers.resize(cfg.layers.size());
  const std::vector<kv_view> kv(cfg.layers.size());
  expect_rejected(gpu->forward(step, kv, {}, nullptr), "all_reduce: empty with tp_size 2");
}

} // namespace
} // namespace kvactor::kernels::gpu_test
