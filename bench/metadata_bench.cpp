// Attention metadata build per step (one builder, one KV cache group of 4 layers): decode batches
// of 1, 32 and 256 requests and a mixed batch (8 prefill chunks of 128 tokens + 248 decodes).
// Baseline in the same run, per batch: a direct fill of the same outputs (the layer map of 4
// entries sharing one reference metadata: query_start_loc, seq_lens and is_prefilling copied,
// the block table and positions viewed, the slot mapping computed), without the builder's
// generality (input checks, slicing per ubatch, the builder table, a second copy of each array).
// Both outputs are compared before timing. The ratio is what that generality costs.
// Summary line: "metadata: decode1 X us (direct Y us, ratio R.RRx), decode32 ..., decode256 X us
// (goal 5 us; direct Y us, ratio R.RRx), mixed ...".
#include <benchmark/benchmark.h>

#include "bench/summary_reporter.hpp"

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

// The batches measured: name -> (decodes, prefills of 128 tokens).
const std::vector<std::pair<std::string, std::pair<int32_t, int32_t>>> batches{
    {"decode1", {1, 0}}, {"decode32", {32, 0}}, {"decode256", {256, 0}}, {"mixed", {248, 8}}};

expected<layer_metadata> build_with_builder(setup& s) {
  ubatch_work w{1, 0, 0, s.batch.num_tokens(), 0, s.batch.num_reqs()};
  auto in = slice_inputs(s.batch, w, s.groups, s.slots);
  if (!in) return in.err();
  return build_attention_metadata(s.attn, s.builders, *in);
}

// The baseline: the builder's outputs for this one-group, one-ubatch step, filled directly.
layer_metadata direct_fill(const step_batch& b, const std::vector<std::string>& layers,
                           std::vector<int64_t>& slots) {
  auto md = std::make_shared<backend_metadata>();
  md->backend = "reference";
  auto& m = md->common;
  m.query_start_loc = b.query_start_loc;
  m.seq_lens = b.seq_lens;
  m.is_prefilling = b.is_prefilling;
  m.num_reqs = b.num_reqs();
  m.num_actual_tokens = b.num_tokens();
  m.max_query_len = b.max_query_len;
  m.max_seq_len = b.max_seq_len;
  m.block_table = b.block_rows[0];
  m.block_table_width = b.widths[0];
  m.positions = b.positions;
  // block_size 16 = kernel block size: slot = row[pos / 16] * 16 + pos % 16.
  slots.resize(static_cast<size_t>(b.num_tokens()));
  for (int32_t r = 0; r < b.num_reqs(); ++r) {
    const int32_t* row = b.block_rows[0].data() + static_cast<size_t>(r) * width;
    for (auto t = static_cast<size_t>(b.query_start_loc[static_cast<size_t>(r)]);
         t < static_cast<size_t>(b.query_start_loc[static_cast<size_t>(r) + 1]); ++t)
      slots[t] = (int64_t{row[b.positions[t] >> 4]} << 4) + (b.positions[t] & 15);
  }
  m.slot_mapping = slots;
  layer_metadata out;
  for (const auto& name : layers)
    out.emplace(name, md);
  return out;
}

// Whether two layer maps hold equal metadata for the same layers.
bool same_outputs(const layer_metadata& a, const layer_metadata& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, md] : a) {
    auto it = b.find(name);
    if (it == b.end() || md->backend != it->second->backend || !(md->common == it->second->common))
      return false;
  }
  return true;
}

void BM_builder(benchmark::State& state, int32_t decodes, int32_t prefills) {
  setup s(make_batch(decodes, prefills, 128));
  for (auto _ : state) {
    auto md = build_with_builder(s);
    benchmark::DoNotOptimize(md);
  }
}

void BM_direct(benchmark::State& state, int32_t decodes, int32_t prefills) {
  setup s(make_batch(decodes, prefills, 128));
  const auto& layers = s.attn[0][0].layer_names;
  std::vector<int64_t> slots;
  for (auto _ : state) {
    auto md = direct_fill(s.batch, layers, slots);
    benchmark::DoNotOptimize(md);
  }
}

// Both paths fill the same outputs before their speed means anything; false names the batch.
bool outputs_agree() {
  for (const auto& [name, shape] : batches) {
    setup s(make_batch(shape.first, shape.second, 128));
    std::vector<int64_t> slots;
    auto built = build_with_builder(s);
    if (!built || !same_outputs(*built, direct_fill(s.batch, s.attn[0][0].layer_names, slots))) {
      std::fprintf(stderr, "metadata: the direct fill differs from the builder on %s%s%s\n",
                   name.c_str(), built ? "" : ": ", built ? "" : built.err().message.c_str());
      return false;
    }
  }
  return true;
}

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (!outputs_agree()) return 1;
  for (const auto& [name, shape] : batches) {
    const auto [decodes, prefills] = shape;
    benchmark::RegisterBenchmark(("BM_metadata_" + name).c_str(), BM_builder, decodes, prefills);
    benchmark::RegisterBenchmark(("BM_direct_" + name).c_str(), BM_direct, decodes, prefills);
  }
  kvactor::bench::summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::string line;
  for (const auto& [name, shape] : batches) {
    const double built = reporter.ns["BM_metadata_" + name] / 1e3;
    const double direct = reporter.ns["BM_direct_" + name] / 1e3;
    if (built <= 0 || direct <= 0) continue; // filtered out
    char part[160];
    std::snprintf(part, sizeof part, "%s%s %.2f us (%sdirect %.2f us, ratio %.2fx)",
                  line.empty() ? "" : ", ", name.c_str(), built,
                  name == "decode256" ? "goal 5 us; " : "", direct, built / direct);
    line += part;
  }
  if (!line.empty()) std::printf("metadata: %s\n", line.c_str());
  return 0;
}
