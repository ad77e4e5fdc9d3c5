/* common_portable.cuh — the part of common.cuh that also compiles for the host: strided reads of fp32/bf16/fp16/
 * int32/int64 tensors as fp32 (and their elements' addresses), and warp reductions and scans through the warp
 * intrinsics. common.cuh includes it for the kernels; tests/routing_emu/common_host.h includes it for the emulated
 * warp (whose intrinsics warp_emu.h defines), so the host runs these very functions, not copies. */
#ifndef FP8MOE_KERNELS_COMMON_PORTABLE_CUH
#define FP8MOE_KERNELS_COMMON_PORTABLE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels_internal.h"
#include "tensor_internal.h"

namespace fp8moe {

/* Element off (in elements) of a fp32/bf16/fp16/int32/int64 tensor, as fp32. */
__device__ __forceinline__ float load_f32(const void* p, int32_t dt, int64_t off) {
  switch (dt) {
    case FP8MOE_DT_F32: return static_cast<const float*>(p)[off];
    case FP8MOE_DT_BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[off]);
    case FP8MOE_DT_F16: return __half2float(static_cast<const __half*>(p)[off]);
    case FP8MOE_DT_I32: return static_cast<float>(static_cast<const int32_t*>(p)[off]);
    case FP8MOE_DT_I64: return static_cast<float>(static_cast<const int64_t*>(p)[off]);
    default: return 0.0f;
  }
}

__device__ __forceinline__ float kref_at(const fp8moe_kref& r, int64_t i0, int64_t i1 = 0, int64_t i2 = 0) {
  return load_f32(r.data, r.dt, i0 * r.s[0] + i1 * r.s[1] + i2 * r.s[2]);
}

/* Bytes per element of the dtypes load_f32 reads (the kernels' twin of the host's fp8moe_dt_size). */
__device__ __forceinline__ int kdt_size(int32_t dt) {
  return dt == FP8MOE_DT_F32 || dt == FP8MOE_DT_I32 ? 4 : dt == FP8MOE_DT_I64 ? 8 : 2;
}

/* The address of element (i0, i1, i2) of a strided tensor, for a prefetch. */
__device__ __forceinline__ const void* kref_addr(const fp8moe_kref& r, int64_t i0, int64_t i1, int64_t i2) {
  return static_cast<const uint8_t*>(r.data) + (i0 * r.s[0] + i1 * r.s[1] + i2 * r.s[2]) * kdt_size(r.dt);
}

/* The warp's maximum and sum by the xor butterfly (offsets 16, 8, 4, 2, 1): the order src/routing_math.h's
 * fp8moe_rm_sum32 replays on the host. */
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* Inclusive prefix sum of v over lanes 0..lane of a full warp. */
__device__ __forceinline__ int32_t warp_inclusive_sum(int32_t v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t up = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += up;
  }
  return v;
}

/* Warp 0 of a block (lane = tid < 32): exclusive scan of the experts' padded tile counts, each lane a
 * contiguous run of experts: start[e] = first row of expert e's tiles. Returns the inclusive total of lanes
 * 0..lane (lane 31: the tile count). Shared by the one-block permutation and the prologue's slot list
 * (FALLBACK "w"). */
__device__ __forceinline__ int32_t scan_tile_starts(const int32_t* count, int32_t* start, int n, int32_t tile_m,
                                                    int lane) {
  const int per = (n + 31) / 32;
  const int lo = min(lane * per, n), hi = min(lo + per, n);
  int32_t run = 0;
  for (int e = lo; e < hi; ++e) run += (count[e] + tile_m - 1) / tile_m;
  const int32_t incl = warp_inclusive_sum(run, lane);
  int32_t tile = incl - run;
  for (int e = lo; e < hi; ++e) {
    start[e] = tile * tile_m;
    tile += (count[e] + tile_m - 1) / tile_m;
  }
  return incl;
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_COMMON_PORTABLE_CUH */
