/* quantize_token.cuh — one token's activation quantization by one block of THREADS threads, the one
 * implementation behind quantize_input.cu (a block per token) and prologue.cu (the fused small-T launch).
 * Contract as quantize_input.cu states it; wt is the token's routing weight when it applies to the input
 * (a.token_weight non-NULL), else unused. */
#ifndef FP8MOE_KERNELS_QUANTIZE_TOKEN_CUH
#define FP8MOE_KERNELS_QUANTIZE_TOKEN_CUH

#include "common.cuh"

namespace fp8moe {

/* Four consecutive elements of a bf16/fp16 row: the raw 8 bytes, then as fp32. Split so that a caller can
 * issue several loads before it uses any (the loops below: one memory round trip per batch, not per step). */
__device__ __forceinline__ uint2 load_raw4(const fp8moe_quantize_input_args& a, int64_t t, int64_t i) {
  return *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(a.hidden.data) + t * a.hidden.s[0] + i);
}

/* Eight consecutive elements (16 bytes: i a multiple of 8, rows 16-byte aligned by the contract). */
__device__ __forceinline__ uint4 load_raw8(const fp8moe_quantize_input_args& a, int64_t t, int64_t i) {
  return *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.hidden.data) + t * a.hidden.s[0] + i);
}

__device__ __forceinline__ float4 widen4(uint2 v, int32_t dt) {
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

/* The loaded elements as fp32, times the token's weight where it applies to the input. */
__device__ __forceinline__ float4 scaled4(const fp8moe_quantize_input_args& a, uint2 raw, float wt) {
  float4 v = widen4(raw, a.hidden.dt);
  if (a.token_weight) {
    v.x *= wt; v.y *= wt; v.z *= wt; v.w *= wt;
  }
  return v;
}

__device__ __forceinline__ float amax4(float4 v) {
  return fmaxf(fmaxf(finite_abs(v.x), finite_abs(v.y)), fmaxf(finite_abs(v.z), finite_abs(v.w)));
}

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

/* Loads in flight per thread in the loops below: the loads of kQuantBatch steps are issued before the first is
 * used (a warp's 1x128 groups, or a thread's 4-element pieces), so a warp waits for one memory round trip per
 * batch. Without it the stores of a step kept the next step's load behind them (SASS: one LDG per iteration), and
 * the amax loop's remainder after the compiler's 4-way unrolling ran one load at a time. */
constexpr int kQuantBatch = 4;

/* The raw loads of this thread's pieces i0 + b·THREADS·4 (b < kQuantBatch) of the token's row, zero past H. */
template <int THREADS>
__device__ __forceinline__ void load_pieces(const fp8moe_quantize_input_args& a, int64_t t, int64_t i0,
                                            uint2 (&raw)[kQuantBatch]) {
#pragma unroll
  for (int b = 0; b < kQuantBatch; ++b) {
    const int64_t i = i0 + b * THREADS * 4;
    raw[b] = i < a.H ? load_raw4(a, t, i) : make_uint2(0u, 0u);
  }
}

/* This thread's finite amax of the token's row (its 4-element pieces in ascending order, as a plain loop). */
template <int THREADS>
__device__ __forceinline__ float thread_amax(const fp8moe_quantize_input_args& a, int64_t t, float wt) {
  float m = 0.0f;
  for (int64_t i0 = threadIdx.x * 4; i0 < a.H; i0 += kQuantBatch * THREADS * 4) {
    uint2 raw[kQuantBatch];
    load_pieces<THREADS>(a, t, i0, raw);
#pragma unroll
    for (int b = 0; b < kQuantBatch; ++b)
      if (i0 + b * THREADS * 4 < a.H) m = fmaxf(m, amax4(scaled4(a, raw[b], wt)));
  }
  return m;
}

/* The token's finite amax into *a.amax (dynamic per-tensor scale, first pass). */
template <int THREADS>
__device__ __forceinline__ void token_amax(const fp8moe_quantize_input_args& a, int64_t t, float wt) {
  const float m = block_max<THREADS>(thread_amax<THREADS>(a, t, wt));
  if (threadIdx.x == 0) atomic_amax(a.amax, m);
}

/* SORTED: v, the codes at byte `off` of token t's row, into each of the token's expert-sorted rows (dest_rows). */
template <class V>
__device__ __forceinline__ void store_sorted(const fp8moe_quantize_input_args& a, const int32_t* dest_rows, int64_t t,
                                             int64_t off, V v) {
  for (int32_t k = 0; k < a.K; ++k) {
    const int32_t r = dest_rows[t * a.K + k];
    if (r >= 0) *reinterpret_cast<V*>(a.xq + static_cast<int64_t>(r) * a.H + off) = v;
  }
}

/* Encodes token t (for DYN_TENSOR *a.amax must be final); SORTED: into the rows dest_rows names
 * (fp8moe_launch_quantize_input_sorted), not row t. */
template <int THREADS, bool SORTED = false>
__device__ __forceinline__ void quantize_token(const fp8moe_quantize_input_args& a, int64_t t, float wt,
                                               const int32_t* dest_rows = nullptr) {
  uint32_t* out = reinterpret_cast<uint32_t*>(a.xq + t * a.H);
  if (a.mode == FP8MOE_ACTQ_GROUP128) {
    /* A half-warp per 1×128 group, 8 elements (one 16-byte load) per lane: a warp encodes two groups per step, so
     * the group's maximum takes 4 shuffle steps for two groups and the scale's division runs once per two groups.
     * The maximum is exact in any order, so the scales and codes are those of a warp per group. Half h of warp w
     * takes groups 2w + h, 2w + h + 2·warps, …; the loop runs on the warp's first group, so both halves stay in it
     * for the shuffles and the half past the last group (odd H / 128) computes on zeros and stores nothing. */
    constexpr int kWarps = THREADS / 32;
    const int warp = threadIdx.x / 32, half = (threadIdx.x / 16) % 2, hl = threadIdx.x % 16;
    const int64_t groups = a.H / 128;
    for (int64_t w0 = 2 * warp; w0 < groups; w0 += kQuantBatch * 2 * kWarps) {
      uint4 raw[kQuantBatch];
#pragma unroll
      for (int b = 0; b < kQuantBatch; ++b) {
        const int64_t g = w0 + b * 2 * kWarps + half;
        raw[b] = g < groups ? load_raw8(a, t, g * 128 + hl * 8) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int b = 0; b < kQuantBatch; ++b) {
        if (w0 + b * 2 * kWarps >= groups) break; /* warp-uniform */
        const int64_t g = w0 + b * 2 * kWarps + half;
        const float4 lo = scaled4(a, make_uint2(raw[b].x, raw[b].y), wt);
        const float4 hi = scaled4(a, make_uint2(raw[b].z, raw[b].w), wt);
        float m = fmaxf(amax4(lo), amax4(hi));
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o)); /* within the half */
        const float s = dynamic_scale(m);
        const EncodeScale q = encode_scale(s, m);
        if (g < groups) {
          if constexpr (SORTED)
            store_sorted(a, dest_rows, t, (g * 16 + hl) * 8, make_uint2(quant4(lo, q), quant4(hi, q)));
          else reinterpret_cast<uint2*>(out)[g * 16 + hl] = make_uint2(quant4(lo, q), quant4(hi, q));
          if (hl == 0) a.xs[t * groups + g] = s;
        }
      }
    }
    return;
  }
  float s, m = NAN; /* m: the finite amax behind a dynamic scale (none for a static one) */
  if (a.mode == FP8MOE_ACTQ_STATIC) {
    s = kref_at(a.static_scale, 0);
  } else if (a.mode == FP8MOE_ACTQ_DYN_TENSOR) {
    m = __uint_as_float(*a.amax);
    s = dynamic_scale(m);
    if (t == 0 && threadIdx.x == 0) a.xs[0] = s;
  } else {
    m = block_max<THREADS>(thread_amax<THREADS>(a, t, wt));
    s = dynamic_scale(m);
    if (threadIdx.x == 0) a.xs[t] = s;
  }
  const EncodeScale q = encode_scale(s, m);
  for (int64_t i0 = threadIdx.x * 4; i0 < a.H; i0 += kQuantBatch * THREADS * 4) {
    uint2 raw[kQuantBatch];
    load_pieces<THREADS>(a, t, i0, raw);
#pragma unroll
    for (int b = 0; b < kQuantBatch; ++b) {
      const int64_t i = i0 + b * THREADS * 4;
      if (i < a.H) {
        if constexpr (SORTED) store_sorted(a, dest_rows, t, i, quant4(scaled4(a, raw[b], wt), q));
        else out[i / 4] = quant4(scaled4(a, raw[b], wt), q);
      }
    }
  }
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_QUANTIZE_TOKEN_CUH */
