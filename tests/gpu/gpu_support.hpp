// Test support for the CUDA kernels: skipping without a device, device buffers, and element
// conversions for building bf16/f16 inputs on the host.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvactor/kernels/cuda/cuda_check.h"
#include "kvactor/kernels/float_convert.h"
#include "kvactor/kernels/kv_cache_view.h"

// Skips the calling test unless a CUDA device answers.
#define KVACTOR_REQUIRE_CUDA_DEVICE()                                                              \
  do {                                                                                             \
    int kvactor_devices_ = 0;                                                                      \
    const cudaError_t kvactor_err_ = cudaGetDeviceCount(&kvactor_devices_);                        \
    if (kvactor_err_ != cudaSuccess || kvactor_devices_ == 0) {                                    \
      (void)cudaGetLastError();                                                                    \
      GTEST_SKIP() << "no CUDA device: "                                                           \
                   << (kvactor_err_ != cudaSuccess ? cudaGetErrorString(kvactor_err_)              \
                                                   : "cudaGetDeviceCount found none");             \
    }                                                                                              \
  } while (0)

// ASSERT that a cuda_status is ok, printing its message otherwise.
#define ASSERT_CUDA_OK(expr)                                                                       \
  do {                                                                                             \
    const ::kvactor::kernels::cuda_status kvactor_status_ = (expr);                                \
    ASSERT_TRUE(kvactor_status_.ok()) << kvactor_status_.message();                                \
  } while (0)

namespace kvactor::kernels::gpu_test {

inline void cuda_or_throw(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// A device allocation of n elements of T, optionally filled from the host.
template <class T>
class device_array {
public:
  device_array() = default;
  explicit device_array(size_t n) : n_(n) {
    if (n_ > 0) cuda_or_throw(cudaMalloc(&ptr_, n_ * sizeof(T)), "cudaMalloc");
  }
  explicit device_array(const std::vector<T>& host) : device_array(host.size()) {
    if (n_ > 0)
      cuda_or_throw(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
                    "cudaMemcpy to device");
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }

  T* get() const { return static_cast<T*>(ptr_); }
  size_t size() const { return n_; }
  /// Every byte set to `byte` (0xff: NaN in bf16 and f16).
  void fill_bytes(int byte) {
    if (n_ > 0) cuda_or_throw(cudaMemset(ptr_, byte, n_ * sizeof(T)), "cudaMemset");
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_ > 0)
      cuda_or_throw(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
                    "cudaMemcpy to host");
    return host;
  }

private:
  void* ptr_ = nullptr;
  size_t n_ = 0;
};

/// x rounded into element type t (bf16 or f16), as raw bits.
inline uint16_t to_bits(element_type t, float x) {
  return t == element_type::bf16 ? float_to_bf16(x) : float_to_f16(x);
}
inline float from_bits(element_type t, uint16_t bits) {
  return t == element_type::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
}

/// n random elements of type t, uniform in [-range, range) before rounding.
inline std::vector<uint16_t> random_bits(element_type t, size_t n, std::mt19937& rng,
                                         float range = 1.0f) {
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v)
    x = to_bits(t, dist(rng));
  return v;
}

} // namespace kvactor::kernels::gpu_test
