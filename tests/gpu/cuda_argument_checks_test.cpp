// The CUDA launchers' argument checks: every rejected argument is named with its value, and the
// check happens on the host before any CUDA call, so these tests need no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../kernels/paged_cache.hpp"
#include "kvactor/kernels/cuda/kv_write_cuda.h"
#include "kvactor/kernels/cuda/paged_attention_cuda.h"

namespace kvactor::kernels::gpu_test {
namespace {

// Host memory stands in for device pointers: the checks never dereference them.
alignas(16) unsigned char fake_memory[4096];
void* fake(size_t offset = 0) {
  return fake_memory + offset;
}

void expect_rejected(const cuda_status& s, const std::string& needle) {
  EXPECT_FALSE(s.ok()) << "accepted; expected a failure naming " << needle;
  EXPECT_EQ(s.code(), cudaErrorInvalidValue);
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

struct attention_fixture {
  attention_params p;
  kv_view view;
  int32_t width = 4, num_reqs = 2, num_tokens = 3;
  const void* q = fake();
  void* out = fake(1024);
  cuda_workspace ws;
  decode_shape decode;

  attention_fixture() {
    p.num_q_heads = 8;
    p.num_kv_heads = 2;
    p.head_size = 128;
    p.v_offset = 128;
    p.v_size = 128;
    p.scale = 0.088f;
    view = test::packed_view(element_type::bf16, 10, 2, 16, 256);
    view.base = fake();
  }
  cuda_status run() const {
    const auto* ints = static_cast<const int32_t*>(fake(2048));
    return paged_attention_cuda(p, view, q, ints, ints, ints, width, num_reqs, num_tokens, out, ws,
                                nullptr, 0, prefill_kernel::automatic, decode);
  }
};

// MLA's shape: one latent KV head of 576 (V: its first 512), in a cache of `type`.
void as_mla(attention_fixture& f, element_type type = element_type::bf16) {
  f.p.num_q_heads = 16;
  f.p.num_kv_heads = 1;
  f.p.head_size = 576;
  f.p.v_offset = 0;
  f.p.v_size = 512;
  f.view = test::packed_view(type, 10, 1, 16, 576);
  f.view.base = fake();
}

template <class F>
void expect_attention_rejected(F&& mutate, const std::string& needle) {
  attention_fixture f;
  mutate(f);
  expect_rejected(f.run(), needle);
}

TEST(PagedAttentionCudaChecks, ValidArgumentsPassTheHostChecks) {
  const attention_fixture f;
  const auto* ints = static_cast<const int32_t*>(fake(2048));
  const cuda_status s = check_paged_attention_cuda(f.p, f.view, f.q, ints, ints, ints, f.width,
                                                   f.num_reqs, f.num_tokens, f.out, f.ws);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(PagedAttentionCudaChecks, RejectsUnsupportedShapesNamingThem) {
  expect_attention_rejected([](attention_fixture& f) { f.p.head_size = f.p.v_size = 80; },
                            "head_size: 80 is not supported");
  expect_attention_rejected([](attention_fixture& f) { f.p.v_size = 64; },
                            "v_size: 64 is not supported");
  expect_attention_rejected([](attention_fixture& f) { f.view.block_size = 8; },
                            "view.block_size: 8 is not supported");
  expect_attention_rejected([](attention_fixture& f) { f.view.type = element_type::f32; },
                            "view.type: f32 is not supported");
  expect_attention_rejected(
      [](attention_fixture& f) {
        f.p.head_size = 576;
        f.p.v_offset = 0;
        f.p.v_size = 512;
        f.view.content = 576;
        f.view.stride_token = 576;
      },
      "num_kv_heads: 2 is not supported with head_size 576");
}

TEST(PagedAttentionCudaChecks, RejectsFixedDecodeSplitsItCannotRunNamingThem) {
  expect_attention_rejected([](attention_fixture& f) { f.decode.splits = -1; },
                            "decode.splits: -1 is outside [0, 64]");
  expect_attention_rejected([](attention_fixture& f) { f.decode.splits = 65; },
                            "decode.splits: 65 is outside [0, 64]");
  // One split counter per (request, KV head) row group: 2 KV heads x 4096 requests overflow them.
  expect_attention_rejected(
      [](attention_fixture& f) {
        f.decode.splits = 2;
        f.num_reqs = f.num_tokens = 4096;
      },
      "decode.splits: 2 needs at most 4094 row groups; this call has 8192");
  // The checks alone refuse what the launcher refuses.
  const attention_fixture f;
  const auto* ints = static_cast<const int32_t*>(fake(2048));
  expect_rejected(check_paged_attention_cuda(f.p, f.view, f.q, ints, ints, ints, f.width,
                                             f.num_reqs, f.num_tokens, f.out, f.ws,
                                             decode_shape{65}),
                  "decode.splits: 65");
}

TEST(PagedAttentionCudaChecks, RejectsFixedSplitsWithMlaNamingThem) {
  expect_attention_rejected(
      [](attention_fixture& f) {
        as_mla(f);
        f.decode.splits = 4;
      },
      "decode.splits: fixed splits are not supported with head_size 576 (MLA)");
}

TEST(PagedAttentionCudaChecks, AFixedDecodeGridNeedsItsOwnWorkspaceSize) {
  const attention_fixture f;
  // The bytes follow the splits asked for; a shape that cannot run needs none.
  const size_t two = paged_attention_workspace_bytes(f.p, f.view, f.width, f.num_reqs, f.num_tokens,
                                                     decode_shape{2});
  const size_t four = paged_attention_workspace_bytes(f.p, f.view, f.width, f.num_reqs,
                                                      f.num_tokens, decode_shape{4});
  EXPECT_GT(two, 0u);
  EXPECT_GT(four, two);
  EXPECT_EQ(paged_attention_workspace_bytes(f.p, f.view, f.width, f.num_reqs, f.num_tokens,
                                            decode_shape{99}),
            0u);
}

TEST(PagedAttentionCudaChecks, RejectsInconsistentHeadsAndParameters) {
  expect_attention_rejected([](attention_fixture& f) { f.p.num_q_heads = 7; },
                            "num_q_heads: 7 is not a multiple of num_kv_heads 2");
  expect_attention_rejected([](attention_fixture& f) { f.p.num_kv_heads = 4; },
                            "num_kv_heads: 4 differs from the view's num_heads 2");
  expect_attention_rejected([](attention_fixture& f) { f.p.softcap = -1.0f; }, "softcap: -1");
  expect_attention_rejected([](attention_fixture& f) { f.p.scale = NAN; }, "scale: nan");
  expect_attention_rejected([](attention_fixture& f) { f.p.sliding_window = -3; },
                            "sliding_window: -3");
  expect_attention_rejected([](attention_fixture& f) { f.p.v_offset = 132; },
                            "v_offset + v_size: 132 + 128");
}

TEST(PagedAttentionCudaChecks, RejectsBadViewsAndPointers) {
  expect_attention_rejected([](attention_fixture& f) { f.view.base = nullptr; },
                            "view.base: is null");
  expect_attention_rejected([](attention_fixture& f) { f.view.base = fake(2); },
                            "is not 16-byte aligned");
  expect_attention_rejected([](attention_fixture& f) { f.view.stride_token = 260; },
                            "are not all multiples of 8");
  expect_attention_rejected([](attention_fixture& f) { f.q = nullptr; }, "q: ");
  expect_attention_rejected([](attention_fixture& f) { f.out = fake(8); }, "out: ");
  expect_attention_rejected([](attention_fixture& f) { f.width = 0; }, "width: 0 must be > 0");
  expect_attention_rejected([](attention_fixture& f) { f.num_tokens = -1; }, "num_tokens: -1");
  expect_attention_rejected(
      [](attention_fixture& f) {
        f.ws = cuda_workspace{nullptr, 64};
      },
      "workspace.data");
}

TEST(PagedAttentionCudaChecks, Fp8CachesNeedSixteenElementStridesPositiveScalesAndNoMla) {
  auto fp8 = [](attention_fixture& f) {
    f.view = test::packed_view(element_type::fp8_e4m3, 10, 2, 16, 256);
    f.view.base = fake();
  };
  {
    attention_fixture f;
    fp8(f);
    const auto* ints = static_cast<const int32_t*>(fake(2048));
    const cuda_status s = check_paged_attention_cuda(f.p, f.view, f.q, ints, ints, ints, f.width,
                                                     f.num_reqs, f.num_tokens, f.out, f.ws);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  expect_attention_rejected(
      [&](attention_fixture& f) {
        fp8(f);
        f.view.stride_token = 264;
      },
      "are not all multiples of 16 elements");
  expect_attention_rejected(
      [&](attention_fixture& f) {
        fp8(f);
        f.view.v_scale = 0.0f;
      },
      "view.v_scale: 0 must be finite and > 0");
  expect_attention_rejected([](attention_fixture& f) { as_mla(f, element_type::fp8_e4m3); },
                            "fp8_e4m3 is not supported with head_size 576");
}

TEST(PagedAttentionCudaChecks, AnEmptyBatchIsAcceptedWithoutTouchingTheDevice) {
  attention_fixture f;
  f.num_reqs = 0;
  f.q = nullptr;
  f.out = nullptr;
  EXPECT_TRUE(f.run().ok());
}

TEST(PagedAttentionCudaChecks, WorkspaceIsZeroForUnsupportedArguments) {
  attention_fixture f;
  f.p.head_size = 80;
  EXPECT_EQ(paged_attention_workspace_bytes(f.p, f.view, 4, 1, 1), 0u);
}

struct write_fixture {
  kv_view view;
  const void* k = fake();
  const void* v = fake(512);
  element_type type = element_type::f16;
  int32_t d = 64, dv = 64, num_tokens = 4;
  const int64_t* slots = static_cast<const int64_t*>(fake(1024));

  write_fixture() {
    view = test::packed_view(element_type::f16, 4, 2, 16, 128);
    view.base = fake();
  }
  cuda_status run() const { return kv_write_cuda(view, k, v, type, d, dv, slots, num_tokens, {}); }
};

template <class F>
void expect_write_rejected(F&& mutate, const std::string& needle) {
  write_fixture f;
  mutate(f);
  expect_rejected(f.run(), needle);
}

TEST(KvWriteCudaChecks, ValidArgumentsPassTheHostChecks) {
  const write_fixture f;
  const cuda_status s =
      check_kv_write_cuda(f.view, f.k, f.v, f.type, f.d, f.dv, f.slots, f.num_tokens);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(KvWriteCudaChecks, RejectsInconsistentArgumentsNamingThem) {
  expect_write_rejected([](write_fixture& f) { f.type = element_type::bf16; },
                        "type: bf16 differs from the view's f16");
  expect_write_rejected(
      [](write_fixture& f) {
        f.view.type = element_type::f32;
        f.type = element_type::f32;
      },
      "view.type: f32 is not supported");
  expect_write_rejected([](write_fixture& f) { f.dv = 72; }, "head_size + head_size_v: 64 + 72");
  expect_write_rejected([](write_fixture& f) { f.v = nullptr; }, "v: null with head_size_v 64");
  expect_write_rejected([](write_fixture& f) { f.k = nullptr; }, "k: ");
  expect_write_rejected([](write_fixture& f) { f.slots = nullptr; }, "slot_mapping: ");
  expect_write_rejected([](write_fixture& f) { f.num_tokens = -2; }, "num_tokens: -2");
  expect_write_rejected([](write_fixture& f) { f.view.num_heads = 0; }, "view.num_heads: 0");
}

TEST(KvWriteCudaChecks, AnFp8CacheTakesBf16OrF16InputsAndPositiveScales) {
  auto fp8 = [](write_fixture& f) {
    f.view.type = element_type::fp8_e4m3;
    f.type = element_type::bf16;
  };
  {
    write_fixture f;
    fp8(f);
    const cuda_status s =
        check_kv_write_cuda(f.view, f.k, f.v, f.type, f.d, f.dv, f.slots, f.num_tokens);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  expect_write_rejected(
      [&](write_fixture& f) {
        fp8(f);
        f.type = element_type::f32;
      },
      "type: f32 is not supported for an fp8_e4m3 cache");
  expect_write_rejected(
      [&](write_fixture& f) {
        fp8(f);
        f.view.k_scale = -2.0f;
      },
      "view.k_scale: -2 must be finite and > 0");
}

} // namespace
} // namespace kvactor::kernels::gpu_test
