#include "kvactor/kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kvactor/kernels/check.h"

namespace kvactor::kernels {

void visible_keys(const attention_params& params, int32_t p, int32_t seq_len, int32_t* lo,
                  int32_t* hi) {
  int32_t l = 0;
  int32_t h = params.causal ? p : seq_len - 1;
  if (params.sliding_window > 0) {
    l = std::max(l, p - params.sliding_window + 1);
    if (!params.causal) h = std::min(h, p + params.sliding_window - 1);
  }
  if (params.chunk_size > 0) {
    const int32_t chunk_begin = p / params.chunk_size * params.chunk_size;
    l = std::max(l, chunk_begin);
    h = std::min(h, chunk_begin + params.chunk_size - 1);
  }
  *lo = l;
  *hi = h;
}

void check_attention_sizes(const attention_params& p, const kv_view& view, const char* who) {
  KVACTOR_CHECK(p.num_q_heads > 0, who, ": num_q_heads: ", p.num_q_heads, " must be > 0");
  KVACTOR_CHECK(p.num_kv_heads > 0, who, ": num_kv_heads: ", p.num_kv_heads, " must be > 0");
  KVACTOR_CHECK(p.num_q_heads % p.num_kv_heads == 0, who, ": num_q_heads: ", p.num_q_heads,
                " is not a multiple of num_kv_heads ", p.num_kv_heads);
  KVACTOR_CHECK(p.num_kv_heads == view.num_heads, who, ": num_kv_heads: ", p.num_kv_heads,
                " differs from the view's num_heads ", view.num_heads);
  KVACTOR_CHECK(p.head_size > 0 && p.head_size <= view.content, who, ": head_size: ", p.head_size,
                " is outside [1, content = ", view.content, "]");
  KVACTOR_CHECK(p.v_size > 0, who, ": v_size: ", p.v_size, " must be > 0");
  KVACTOR_CHECK(p.v_offset >= 0 && p.v_offset + p.v_size <= view.content, who,
                ": v_offset + v_size: ", p.v_offset, " + ", p.v_size,
                " is outside the view's content ", view.content);
}

void check_attention_scores(const attention_params& p, const char* who) {
  KVACTOR_CHECK(std::isfinite(p.scale), who, ": scale: ", p.scale, " is not finite");
  KVACTOR_CHECK(p.sliding_window >= 0, who, ": sliding_window: ", p.sliding_window, " is negative");
  KVACTOR_CHECK(p.chunk_size >= 0, who, ": chunk_size: ", p.chunk_size, " is negative");
  KVACTOR_CHECK(std::isfinite(p.softcap) && p.softcap >= 0.0f, who, ": softcap: ", p.softcap,
                " must be finite and >= 0");
}

namespace {

void check_params(const attention_params& p, const kv_view& view) {
  check_attention_sizes(p, view, "paged_attention");
  check_attention_scores(p, "paged_attention");
  if (p.sinks != nullptr)
    for (int32_t h = 0; h < p.num_q_heads; ++h)
      KVACTOR_CHECK(std::isfinite(p.sinks[h]), "paged_attention: sinks[", h, "]: ", p.sinks[h],
                    " is not finite");
}

// Validates the batch description, and every block id that the computation will read.
void check_batch(const attention_params& p, const kv_view& view, const float* q, const int32_t* qsl,
                 const int32_t* seq_lens, const int32_t* block_table, int32_t width,
                 int32_t num_reqs, const float* out) {
  KVACTOR_CHECK(num_reqs >= 0, "paged_attention: num_reqs: ", num_reqs, " is negative");
  KVACTOR_CHECK(width >= 0, "paged_attention: width: ", width, " is negative");
  if (num_reqs == 0) return;
  KVACTOR_CHECK(qsl != nullptr, "paged_attention: query_start_loc: is null");
  KVACTOR_CHECK(seq_lens != nullptr, "paged_attention: seq_lens: is null");
  KVACTOR_CHECK(qsl[0] == 0, "paged_attention: query_start_loc[0]: ", qsl[0], " must be 0");
  for (int32_t r = 0; r < num_reqs; ++r) {
    const int32_t query_len = qsl[r + 1] - qsl[r];
    KVACTOR_CHECK(query_len >= 0, "paged_attention: query_start_loc[", r + 1, "]: ", qsl[r + 1],
                  " is below query_start_loc[", r, "] = ", qsl[r]);
    KVACTOR_CHECK(seq_lens[r] >= query_len, "paged_attention: seq_lens[", r, "]: ", seq_lens[r],
                  " is below the request's query length ", query_len);
    if (query_len == 0) continue;
    KVACTOR_CHECK(q != nullptr, "paged_attention: q: is null");
    KVACTOR_CHECK(out != nullptr, "paged_attention: out: is null");
    KVACTOR_CHECK(block_table != nullptr, "paged_attention: block_table: is null");
    const int32_t seq = seq_lens[r];
    const int64_t blocks_needed =
        (static_cast<int64_t>(seq) + view.block_size - 1) / view.block_size;
    KVACTOR_CHECK(blocks_needed <= width, "paged_attention: width: ", width,
                  " blocks cannot hold seq_lens[", r, "] = ", seq, " tokens of block size ",
                  view.block_size);
    int32_t lo = 0, hi = 0, unused = 0;
    visible_keys(p, seq - query_len, seq, &lo, &unused);
    visible_keys(p, seq - 1, seq, &unused, &hi);
    for (int32_t b = lo / view.block_size; b <= hi / view.block_size; ++b) {
      const int32_t id = block_table[static_cast<int64_t>(r) * width + b];
      KVACTOR_CHECK(id >= 0 && id < view.num_blocks, "paged_attention: block_table[", r, ", ", b,
                    "]: ", id, " is outside [0, num_blocks = ", view.num_blocks, ")");
    }
  }
}

template <class T>
void attend(const attention_params& p, const kv_view& view, const float* q, const int32_t* qsl,
            const int32_t* seq_lens, const int32_t* block_table, int32_t width, int32_t num_reqs,
            float* out) {
  const int32_t group = p.num_q_heads / p.num_kv_heads;
  const int32_t bs = view.block_size;
  // Stored element x scale is the value (1 but for FP8); V of MLA is a prefix of the latent (K).
  const float k_scale = key_scale(view);
  const float v_scale = p.v_offset >= p.head_size ? value_scale(view) : k_scale;
  std::vector<float> scores;
  for (int32_t r = 0; r < num_reqs; ++r) {
    const int32_t query_len = qsl[r + 1] - qsl[r];
    const int32_t seq = seq_lens[r];
    const int32_t* blocks = block_table + static_cast<int64_t>(r) * width;
    for (int32_t i = 0; i < query_len; ++i) {
      const int64_t t = qsl[r] + i;
      int32_t lo = 0, hi = 0;
      visible_keys(p, seq - query_len + i, seq, &lo, &hi);
      scores.resize(static_cast<size_t>(hi - lo + 1));
      for (int32_t h = 0; h < p.num_q_heads; ++h) {
        const int32_t kvh = h / group;
        const float* qrow = q + (t * p.num_q_heads + h) * p.head_size;
        float* orow = out + (t * p.num_q_heads + h) * p.v_size;
        float m = -std::numeric_limits<float>::infinity();
        for (int32_t j = lo; j <= hi; ++j) {
          const T* k = entry<const T>(view, blocks[j / bs], kvh, j % bs);
          float s = 0.0f;
          for (int32_t d = 0; d < p.head_size; ++d)
            s += qrow[d] * (to_float(k[d]) * k_scale);
          s *= p.scale;
          if (p.softcap > 0.0f) s = p.softcap * std::tanh(s / p.softcap);
          scores[static_cast<size_t>(j - lo)] = s;
          m = std::max(m, s);
        }
        // The sink joins the max so that exp() cannot overflow when it dominates.
        if (p.sinks != nullptr) m = std::max(m, p.sinks[h]);
        std::fill(orow, orow + p.v_size, 0.0f);
        float denom = 0.0f;
        for (int32_t j = lo; j <= hi; ++j) {
          const float w = std::exp(scores[static_cast<size_t>(j - lo)] - m);
          denom += w;
          const T* v = entry<const T>(view, blocks[j / bs], kvh, j % bs) + p.v_offset;
          for (int32_t d = 0; d < p.v_size; ++d)
            orow[d] += w * (to_float(v[d]) * v_scale);
        }
        if (p.sinks != nullptr) denom += std::exp(p.sinks[h] - m);
        for (int32_t d = 0; d < p.v_size; ++d)
          orow[d] /= denom;
      }
    }
  }
}

} // namespace

void check_paged_attention(const attention_params& params, const kv_view& view, const float* q,
                           const int32_t* query_start_loc, const int32_t* seq_lens,
                           const int32_t* block_table, int32_t width, int32_t num_reqs,
                           const float* out) {
  check_view(view, "paged_attention: view");
  check_params(params, view);
  check_batch(params, view, q, query_start_loc, seq_lens, block_table, width, num_reqs, out);
}

void paged_attention(const attention_params& params, const kv_view& view, const float* q,
                     const int32_t* query_start_loc, const int32_t* seq_lens,
                     const int32_t* block_table, int32_t width, int32_t num_reqs, float* out) {
  check_paged_attention(params, view, q, query_start_loc, seq_lens, block_table, width, num_reqs,
                        out);
  dispatch_element_type(view.type, [&](auto tag) {
    attend<decltype(tag)>(params, view, q, query_start_loc, seq_lens, block_table, width, num_reqs,
                          out);
  });
}

} // namespace kvactor::kernels
