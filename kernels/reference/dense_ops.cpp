#include "kvactor/kernels/dense_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kvactor/kernels/check.h"

namespace kvactor::kernels {

void rms_norm(const float* x, int32_t num_tokens, int32_t dim, float eps, float* y) {
  KVACTOR_CHECK(num_tokens >= 0, "rms_norm: num_tokens: ", num_tokens, " is negative");
  KVACTOR_CHECK(dim > 0, "rms_norm: dim: ", dim, " must be > 0");
  KVACTOR_CHECK(eps > 0.0f, "rms_norm: eps: ", eps, " must be > 0");
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xr = x + t * dim;
    float* yr = y + t * dim;
    float sum = 0.0f;
    for (int32_t i = 0; i < dim; ++i)
      sum += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    for (int32_t i = 0; i < dim; ++i)
      yr[i] = xr[i] * inv;
  }
}

void linear(const float* x, const float* w, int32_t num_tokens, int32_t in, int32_t out, float* y) {
  KVACTOR_CHECK(num_tokens >= 0, "linear: num_tokens: ", num_tokens, " is negative");
  KVACTOR_CHECK(in > 0, "linear: in: ", in, " must be > 0");
  KVACTOR_CHECK(out > 0, "linear: out: ", out, " must be > 0");
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xr = x + t * in;
    float* yr = y + t * out;
    for (int64_t o = 0; o < out; ++o) {
      const float* wr = w + o * in;
      float acc = 0.0f;
      for (int32_t i = 0; i < in; ++i)
        acc += xr[i] * wr[i];
      yr[o] = acc;
    }
  }
}

void rope(float* x, const int32_t* positions, int32_t num_tokens, int32_t num_heads,
          int32_t head_stride, int32_t rot_offset, int32_t rot_dim, float theta) {
  KVACTOR_CHECK(theta > 0.0f, "rope: theta: ", theta, " must be > 0");
  KVACTOR_CHECK(rot_dim > 0 && rot_dim % 2 == 0, "rope: rot_dim: ", rot_dim,
                " must be even and > 0");
  const int32_t half = rot_dim / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int32_t i = 0; i < half; ++i)
    inv_freq[static_cast<size_t>(i)] =
        std::pow(static_cast<double>(theta), -2.0 * i / static_cast<double>(rot_dim));
  rope_with_frequencies(x, positions, num_tokens, num_heads, head_stride, rot_offset, rot_dim,
                        inv_freq.data());
}

void rope_with_frequencies(float* x, const int32_t* positions, int32_t num_tokens,
                           int32_t num_heads, int32_t head_stride, int32_t rot_offset,
                           int32_t rot_dim, const double* inv_freq) {
  KVACTOR_CHECK(num_tokens >= 0, "rope: num_tokens: ", num_tokens, " is negative");
  KVACTOR_CHECK(num_heads > 0, "rope: num_heads: ", num_heads, " must be > 0");
  KVACTOR_CHECK(rot_dim > 0 && rot_dim % 2 == 0, "rope: rot_dim: ", rot_dim,
                " must be even and > 0");
  KVACTOR_CHECK(rot_offset >= 0 && rot_offset + rot_dim <= head_stride,
                "rope: rot_offset: ", rot_offset, " + rot_dim ", rot_dim, " exceeds head_stride ",
                head_stride);
  const int32_t half = rot_dim / 2;
  std::vector<float> cos_v(static_cast<size_t>(half)), sin_v(static_cast<size_t>(half));
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int32_t i = 0; i < half; ++i) {
      const double angle = positions[t] * inv_freq[i];
      cos_v[static_cast<size_t>(i)] = static_cast<float>(std::cos(angle));
      sin_v[static_cast<size_t>(i)] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * head_stride + rot_offset;
      for (int32_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        const float c = cos_v[static_cast<size_t>(i)], s = sin_v[static_cast<size_t>(i)];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

#if KVACTOR_WITH_OPENBLAS
extern "C" void openblas_set_num_threads(int num_threads);
extern "C" void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc);

void projection(const float* x, const float* w, int32_t num_tokens, int32_t in, int32_t out,
                float* y) {
  KVACTOR_CHECK(num_tokens >= 0 && in > 0 && out > 0, "projection: num_tokens ", num_tokens,
                ", in ", in, ", out ", out);
  if (num_tokens == 0) return;
  static const bool one_thread = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)one_thread;
  constexpr int row_major = 101, no_trans = 111, trans = 112; // CBLAS's enum values
  // sgemm's sums depend on the number of rows it is given (its kernels differ by shape), so it
  // is always given whole tiles of `tile` rows, the last one padded with zeros: a token's result
  // is then the same whichever batch it is in (checked by DecoderSplits).
  constexpr int32_t tile = 8;
  const int32_t whole = num_tokens / tile * tile;
  for (int32_t t = 0; t < whole; t += tile)
    cblas_sgemm(row_major, no_trans, trans, tile, out, in, 1.0f, x + static_cast<int64_t>(t) * in,
                in, w, in, 0.0f, y + static_cast<int64_t>(t) * out, out);
  if (whole == num_tokens) return;
  const int32_t rest = num_tokens - whole;
  thread_local std::vector<float> xs, ys;
  xs.assign(static_cast<size_t>(tile) * in, 0.0f);
  ys.resize(static_cast<size_t>(tile) * out);
  std::copy_n(x + static_cast<int64_t>(whole) * in, static_cast<int64_t>(rest) * in, xs.data());
  cblas_sgemm(row_major, no_trans, trans, tile, out, in, 1.0f, xs.data(), in, w, in, 0.0f,
              ys.data(), out);
  std::copy_n(ys.data(), static_cast<int64_t>(rest) * out, y + static_cast<int64_t>(whole) * out);
}

const char* projection_backend() {
  return "openblas";
}
#else
void projection(const float* x, const float* w, int32_t num_tokens, int32_t in, int32_t out,
                float* y) {
  linear(x, w, num_tokens, in, out, y);
}

const char* projection_backend() {
  return "reference";
}
#endif

void weighted_rms_norm(const float* x, int32_t num_tokens, int32_t dim, float eps,
                       const float* weight, bool one_plus_weight, float* y) {
  rms_norm(x, num_tokens, dim, eps, y);
  for (int64_t t = 0; t < num_tokens; ++t)
    for (int32_t i = 0; i < dim; ++i)
      y[t * dim + i] *= one_plus_weight ? 1.0f + weight[i] : weight[i];
}

} // namespace kvactor::kernels
