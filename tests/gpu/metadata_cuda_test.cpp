// Device metadata kernels against the host's: slot mappings, block-table updates, row gathers.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "actors/metadata/slot_mapping.hpp"
#include "gpu_support.hpp"
#include "kvactor/kernels/cuda/metadata_cuda.h"

using namespace kvactor;
using namespace kvactor::kernels;
using kvactor::kernels::gpu_test::device_array;

TEST(MetadataCuda, SlotMappingMatchesTheHostAndPadsWithMinusOne) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(7);
  const int32_t kbs = 16, width = 64, num_reqs = 9;
  std::vector<int32_t> table(num_reqs * width);
  std::iota(table.begin(), table.end(), 1);
  std::shuffle(table.begin(), table.end(), rng); // random, non-contiguous blocks
  std::vector<int32_t> qsl{0};
  std::vector<int64_t> positions;
  for (int32_t r = 0; r < num_reqs; ++r) {
    const int32_t q = r % 3 == 0 ? 1 + static_cast<int32_t>(rng() % 200) : 1;
    const int32_t seq = q + static_cast<int32_t>(rng() % (width * kbs - q));
    for (int32_t i = 0; i < q; ++i)
      positions.push_back(seq - q + i);
    qsl.push_back(qsl.back() + q);
  }
  const int32_t out_len = qsl.back() + 37; // padding past the last token
  std::vector<int64_t> want(out_len, -1);
  for (int32_t r = 0; r < num_reqs; ++r)
    for (int32_t t = qsl[r]; t < qsl[r + 1]; ++t)
      want[t] = slot_for_position(std::span<const int32_t>(table).subspan(r * width, width),
                                  positions[t], kbs);
  device_array<int32_t> d_qsl(qsl), d_table(table);
  device_array<int64_t> d_pos(positions), d_out(out_len);
  d_out.fill_bytes(0x5a); // stale slots must not survive
  ASSERT_CUDA_OK(slot_mapping_cuda(d_qsl.get(), d_pos.get(), d_table.get(), width, num_reqs, kbs,
                                   d_out.get(), out_len, nullptr));
  EXPECT_EQ(d_out.download(), want);
}

TEST(MetadataCuda, BlockTableUpdatesWriteExactlyTheirColumns) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const int32_t width = 32, num_rows = 4;
  std::vector<int32_t> table(width * num_rows, 0);
  std::vector<int32_t> rows{2, 0, 2}, starts{0, 5, 3}, offsets{0, 3, 4, 6},
      ids{7, 8, 9, 40, 41, 42};
  auto want = table;
  for (size_t u = 0; u < rows.size(); ++u)
    for (int32_t i = offsets[u]; i < offsets[u + 1]; ++i)
      want[rows[u] * width + starts[u] + (i - offsets[u])] = ids[i];
  device_array<int32_t> d_table(table), d_rows(rows), d_starts(starts), d_off(offsets), d_ids(ids);
  ASSERT_CUDA_OK(update_block_table_cuda(d_table.get(), width, num_rows, d_rows.get(),
                                         d_starts.get(), d_off.get(), d_ids.get(), 3, nullptr));
  EXPECT_EQ(d_table.download(), want);
}

TEST(MetadataCuda, GatherRowsCopiesTheLogitsRows) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const int32_t hidden = 300, rows = 11;
  std::vector<float> h(hidden * rows);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto& x : h)
    x = dist(rng);
  std::vector<int32_t> idx{10, 0, 4, 4};
  std::vector<float> want;
  for (auto i : idx)
    want.insert(want.end(), h.begin() + i * hidden, h.begin() + (i + 1) * hidden);
  device_array<float> d_h(h), d_out(want.size());
  device_array<int32_t> d_idx(idx);
  ASSERT_CUDA_OK(gather_rows_cuda(d_h.get(), hidden, d_idx.get(), 4, d_out.get(), nullptr));
  EXPECT_EQ(d_out.download(), want);
}

TEST(MetadataCuda, BadArgumentsAreRejectedByNameBeforeAnyCudaCall) {
  auto s = slot_mapping_cuda(nullptr, nullptr, nullptr, 0, 1, 16, nullptr, 4, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("slot_mapping_cuda: width: 0"), std::string::npos) << s.message();
  auto k = slot_mapping_cuda(nullptr, nullptr, nullptr, 4, 0, 0, nullptr, 0, nullptr);
  EXPECT_NE(k.message().find("kernel_block_size: 0"), std::string::npos) << k.message();
  auto u = update_block_table_cuda(nullptr, 0, 1, nullptr, nullptr, nullptr, nullptr, 1, nullptr);
  EXPECT_NE(u.message().find("width: 0"), std::string::npos) << u.message();
  auto g = gather_rows_cuda(nullptr, 16, nullptr, 2, nullptr, nullptr);
  EXPECT_NE(g.message().find("gather_rows_cuda: a pointer is null"), std::string::npos)
      << g.message();
}
