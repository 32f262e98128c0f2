// Internal: the host side of launching the attention kernels (decode, prefill, MLA, merge), shared
// by their .cu files: dispatch on the element type and the head size, and the launch itself
// (dynamic shared memory, programmatic dependent launch), every failure as a cuda_status.
// Compiled as C++17 by nvcc.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "attention_args.h"
#include "pdl_scope.h"

namespace kvactor::kernels::cuda_detail {

/// A type as a value, for the dispatchers below: decltype(tag)::type.
template <class T>
struct type_tag {
  using type = T;
};

/// f(type_tag<__nv_bfloat16>{}) when bf16, else f(type_tag<__half>{}): the 16-bit element types
/// of the attention kernels (dispatch_element_type of kv_cache_view.h covers the host types).
template <class F>
cuda_status dispatch_half_type(bool bf16, F&& f) {
  if (bf16) return f(type_tag<__nv_bfloat16>{});
  return f(type_tag<__half>{});
}

/// f(std::integral_constant<int, D>{}) for the instantiated head sizes D = 64, 96, 128, 256; any
/// other (which the host checks reject first) fails as "KERNEL: head_size N is not instantiated".
template <class F>
cuda_status dispatch_head_size(const char* kernel, int32_t head_size, F&& f) {
  switch (head_size) {
  case 64: return f(std::integral_constant<int, 64>{});
  case 96: return f(std::integral_constant<int, 96>{});
  case 128: return f(std::integral_constant<int, 128>{});
  case 256: return f(std::integral_constant<int, 256>{});
  default: break;
  }
  return detail::invalid_cuda_argument(kernel, ": head_size ", head_size, " is not instantiated");
}

/// This process's KVACTOR_PDL (pdl_scope.h), read once; a value it does not know counts as unset
/// here (decoder_cuda::create refuses it).
inline pdl_scope pdl_setting() {
  static const pdl_scope scope = [] {
    pdl_scope s = pdl_scope::everywhere;
    (void)parse_pdl_scope(std::getenv("KVACTOR_PDL"), &s); // refused values leave the default
    return s;
  }();
  return scope;
}

/// Whether a launch on `stream` may be a programmatic dependent under KVACTOR_PDL.
inline bool pdl_allowed(cudaStream_t stream) {
  switch (pdl_setting()) {
  case pdl_scope::nowhere: return false;
  case pdl_scope::eager: {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(stream, &capture) == cudaSuccess
           && capture == cudaStreamCaptureStatusNone;
  }
  default: return true;
  }
}

/// kernel<<<grid, threads, smem, stream>>>(args...), as a programmatic dependent launch when pdl
/// (the kernel may then start before the stream's previous kernel ends, and must wait for it
/// with griddepcontrol.wait before it touches what that kernel writes or reads).
template <class... Params, class... Args>
cudaError_t launch_ex(void (*kernel)(Params...), dim3 grid, unsigned threads, size_t smem, bool pdl,
                      cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl && pdl_allowed(stream) ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

/// kernel<<<grid, block, 0, stream>>>(args...) as a programmatic dependent launch: it may start
/// before the stream's previous kernel ends, and waits for it in the kernel (the dense kernels'
/// pdl_start, or the skinny kernels' wait after they start their weight stream).
template <class Kernel, class... Args>
cudaError_t launch_dependent(Kernel kernel, dim3 grid, unsigned block, cudaStream_t stream,
                             Args... args) {
  return launch_ex(kernel, grid, block, 0, true, stream, args...);
}

/// Launches kernel<<<grid, threads, smem, stream>>>(a), as a programmatic dependent when pdl.
template <class Kernel>
cuda_status launch_kernel(Kernel kernel, dim3 grid, unsigned threads, size_t smem, bool pdl,
                          cudaStream_t stream, const attention_args& a) {
  KVACTOR_CUDA_CALL(launch_ex(kernel, grid, threads, smem, pdl, stream, a));
  return {};
}

/// launch_kernel for a kernel with `smem` bytes of dynamic shared memory, which may exceed the
/// 48 KiB default: the kernel's limit is raised to `smem` first.
template <class Kernel>
cuda_status launch_kernel_with_smem(Kernel kernel, dim3 grid, unsigned threads, size_t smem,
                                    bool pdl, cudaStream_t stream, const attention_args& a) {
  KVACTOR_CUDA_CALL(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  return launch_kernel(kernel, grid, threads, smem, pdl, stream, a);
}

/// The kernel of one family (decode, prefill) for q/out element type T, cache element type C (T,
/// or __nv_fp8_e4m3) and head size D, with its launch configuration:
///   struct Kernels {
///     template <int D, class C> using config = ...;             // threads, smem_bytes
///     template <class T, class C, int D> static auto instance(); // the __global__ function
///   };
/// launch_per_head_size<Kernels> launches the instance for the call's types (fp8: a bf16 q with an
/// FP8 cache; else bf16 or f16 for both) and head size (64, 96, 128 or 256; `name` names the
/// family when it is another).
template <class Kernels>
cuda_status launch_per_head_size(const char* name, const attention_args& a, bool bf16, bool fp8,
                                 dim3 grid, bool pdl, cudaStream_t stream) {
  auto launch = [&](auto q_type, auto cache_type) {
    using T = typename decltype(q_type)::type;
    using C = typename decltype(cache_type)::type;
    return dispatch_head_size(name, a.head_size, [&](auto head_size) {
      constexpr int D = decltype(head_size)::value;
      using cfg = typename Kernels::template config<D, C>;
      return launch_kernel_with_smem(Kernels::template instance<T, C, D>(), grid, cfg::threads,
                                     cfg::smem_bytes, pdl, stream, a);
    });
  };
  if (fp8) return launch(type_tag<__nv_bfloat16>{}, type_tag<__nv_fp8_e4m3>{});
  return dispatch_half_type(bf16, [&](auto type) { return launch(type, type); });
}

} // namespace kvactor::kernels::cuda_detail
