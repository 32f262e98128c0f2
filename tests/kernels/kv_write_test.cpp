// write_kv: slot -> (block, offset), K then V in the entry, padding skipped, checks first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "attention_oracle.hpp"
#include "expect_invalid.hpp"
#include "kvactor/kernels/kv_write.h"
#include "paged_cache.hpp"

namespace kvactor::kernels::test {
namespace {

float read(const kv_view& v, int64_t block, int32_t head, int32_t token, int32_t c) {
  return dispatch_element_type(v.type, [&](auto tag) {
    return to_float(entry<const decltype(tag)>(v, block, head, token)[c]);
  });
}

class WriteKvLayouts : public ::testing::TestWithParam<cache_layout> {};

TEST_P(WriteKvLayouts, WritesKThenVAtTheSlot) {
  cache_buffer cache(element_type::f32, 4, 2, 4, 5, GetParam());
  const int32_t d = 3, dv = 2, heads = 2;
  const std::vector<int64_t> slots{6, -1, 13};
  std::vector<float> k(3 * heads * d), v(3 * heads * dv);
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = static_cast<float>(100 + i);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(200 + i);
  write_kv(cache.view(), k.data(), d, v.data(), dv, slots.data(), 3);
  for (int32_t t : {0, 2}) {
    const int64_t s = slots[static_cast<size_t>(t)];
    for (int32_t h = 0; h < heads; ++h) {
      for (int32_t c = 0; c < d; ++c)
        EXPECT_EQ(read(cache.view(), s / 4, h, s % 4, c), k[(t * heads + h) * d + c]);
      for (int32_t c = 0; c < dv; ++c)
        EXPECT_EQ(read(cache.view(), s / 4, h, s % 4, d + c), v[(t * heads + h) * dv + c]);
    }
  }
  // Everything else still holds the 0xff fill: only slots 6 and 13 were written.
  for (int64_t b = 0; b < 4; ++b) {
    for (int32_t h = 0; h < heads; ++h) {
      for (int32_t n = 0; n < 4; ++n) {
        if (b * 4 + n == 6 || b * 4 + n == 13) continue;
        EXPECT_TRUE(std::isnan(read(cache.view(), b, h, n, 0))) << b << " " << h << " " << n;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvWrite, WriteKvLayouts,
                         ::testing::Values(cache_layout::bhnc, cache_layout::bnhc),
                         [](const ::testing::TestParamInfo<cache_layout>& info) {
                           return std::string(info.param == cache_layout::bhnc ? "bhnc" : "bnhc");
                         });

TEST(KvWrite, RoundsToBf16AndF16) {
  for (element_type t : {element_type::bf16, element_type::f16}) {
    cache_buffer cache(t, 2, 1, 2, 4);
    const std::vector<float> k{0.1f, -3.14159f, 1e-3f, 65519.0f};
    const std::vector<int64_t> slots{3};
    write_kv(cache.view(), k.data(), 4, nullptr, 0, slots.data(), 1);
    for (int32_t c = 0; c < 4; ++c)
      EXPECT_EQ(read(cache.view(), 1, 0, 1, c), round_to(t, k[static_cast<size_t>(c)]));
  }
}

TEST(KvWrite, Fp8StoresTheCodeOfValueOverScaleAndSaturates) {
  cache_buffer cache(element_type::fp8_e4m3, 2, 1, 2, 6);
  cache.set_scales(0.5f, 2.0f);
  const std::vector<float> k{0.1f, -3.0f, 1000.0f}, v{0.1f, -3.0f, -5000.0f};
  const std::vector<int64_t> slots{2};
  write_kv(cache.view(), k.data(), 3, v.data(), 3, slots.data(), 1);
  const auto* e = entry<const fp8_t>(cache.view(), 1, 0, 0);
  for (int32_t c = 0; c < 3; ++c) {
    EXPECT_EQ(e[c].bits, float_to_fp8_e4m3(k[static_cast<size_t>(c)] / 0.5f)) << c;
    EXPECT_EQ(e[3 + c].bits, float_to_fp8_e4m3(v[static_cast<size_t>(c)] / 2.0f)) << c;
  }
  EXPECT_EQ(fp8_e4m3_to_float(e[2].bits), 448.0f);  // 2000 saturates
  EXPECT_EQ(fp8_e4m3_to_float(e[5].bits), -448.0f); // -2500 too
  EXPECT_TRUE(std::isnan(read(cache.view(), 0, 0, 0, 0))) << "an unwritten slot changed";
}

TEST(KvWrite, Fp8RejectsAScaleThatIsNotFiniteAndPositive) {
  cache_buffer cache(element_type::fp8_e4m3, 1, 1, 2, 2);
  const std::vector<float> k{1, 2};
  const std::vector<int64_t> slots{0};
  for (float bad : {0.0f, -1.0f, std::nanf(""), INFINITY}) {
    cache.set_scales(bad, 1.0f);
    expect_invalid([&] { write_kv(cache.view(), k.data(), 1, k.data(), 1, slots.data(), 1); },
                   "k_scale");
    cache.set_scales(1.0f, bad);
    expect_invalid([&] { write_kv(cache.view(), k.data(), 1, k.data(), 1, slots.data(), 1); },
                   "v_scale");
  }
}

TEST(KvWrite, MlaWritesTheLatentAlone) {
  cache_buffer cache(element_type::f32, 1, 1, 2, 6);
  const std::vector<float> latent{1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> slots{1};
  write_kv(cache.view(), latent.data(), 6, nullptr, 0, slots.data(), 1);
  for (int32_t c = 0; c < 6; ++c)
    EXPECT_EQ(read(cache.view(), 0, 0, 1, c), latent[static_cast<size_t>(c)]);
}

TEST(KvWrite, RejectsASlotBeyondCapacityBeforeWriting) {
  cache_buffer cache(element_type::f32, 2, 1, 4, 2);
  const std::vector<float> k{1, 2};
  const std::vector<int64_t> slots{0, 8};
  const std::vector<float> before = cache.snapshot();
  expect_invalid([&] { write_kv(cache.view(), k.data(), 1, k.data(), 1, slots.data(), 2); },
                 "slot_mapping[1]: 8");
  const std::vector<float> after = cache.snapshot();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * 4), 0);
}

TEST(KvWrite, RejectsInconsistentArguments) {
  cache_buffer cache(element_type::f32, 2, 1, 4, 4);
  const std::vector<float> k(8, 1.0f);
  const std::vector<int64_t> slots{0};
  const std::vector<int64_t> bad_slot{-2};
  const kv_view& v = cache.view();
  expect_invalid([&] { write_kv(v, k.data(), 3, k.data(), 2, slots.data(), 1); },
                 "head_size + head_size_v: 3 + 2");
  expect_invalid([&] { write_kv(v, k.data(), 2, nullptr, 2, slots.data(), 1); }, "v: null");
  expect_invalid([&] { write_kv(v, k.data(), 2, k.data(), 0, slots.data(), 1); }, "v: non-null");
  expect_invalid([&] { write_kv(v, k.data(), 2, k.data(), 2, bad_slot.data(), 1); },
                 "slot_mapping[0]: -2");
  expect_invalid([&] { write_kv(v, k.data(), 2, k.data(), 2, nullptr, 1); }, "slot_mapping");
  expect_invalid([&] { write_kv(v, k.data(), 0, nullptr, 0, slots.data(), 1); }, "head_size: 0");
  expect_invalid([&] { write_kv(v, k.data(), 2, k.data(), 2, slots.data(), -1); }, "num_tokens");
  kv_view broken = v;
  broken.base = nullptr;
  expect_invalid([&] { write_kv(broken, k.data(), 2, k.data(), 2, slots.data(), 1); }, "base");
  broken = v;
  broken.stride_token = 2;
  expect_invalid([&] { write_kv(broken, k.data(), 2, k.data(), 2, slots.data(), 1); },
                 "stride_token: 2");
}

} // namespace
} // namespace kvactor::kernels::test
