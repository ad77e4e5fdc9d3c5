/* common.cuh — device helpers shared by the kernel files: strided reads of fp32/bf16/fp16 tensors, the
 * e4m3 encoding (cvt.rn.satfinite, NaN stays NaN), the dynamic-scale rule of docs/DESIGN.md, amax over
 * finite values, and the m16n8k32 e4m3 tensor-core MMA. Header-only; included by kernels/<op>.cu only. */
#ifndef FP8MOE_KERNELS_COMMON_CUH
#define FP8MOE_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "common_portable.cuh" /* load_f32, kref_at/addr, warp_max/sum/inclusive_sum, scan_tile_starts */
#include "kernels_internal.h"
#include "scale_div.h"
#include "tensor_internal.h"

namespace fp8moe {

constexpr float kE4m3Max = 448.0f;

/* Round-to-nearest-even store of an fp32 value into an fp32/bf16/fp16 element. */
__device__ __forceinline__ void store_out(void* p, int32_t dt, int64_t off, float v) {
  switch (dt) {
    case FP8MOE_DT_F32: static_cast<float*>(p)[off] = v; break;
    case FP8MOE_DT_BF16: static_cast<__nv_bfloat16*>(p)[off] = __float2bfloat16_rn(v); break;
    case FP8MOE_DT_F16: static_cast<__half*>(p)[off] = __float2half_rn(v); break;
    default: break;
  }
}

/* The slot outputs y of GEMM2 are stored as bf16 (docs/GPU.md "Workspace"): RNE, except that a finite
 * value never becomes infinite (one above the largest finite bf16 keeps that, with its sign); NaN and ±Inf
 * stay what they are, so the combine sees Inf/NaN exactly where the fp32 value had them. */
constexpr float kBf16Max = 3.38953139e38f; /* 0x7F7F0000 */
__device__ __forceinline__ float bf16_keep_finite(float v) {
  return (fabsf(v) > kBf16Max && fabsf(v) < INFINITY) ? copysignf(kBf16Max, v) : v;
}
/* Two adjacent y values → one 32-bit word (low half = a). */
__device__ __forceinline__ uint32_t y_bf16x2(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(bf16_keep_finite(a), bf16_keep_finite(b));
  return *reinterpret_cast<const uint32_t*>(&h);
}
/* y_bf16x2 of two values known to be neither ±Inf nor NaN: one saturating conversion (cvt.rn.satfinite.bf16x2: RNE, and
 * a finite value beyond the largest finite bf16 gives ±max) is the rule above; GEMM2's staged epilogue checks for
 * ±Inf and NaN and converts by y_bf16x2 where it meets one (docs/GPU.md "The y conversion"). */
__device__ __forceinline__ uint32_t y_bf16x2_finite(float a, float b) {
  uint32_t w;
  asm("cvt.rn.satfinite.bf16x2.f32 %0, %1, %2;\n" : "=r"(w) : "f"(b), "f"(a)); /* the first source: the high half */
  return w;
}
/* Four consecutive y values (one 8-byte load) → fp32, exactly. */
__device__ __forceinline__ float4 y_widen4(uint2 w) {
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

/* Two fp32 values → two e4m3 codes (low byte = a), RNE, saturating to ±448, NaN → NaN. */
__device__ __forceinline__ uint16_t e4m3x2(float a, float b) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
}

/* Four fp32 values → four e4m3 codes packed little-endian. */
__device__ __forceinline__ uint32_t e4m3x4(float a, float b, float c, float d) {
  return static_cast<uint32_t>(e4m3x2(a, b)) | (static_cast<uint32_t>(e4m3x2(c, d)) << 16);
}

/* An empty asm that holds two fp32 values in registers at this point (an ordering fence for ptxas: routing_token.cuh
 * pins its exps before its divisions). */
__device__ __forceinline__ void pin_f32x2(float& a, float& b) { asm volatile("" : "+f"(a), "+f"(b)); }

/* 2^x and 1/x by the SFU alone (ex2.approx.ftz, rcp.approx.ftz: ≤ 2 ulp and 1 ulp; the flush to zero touches only
 * inputs and results below 2^-126, where the activation below adds 1 to e or multiplies by ~0 either way). */
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* The gated activation of GEMM1's epilogue, act(gate)·up: SwiGLU g·sigmoid(g)·u or GeGLU (erf form); every
 * GEMM1 kernel calls this one, so all of them evaluate it with the same operations. SwiGLU takes the sigmoid as
 * the SFU's reciprocal of 1 + e^−g, e^−g by the SFU's 2^x: within a few ulp of the CPU backend's
 * g / (1 + expf(−g)), far below the 2^-4 steps of the e4m3 requantization that follows, in 6 instructions per output
 * (an accurate expf's range reduction and an IEEE division or a correctly rounded reciprocal, with their
 * slow-path tests and branches, were ~25 of the epilogue's ~40 per output: docs/GPU.md "The activation's cost").
 * Large negative g: below −88.72 e^−g = +Inf gives g·0 = −0, as g / Inf; between −88.72 and −87.34 (1 + e^−g above
 * 2^126) the flushed reciprocal gives −0 where the division gives ~−1e-36 (a 128-column group made only of such
 * outputs requantizes to zeros instead of codes worth ~1e-36: no output's norm can see it). NaN stays NaN. */
__device__ __forceinline__ float gated_activation(int32_t act, float g, float u) {
  if (act == FP8MOE_ACTIVATION_GEGLU) return 0.5f * g * (1.0f + erff(g / 1.41421356237309505f)) * u;
  return g * rcp_approx(1.0f + ex2_approx(g * -1.44269504088896341f)) * u;
}

/* Named barrier kId over `threads` threads of the block (a multiple of 32): wait for all of them, or only count this
 * warp in. tests/routing_emu/common_host.h has their host stand-ins. */
template <int kId>
__device__ __forceinline__ void named_sync(int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "r"(threads) : "memory");
}
template <int kId>
__device__ __forceinline__ void named_arrive(int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"n"(kId), "r"(threads) : "memory");
}

/* |x| when finite, else 0: dynamic scales ignore NaN and ±Inf (docs/DESIGN.md). */
__device__ __forceinline__ float finite_abs(float x) { return isfinite(x) ? fabsf(x) : 0.0f; }

/* max(a, b) that returns NaN where either is NaN (max.NaN; fmaxf drops a NaN operand): a running max of |x| then
 * stays finite exactly where every x was finite, so one test at the end replaces finite_abs's per element. */
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

/* s = max(amax / 448, FLT_MIN), IEEE division. */
__device__ __forceinline__ float dynamic_scale(float amax) { return fmaxf(amax / kE4m3Max, 1.17549435e-38f); }

/* A scale as the encoding divides by it: where fp8moe_scale_div_fast_for(s, amax) (amax: the group's finite amax,
 * NaN where none is known), x / s comes by the correctly rounded reciprocal and one correction
 * (kernels/scale_div.h: the same e4m3 codes as the IEEE division, checked by tests/test_scale_div.c; GEMM1's
 * requantization does the same), ~4 instructions per element instead of the division's ~9 and its slow-path
 * test; otherwise by division. One scale covers a warp's group or a whole row, so the path is uniform where it
 * is chosen. */
struct EncodeScale {
  float s, r;
  bool fast;
};
__device__ __forceinline__ EncodeScale encode_scale(float s, float amax) {
  return {s, __frcp_rn(s), fp8moe_scale_div_fast_for(s, amax) != 0};
}

__device__ __forceinline__ uint32_t quant4(float4 v, const EncodeScale& q) {
  if (q.fast)
    return e4m3x4(fp8moe_scale_div(v.x, q.s, q.r), fp8moe_scale_div(v.y, q.s, q.r), fp8moe_scale_div(v.z, q.s, q.r),
                  fp8moe_scale_div(v.w, q.s, q.r));
  return e4m3x4(v.x / q.s, v.y / q.s, v.z / q.s, v.w / q.s);
}

/* amax ≥ 0, so its bit pattern orders like an unsigned integer: atomicMax on the bits is a float max. */
__device__ __forceinline__ void atomic_amax(uint32_t* slot, float amax) {
  if (amax > 0.0f) atomicMax(slot, __float_as_uint(amax));
}

/* D += A·B for one m16n8k32 tile, e4m3 operands, fp32 accumulate (sm_89+ tensor cores). */
__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* A word an earlier kernel wrote, read at gpu scope (from L2: never a stale L1 line): what a kernel reads of the
 * permutation's outputs before its own griddepcontrol.wait (kernels/pdl.cuh). */
__device__ __forceinline__ int32_t ld_relaxed(const int32_t* p) {
  int32_t v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* 16-byte global → shared copy that bypasses L1; src_bytes = 0 zero-fills the destination. */
__device__ __forceinline__ void cp_async_16(uint32_t smem, const void* gmem, int src_bytes) { /* shared address */
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, int src_bytes) {
  cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(smem)), gmem, src_bytes);
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/* Waits for every cp.async this thread has issued, committed to a group or not. */
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

/* Waits until at most N of this thread's committed cp.async groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_COMMON_CUH */
