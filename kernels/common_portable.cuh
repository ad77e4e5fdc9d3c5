/* common_portable.cuh — the part of common.cuh that also compiles for the host: strided reads of fp32/bf16/fp16/
 * int32/int64 tensors as fp32, and warp reductions through the warp intrinsics. common.cuh includes it for the
 * kernels; tests/routing_emu/common_host.h includes it for the emulated warp (whose intrinsics warp_emu.h defines), so
 * the host runs these very functions, not copies. */
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

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_COMMON_PORTABLE_CUH */
