// Errors of the CUDA kernels as values. A launcher returns a cuda_status: ok, or a message that
// names what failed: the argument and its value (checked on the host before any CUDA call), or
// the CUDA call with its file:line and cudaGetErrorString.
#pragma once

#include <cuda_runtime_api.h>

#include <sstream>
#include <string>
#include <utility>

namespace kvactor::kernels {

class [[nodiscard]] cuda_status {
public:
  /// An ok status.
  cuda_status() = default;

  /// A failed status. REQUIRES: code != cudaSuccess.
  static cuda_status failure(cudaError_t code, std::string message) {
    cuda_status s;
    s.code_ = code;
    s.message_ = std::move(message);
    return s;
  }

  bool ok() const noexcept { return code_ == cudaSuccess; }
  explicit operator bool() const noexcept { return ok(); }
  /// cudaSuccess when ok; cudaErrorInvalidValue for a rejected argument; else the failed call's.
  cudaError_t code() const noexcept { return code_; }
  /// Empty when ok.
  const std::string& message() const noexcept { return message_; }

private:
  cudaError_t code_ = cudaSuccess;
  std::string message_;
};

namespace detail {

/// "CALL failed at FILE:LINE: REASON (NAME)" with status `code`: the one message format of every
/// failed library call (CUDA, cuBLAS, NCCL).
cuda_status call_failed(cudaError_t code, const char* call, const char* file, int line,
                        const char* reason, const char* name);

/// "CALL failed at FILE:LINE: <cudaGetErrorString> (<cudaGetErrorName>)".
cuda_status cuda_call_failed(cudaError_t code, const char* call, const char* file, int line);

template <class... Args>
cuda_status invalid_cuda_argument(Args&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(parts));
  return cuda_status::failure(cudaErrorInvalidValue, os.str());
}

} // namespace detail
} // namespace kvactor::kernels

// KVACTOR_CUDA_CALL(cudaMemcpyAsync(...)): in a function returning cuda_status, returns a failed
// status naming the call, file:line and the CUDA error when the call does not return cudaSuccess.
#define KVACTOR_CUDA_CALL(call)                                                                    \
  do {                                                                                             \
    const cudaError_t kvactor_cuda_err_ = (call);                                                  \
    if (kvactor_cuda_err_ != cudaSuccess)                                                          \
      return ::kvactor::kernels::detail::cuda_call_failed(kvactor_cuda_err_, #call, __FILE__,      \
                                                          __LINE__);                               \
  } while (0)

// KVACTOR_CUDA_CHECK_ARG(cond, "argument: ", value, " is ..."): in a function returning
// cuda_status, returns cudaErrorInvalidValue with the concatenated message when cond is false.
#define KVACTOR_CUDA_CHECK_ARG(cond, ...)                                                          \
  do {                                                                                             \
    if (!(cond)) return ::kvactor::kernels::detail::invalid_cuda_argument(__VA_ARGS__);            \
  } while (0)
