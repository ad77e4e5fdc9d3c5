/* quantize_token.cuh — one token's activation quantization by one block of THREADS threads, the one
 * implementation behind quantize_input.cu (a block per token) and prologue.cu (the fused small-T launch).
 * Contract as quantize_input.cu states it; wt is the token's routing weight when it applies to the input
 * (a.token_weight non-NULL), else unused. */
#ifndef FP8MOE_KERNELS_QUANTIZE_TOKEN_CUH
#define FP8MOE_KERNELS_QUANTIZE_TOKEN_CUH

#include "common.cuh"

namespace fp8moe {

/* Four consecutive elements of a bf16/fp16 row as fp32 (one 8-byte load). */
__device__ __forceinline__ float4 load4(const void* row, int32_t dt, int64_t i) {
  const uint2 v = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(row) + i);
  float4 r;
  if (dt == FP8MOE_DT_BF16) {
    r.x = __uint_as_float(v.x << 16);
    r.y = __uint_as_float(v.x & 0xFFFF0000u);
    r.z = __uint_as_float(v.y << 16);
    r.w = __uint_as_float(v.y & 0xFFFF0000u);
  } else {
    const __half2 a = *reinterpret_cast<const __half2*>(&v.x), b = *reinterpret_cast<const __half2*>(&v.y);
    const float2 fa = __half22float2(a), fb = __half22float2(b);
    r = make_float4(fa.x, fa.y, fb.x, fb.y);
  }
  return r;
}

__device__ __forceinline__ float4 scaled4(const fp8moe_quantize_input_args& a, int64_t t, int64_t i, float wt) {
  float4 v = load4(static_cast<const uint8_t*>(a.hidden.data) + t * a.hidden.s[0] * 2, a.hidden.dt, i);
  if (a.token_weight) {
    v.x *= wt; v.y *= wt; v.z *= wt; v.w *= wt;
  }
  return v;
}

__device__ __forceinline__ float amax4(float4 v) {
  return fmaxf(fmaxf(finite_abs(v.x), finite_abs(v.y)), fmaxf(finite_abs(v.z), finite_abs(v.w)));
}

__device__ __forceinline__ uint32_t quant4(float4 v, float s) { return e4m3x4(v.x / s, v.y / s, v.z / s, v.w / s); }

/* The max of v over the block (every thread gets it). */
template <int THREADS>
__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[THREADS / 32];
  v = warp_max(v);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float r = 0.0f;
  for (int i = 0; i < THREADS / 32; ++i) r = fmaxf(r, part[i]);
  __syncthreads();
  return r;
}

/* The token's finite amax into *a.amax (dynamic per-tensor scale, first pass). */
template <int THREADS>
__device__ __forceinline__ void token_amax(const fp8moe_quantize_input_args& a, int64_t t, float wt) {
  float m = 0.0f;
  for (int64_t i = threadIdx.x * 4; i < a.H; i += THREADS * 4) m = fmaxf(m, amax4(scaled4(a, t, i, wt)));
  m = block_max<THREADS>(m);
  if (threadIdx.x == 0) atomic_amax(a.amax, m);
}

/* Encodes token t (for DYN_TENSOR *a.amax must be final). */
template <int THREADS>
__device__ __forceinline__ void quantize_token(const fp8moe_quantize_input_args& a, int64_t t, float wt) {
  uint32_t* out = reinterpret_cast<uint32_t*>(a.xq + t * a.H);
  if (a.mode == FP8MOE_ACTQ_GROUP128) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t groups = a.H / 128;
    for (int64_t g = warp; g < groups; g += THREADS / 32) {
      const float4 v = scaled4(a, t, g * 128 + lane * 4, wt);
      const float s = dynamic_scale(warp_max(amax4(v)));
      out[g * 32 + lane] = quant4(v, s);
      if (lane == 0) a.xs[t * groups + g] = s;
    }
    return;
  }
  float s;
  if (a.mode == FP8MOE_ACTQ_STATIC) {
    s = kref_at(a.static_scale, 0);
  } else if (a.mode == FP8MOE_ACTQ_DYN_TENSOR) {
    s = dynamic_scale(__uint_as_float(*a.amax));
    if (t == 0 && threadIdx.x == 0) a.xs[0] = s;
  } else {
    float m = 0.0f;
    for (int64_t i = threadIdx.x * 4; i < a.H; i += THREADS * 4) m = fmaxf(m, amax4(scaled4(a, t, i, wt)));
    s = dynamic_scale(block_max<THREADS>(m));
    if (threadIdx.x == 0) a.xs[t] = s;
  }
  for (int64_t i = threadIdx.x * 4; i < a.H; i += THREADS * 4) out[i / 4] = quant4(scaled4(a, t, i, wt), s);
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_QUANTIZE_TOKEN_CUH */
