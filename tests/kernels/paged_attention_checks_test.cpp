// paged_attention's argument checks: each inconsistency is named, with its value, before any
// output is written.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "expect_invalid.hpp"
#include "kvactor/kernels/paged_attention.h"
#include "paged_cache.hpp"

namespace kvactor::kernels::test {
namespace {

struct fixture {
  cache_buffer cache{element_type::f32, 4, 2, 4, 16};
  attention_params p;
  std::vector<float> q = std::vector<float>(3 * 4 * 8, 0.5f);
  std::vector<float> out = std::vector<float>(3 * 4 * 8, -7.0f);
  std::vector<int32_t> qsl{0, 2, 3};
  std::vector<int32_t> seq_lens{6, 5};
  std::vector<int32_t> table{3, 1, 0, 2};
  int32_t width = 2;

  fixture() {
    p.num_q_heads = 4;
    p.num_kv_heads = 2;
    p.head_size = 8;
    p.v_offset = 8;
    p.v_size = 8;
    p.scale = 0.35f;
  }
  void run() {
    paged_attention(p, cache.view(), q.data(), qsl.data(), seq_lens.data(), table.data(), width, 2,
                    out.data());
  }
};

// A fresh fixture, changed by `mutate`, must be rejected naming `needle`, output untouched.
template <class F>
void expect_rejected(F&& mutate, const std::string& needle) {
  fixture f;
  mutate(f);
  expect_invalid([&] { f.run(); }, needle);
  for (float x : f.out)
    ASSERT_EQ(x, -7.0f);
}

TEST(PagedAttentionChecks, RejectInconsistentHeadsAndSizes) {
  expect_rejected([](fixture& f) { f.p.num_q_heads = 3; }, "num_q_heads: 3");
  expect_rejected(
      [](fixture& f) {
        f.p.num_q_heads = 2;
        f.p.num_kv_heads = 1;
      },
      "num_kv_heads: 1 differs from the view's num_heads 2");
  expect_rejected([](fixture& f) { f.p.v_size = 9; }, "v_offset + v_size: 8 + 9");
  expect_rejected([](fixture& f) { f.p.head_size = 17; }, "head_size: 17");
  expect_rejected([](fixture& f) { f.p.softcap = -1.0f; }, "softcap: -1");
  expect_rejected([](fixture& f) { f.p.sliding_window = -2; }, "sliding_window: -2");
  static const std::vector<float> sinks{0.0f, NAN, 0.0f, 0.0f};
  expect_rejected([](fixture& f) { f.p.sinks = sinks.data(); }, "sinks[1]");
}

TEST(PagedAttentionChecks, RejectInconsistentBatches) {
  expect_rejected([](fixture& f) { f.seq_lens[1] = 0; },
                  "seq_lens[1]: 0 is below the request's query length 1");
  expect_rejected([](fixture& f) { f.qsl = {0, 3, 2}; }, "query_start_loc[2]: 2");
  expect_rejected([](fixture& f) { f.qsl = {1, 2, 3}; }, "query_start_loc[0]: 1");
  expect_rejected([](fixture& f) { f.seq_lens[0] = 9; },
                  "width: 2 blocks cannot hold seq_lens[0] = 9");
  expect_rejected([](fixture& f) { f.table[3] = 4; }, "block_table[1, 1]: 4");
  expect_rejected([](fixture& f) { f.table[1] = -1; }, "block_table[0, 1]: -1");
}

TEST(PagedAttentionChecks, ReadOnlyTheBlocksAWindowCanSee) {
  fixture f;
  // Entries never written hold NaN: reading one (or block -1) would poison or fail the run.
  f.p.sliding_window = 2;
  f.seq_lens = {8, 5};
  f.qsl = {0, 1, 2};
  f.table = {-1, 1, 0, 2}; // request 0's first block was released by the window
  // Write the visible keys (positions 6, 7 of request 0; 3, 4 of request 1).
  for (auto [block, token] : {std::pair{1, 2}, {1, 3}, {0, 3}, {2, 0}})
    for (int32_t h = 0; h < 2; ++h)
      for (int32_t c = 0; c < 16; ++c)
        entry<float>(f.cache.view(), block, h, token)[c] = 0.25f;
  f.run();
  for (size_t i = 0; i < 2 * 4 * 8; ++i)
    EXPECT_FLOAT_EQ(f.out[i], 0.25f) << i;
}

} // namespace
} // namespace kvactor::kernels::test
