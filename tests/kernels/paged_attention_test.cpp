// Paged attention vs dense attention computed from the raw K/V rows, with scattered block tables.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "attention_oracle.hpp"
#include "kvactor/kernels/kv_write.h"
#include "kvactor/kernels/paged_attention.h"
#include "paged_cache.hpp"

namespace kvactor::kernels::test {
namespace {

constexpr float sentinel = 12345.0f;

struct attention_case {
  int32_t hq = 4, hkv = 4, d = 16, dv = 16;
  bool mla = false; // content = d (the latent), V = its first dv elements
  int32_t window = 0, chunk = 0;
  float softcap = 0.0f;
  bool sinks = false;
  bool causal = true;
  element_type type = element_type::f32;
  float k_scale = 1.0f, v_scale = 1.0f; // FP8
  cache_layout layout = cache_layout::bhnc;
  int32_t block_size = 4;
  // Per request: (tokens already cached by an earlier step, tokens in this step).
  std::vector<std::pair<int32_t, int32_t>> reqs{{0, 7}, {5, 1}, {12, 1}, {3, 6}};
  int32_t padding = 0;
};

// Writes each request's context in one step, then this step's tokens (plus padding) in a second
// write, runs paged attention and compares every query row with the dense oracle.
void run_case(const attention_case& c) {
  std::mt19937 rng(1234);
  const int32_t content = c.mla ? c.d : c.d + c.dv;
  std::vector<float> sink_values{-1.0f, 0.5f, 2.0f, 0.0f, 1.5f, -0.5f, 3.0f, 0.25f};
  attention_params p;
  p.num_q_heads = c.hq;
  p.num_kv_heads = c.hkv;
  p.head_size = c.d;
  p.v_offset = c.mla ? 0 : c.d;
  p.v_size = c.dv;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  p.sliding_window = c.window;
  p.chunk_size = c.chunk;
  p.softcap = c.softcap;
  p.sinks = c.sinks ? sink_values.data() : nullptr;
  p.causal = c.causal;

  std::vector<sequence> seqs(c.reqs.size());
  std::vector<std::vector<float>> rows(c.reqs.size()); // [seq, hkv, content], as stored
  int64_t blocks_needed = 0;
  for (size_t r = 0; r < c.reqs.size(); ++r) {
    const int32_t seq = c.reqs[r].first + c.reqs[r].second;
    seqs[r].tokens.assign(static_cast<size_t>(seq), 0);
    rows[r] = random_floats(static_cast<size_t>(seq) * c.hkv * content, rng, -2.0f, 2.0f);
    for (size_t i = 0; i < rows[r].size(); ++i) {
      const bool is_k = c.mla || static_cast<int32_t>(i % static_cast<size_t>(content)) < c.d;
      rows[r][i] = round_to(c.type, rows[r][i], is_k ? c.k_scale : c.v_scale);
    }
    blocks_needed += (seq + c.block_size - 1) / c.block_size;
  }
  block_pool pool(blocks_needed + 5, 99);
  cache_buffer cache(c.type, blocks_needed + 5, c.hkv, c.block_size, content, c.layout, 3);
  cache.set_scales(c.k_scale, c.v_scale);

  // K [T, hkv, d] and V [T, hkv, dv] of a batch, gathered from the raw rows.
  auto write = [&](const step_batch& b, const std::vector<size_t>& req_of_token) {
    const int32_t dk = c.mla ? content : c.d;
    std::vector<float> k(static_cast<size_t>(b.num_tokens()) * c.hkv * dk, 0.0f);
    std::vector<float> v(static_cast<size_t>(b.num_tokens()) * c.hkv * c.dv, 0.0f);
    for (size_t t = 0; t < req_of_token.size(); ++t) {
      const float* src = rows[req_of_token[t]].data() + int64_t{b.positions[t]} * c.hkv * content;
      for (int32_t h = 0; h < c.hkv; ++h) {
        for (int32_t d = 0; d < dk; ++d)
          k[(t * c.hkv + h) * dk + d] = src[h * content + d];
        for (int32_t d = 0; !c.mla && d < c.dv; ++d)
          v[(t * c.hkv + h) * c.dv + d] = src[h * content + c.d + d];
      }
    }
    write_kv(cache.view(), k.data(), dk, c.mla ? nullptr : v.data(), c.mla ? 0 : c.dv,
             b.slot_mapping.data(), b.num_tokens());
  };

  std::vector<sequence*> ctx_seqs;
  std::vector<int32_t> ctx_counts;
  std::vector<size_t> ctx_req;
  for (size_t r = 0; r < c.reqs.size(); ++r) {
    if (c.reqs[r].first == 0) continue;
    ctx_seqs.push_back(&seqs[r]);
    ctx_counts.push_back(c.reqs[r].first);
    ctx_req.insert(ctx_req.end(), static_cast<size_t>(c.reqs[r].first), r);
  }
  write(schedule(ctx_seqs, ctx_counts, pool, c.block_size), ctx_req);

  std::vector<sequence*> all;
  std::vector<int32_t> counts;
  std::vector<size_t> req_of_token;
  for (size_t r = 0; r < c.reqs.size(); ++r) {
    all.push_back(&seqs[r]);
    counts.push_back(c.reqs[r].second);
    req_of_token.insert(req_of_token.end(), static_cast<size_t>(c.reqs[r].second), r);
  }
  const step_batch b = schedule(all, counts, pool, c.block_size, c.padding);
  write(b, req_of_token);

  const auto num_tokens = static_cast<size_t>(b.num_tokens());
  const std::vector<float> q = random_floats(num_tokens * c.hq * c.d, rng, -2.0f, 2.0f);
  std::vector<float> out(num_tokens * c.hq * c.dv, sentinel);
  paged_attention(p, cache.view(), q.data(), b.query_start_loc.data(), b.seq_lens.data(),
                  b.block_table.data(), b.width, b.num_reqs(), out.data());

  std::vector<float> ref(static_cast<size_t>(c.hq * c.dv));
  for (size_t t = 0; t < req_of_token.size(); ++t) {
    const size_t r = req_of_token[t];
    naive_attention(p, rows[r], content, b.seq_lens[r], b.positions[t], q.data() + t * c.hq * c.d,
                    ref.data());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(out[t * ref.size() + i], ref[i], 2e-5 + 2e-5 * std::fabs(ref[i]))
          << "token " << t << " element " << i;
  }
  for (size_t i = req_of_token.size() * ref.size(); i < out.size(); ++i)
    ASSERT_EQ(out[i], sentinel) << "padding row element " << i << " was written";
}

TEST(PagedAttention, FullCausalMatchesDense) {
  run_case({});
}

TEST(PagedAttention, GqaSharesAKvHeadAcrossQueryHeads) {
  attention_case c;
  c.hq = 8;
  c.hkv = 2;
  run_case(c);
}

TEST(PagedAttention, MqaReadsOneKvHead) {
  attention_case c;
  c.hq = 4;
  c.hkv = 1;
  c.dv = 8; // V narrower than K
  run_case(c);
}

TEST(PagedAttention, SlidingWindowHidesOldKeys) {
  attention_case c;
  c.window = 3;
  c.reqs = {{0, 9}, {10, 1}, {6, 5}};
  run_case(c);
}

TEST(PagedAttention, ChunkedLocalAttendsWithinChunk) {
  attention_case c;
  c.chunk = 4;
  c.block_size = 2;
  c.reqs = {{0, 11}, {9, 1}, {3, 6}};
  run_case(c);
}

TEST(PagedAttention, SoftcapBoundsScores) {
  attention_case c;
  c.softcap = 0.5f;
  run_case(c);
}

TEST(PagedAttention, SinksJoinTheDenominator) {
  attention_case c;
  c.hq = 8;
  c.hkv = 2;
  c.sinks = true;
  run_case(c);
}

TEST(PagedAttention, MlaReadsVAsALatentPrefix) {
  attention_case c;
  c.mla = true;
  c.hq = 8;
  c.hkv = 1;
  c.d = 24;
  c.dv = 16;
  run_case(c);
}

TEST(PagedAttention, Bf16Cache) {
  attention_case c;
  c.type = element_type::bf16;
  c.hkv = 2;
  run_case(c);
}

TEST(PagedAttention, F16CacheInBnhcLayout) {
  attention_case c;
  c.type = element_type::f16;
  c.layout = cache_layout::bnhc;
  c.hkv = 2;
  run_case(c);
}

TEST(PagedAttention, Fp8CacheReadsCodesTimesTheirScales) {
  attention_case c;
  c.type = element_type::fp8_e4m3;
  c.k_scale = 0.02f; // K and V of [-2, 2] spread over the codes, not all near 448 or 0
  c.v_scale = 0.0125f;
  c.hkv = 2;
  run_case(c);
}

TEST(PagedAttention, Fp8MlaLatentTakesTheKeyScale) {
  attention_case c;
  c.type = element_type::fp8_e4m3;
  c.k_scale = 0.05f;
  c.v_scale = 1000.0f; // never used: a wrong choice would show
  c.mla = true;
  c.hq = 4;
  c.hkv = 1;
  c.d = 24;
  c.dv = 16;
  run_case(c);
}

TEST(PagedAttention, MixedBatchContinuesAnEarlierPrefillChunk) {
  attention_case c;
  c.hq = 8;
  c.hkv = 2;
  c.block_size = 8;
  c.reqs = {{9, 5}, {0, 4}, {13, 1}, {20, 1}, {16, 16}};
  run_case(c);
}

TEST(PagedAttention, PaddingTokensAreNeitherReadNorWritten) {
  attention_case c;
  c.padding = 3;
  run_case(c);
}

TEST(PagedAttention, NonCausalSeesTheWholeSequence) {
  attention_case c;
  c.causal = false;
  c.reqs = {{0, 7}, {0, 1}, {0, 5}};
  run_case(c);
}

TEST(PagedAttention, NonCausalWindowIsSymmetric) {
  attention_case c;
  c.causal = false;
  c.window = 2;
  c.reqs = {{0, 7}, {0, 5}};
  run_case(c);
}

TEST(PagedAttention, BlockSizeOneAndAllFeaturesTogether) {
  attention_case c;
  c.hq = 6;
  c.hkv = 3;
  c.block_size = 1;
  c.window = 5;
  c.softcap = 1.0f;
  c.sinks = true;
  c.type = element_type::bf16;
  c.layout = cache_layout::bnhc;
  run_case(c);
}

} // namespace
} // namespace kvactor::kernels::test
