/* common_host.h — a host stand-in for the parts of kernels/common.cuh that kernels/routing_token.cuh uses, so that
 * tests/test_routing_emu.cpp can compile the routing code for the host and run it on warp_emu.h's lanes. It takes
 * common.cuh's include guard: included first, it keeps the real header (device intrinsics, inline PTX) out.
 * warp_max and warp_sum are common.cuh's butterflies, written the same way. ex2_approx and rcp_approx stand for the
 * SFU's ex2.approx.ftz and rcp.approx.ftz: the correctly rounded value moved by up to their documented error (2 ulp
 * and 1 ulp, chosen per input by a hash, so runs repeat), with the flush to zero below 2^-126. */
#ifndef FP8MOE_KERNELS_COMMON_CUH
#define FP8MOE_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "kernels_internal.h"
#include "tensor_internal.h"
#include "warp_emu.h"

namespace fp8moe {

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

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* How far the stand-ins move from the correctly rounded value: 0 = not at all, else up to their bound. */
extern int sfu_error_ulps;

inline float move_ulps(float y, float x, int max_ulps) {
  if (max_ulps == 0 || !(fabsf(y) < INFINITY) || y == 0.0f) return y;
  uint32_t h = __float_as_uint(x) * 2654435761u;
  h ^= h >> 15;
  const int k = static_cast<int>(h % static_cast<uint32_t>(2 * max_ulps + 1)) - max_ulps;
  for (int i = 0; i < k; ++i) y = nextafterf(y, INFINITY);
  for (int i = 0; i > k; --i) y = nextafterf(y, -INFINITY);
  return y;
}
inline float flush(float v) { return fabsf(v) < 0x1p-126f ? copysignf(0.0f, v) : v; }

/* common.cuh's register pin; on the host only a compiler fence (SSE registers). */
__device__ __forceinline__ void pin_f32x2(float& a, float& b) { asm volatile("" : "+x"(a), "+x"(b)); }

__device__ __forceinline__ float ex2_approx(float x) {
  return flush(move_ulps(exp2f(flush(x)), x, sfu_error_ulps ? 2 : 0));
}
__device__ __forceinline__ float rcp_approx(float x) {
  return flush(move_ulps(1.0f / flush(x), x, sfu_error_ulps ? 1 : 0));
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_COMMON_CUH */
