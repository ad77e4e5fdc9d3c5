/* routing_math.h — the one formulation of the routing weights' transcendental arithmetic, shared by the CPU
 * backend (src/cpu/cpu_routing.c, C) and the CUDA kernel (kernels/routing.cu), so that both produce the same
 * bits by construction (docs/DESIGN.md "Routing", docs/RELIABILITY.md "Routing weights").
 *
 * Why it is written this way:
 *   - No libm transcendental: glibc's expf and CUDA's expf (or exp in double) round differently in rare
 *     cases, and one ulp of a routing weight can move an FP8-quantized input across a rounding midpoint.
 *     exp is Cody–Waite range reduction plus a degree-6 polynomial (Cephes expf coefficients) and an exact
 *     two-step scaling by 2^n: within 1 ulp of exp over the whole float range (tests/test_routing_math.c).
 *   - Every multiply-add that matters is an explicit fused fmaf (IEEE-754 fusedMultiplyAdd, correctly
 *     rounded on both sides); every other operation is a separately rounded +, −, ×, ÷. On the device these
 *     are the _rn intrinsics, which nvcc never contracts; on the host the library is compiled with
 *     -ffp-contract=off (src/CMakeLists.txt) and clang is told the same below.
 *   - Softmax denominators are summed in one fixed order: 32 strided partial sums (element e into partial
 *     e mod 32, in index order) combined by the xor butterfly of a warp reduction. The kernel's warp_sum is
 *     that butterfly; fp8moe_rm_sum32 below replays it on the host. */
#ifndef FP8MOE_ROUTING_MATH_H
#define FP8MOE_ROUTING_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define FP8MOE_RM_FN __host__ __device__ __forceinline__
#else
#define FP8MOE_RM_FN static inline
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#endif

#if defined(__CUDA_ARCH__)
#define FP8MOE_RM_MUL(a, b) __fmul_rn((a), (b))
#define FP8MOE_RM_ADD(a, b) __fadd_rn((a), (b))
#define FP8MOE_RM_SUB(a, b) __fsub_rn((a), (b))
#define FP8MOE_RM_DIV(a, b) __fdiv_rn((a), (b))
#define FP8MOE_RM_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#else
#define FP8MOE_RM_MUL(a, b) ((a) * (b))
#define FP8MOE_RM_ADD(a, b) ((a) + (b))
#define FP8MOE_RM_SUB(a, b) ((a) - (b))
#define FP8MOE_RM_DIV(a, b) ((a) / (b))
#define FP8MOE_RM_FMA(a, b, c) fmaf((a), (b), (c))
#endif

/* 2^k for k in [-126, 127], exact. */
FP8MOE_RM_FN float fp8moe_rm_pow2(int32_t k) {
  uint32_t bits = (uint32_t)(k + 127) << 23;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

/* e^x, within 1 ulp; +Inf past the overflow threshold, +0 past the underflow one, NaN stays NaN.
 * Branch-free: the polynomial runs on x clamped to [−104, 89] (x itself wherever the result is the
 * polynomial's, so the same operations on the same values as the early-return form it replaced: every
 * non-NaN float gives the same bits, exp and sigmoid, checked on the host over all 2^32 inputs; a NaN stays
 * a NaN, its sign left to the compiler as before), and the special cases are selected at the end. On the GPU
 * the routing evaluates one exp per register of a lane; without branches ptxas interleaves them instead of
 * running each behind its own reconvergence point (docs/GPU.md "Small-T prologue", phase trace). */
FP8MOE_RM_FN float fp8moe_rm_exp(float x) {
  const float xc = fminf(fmaxf(x, -104.0f), 89.0f); /* NaN → −104: its result is replaced below */
  /* n = round(x / ln 2), by the 1.5·2^23 shifter (one rounding: the fma is exact before it) */
  const float shifter = 12582912.0f;
  float n = FP8MOE_RM_SUB(FP8MOE_RM_FMA(xc, 1.44269502162933349609375f, shifter), shifter);
  /* r = x − n·ln 2 in two parts: |r| <= ~0.35 */
  float r = FP8MOE_RM_FMA(n, -0.693145751953125f, xc);
  r = FP8MOE_RM_FMA(n, -1.428606765330187045e-06f, r);
  /* e^r = 1 + r + r²·P(r) */
  float p = 1.9875691500e-4f;
  p = FP8MOE_RM_FMA(p, r, 1.3981999507e-3f);
  p = FP8MOE_RM_FMA(p, r, 8.3334519073e-3f);
  p = FP8MOE_RM_FMA(p, r, 4.1665795894e-2f);
  p = FP8MOE_RM_FMA(p, r, 1.6666665459e-1f);
  p = FP8MOE_RM_FMA(p, r, 5.0000001201e-1f);
  float y = FP8MOE_RM_ADD(FP8MOE_RM_FMA(p, FP8MOE_RM_MUL(r, r), r), 1.0f);
  /* × 2^n in two exact steps (n in [-150, 128]); only the last can round (into subnormals) or overflow */
  int32_t ni = (int32_t)n;
  int32_t n1 = ni / 2;
  const float v = FP8MOE_RM_MUL(FP8MOE_RM_MUL(y, fp8moe_rm_pow2(n1)), fp8moe_rm_pow2(ni - n1));
  /* past the overflow threshold +Inf (the scaling overflows correctly up to 89), below −104 +0 (e^x < 2^-150) */
  const float limited = x > 89.0f ? INFINITY : x < -104.0f ? 0.0f : v;
  return x != x ? x : limited;
}

/* The sigmoid's quotient before its division: *num / *den is fp8moe_rm_sigmoid(x). The GPU routing takes
 * every register's terms first and divides after, so the exps (branch-free) interleave instead of each
 * waiting behind the previous division's slow-path branch (kernels/routing_token.cuh). */
FP8MOE_RM_FN void fp8moe_rm_sigmoid_terms(float x, float* num, float* den) {
  /* Both branches as one exp and one division with selected operands (the same operations on the same
   * values, so the same bits): the GPU routing unrolls this per register of a lane, and one inlined exp
   * instead of two halves its code (kernels/routing_token.cuh; docs/GPU.md "Small-T prologue"). */
  const int below = x < 0.0f;
  const float e = fp8moe_rm_exp(below ? x : -x);
  *num = below ? e : 1.0f;
  *den = FP8MOE_RM_ADD(1.0f, e);
}

/* 1 / (1 + e^−x) for x >= 0, e^x / (1 + e^x) below (e^−x would overflow past −88.7 while the result is
 * still a positive subnormal). Within 2.5 ulp (three roundings on exp's one ulp). NaN stays NaN. */
FP8MOE_RM_FN float fp8moe_rm_sigmoid(float x) {
  float num, den;
  fp8moe_rm_sigmoid_terms(x, &num, &den);
  return FP8MOE_RM_DIV(num, den);
}

/* A softmax numerator, e^(x − max). */
FP8MOE_RM_FN float fp8moe_rm_softmax_term(float x, float max) { return fp8moe_rm_exp(FP8MOE_RM_SUB(x, max)); }

#if !defined(__CUDACC__)
/* The sum of v[0..n) in the kernel's order: partial[l] = Σ v[e] for e ≡ l (mod 32) in index order, then the
 * xor butterfly of a 32-lane warp reduction (offsets 16, 8, 4, 2, 1). */
static inline float fp8moe_rm_sum32(const float* v, int32_t n) {
  float part[32], next[32];
  for (int32_t l = 0; l < 32; ++l) part[l] = 0.0f;
  for (int32_t e = 0; e < n; ++e) part[e % 32] = FP8MOE_RM_ADD(part[e % 32], v[e]);
  for (int32_t o = 16; o > 0; o >>= 1) {
    for (int32_t l = 0; l < 32; ++l) next[l] = FP8MOE_RM_ADD(part[l], part[l ^ o]);
    for (int32_t l = 0; l < 32; ++l) part[l] = next[l];
  }
  return part[0];
}
#endif

#endif /* FP8MOE_ROUTING_MATH_H */
