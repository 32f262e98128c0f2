// kv_write_cuda vs the CPU reference (write_kv): the same cache bytes, padding slots skipped.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../kernels/paged_cache.hpp"
#include "gpu_support.hpp"
#include "kvactor/kernels/cuda/kv_write_cuda.h"
#include "kvactor/kernels/kv_write.h"

namespace kvactor::kernels::gpu_test {
namespace {

struct write_case {
  element_type type = element_type::bf16;
  int32_t heads = 8, d = 128, dv = 128; // dv == 0: MLA (no V)
  int32_t content = 256;
  int32_t block_size = 16;
  int64_t num_blocks = 40;
  bool bnhc = false;
  int32_t num_tokens = 37;
};

// Writes random K/V for tokens with scattered slots (every 5th token is padding, slot -1) into a
// NaN-filled cache on the GPU and with write_kv on the host; every cache byte must agree.
void expect_same_cache(const write_case& c) {
  std::mt19937 rng(7);
  // 8 elements (16 bytes) between entries, never written.
  kv_view v = test::packed_view(c.type, c.num_blocks, c.heads, c.block_size, c.content,
                                c.bnhc ? test::cache_layout::bnhc : test::cache_layout::bhnc, 8);
  std::vector<uint16_t> host(static_cast<size_t>(v.stride_block * v.num_blocks), 0xffff);

  std::vector<int64_t> slots(static_cast<size_t>(v.capacity_tokens()));
  for (size_t i = 0; i < slots.size(); ++i)
    slots[i] = static_cast<int64_t>(i);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<size_t>(c.num_tokens));
  for (size_t t = 0; t < slots.size(); t += 5)
    slots[t] = -1;

  const size_t n = static_cast<size_t>(c.num_tokens) * c.heads;
  const std::vector<uint16_t> k = random_bits(c.type, n * c.d, rng);
  const std::vector<uint16_t> vv = random_bits(c.type, n * c.dv, rng);

  device_array<uint16_t> cache(host), dk(k), dv(vv);
  device_array<int64_t> dslots(slots);
  kv_view dview = v;
  dview.base = cache.get();
  ASSERT_CUDA_OK(kv_write_cuda(dview, dk.get(), c.dv > 0 ? dv.get() : nullptr, c.type, c.d, c.dv,
                               dslots.get(), c.num_tokens, nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<float> kf(k.size()), vf(vv.size());
  for (size_t i = 0; i < k.size(); ++i)
    kf[i] = from_bits(c.type, k[i]);
  for (size_t i = 0; i < vv.size(); ++i)
    vf[i] = from_bits(c.type, vv[i]);
  v.base = host.data();
  write_kv(v, kf.data(), c.d, c.dv > 0 ? vf.data() : nullptr, c.dv, slots.data(), c.num_tokens);

  const std::vector<uint16_t> got = cache.download();
  size_t mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i)
    mismatches += got[i] != host[i];
  EXPECT_EQ(mismatches, 0u) << "of " << got.size() << " cache elements";
}

TEST(KvWriteCuda, ScattersKAndVAndSkipsPaddingSlotsBf16) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  expect_same_cache({});
}

TEST(KvWriteCuda, ScattersKAndVInBnhcLayoutFp16) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  write_case c;
  c.type = element_type::f16;
  c.bnhc = true;
  c.heads = 4;
  c.d = c.dv = 64;
  c.content = 128;
  c.block_size = 32;
  c.num_tokens = 300;
  expect_same_cache(c);
}

TEST(KvWriteCuda, WritesTheMlaLatentWithoutV) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  write_case c;
  c.heads = 1;
  c.d = 576;
  c.dv = 0;
  c.content = 576;
  c.block_size = 64;
  expect_same_cache(c);
}

TEST(KvWriteCuda, UnalignedHeadSizesTakeTheScalarPath) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  write_case c;
  c.heads = 3;
  c.d = 12;
  c.dv = 5;
  c.content = 20;
  expect_same_cache(c);
}

// An FP8 cache stores the code of value / scale: the same bytes as write_kv for bf16 and f16
// inputs, including values past 448 x scale (saturated) and the scalar path.
void expect_same_fp8_codes(element_type input, int32_t d, int32_t dv, bool bnhc) {
  std::mt19937 rng(11);
  const int32_t heads = 4, block_size = 16, num_tokens = 41;
  kv_view v = test::packed_view(element_type::fp8_e4m3, 24, heads, block_size, d + dv,
                                bnhc ? test::cache_layout::bnhc : test::cache_layout::bhnc, 16);
  v.k_scale = 0.0125f; // K up to 6 saturates past 5.6
  v.v_scale = 0.5f;
  std::vector<unsigned char> host(static_cast<size_t>(v.stride_block * v.num_blocks), 0xff);
  std::vector<int64_t> slots(static_cast<size_t>(v.capacity_tokens()));
  for (size_t i = 0; i < slots.size(); ++i)
    slots[i] = static_cast<int64_t>(i);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(num_tokens);
  slots[3] = -1;
  const size_t n = size_t{num_tokens} * heads;
  const std::vector<uint16_t> k = random_bits(input, n * d, rng, 6.0f);
  const std::vector<uint16_t> vv = random_bits(input, n * dv, rng, 100.0f);

  device_array<unsigned char> cache(host);
  device_array<uint16_t> dk(k), dv_(vv);
  device_array<int64_t> dslots(slots);
  kv_view dview = v;
  dview.base = cache.get();
  ASSERT_CUDA_OK(
      kv_write_cuda(dview, dk.get(), dv_.get(), input, d, dv, dslots.get(), num_tokens, nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<float> kf(k.size()), vf(vv.size());
  for (size_t i = 0; i < k.size(); ++i)
    kf[i] = from_bits(input, k[i]);
  for (size_t i = 0; i < vv.size(); ++i)
    vf[i] = from_bits(input, vv[i]);
  v.base = host.data();
  write_kv(v, kf.data(), d, vf.data(), dv, slots.data(), num_tokens);
  const std::vector<unsigned char> got = cache.download();
  size_t mismatches = 0, saturated = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    mismatches += got[i] != host[i];
    saturated += (host[i] & 0x7F) == 0x7E;
  }
  EXPECT_EQ(mismatches, 0u) << "of " << got.size() << " cache bytes";
  EXPECT_GT(saturated, 0u) << "the inputs reach past 448 x scale";
}

TEST(KvWriteCuda, Fp8CacheStoresTheHostCodesOfBf16Inputs) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  expect_same_fp8_codes(element_type::bf16, 128, 128, false);
}

TEST(KvWriteCuda, Fp8CacheStoresTheHostCodesOfF16InputsInBnhcLayout) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  expect_same_fp8_codes(element_type::f16, 64, 64, true);
}

TEST(KvWriteCuda, Fp8CacheWithUnalignedHeadSizesTakesTheScalarPath) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  expect_same_fp8_codes(element_type::bf16, 12, 5, false);
}

TEST(KvWriteCuda, SlotsPastTheCacheAreSkippedNotWritten) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  kv_view v = test::packed_view(element_type::bf16, 2, 1, 16, 16); // 32 token slots
  device_array<uint16_t> cache(static_cast<size_t>(v.stride_block * v.num_blocks));
  cache.fill_bytes(0xff);
  v.base = cache.get();
  std::mt19937 rng(3);
  device_array<uint16_t> k(random_bits(v.type, 2 * 8, rng)), vv(random_bits(v.type, 2 * 8, rng));
  device_array<int64_t> slots(std::vector<int64_t>{32, 1000});
  ASSERT_CUDA_OK(kv_write_cuda(v, k.get(), vv.get(), v.type, 8, 8, slots.get(), 2, nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (uint16_t x : cache.download())
    ASSERT_EQ(x, 0xffff);
}

} // namespace
} // namespace kvactor::kernels::gpu_test
