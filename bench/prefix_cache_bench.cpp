// Prefix caching's host cost per block (the goal: hashing and lookup <= 1 us per block).
// A 2048-token prompt (128 blocks of 16) whose blocks are cached:
//   hit       take_cached_prefix (hash chain, lookup, a reference on each block, the table
//             writes for the ranks), then free (the blocks go back to the free queue, cached)
//   register  allocate 128 blocks, cache_full_blocks, free: a prompt never seen (its first token
//             changes each time), so every block is hashed and registered and old ones evicted
//   baseline  the same blocks through a 64-bit FNV-1a chain and a std::unordered_map lookup:
//             what the hit costs without 128-bit hashes, reference counts and the free queue
// Summary line: "prefix cache: hit X ns per block (goal 1000 ns; baseline Y ns, ratio R.RRx),
// register Z ns per block".
#include <benchmark/benchmark.h>

#include "bench/summary_reporter.hpp"

#include <cstdio>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "actors/driver/kv_block_manager.hpp"

namespace {

using namespace kvactor;

constexpr int32_t block_size = 16;
constexpr int32_t prompt_len = 2048;
constexpr int32_t blocks_per_prompt = prompt_len / block_size;

std::vector<int32_t> prompt() {
  std::vector<int32_t> t(prompt_len);
  std::iota(t.begin(), t.end(), 7);
  return t;
}

struct cache {
  block_pool pool{8192};
  kv_block_manager blocks{
      {{{"model.layers.0"}, full_attention_spec(block_size, 8, 128, dtype::bfloat16)}}, pool};
  std::vector<int32_t> tokens = prompt();
  cache() {
    blocks.set_prefix_caching(true);
    (void)blocks.allocate(0, 0, prompt_len);
    blocks.cache_full_blocks(0, tokens, prompt_len);
    blocks.free(0);
  }
};

void BM_hit(benchmark::State& state) {
  cache c;
  std::vector<block_table_update> updates;
  for (auto _ : state) {
    updates.clear();
    benchmark::DoNotOptimize(c.blocks.take_cached_prefix(1, c.tokens, prompt_len, updates));
    c.blocks.free(1);
  }
}

void BM_register(benchmark::State& state) {
  cache c;
  int32_t first = 1 << 20;
  for (auto _ : state) {
    c.tokens[0] = first++;
    (void)c.blocks.allocate(1, 0, prompt_len);
    c.blocks.cache_full_blocks(1, c.tokens, prompt_len);
    c.blocks.free(1);
  }
}

uint64_t fnv1a(uint64_t h, const int32_t* t, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    auto u = static_cast<uint32_t>(t[i]);
    for (int b = 0; b < 4; ++b, u >>= 8)
      h = (h ^ (u & 0xff)) * 0x100000001b3ULL;
  }
  return h;
}

void BM_baseline(benchmark::State& state) {
  const auto tokens = prompt();
  std::unordered_map<uint64_t, int32_t> cached;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int32_t k = 0; k < blocks_per_prompt; ++k)
    cached.emplace(h = fnv1a(h, tokens.data() + k * block_size, block_size), k + 1);
  std::vector<int32_t> table;
  for (auto _ : state) {
    table.clear();
    h = 0xcbf29ce484222325ULL;
    for (int32_t k = 0; k < blocks_per_prompt; ++k) {
      h = fnv1a(h, tokens.data() + k * block_size, block_size);
      auto it = cached.find(h);
      if (it == cached.end()) break;
      table.push_back(it->second);
    }
    benchmark::DoNotOptimize(table.data());
  }
}

// The hit takes every block before its speed means anything.
bool hits_every_block() {
  cache c;
  std::vector<block_table_update> updates;
  const auto hit = c.blocks.take_cached_prefix(1, c.tokens, prompt_len, updates);
  if (hit == prompt_len) return true;
  std::fprintf(stderr, "prefix cache: the cached prompt hit %lld of %d tokens\n",
               static_cast<long long>(hit), prompt_len);
  return false;
}

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (!hits_every_block()) return 1;
  benchmark::RegisterBenchmark("BM_prefix_hit", BM_hit);
  benchmark::RegisterBenchmark("BM_prefix_register", BM_register);
  benchmark::RegisterBenchmark("BM_prefix_baseline", BM_baseline);
  kvactor::bench::summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double per_block = 1.0 / blocks_per_prompt;
  const double hit = reporter.ns["BM_prefix_hit"] * per_block;
  const double reg = reporter.ns["BM_prefix_register"] * per_block;
  const double base = reporter.ns["BM_prefix_baseline"] * per_block;
  if (hit > 0 && reg > 0 && base > 0)
    std::printf("prefix cache: hit %.0f ns per block (goal 1000 ns; baseline %.0f ns, ratio "
                "%.2fx), register %.0f ns per block\n",
                hit, base, hit / base, reg);
  return 0;
}
