// Internal: Hopper warpgroup MMA (wgmma, sm_90a) for the attention kernels: shared-memory matrix
// descriptors of the 128-byte swizzled layouts, and m64nNk16 MMAs (N = 64 or 128) with float
// accumulators, A from shared memory (ss) or registers (rs), B from shared memory.
//
// The layout every operand tile uses here: a [rows][cols] tile of 16-bit elements with cols a
// multiple of 64 is stored as cols / 64 column blocks of [rows][64], each row 128 bytes; inside
// each group of 8 rows (1024 bytes, aligned to 1024) the 16-byte chunk c of row r sits at chunk
// c ^ (r % 8) (sw128_offset). Read by rows (K-major: the MMA's K runs along cols) it is the
// canonical K-major SW128 layout (8-row groups 1024 bytes apart); read by columns (MN-major: K
// runs along rows) the canonical MN-major SW128 layout (64-column blocks rows * 128 bytes apart,
// 8-row groups 1024 bytes apart).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace kvactor::kernels::cuda_detail {

/// Byte offset of the 16-byte chunk `chunk` (columns 8 chunk .. 8 chunk + 7) of row `row` in a
/// swizzled tile of `rows` rows (see above).
__device__ __forceinline__ uint32_t sw128_offset(int row, int chunk, int rows) {
  return static_cast<uint32_t>((chunk / 8) * rows * 128 + row * 128
                               + (((chunk % 8) ^ (row % 8)) * 16));
}

/// A wgmma shared-memory descriptor in its two 32-bit halves: the start address (16-byte units)
/// and the leading byte offset in `lo`, the stride byte offset and the layout in `hi`. Stepping
/// through a tile changes only the start address, so `+` adds to `lo` alone: a 32-bit add where a
/// 64-bit one would cost a carry chain and register moves before every MMA.
struct smem_desc {
  uint32_t lo, hi;
  __device__ __forceinline__ smem_desc operator+(uint32_t units) const { return {lo + units, hi}; }
};

/// The descriptor of a 128-byte-swizzled operand at `smem` (generic pointer into shared memory):
/// start address, leading and stride byte offsets (16-byte units), layout 1 (SW128) in the top two
/// bits. The start address field has 14 bits: offsets added later stay inside the 256 KB window.
__device__ __forceinline__ smem_desc sw128_descriptor(const void* smem, uint32_t leading_bytes,
                                                      uint32_t stride_bytes) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return {((addr >> 4) & 0x3fffu) | (((leading_bytes >> 4) & 0x3fffu) << 16),
          ((stride_bytes >> 4) & 0x3fffu) | (1u << 30)};
}

/// Orders this thread's earlier register writes (accumulators, A fragments) before the next wgmma.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/// Waits until at most N committed wgmma groups of this warpgroup are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Pins accumulator registers in place: the compiler may not move their reads or writes across
/// this point (put after a wait, so that nothing touches them while an MMA is in flight).
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}
template <int M, int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[M][N]) {
#pragma unroll
  for (int i = 0; i < M; ++i)
    fence_accumulators(d[i]);
}

/// Warp specialisation's register split (setmaxnreg): every warp of a warpgroup lowers or raises
/// its per-thread register budget to N (a multiple of 8), so that a producer warpgroup that only
/// issues copies gives its registers to the consumers' accumulators.
template <int N>
__device__ __forceinline__ void warpgroup_registers_down() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void warpgroup_registers_up() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

/// Makes this thread's ordinary shared-memory writes (cp.async included) visible to the async
/// proxy (wgmma operand reads); a barrier must follow before another thread's wgmma reads them.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Accumulator operand lists: "+f"(d[0]) ... for 32 and 64 registers, and their placeholders.
#define KVACTOR_F4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KVACTOR_F16(d, i)                                                                          \
  KVACTOR_F4(d, i), KVACTOR_F4(d, i + 4), KVACTOR_F4(d, i + 8), KVACTOR_F4(d, i + 12)
#define KVACTOR_ACC32(d) KVACTOR_F16(d, 0), KVACTOR_F16(d, 16)
#define KVACTOR_ACC64(d)                                                                           \
  KVACTOR_F16(d, 0), KVACTOR_F16(d, 16), KVACTOR_F16(d, 32), KVACTOR_F16(d, 48)
#define KVACTOR_D32                                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                        \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define KVACTOR_D64                                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                        \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "               \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "               \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// The operands after the accumulators: A and B, then the scale_d predicate source.
// Descriptors arrive as 32-bit halves and are joined into the 64-bit operands da and db.
#define KVACTOR_SS_DESC32 "mov.b64 da, {%32, %33};\nmov.b64 db, {%34, %35};\n"
#define KVACTOR_SS_P32 "%36"
#define KVACTOR_RS_DESC32 "mov.b64 db, {%36, %37};\n"
#define KVACTOR_RS_A32 "{%32, %33, %34, %35}"
#define KVACTOR_RS_P32 "%38"
#define KVACTOR_SS_DESC64 "mov.b64 da, {%64, %65};\nmov.b64 db, {%66, %67};\n"
#define KVACTOR_SS_P64 "%68"
#define KVACTOR_RS_DESC64 "mov.b64 db, {%68, %69};\n"
#define KVACTOR_RS_A64 "{%64, %65, %66, %67}"
#define KVACTOR_RS_P64 "%70"

// d (+)= A * B, m64nNk16, float accumulators d[N / 2] in wgmma's fragment layout (warp w of the
// warpgroup holds rows 16 w .. 16 w + 15 as mma.sync's m16n8 accumulators, one per 8 columns).
// ss: A (K-major) and B (K-major) by descriptor; rs: A from registers (mma.sync's m16n8k16 A
// fragment), B (MN-major, transposed) by descriptor. scale_d == 0 overwrites d.
#define KVACTOR_WGMMA(N, R, TY, PTX_TY)                                                            \
  template <>                                                                                      \
  struct wgmma_ops<N, TY> {                                                                        \
    __device__ __forceinline__ static void ss(float (&d)[R], smem_desc a, smem_desc b,             \
                                              int scale_d) {                                       \
      asm volatile("{\n.reg .pred p;\n.reg .b64 da, db;\n" KVACTOR_SS_DESC##R                      \
                   "setp.ne.b32 p, " KVACTOR_SS_P##R ", 0;\n"                                      \
                                                     "wgmma.mma_async.sync.aligned.m64n" #N        \
                                                     "k16.f32." PTX_TY "." PTX_TY " " KVACTOR_D##R \
                   ", da, db, p, 1, 1, 0, 0;\n}\n"                                                 \
                   : KVACTOR_ACC##R(d)                                                             \
                   : "r"(a.lo), "r"(a.hi), "r"(b.lo), "r"(b.hi), "r"(scale_d));                    \
    }                                                                                              \
    __device__ __forceinline__ static void rs(float (&d)[R], const uint32_t (&a)[4], smem_desc b,  \
                                              int scale_d) {                                       \
      asm volatile(                                                                                \
          "{\n.reg .pred p;\n.reg .b64 db;\n" KVACTOR_RS_DESC##R "setp.ne.b32 p, " KVACTOR_RS_P##R \
          ", 0;\n"                                                                                 \
          "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_TY "." PTX_TY " " KVACTOR_D##R     \
          ", " KVACTOR_RS_A##R ", db, p, 1, 1, 1;\n}\n"                                            \
          : KVACTOR_ACC##R(d)                                                                      \
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.lo), "r"(b.hi), "r"(scale_d));       \
    }                                                                                              \
  };

template <int N, class T>
struct wgmma_ops;
KVACTOR_WGMMA(64, 32, __nv_bfloat16, "bf16")
KVACTOR_WGMMA(64, 32, __half, "f16")
KVACTOR_WGMMA(128, 64, __nv_bfloat16, "bf16")
KVACTOR_WGMMA(128, 64, __half, "f16")

#undef KVACTOR_WGMMA
#undef KVACTOR_SS_DESC32
#undef KVACTOR_SS_P32
#undef KVACTOR_RS_DESC32
#undef KVACTOR_RS_A32
#undef KVACTOR_RS_P32
#undef KVACTOR_SS_DESC64
#undef KVACTOR_SS_P64
#undef KVACTOR_RS_DESC64
#undef KVACTOR_RS_A64
#undef KVACTOR_RS_P64
#undef KVACTOR_D64
#undef KVACTOR_D32
#undef KVACTOR_ACC64
#undef KVACTOR_ACC32
#undef KVACTOR_F16
#undef KVACTOR_F4

} // namespace kvactor::kernels::cuda_detail
