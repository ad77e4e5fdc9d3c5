/* common_host.h — a host stand-in for kernels/common.cuh where the kernels' headers under test need it, so that
 * tests/test_routing_emu.cpp and tests/test_slot_list_emu.cpp can compile that code for the host and run it on
 * warp_emu.h's emulated block. It takes
 * common.cuh's include guard: included first, it keeps the real header (device intrinsics, inline PTX) out. The
 * strided reads and the warp reductions are the kernels' own (common_portable.cuh); only the inline PTX is stood in
 * for: ex2_approx and rcp_approx, for the SFU's ex2.approx.ftz and rcp.approx.ftz, give the correctly rounded value
 * moved by up to their documented error (2 ulp and 1 ulp, chosen per input by a hash, so runs repeat), with the flush
 * to zero below 2^-126; pin_f32x2 is a compiler fence; the named barriers are the emulated block's. */
#ifndef FP8MOE_KERNELS_COMMON_CUH
#define FP8MOE_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "kernels_internal.h"
#include "tensor_internal.h"
#include "warp_emu.h"

#include "common_portable.cuh" /* the real load_f32, kref_at, warp_max, warp_sum, on warp_emu.h's intrinsics */

namespace fp8moe {

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

/* common.cuh's named barriers, on warp_emu.h's block. */
template <int kId>
__device__ __forceinline__ void named_sync(int threads) {
  emu_bar_sync(kId, static_cast<unsigned>(threads));
}
template <int kId>
__device__ __forceinline__ void named_arrive(int threads) {
  emu_bar_arrive(kId, static_cast<unsigned>(threads));
}

__device__ __forceinline__ float ex2_approx(float x) {
  return flush(move_ulps(exp2f(flush(x)), x, sfu_error_ulps ? 2 : 0));
}
__device__ __forceinline__ float rcp_approx(float x) {
  return flush(move_ulps(1.0f / flush(x), x, sfu_error_ulps ? 1 : 0));
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_COMMON_CUH */
