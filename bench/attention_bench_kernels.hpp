// Device helpers of kvactor_attention_bench: random bf16 fills, an L2-evicting read, a count of
// non-finite outputs and a gather of cache entries for the CPU check. Each enqueues one kernel on
// `stream` and returns the launch's error (cudaSuccess when it was enqueued).
//
// NOTE(standard): included by a .cu file, which nvcc compiles as C++17 (CMake 3.25 has no C++20
// flag for nvcc): keep this header free of C++20.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kvactor::bench {

/// data[i] = bf16 bits of a value uniform in (-range, range), never exactly zero, drawn from a hash
/// of (seed, i): the same bits for the same seed on every run and device.
///   data // [n] device, bf16 bits
cudaError_t fill_uniform_bf16(uint16_t* data, size_t n, float range, uint64_t seed,
                              cudaStream_t stream);

/// data[i] = the FP8 E4M3 code of a value uniform in (-range, range), from a hash of (seed, i).
cudaError_t fill_uniform_fp8(uint8_t* data, size_t n, float range, uint64_t seed,
                             cudaStream_t stream);

/// Reads data[0, bytes) through L2, so that afterwards L2 holds clean lines of `data` only.
/// REQUIRES: data 16-byte aligned, bytes a multiple of 16; sink a device word (written only when
/// an unlikely hash matches, so that the reads cannot be optimized away).
cudaError_t read_sweep(const void* data, size_t bytes, uint32_t* sink, cudaStream_t stream);

/// *count += the number of NaN or infinite values among data[0, n).
///   data  // [n] device, bf16 bits
///   count // device counter
cudaError_t count_nonfinite_bf16(const uint16_t* data, size_t n, unsigned long long* count,
                                 cudaStream_t stream);

/// For every entry e in [0, num_entries):
///   dst[e * entry_elems, (e + 1) * entry_elems) = src[offsets[e], offsets[e] + entry_elems)
/// when offsets[e] >= 0, zeros otherwise.
///   src     // device, bf16 bits
///   offsets // [num_entries] device, element offsets into src, or -1
///   dst     // [num_entries * entry_elems] device
cudaError_t gather_entries(const uint16_t* src, const int64_t* offsets, int64_t num_entries,
                           int32_t entry_elems, uint16_t* dst, cudaStream_t stream);

} // namespace kvactor::bench
