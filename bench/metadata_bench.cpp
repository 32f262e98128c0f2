// Attention metadata build per step (one builder, one KV cache group of 4 layers): decode batches
// of 1, 32 and 256 requests and a mixed batch (8 prefill chunks of 128 tokens + 248 decodes).
// Baseline in the same run: copying the step's inputs once (block-table rows, positions,
// query_start_loc, seq_lens), the floor any builder that owns its buffers pays.
// Summary line: "metadata: decode256 X us (goal 5 us), copy floor Y us, ratio Z.ZZx".
#include <benchmark/benchmark.h>

#include "bench/summary_reporter.hpp"

#include <cstdio>
#include <map>
#include <string>

#include "actors/metadata/builder.hpp"
#include "actors/metadata/ubatch_inputs.hpp"

namespace {

using namespace kvactor;

constexpr int32_t block_size = 16;
constexpr int32_t max_model_len = 2048;
constexpr int32_t width = max_model_len / block_size;

// decodes: requests with 1 token; prefills: requests with `chunk` tokens.
step_batch make_batch(int32_t decodes, int32_t prefills, int32_t chunk) {
  step_batch b;
  b.seq = 1;
  b.block_rows.resize(1);
  b.widths = {width};
  b.query_start_loc = {0};
  int32_t next_block = 1;
  auto add = [&](int32_t n, int32_t seq_len) {
    b.request_ids.push_back(b.request_ids.size());
    for (int32_t t = 0; t < n; ++t) {
      b.token_ids.push_back(t);
      b.positions.push_back(seq_len - n + t);
    }
    b.query_start_loc.push_back(b.query_start_loc.back() + n);
    b.seq_lens.push_back(seq_len);
    b.is_prefilling.push_back(n > 1);
    b.max_query_len = std::max(b.max_query_len, n);
    b.max_seq_len = std::max(b.max_seq_len, seq_len);
    const int32_t blocks = (seq_len + block_size - 1) / block_size;
    for (int32_t i = 0; i < width; ++i)
      b.block_rows[0].push_back(i < blocks ? next_block++ : 0);
  };
  for (int32_t r = 0; r < decodes; ++r)
    add(1, 300 + (r * 37) % 1500);
  for (int32_t r = 0; r < prefills; ++r)
    add(chunk, chunk * (1 + r % 3));
  return b;
}

struct setup {
  step_batch batch;
  std::vector<group_geometry> groups{{block_size, block_size, true}};
  std::vector<std::vector<attention_group>> attn;
  builder_table builders;
  std::vector<std::vector<int64_t>> slots;
  explicit setup(step_batch b) : batch(std::move(b)) {
    attention_group a;
    a.backend = "reference";
    a.layer_names = {"model.layers.0", "model.layers.1", "model.layers.2", "model.layers.3"};
    a.spec = full_attention_spec(block_size, 2, 32, dtype::bfloat16);
    attn = {{a}};
    builders.resize(1);
    builders[0].resize(1);
    builders[0][0].push_back(std::make_unique<reference_builder>());
  }
};

void build(benchmark::State& state, int32_t decodes, int32_t prefills) {
  setup s(make_batch(decodes, prefills, 128));
  ubatch_work w{1, 0, 0, s.batch.num_tokens(), 0, s.batch.num_reqs()};
  for (auto _ : state) {
    auto in = slice_inputs(s.batch, w, s.groups, s.slots);
    auto md = build_attention_metadata(s.attn, s.builders, *in);
    benchmark::DoNotOptimize(md);
  }
}

void BM_metadata_decode1(benchmark::State& st) {
  build(st, 1, 0);
}
void BM_metadata_decode32(benchmark::State& st) {
  build(st, 32, 0);
}
void BM_metadata_decode256(benchmark::State& st) {
  build(st, 256, 0);
}
void BM_metadata_mixed(benchmark::State& st) {
  build(st, 248, 8);
}
BENCHMARK(BM_metadata_decode1);
BENCHMARK(BM_metadata_decode32);
BENCHMARK(BM_metadata_decode256);
BENCHMARK(BM_metadata_mixed);

void BM_copy_floor_decode256(benchmark::State& state) {
  auto b = make_batch(256, 0, 0);
  std::vector<int32_t> rows, qsl, lens;
  std::vector<int64_t> pos;
  for (auto _ : state) {
    rows.assign(b.block_rows[0].begin(), b.block_rows[0].end());
    qsl.assign(b.query_start_loc.begin(), b.query_start_loc.end());
    lens.assign(b.seq_lens.begin(), b.seq_lens.end());
    pos.assign(b.positions.begin(), b.positions.end());
    benchmark::DoNotOptimize(rows.data());
    benchmark::DoNotOptimize(pos.data());
  }
}
BENCHMARK(BM_copy_floor_decode256);

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  kvactor::bench::summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double build256 = reporter.ns["BM_metadata_decode256"] / 1e3;
  const double floor = reporter.ns["BM_copy_floor_decode256"] / 1e3;
  if (floor > 0)
    std::printf("metadata: decode1 %.2f us, decode32 %.2f us, decode256 %.2f us (goal 5 us), "
                "mixed %.2f us; copy floor %.2f us, ratio %.2fx\n",
                reporter.ns["BM_metadata_decode1"] / 1e3, reporter.ns["BM_metadata_decode32"] / 1e3,
                build256, reporter.ns["BM_metadata_mixed"] / 1e3, floor, build256 / floor);
  return 0;
}
