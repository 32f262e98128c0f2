// Test support for attention_stack_cuda: device copies of the CPU oracle's caches (same layout and
// strides) and of a scheduled step's metadata, and the comparison helpers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "../kernels/stack_fixture.hpp" // the CPU oracle's caches and step builder
#include "gpu_support.hpp"
#include "kvactor/kernels/cuda/attention_stack_cuda.h"
#include "kvactor/kernels/synthetic_weights.h"

namespace kvactor::kernels::gpu_test {

inline stack_layer make_layer(stack_layer_kind kind, int32_t hq, int32_t hkv, int32_t head_size) {
  stack_layer l;
  l.kind = kind;
  l.num_q_heads = hq;
  l.num_kv_heads = hkv;
  l.head_size = head_size;
  return l;
}

/// hidden 256, GQA 8 q / `total_kv` kv heads over tp_size ranks: full (head 64), sliding window 8,
/// chunked local 16 (head 128), full with softcap and sinks, and a layer reading layer 0's cache.
inline stack_config small_config(int32_t tp_size = 1, int32_t tp_rank = 0, int32_t total_kv = 2) {
  stack_config cfg;
  cfg.hidden_size = 256;
  cfg.vocab_size = 1024;
  cfg.seed = 11;
  cfg.tp_size = tp_size;
  cfg.tp_rank = tp_rank;
  cfg.total_q_heads = 8;
  cfg.total_kv_heads = total_kv;
  const int32_t hq = 8 / tp_size, hkv = std::max(1, total_kv / tp_size);
  const stack_layer full = make_layer(stack_layer_kind::full, hq, hkv, 64);
  stack_layer window = make_layer(stack_layer_kind::sliding_window, hq, hkv, 64);
  window.sliding_window = 8;
  stack_layer chunked = make_layer(stack_layer_kind::chunked_local, hq, hkv, 128);
  chunked.chunk_size = 16;
  stack_layer capped = full;
  capped.softcap = 30.0f;
  capped.has_sinks = true;
  stack_layer shared = full;
  shared.shares_kv_with = 0;
  cfg.layers = {full, window, chunked, capped, shared};
  return cfg;
}

/// MLA (576 = 512 latent + 64 RoPE tail) with sinks, a full layer, and an MLA layer reading
/// layer 0's latent cache.
inline stack_config mla_config() {
  stack_config cfg = small_config();
  stack_layer mla = make_layer(stack_layer_kind::mla, 8, 1, 576);
  mla.head_size_v = 512;
  mla.has_sinks = true;
  stack_layer shared = mla;
  shared.has_sinks = false;
  shared.shares_kv_with = 0;
  cfg.layers = {mla, make_layer(stack_layer_kind::full, 8, 2, 64), shared};
  return cfg;
}

/// Creates the stack, or adds a test failure with the status and returns null.
inline std::unique_ptr<attention_stack_cuda>
create_or_fail(const stack_config& cfg, int32_t max_tokens,
               element_type dtype = element_type::bf16) {
  attention_stack_cuda_options opt;
  opt.max_tokens = max_tokens;
  opt.dtype = dtype;
  attention_stack_cuda_created c = attention_stack_cuda::create(cfg, opt);
  EXPECT_TRUE(c.status.ok()) << c.status.message();
  return std::move(c.stack);
}

/// A stack on a stream of its own (CUDA graphs cannot capture the legacy default stream); the
/// stack is destroyed before its stream.
struct stack_on_stream {
  cudaStream_t stream = nullptr;
  std::unique_ptr<attention_stack_cuda> stack; // null (and a test failure) if create failed

  stack_on_stream(const stack_config& cfg, int32_t max_tokens) {
    cuda_or_throw(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    attention_stack_cuda_options opt;
    opt.max_tokens = max_tokens;
    opt.stream = stream;
    attention_stack_cuda_created c = attention_stack_cuda::create(cfg, opt);
    EXPECT_TRUE(c.status.ok()) << c.status.message();
    stack = std::move(c.stack);
  }
  ~stack_on_stream() {
    stack.reset();
    cudaStreamDestroy(stream);
  }
  stack_on_stream(const stack_on_stream&) = delete;
  stack_on_stream& operator=(const stack_on_stream&) = delete;
};

/// A device copy of every cache buffer of `host` (its current bytes), with the same strides.
struct device_cache {
  std::vector<std::unique_ptr<device_array<float>>> buffers; // null for sharing layers
  std::vector<kv_view> views;                                // [num_layers] device views

  device_cache(const attention_stack& cpu, const test::stack_cache& host) {
    for (size_t l = 0; l < host.buffers.size(); ++l) {
      const auto src = static_cast<size_t>(cpu.geometry(l).kv_source);
      if (src != l) {
        buffers.emplace_back();
        views.push_back(views[src]);
        continue;
      }
      buffers.push_back(std::make_unique<device_array<float>>(host.buffers[l]->snapshot()));
      kv_view v = host.views[l];
      v.base = buffers.back()->get();
      views.push_back(v);
    }
  }
};

/// A device copy of one step's metadata, the same for every layer (one KV cache group).
struct device_batch {
  device_array<int32_t> token_ids, positions, query_start_loc, seq_lens, block_table;
  device_array<int64_t> slot_mapping;
  device_step step;

  device_batch(const test::step_batch& b, size_t num_layers)
      : token_ids(b.token_ids), positions(b.positions), query_start_loc(b.query_start_loc),
        seq_lens(b.seq_lens), block_table(b.block_table), slot_mapping(b.slot_mapping) {
    step.token_ids = token_ids.get();
    step.positions = positions.get();
    step.num_tokens = b.num_tokens();
    device_layer_batch lb;
    lb.query_start_loc = query_start_loc.get();
    lb.seq_lens = seq_lens.get();
    lb.block_table = block_table.get();
    lb.slot_mapping = slot_mapping.get();
    lb.width = b.width;
    lb.num_reqs = b.num_reqs();
    step.layers.assign(num_layers, lb);
  }
};

/// A stack (small_config, on a stream of its own) whose device cache holds the first `prefill[i]`
/// tokens of each of `num_seqs` random sequences of `len` tokens, written by one eager step; with
/// the CPU twin whose cache layout the device cache copies. Throws when the stack cannot be
/// created or the step fails.
struct prefilled_stack {
  static constexpr int32_t block_size = 16;
  stack_config cfg = small_config();
  stack_on_stream on{cfg, 128};
  attention_stack cpu{cfg};
  test::stack_cache host{cpu, 64, block_size, element_type::bf16};
  device_cache dev{cpu, host};
  test::block_pool pool{64, 5};
  std::mt19937 rng;
  std::vector<test::sequence> seqs;
  std::vector<test::sequence*> all;

  prefilled_stack(uint32_t seed, size_t num_seqs, int32_t len, const std::vector<int32_t>& prefill)
      : rng(seed), seqs(num_seqs) {
    if (!on.stack) throw std::runtime_error("attention_stack_cuda::create failed");
    for (auto& s : seqs) {
      for (int32_t i = 0; i < len; ++i)
        s.tokens.push_back(random_token());
      all.push_back(&s);
    }
    const auto step = test::schedule(all, prefill, pool, block_size, 0);
    const device_batch b(step, cfg.layers.size());
    device_array<float> hidden(static_cast<size_t>(step.num_tokens()) * cfg.hidden_size);
    if (cuda_status st = on.stack->forward(b.step, dev.views, {}, hidden.get()); !st)
      throw std::runtime_error(st.message());
    cuda_or_throw(cudaStreamSynchronize(on.stream), "prefill");
  }

  attention_stack_cuda& gpu() { return *on.stack; }
  int32_t random_token() { return static_cast<int32_t>(rng() % 1024); }
  /// A next token for every sequence whose tokens are all in the cache.
  void extend_finished() {
    for (auto* s : all)
      if (s->computed == static_cast<int32_t>(s->tokens.size()))
        s->tokens.push_back(random_token());
  }
};

/// ||a - b|| / ||b||.
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = double{a[i]} - double{b[i]};
    err += d * d;
    norm += double{b[i]} * double{b[i]};
  }
  if (a.size() != b.size() || !std::isfinite(err)) return INFINITY;
  return norm > 0.0 ? std::sqrt(err / norm) : std::sqrt(err);
}

/// hidden minus each row's embedding: what the layers added to the residual stream.
inline std::vector<float> layer_delta(const std::vector<float>& hidden,
                                      const std::vector<int32_t>& token_ids, uint64_t seed,
                                      int32_t hidden_size) {
  std::vector<float> d = hidden;
  for (size_t t = 0; t < token_ids.size(); ++t)
    for (int32_t c = 0; c < hidden_size; ++c)
      d[t * static_cast<size_t>(hidden_size) + static_cast<size_t>(c)] -=
          synthetic_uniform(seed, weight_matrix::embedding, 0, token_ids[t], c);
  return d;
}

} // namespace kvactor::kernels::gpu_test
