#include "attention_bench_run.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "attention_bench_kernels.hpp"
#include "kvactor/kernels/cuda/paged_attention_cuda.h"
#include "kvactor/kernels/float_convert.h"
#include "kvactor/kernels/paged_attention.h"

namespace kvactor::bench {
namespace {

using kernels::attention_params;
using kernels::kv_view;

constexpr int32_t content = 2 * head_size; // K then V

struct host_batch {
  std::vector<int32_t> qsl;         // [num_reqs + 1] indptr
  std::vector<int32_t> seq_lens;    // [num_reqs]
  std::vector<int32_t> block_table; // [num_reqs, width] kernel block ids, -1 past a request's
  int32_t width = 0;
  int64_t num_blocks = 0; // cache blocks: pool_factor times what the batch needs
};

int32_t blocks_for(int32_t tokens) {
  return (tokens + kernel_block_size - 1) / kernel_block_size;
}

// Every request's blocks come from one shuffled pool of all block ids, so no table is a
// contiguous run and the ids spread over a cache larger than the batch.
host_batch build_batch(const bench_case& c, double pool_factor, std::mt19937_64& rng) {
  host_batch b;
  b.qsl.push_back(0);
  int64_t needed = 0;
  for (const bench_request& r : c.reqs) {
    b.qsl.push_back(b.qsl.back() + r.fresh);
    b.seq_lens.push_back(r.seq_len());
    b.width = std::max(b.width, blocks_for(r.seq_len()));
    needed += blocks_for(r.seq_len());
  }
  b.num_blocks = std::max<int64_t>(
      needed + 1, static_cast<int64_t>(std::ceil(static_cast<double>(needed) * pool_factor)));
  std::vector<int32_t> pool(static_cast<size_t>(b.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  const auto width = static_cast<size_t>(b.width);
  b.block_table.assign(c.reqs.size() * width, -1);
  size_t next = 0;
  for (size_t r = 0; r < c.reqs.size(); ++r)
    for (int32_t blk = 0; blk < blocks_for(b.seq_lens[r]); ++blk)
      b.block_table[r * width + static_cast<size_t>(blk)] = pool[next++];
  return b;
}

kv_view make_view(int32_t num_kv_heads, cache_layout layout, int64_t num_blocks, void* base,
                  bool fp8) {
  kv_view v;
  v.base = base;
  v.type = fp8 ? kernels::element_type::fp8_e4m3 : kernels::element_type::bf16;
  v.num_blocks = num_blocks;
  v.num_heads = num_kv_heads;
  v.block_size = kernel_block_size;
  v.content = content;
  if (layout == cache_layout::hnd) {
    v.stride_token = content;
    v.stride_head = int64_t{content} * kernel_block_size;
    v.stride_block = v.stride_head * num_kv_heads;
  } else {
    v.stride_head = content;
    v.stride_token = int64_t{content} * num_kv_heads;
    v.stride_block = v.stride_token * kernel_block_size;
  }
  return v;
}

attention_params make_params(int32_t num_q_heads, int32_t num_kv_heads) {
  attention_params p;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_size = head_size;
  p.v_offset = head_size;
  p.v_size = head_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(head_size));
  p.causal = true;
  return p;
}

// One checked output row: query token `token` (of request `req`) for the q heads of `kv_head`.
struct check_row {
  int32_t req = 0, token = 0, kv_head = 0;
};

// Every row when there are at most max_rows; else max_rows distinct random rows, alternating
// between decodes and requests of several queries when the batch has both.
std::vector<check_row> pick_rows(const bench_case& c, const host_batch& b, int32_t max_rows,
                                 std::mt19937_64& rng) {
  std::vector<check_row> rows;
  const auto num_reqs = static_cast<int32_t>(c.reqs.size());
  if (int64_t{c.num_tokens()} * c.num_kv_heads <= max_rows) {
    for (int32_t r = 0; r < num_reqs; ++r)
      for (int32_t t = b.qsl[r]; t < b.qsl[r + 1]; ++t)
        for (int32_t h = 0; h < c.num_kv_heads; ++h)
          rows.push_back({r, t, h});
    return rows;
  }
  std::vector<int32_t> decodes, multi;
  for (int32_t r = 0; r < num_reqs; ++r)
    (c.reqs[static_cast<size_t>(r)].fresh == 1 ? decodes : multi).push_back(r);
  std::set<std::pair<int32_t, int32_t>> seen;
  for (int64_t attempt = 0; std::ssize(rows) < max_rows && attempt < 100 * int64_t{max_rows};
       ++attempt) {
    const bool from_multi = !multi.empty() && (decodes.empty() || rows.size() % 2 == 1);
    const std::vector<int32_t>& from = from_multi ? multi : decodes;
    const int32_t r = from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
    const int32_t t = std::uniform_int_distribution<int32_t>(b.qsl[r], b.qsl[r + 1] - 1)(rng);
    const int32_t h = std::uniform_int_distribution<int32_t>(0, c.num_kv_heads - 1)(rng);
    if (seen.insert({t, h}).second) rows.push_back({r, t, h});
  }
  return rows;
}

struct check_outcome {
  double rel_l2 = 0.0;
  int64_t nonfinite = 0;
};

// The reference batch of a check: row s becomes request s, a single query at the row's position
// p over a compact copy of its KV head's entries, so it sees the same keys [0, p] as in the full
// batch (causal). The copy is [block, token, K|V] with one KV head.
struct check_plan {
  std::vector<int32_t> qsl{0};      // [rows + 1]
  std::vector<int32_t> seq_lens;    // [rows] p + 1
  std::vector<int32_t> block_table; // [rows, width] ids of the compact copy
  int32_t width = 0;
  int64_t num_blocks = 0;            // of the compact copy
  std::vector<int64_t> offsets;      // [num_blocks * block size] cache element offset of each
                                     // entry of the copy, or -1 (past p)
  std::vector<size_t> first_element; // [rows] the row's first element in q and out
  size_t row_elems = 0;              // elements of a row: group x head_size
};

check_plan plan_check(const bench_case& c, const host_batch& b, const kv_view& view,
                      const std::vector<check_row>& rows) {
  check_plan plan;
  const int32_t group = c.num_q_heads / c.num_kv_heads;
  plan.row_elems = static_cast<size_t>(group) * head_size;
  std::vector<int64_t> first_block;
  for (const check_row& row : rows) {
    const bench_request& req = c.reqs[static_cast<size_t>(row.req)];
    const int32_t keys = req.cached + (row.token - b.qsl[static_cast<size_t>(row.req)]) + 1;
    plan.qsl.push_back(plan.qsl.back() + 1);
    plan.seq_lens.push_back(keys);
    first_block.push_back(plan.num_blocks);
    plan.width = std::max(plan.width, blocks_for(keys));
    plan.num_blocks += blocks_for(keys);
    // The group's q heads are adjacent in a token's [num_q_heads, head] row of q and out.
    plan.first_element.push_back(
        (static_cast<size_t>(row.token) * static_cast<size_t>(c.num_q_heads)
         + static_cast<size_t>(row.kv_head) * static_cast<size_t>(group))
        * head_size);
  }
  const auto width = static_cast<size_t>(plan.width);
  plan.offsets.assign(static_cast<size_t>(plan.num_blocks) * kernel_block_size, -1);
  plan.block_table.assign(rows.size() * width, -1);
  for (size_t s = 0; s < rows.size(); ++s) {
    const check_row& row = rows[s];
    const int32_t* ids = b.block_table.data() + static_cast<size_t>(row.req) * b.width;
    for (int32_t j = 0; j < plan.seq_lens[s]; ++j)
      plan.offsets[static_cast<size_t>(first_block[s] * kernel_block_size + j)] =
          ids[j / kernel_block_size] * view.stride_block + row.kv_head * view.stride_head
          + (j % kernel_block_size) * view.stride_token;
    for (int32_t k = 0; k < blocks_for(plan.seq_lens[s]); ++k)
      plan.block_table[s * width + static_cast<size_t>(k)] =
          static_cast<int32_t>(first_block[s] + k);
  }
  return plan;
}

// Runs the CPU reference on the plan's batch and compares.
//   entries // [num_blocks * block size, content] the compact copy (plan.offsets gathered), of
//           // bf16 or FP8 elements
//   q       // [rows, row_elems] the rows' queries
//   got     // [rows, row_elems] the GPU's outputs of the rows, bf16 bits
check_outcome compare_with_reference(const bench_case& c, const check_plan& plan,
                                     std::vector<uint16_t>& entries, const std::vector<float>& q,
                                     const std::vector<uint16_t>& got) {
  const kv_view host = make_view(1, cache_layout::hnd, plan.num_blocks, entries.data(), c.fp8);
  std::vector<float> ref(q.size());
  kernels::paged_attention(make_params(c.num_q_heads / c.num_kv_heads, 1), host, q.data(),
                           plan.qsl.data(), plan.seq_lens.data(), plan.block_table.data(),
                           plan.width, static_cast<int32_t>(plan.seq_lens.size()), ref.data());
  check_outcome res;
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double x = kernels::bf16_to_float(got[i]);
    if (!std::isfinite(x)) {
      ++res.nonfinite;
      continue;
    }
    err += (x - ref[i]) * (x - ref[i]);
    norm += double{ref[i]} * ref[i];
  }
  res.rel_l2 = norm > 0.0 ? std::sqrt(err / norm) : std::sqrt(err);
  return res;
}

// Compares rows of the GPU output with paged_attention on the same bf16 data (see check_plan).
check_outcome check_against_reference(const bench_case& c, const host_batch& b, const kv_view& view,
                                      const device_buffer<uint16_t>& q,
                                      const device_buffer<uint16_t>& out,
                                      const std::vector<check_row>& rows, cudaStream_t stream) {
  const check_plan plan = plan_check(c, b, view, rows);
  // The gather moves 16-bit units: an FP8 entry is content / 2 of them (offsets stay even, as
  // the strides are multiples of 16 elements).
  const int32_t units = c.fp8 ? content / 2 : content;
  std::vector<int64_t> unit_offsets = plan.offsets;
  if (c.fp8)
    for (int64_t& o : unit_offsets)
      o = o < 0 ? o : o / 2;
  const device_buffer<int64_t> offsets(unit_offsets);
  const device_buffer<uint16_t> gathered(plan.offsets.size() * static_cast<size_t>(units));
  check_cuda(gather_entries(static_cast<const uint16_t*>(view.base), offsets.get(),
                            static_cast<int64_t>(plan.offsets.size()), units, gathered.get(),
                            stream),
             "gather_entries");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (gather)");
  std::vector<uint16_t> entries = gathered.download();
  std::vector<float> qf(rows.size() * plan.row_elems);
  std::vector<uint16_t> got(rows.size() * plan.row_elems);
  for (size_t s = 0; s < rows.size(); ++s) {
    const std::vector<uint16_t> qs = q.download(plan.first_element[s], plan.row_elems);
    const std::vector<uint16_t> os = out.download(plan.first_element[s], plan.row_elems);
    for (size_t x = 0; x < plan.row_elems; ++x) {
      qf[s * plan.row_elems + x] = kernels::bf16_to_float(qs[x]);
      got[s * plan.row_elems + x] = os[x];
    }
  }
  return compare_with_reference(c, plan, entries, qf, got);
}

// FNV-1a: a case's data depends on its name and the seed, not on which cases run before it.
uint64_t case_seed(const std::string& key, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (const char ch : key)
    h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  return h;
}

kernels::prefill_kernel prefill_kernel_of(prefill_choice p) {
  switch (p) {
  case prefill_choice::automatic: return kernels::prefill_kernel::automatic;
  case prefill_choice::mma_sync: return kernels::prefill_kernel::mma_sync;
  case prefill_choice::hopper_per_tile: return kernels::prefill_kernel::hopper_per_tile;
  }
  return kernels::prefill_kernel::automatic;
}

} // namespace

case_result run_case(const bench_case& c, const run_options& o, l2_flusher& flush,
                     cudaStream_t stream) {
  std::mt19937_64 rng(case_seed(c.key, o.seed));
  const host_batch b = build_batch(c, o.pool_factor, rng);
  const auto num_reqs = static_cast<int32_t>(c.reqs.size());
  const int32_t num_tokens = c.num_tokens();

  kv_view view = make_view(c.num_kv_heads, o.layout, b.num_blocks, nullptr, c.fp8);
  // 16-bit units: an FP8 cache takes half as many.
  device_buffer<uint16_t> cache(static_cast<size_t>(b.num_blocks * view.stride_block)
                                / (c.fp8 ? 2 : 1));
  view.base = cache.get();
  const size_t io_elems = static_cast<size_t>(num_tokens) * c.num_q_heads * head_size;
  device_buffer<uint16_t> q(io_elems), out(io_elems);
  const device_buffer<int32_t> qsl(b.qsl), seq_lens(b.seq_lens), table(b.block_table);
  const attention_params params = make_params(c.num_q_heads, c.num_kv_heads);
  case_result res;
  res.workspace_bytes = kernels::paged_attention_workspace_bytes(params, view, b.width, num_reqs,
                                                                 num_tokens, o.decode);
  const device_buffer<unsigned char> workspace(res.workspace_bytes);
  // Zeroed once: the split counters at its start stay zero between calls.
  if (workspace.bytes() > 0)
    check_cuda(cudaMemset(workspace.get(), 0, workspace.bytes()), "cudaMemset (workspace)");
  const device_buffer<unsigned long long> nonfinite(1);
  res.device_bytes = cache.bytes() + q.bytes() + out.bytes() + qsl.bytes() + seq_lens.bytes()
                     + table.bytes() + workspace.bytes() + nonfinite.bytes();
  size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  res.device_used = total_bytes - free_bytes;

  // Random everywhere, unused blocks included; out starts as NaN so unwritten rows show.
  const uint64_t seed = rng();
  if (c.fp8)
    check_cuda(fill_uniform_fp8(reinterpret_cast<uint8_t*>(cache.get()), cache.bytes(), 1.0f, seed,
                                stream),
               "fill (cache)");
  else
    check_cuda(fill_uniform_bf16(cache.get(), cache.size(), 1.0f, seed, stream), "fill (cache)");
  check_cuda(fill_uniform_bf16(q.get(), q.size(), 2.0f, seed + 1, stream), "fill (q)");
  check_cuda(cudaMemsetAsync(out.get(), 0xff, out.bytes(), stream), "cudaMemsetAsync (out)");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (setup)");

  // With the longest query as a decoder step passes it: a batch of decodes launches no prefill.
  const graph_exec graph(stream, [&] {
    const kernels::cuda_status s = kernels::paged_attention_cuda(
        params, view, q.get(), qsl.get(), seq_lens.get(), table.get(), b.width, num_reqs,
        num_tokens, out.get(), kernels::cuda_workspace{workspace.get(), workspace.bytes()}, stream,
        c.max_query_len(), prefill_kernel_of(c.prefill), o.decode);
    if (!s.ok()) throw std::runtime_error("paged_attention_cuda: " + s.message());
  });
  res.time = summarize(time_graph_replays(graph.get(), stream, flush, o.warmup, o.replays));

  check_cuda(cudaMemsetAsync(nonfinite.get(), 0, nonfinite.bytes(), stream), "cudaMemsetAsync");
  check_cuda(count_nonfinite_bf16(out.get(), out.size(), nonfinite.get(), stream),
             "count_nonfinite_bf16");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (NaN scan)");
  res.nonfinite = static_cast<int64_t>(nonfinite.download()[0]);

  const std::vector<check_row> rows = pick_rows(c, b, o.check_rows, rng);
  const check_outcome checked = check_against_reference(c, b, view, q, out, rows, stream);
  res.rel_l2 = checked.rel_l2;
  res.rows_checked = std::ssize(rows);
  res.rows_total = int64_t{num_tokens} * c.num_kv_heads;
  res.nonfinite = std::max(res.nonfinite, checked.nonfinite);
  return res;
}

} // namespace kvactor::bench
