#include "attention_harness.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "../kernels/paged_cache.hpp"
#include "gpu_support.hpp"
#include "kvactor/kernels/cuda/paged_attention_cuda.h"
#include "kvactor/kernels/paged_attention.h"

namespace kvactor::kernels::gpu_test {
namespace {

// The element type of q and out: the cache's, but bf16 with an FP8 cache.
element_type query_type(const attention_case& c) {
  return c.type == element_type::fp8_e4m3 ? element_type::bf16 : c.type;
}

// Stores x as element i of an entry of the cache's type (FP8: the code of x / scale).
void store(unsigned char* entry, element_type t, int32_t i, float x, float scale) {
  if (t == element_type::fp8_e4m3) {
    entry[i] = fp8_quantize(x, scale);
    return;
  }
  const uint16_t bits = to_bits(t, x);
  std::memcpy(entry + 2 * static_cast<size_t>(i), &bits, 2);
}

struct host_batch {
  attention_params params; // host sinks
  kv_view view;            // host cache
  std::vector<unsigned char> cache;
  std::vector<uint16_t> q;
  std::vector<float> sinks;
  std::vector<int32_t> qsl, seq_lens, block_table;
  int32_t width = 1, num_tokens = 0, batch_tokens = 0;
};

host_batch build(const attention_case& c) {
  std::mt19937 rng(c.seed);
  host_batch b;
  attention_params& p = b.params;
  const int32_t content = c.mla ? 576 : 2 * c.d;
  p.num_q_heads = c.hq;
  p.num_kv_heads = c.hkv;
  p.head_size = c.mla ? 576 : c.d;
  p.v_offset = c.mla ? 0 : c.d;
  p.v_size = c.mla ? 512 : c.d;
  p.scale = 1.0f / std::sqrt(static_cast<float>(p.head_size));
  p.sliding_window = c.window;
  p.chunk_size = c.chunk;
  p.softcap = c.softcap;
  p.causal = c.causal;
  if (c.sinks) {
    std::uniform_real_distribution<float> dist(-2.0f, 3.0f);
    for (int32_t h = 0; h < c.hq; ++h)
      b.sinks.push_back(dist(rng));
    p.sinks = b.sinks.data();
  }

  const int32_t bs = c.block_size;
  b.qsl.push_back(0);
  int64_t blocks_needed = 0;
  for (const auto& [cached, fresh] : c.reqs) {
    const int32_t seq = cached + fresh;
    b.seq_lens.push_back(seq);
    b.qsl.push_back(b.qsl.back() + fresh);
    b.width = std::max(b.width, (seq + bs - 1) / bs + 1); // one spare column of -1
    blocks_needed += (seq + bs - 1) / bs;
  }
  b.batch_tokens = b.qsl.back();
  b.num_tokens = b.batch_tokens + c.padding;

  kv_view& v = b.view;
  // 16 bytes between entries, never written.
  const size_t esize = element_size(c.type);
  v = test::packed_view(c.type, blocks_needed + 3, c.hkv, bs, content,
                        c.bnhc ? test::cache_layout::bnhc : test::cache_layout::bhnc,
                        static_cast<int32_t>(16 / esize));
  v.k_scale = c.k_scale;
  v.v_scale = c.v_scale;
  b.cache.assign(static_cast<size_t>(v.stride_block * v.num_blocks) * esize, 0xff); // NaN
  v.base = b.cache.data();

  // Shuffled block ids: tables are scattered, never contiguous runs.
  std::vector<int32_t> pool(static_cast<size_t>(v.num_blocks));
  for (size_t i = 0; i < pool.size(); ++i)
    pool[i] = static_cast<int32_t>(i);
  std::shuffle(pool.begin(), pool.end(), rng);

  std::uniform_real_distribution<float> kv_dist(-1.0f, 1.0f);
  b.block_table.assign(b.seq_lens.size() * static_cast<size_t>(b.width), -1);
  for (size_t r = 0; r < c.reqs.size(); ++r) {
    const int32_t seq = b.seq_lens[r];
    const int32_t qlen = c.reqs[r].second;
    if (seq == 0) continue;
    // Blocks before every visible key (a window or chunk released them) stay -1.
    int32_t lo = 0, hi = 0;
    visible_keys(p, std::max(0, seq - std::max(qlen, 1)), seq, &lo, &hi);
    for (int32_t blk = 0; blk < (seq + bs - 1) / bs; ++blk) {
      if ((blk + 1) * bs <= lo) continue;
      const int32_t id = pool.back();
      pool.pop_back();
      b.block_table[r * static_cast<size_t>(b.width) + static_cast<size_t>(blk)] = id;
      for (int32_t j = blk * bs; j < std::min(seq, (blk + 1) * bs); ++j) {
        for (int32_t h = 0; h < c.hkv; ++h) {
          unsigned char* e = b.cache.data()
                             + (id * v.stride_block + h * v.stride_head + (j % bs) * v.stride_token)
                                   * static_cast<int64_t>(esize);
          // MLA's latent is K and V at once: it takes K's scale.
          for (int32_t x = 0; x < content; ++x)
            store(e, c.type, x, kv_dist(rng), x < p.head_size ? c.k_scale : c.v_scale);
        }
      }
    }
  }
  b.q = random_bits(query_type(c), static_cast<size_t>(b.num_tokens) * c.hq * p.head_size, rng,
                    c.q_range);
  return b;
}

} // namespace

attention_outcome run_attention_case(const attention_case& c) {
  attention_outcome res;
  const host_batch b = build(c);
  const attention_params& p = b.params;
  const auto num_reqs = static_cast<int32_t>(b.seq_lens.size());
  const size_t row = static_cast<size_t>(c.hq) * p.v_size;

  // Reference, in float from the same rounded inputs.
  const element_type qt = query_type(c);
  std::vector<float> qf(b.q.size());
  for (size_t i = 0; i < qf.size(); ++i)
    qf[i] = from_bits(qt, b.q[i]);
  std::vector<float> ref(static_cast<size_t>(b.num_tokens) * row, 0.0f);
  paged_attention(p, b.view, qf.data(), b.qsl.data(), b.seq_lens.data(), b.block_table.data(),
                  b.width, num_reqs, ref.data());

  // GPU.
  device_array<unsigned char> cache(b.cache);
  device_array<uint16_t> q(b.q);
  device_array<int32_t> qsl(b.qsl), seq_lens(b.seq_lens), table(b.block_table);
  device_array<float> sinks(b.sinks);
  device_array<uint16_t> out(static_cast<size_t>(b.num_tokens) * row);
  out.fill_bytes(0xff);
  kv_view view = b.view;
  view.base = cache.get();
  attention_params params = p;
  params.sinks = c.sinks ? sinks.get() : nullptr;
  res.workspace_bytes =
      paged_attention_workspace_bytes(params, view, b.width, num_reqs, b.num_tokens, c.decode);
  const size_t given =
      c.workspace_cap > 0 ? std::min(c.workspace_cap, res.workspace_bytes) : res.workspace_bytes;
  device_array<unsigned char> ws(c.workspace ? given : 0);
  ws.fill_bytes(0); // zeroed once, as paged_attention_cuda asks
  // Twice on the same workspace: the split counters must be back at zero after a call, and the
  // second call must give the first one's bits.
  std::vector<uint16_t> runs[2];
  for (auto& got : runs) {
    out.fill_bytes(0xff);
    const cuda_status st =
        paged_attention_cuda(params, view, q.get(), qsl.get(), seq_lens.get(), table.get(), b.width,
                             num_reqs, b.num_tokens, out.get(), cuda_workspace{ws.get(), ws.size()},
                             nullptr, c.max_query_len, c.prefill, c.decode);
    EXPECT_TRUE(st.ok()) << st.message();
    const cudaError_t sync = cudaDeviceSynchronize();
    EXPECT_EQ(sync, cudaSuccess) << cudaGetErrorString(sync);
    if (!st.ok() || sync != cudaSuccess) return res;
    got = out.download();
  }
  const std::vector<uint16_t>& got = runs[1];
  for (size_t i = 0; i < got.size(); ++i)
    res.repeat_differs += got[i] != runs[0][i];

  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < static_cast<size_t>(b.batch_tokens) * row; ++i) {
    const double x = from_bits(qt, got[i]);
    if (!std::isfinite(x)) {
      ++res.nan_values;
      continue;
    }
    err += (x - ref[i]) * (x - ref[i]);
    norm += double{ref[i]} * ref[i];
  }
  res.rel_l2 = norm > 0.0 ? std::sqrt(err / norm) : std::sqrt(err);
  for (size_t i = static_cast<size_t>(b.batch_tokens) * row; i < got.size(); ++i)
    res.padding_overwritten += got[i] != 0xffff;
  return res;
}

void expect_matches(const attention_case& c, double tolerance) {
  const attention_outcome r = run_attention_case(c);
  EXPECT_EQ(r.nan_values, 0) << "NaN/inf in the output (or rows left unwritten)";
  EXPECT_EQ(r.padding_overwritten, 0) << "padding rows were written";
  EXPECT_EQ(r.repeat_differs, 0) << "a second call on the same workspace differs";
  EXPECT_LE(r.rel_l2, tolerance);
  ::testing::Test::RecordProperty("rel_l2", std::to_string(r.rel_l2));
}

} // namespace kvactor::kernels::gpu_test
