// attention_stack_cuda against the CPU attention_stack: the weight hash bit for bit, each rank's
// weights, the bytes it allocates, and two steps of a mixed batch (prefill chunks with a cached
// prefix, decodes, padding) compared by relative L2 and by the greedy tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "kvactor/kernels/cuda/synthetic_weights_cuda.h"
#include "stack_cuda_support.hpp"

namespace kvactor::kernels::gpu_test {
namespace {

TEST(attention_stack_cuda, weight_hash_is_bit_identical_to_the_host) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  std::vector<synthetic_coord> coords;
  for (const uint64_t seed : {uint64_t{0}, uint64_t{7}, ~uint64_t{0}, uint64_t{1} << 63})
    for (uint64_t m = 1; m <= 8; ++m)
      for (const int32_t layer : {-1, 0, 1, 63})
        for (const int64_t row : {int64_t{0}, int64_t{-1}, int64_t{1} << 40})
          for (const int64_t col : {int64_t{0}, int64_t{5}, int64_t{4095}})
            coords.push_back({seed, static_cast<weight_matrix>(m), layer, row, col});
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 200000; ++i) {
    const auto m = static_cast<weight_matrix>(rng() % 8 + 1);
    if (i % 2 == 0)
      coords.push_back({rng(), m, static_cast<int32_t>(rng() % 256),
                        static_cast<int64_t>(rng() % 200000), static_cast<int64_t>(rng() % 8192)});
    else // any 64-bit row and column, any layer
      coords.push_back({rng(), m, static_cast<int32_t>(rng()), static_cast<int64_t>(rng()),
                        static_cast<int64_t>(rng())});
  }
  device_array<synthetic_coord> d_coords(coords);
  device_array<float> d_out(coords.size());
  ASSERT_CUDA_OK(synthetic_uniform_cuda(d_coords.get(), static_cast<int64_t>(coords.size()),
                                        d_out.get(), nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = d_out.download();
  size_t mismatches = 0;
  for (size_t i = 0; i < coords.size(); ++i) {
    const synthetic_coord& c = coords[i];
    const float want = synthetic_uniform(c.seed, c.matrix, c.layer, c.row, c.col);
    if (std::memcmp(&want, &got[i], sizeof(float)) != 0 && mismatches++ == 0)
      ADD_FAILURE() << "first mismatch at " << i << ": seed " << c.seed << " matrix "
                    << static_cast<uint64_t>(c.matrix) << " layer " << c.layer << " row " << c.row
                    << " col " << c.col << ": host " << want << ", device " << got[i];
  }
  EXPECT_EQ(mismatches, 0u) << "of " << coords.size();
}

// The [outs, ins] slice stack_weights.cpp materialises, rounded to bf16.
std::vector<uint16_t> expected_slice(uint64_t seed, weight_matrix m, int32_t layer,
                                     int64_t row_begin, int32_t ins, int64_t col_begin,
                                     int32_t outs, int64_t fan_in) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
  std::vector<uint16_t> w;
  for (int32_t o = 0; o < outs; ++o)
    for (int32_t i = 0; i < ins; ++i)
      w.push_back(
          float_to_bf16(synthetic_uniform(seed, m, layer, row_begin + i, col_begin + o) * scale));
  return w;
}

template <class T>
std::vector<T> download(const void* p, size_t n) {
  std::vector<T> host(n);
  cuda_or_throw(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return host;
}

void expect_weights_of(const stack_config& cfg) {
  SCOPED_TRACE("tp_rank " + std::to_string(cfg.tp_rank) + " of " + std::to_string(cfg.tp_size));
  const auto gpu = create_or_fail(cfg, 16);
  if (!gpu) return;
  const int32_t hidden = cfg.hidden_size;
  size_t bytes = 0;
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const layer_geometry& g = gpu->geometry(l);
    const layer_weights_cuda w = gpu->weights(l);
    const auto li = static_cast<int32_t>(l);
    const int32_t d = g.head_size;
    std::vector<uint16_t> want = expected_slice(cfg.seed, weight_matrix::q, li, 0, hidden,
                                                int64_t{g.q_head_begin} * d, g.q_heads * d, hidden);
    std::vector<uint16_t> kv;
    if (g.kv_source == li && g.mla) {
      kv = expected_slice(cfg.seed, weight_matrix::kv_latent, li, 0, hidden, 0, d, hidden);
    } else if (g.kv_source == li) {
      kv = expected_slice(cfg.seed, weight_matrix::k, li, 0, hidden, int64_t{g.kv_head_begin} * d,
                          g.kv_heads * d, hidden);
      const std::vector<uint16_t> v =
          expected_slice(cfg.seed, weight_matrix::v, li, 0, hidden,
                         int64_t{g.kv_head_begin} * g.v_size, g.kv_heads * g.v_size, hidden);
      kv.insert(kv.end(), v.begin(), v.end());
    }
    want.insert(want.end(), kv.begin(), kv.end());
    EXPECT_EQ(static_cast<size_t>(w.q_rows + w.k_rows + w.v_rows) * hidden, want.size());
    EXPECT_TRUE(download<uint16_t>(w.qkv, want.size()) == want) << "q/k/v";
    const std::vector<uint16_t> o =
        expected_slice(cfg.seed, weight_matrix::o, li, int64_t{g.q_head_begin} * g.v_size,
                       g.q_heads * g.v_size, 0, hidden, int64_t{cfg.total_q_heads} * g.v_size);
    EXPECT_TRUE(download<uint16_t>(w.o, o.size()) == o) << "o";
    bytes += (want.size() + o.size()) * 2;
    ASSERT_EQ(w.sinks != nullptr, cfg.layers[l].has_sinks);
    if (w.sinks != nullptr) {
      const std::vector<float> sinks = download<float>(w.sinks, static_cast<size_t>(g.q_heads));
      for (int32_t h = 0; h < g.q_heads; ++h)
        EXPECT_EQ(sinks[static_cast<size_t>(h)],
                  synthetic_uniform(cfg.seed, weight_matrix::sinks, li, g.q_head_begin + h, 0));
      bytes += sinks.size() * sizeof(float);
    }
  }
  const std::vector<uint16_t> vocab =
      expected_slice(cfg.seed, weight_matrix::vocab, 0, 0, hidden, 0, cfg.vocab_size, hidden);
  EXPECT_TRUE(download<uint16_t>(gpu->vocab_weights(), vocab.size()) == vocab) << "vocab";
  bytes += vocab.size() * 2;
  EXPECT_EQ(gpu->weights_bytes(), bytes);
}

TEST(attention_stack_cuda, generates_each_ranks_weights_on_the_device) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  expect_weights_of(small_config());
  expect_weights_of(small_config(2, 1));    // KV heads split
  expect_weights_of(small_config(4, 3, 2)); // KV head 1 replicated on ranks 2 and 3
  expect_weights_of(mla_config());
}

TEST(attention_stack_cuda, counts_and_frees_the_bytes_it_allocates) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  attention_stack_cuda_options opt;
  opt.max_tokens = 128;
  opt.attention_workspace_bytes = size_t{1} << 30; // large enough to see it come back
  {
    attention_stack_cuda_created c = attention_stack_cuda::create(small_config(), opt);
    ASSERT_TRUE(c.status.ok()) << c.status.message();
    const size_t counted = c.stack->weights_bytes() + c.stack->activation_bytes();
    // At least q, k, v, attention out and o of 128 tokens, and the attention workspace.
    EXPECT_GE(c.stack->activation_bytes(), opt.attention_workspace_bytes + 128 * 256 * (2 + 4));
    ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT_GE(free0 - free1, counted) << "the device lost less than the stack counted";
    std::printf("[ bytes    ] weights %zu, activations %zu, device used %zu\n",
                c.stack->weights_bytes(), c.stack->activation_bytes(), free0 - free1);
  }
  ASSERT_EQ(cudaMemGetInfo(&free2, &total), cudaSuccess);
  // Loaded kernel modules and cuBLAS's own state may stay; the gigabyte must come back.
  EXPECT_LT(free0 - std::min(free0, free2), size_t{256} << 20);
}

struct stack_outcome {
  double rel_l2 = 0.0, delta_rel_l2 = 0.0; // worst step; delta: the layers' sum, less embedding
  int32_t agree = 0, sampled = 0;          // GPU forward + sample vs CPU forward + sample
  int32_t agree_sample_only = 0;           // GPU sample vs CPU sample of the CPU's hidden states
  int64_t padding_mismatches = 0;          // padding rows: the embedding alone, bit for bit
};

// Two steps over requests of 40, 45, 30 and 20 prompt tokens: step 1 prefills 24, 17, 30 and 20
// of them; step 2 continues the first two from their cached prefix (16 and 28 tokens), decodes
// one token of the others, and adds 3 padding rows. The CPU's tokens drive both.
stack_outcome run_mixed_batch(const stack_config& cfg, element_type dtype,
                              const std::function<void(float*, size_t)>& cpu_reduce = {},
                              const std::function<cuda_status(float*, size_t)>& gpu_reduce = {}) {
  stack_outcome res;
  const attention_stack cpu(cfg);
  const auto gpu = create_or_fail(cfg, 128, dtype);
  if (!gpu) return res;
  constexpr int32_t block_size = 16;
  const int32_t hidden_size = cfg.hidden_size;
  test::stack_cache host(cpu, 64, block_size, dtype);
  const device_cache dev(cpu, host);
  test::block_pool pool(64, 5);
  std::mt19937 rng(static_cast<uint32_t>(cfg.seed));
  std::vector<test::sequence> seqs(4);
  const int32_t prompt_lens[] = {40, 45, 30, 20};
  for (size_t r = 0; r < seqs.size(); ++r)
    for (int32_t i = 0; i < prompt_lens[r]; ++i)
      seqs[r].tokens.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(cfg.vocab_size)));
  const std::vector<test::sequence*> all = {&seqs[0], &seqs[1], &seqs[2], &seqs[3]};
  const std::vector<std::vector<int32_t>> counts = {{24, 17, 30, 20}, {16, 28, 1, 1}};
  for (size_t s = 0; s < counts.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const test::step_batch b = test::schedule(all, counts[s], pool, block_size, s == 1 ? 3 : 0);
    const std::vector<float> want = test::run_step(cpu, host, b, cpu_reduce);
    const device_batch db(b, cfg.layers.size());
    device_array<float> hidden(want.size());
    hidden.fill_bytes(0xff);
    const cuda_status st = gpu->forward(db.step, dev.views, gpu_reduce, hidden.get());
    EXPECT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(cudaStreamSynchronize(gpu->stream()), cudaSuccess);
    if (!st.ok()) return res;
    const std::vector<float> got = hidden.download();
    res.rel_l2 = std::max(res.rel_l2, rel_l2(got, want));
    res.delta_rel_l2 =
        std::max(res.delta_rel_l2, rel_l2(layer_delta(got, b.token_ids, cfg.seed, hidden_size),
                                          layer_delta(want, b.token_ids, cfg.seed, hidden_size)));
    const int32_t real = b.query_start_loc.back();
    for (size_t i = static_cast<size_t>(real) * hidden_size; i < got.size(); ++i)
      res.padding_mismatches += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;

    std::vector<int32_t> rows(static_cast<size_t>(real));
    std::iota(rows.begin(), rows.end(), 0);
    const std::vector<int32_t> cpu_tokens = cpu.sample(want.data(), rows);
    std::vector<int32_t> gpu_tokens, gpu_tokens_of_cpu;
    EXPECT_TRUE(gpu->sample(hidden.get(), rows, gpu_tokens).ok());
    const device_array<float> want_dev(want);
    EXPECT_TRUE(gpu->sample(want_dev.get(), rows, gpu_tokens_of_cpu).ok());
    if (gpu_tokens.size() != rows.size() || gpu_tokens_of_cpu.size() != rows.size()) return res;
    for (size_t i = 0; i < rows.size(); ++i) {
      res.agree += gpu_tokens[i] == cpu_tokens[i];
      res.agree_sample_only += gpu_tokens_of_cpu[i] == cpu_tokens[i];
    }
    res.sampled += real;
    for (size_t r = 0; r < all.size(); ++r)
      if (all[r]->computed == static_cast<int32_t>(all[r]->tokens.size()))
        all[r]->tokens.push_back(cpu_tokens[static_cast<size_t>(b.query_start_loc[r + 1] - 1)]);
  }
  return res;
}

void expect_close(const stack_outcome& res, const char* what) {
  const double agree = res.sampled > 0 ? static_cast<double>(res.agree) / res.sampled : 0.0;
  const double agree_sample =
      res.sampled > 0 ? static_cast<double>(res.agree_sample_only) / res.sampled : 0.0;
  std::printf("[ stack    ] %s: rel_l2 %.3g, layers' rel_l2 %.3g, tokens agree %d/%d (%.1f%%), "
              "sampling alone %.1f%%\n",
              what, res.rel_l2, res.delta_rel_l2, res.agree, res.sampled, 100.0 * agree,
              100.0 * agree_sample);
  EXPECT_GT(res.sampled, 0);
  EXPECT_LE(res.rel_l2, 2e-2);
  EXPECT_LE(res.delta_rel_l2, 5e-2);
  EXPECT_GE(agree, 0.9);
  EXPECT_GE(agree_sample, 0.9);
  EXPECT_EQ(res.padding_mismatches, 0);
}

TEST(attention_stack_cuda, matches_the_cpu_stack_on_a_mixed_batch) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  expect_close(run_mixed_batch(small_config(), element_type::bf16), "bf16");
}

TEST(attention_stack_cuda, matches_the_cpu_stack_with_an_f16_cache) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  expect_close(run_mixed_batch(small_config(), element_type::f16), "f16");
}

TEST(attention_stack_cuda, matches_the_cpu_stack_with_mla_layers) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  expect_close(run_mixed_batch(mla_config(), element_type::bf16), "mla");
}

// Rank 1 of 2 with one KV head (replicated), its partial sums left unreduced on both sides.
TEST(attention_stack_cuda, matches_the_cpu_stack_on_a_tensor_parallel_rank) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  int32_t calls = 0;
  const stack_config cfg = small_config(2, 1, 1);
  const stack_outcome res = run_mixed_batch(
      cfg, element_type::bf16, [](float*, size_t) {},
      [&](float* buffer, size_t count) {
        ++calls;
        EXPECT_NE(buffer, nullptr);
        EXPECT_EQ(count % static_cast<size_t>(cfg.hidden_size), 0u);
        return cuda_status{};
      });
  EXPECT_EQ(calls, 2 * static_cast<int32_t>(cfg.layers.size()));
  expect_close(res, "tp rank 1 of 2");
}

} // namespace
} // namespace kvactor::kernels::gpu_test
