#include "kvactor/kernels/cuda/cuda_check.h"

#include <string>

namespace kvactor::kernels::detail {

cuda_status call_failed(cudaError_t code, const char* call, const char* file, int line,
                        const char* reason, const char* name) {
  std::string msg = call;
  msg += " failed at ";
  msg += file;
  msg += ':';
  msg += std::to_string(line);
  msg += ": ";
  msg += reason;
  msg += " (";
  msg += name;
  msg += ')';
  return cuda_status::failure(code, std::move(msg));
}

cuda_status cuda_call_failed(cudaError_t code, const char* call, const char* file, int line) {
  return call_failed(code, call, file, line, cudaGetErrorString(code), cudaGetErrorName(code));
}

} // namespace kvactor::kernels::detail
