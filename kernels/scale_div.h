/* scale_div.h — x / s for the e4m3 requantizations without an IEEE division per element: q0 = x·r with r the
 * correctly rounded 1/s, the remainder x − q0·s exactly by one FMA, and q0 + rem·r rounded once (Markstein's
 * correction). Where neither the remainder underflows nor the quotient overflows this is the correctly rounded
 * x / s; outside that (|x| below ~2^-122, or q0 = ±Inf) it may differ from x / s in the last bits of an fp32
 * quotient that the e4m3 encoding (cvt.rn.satfinite: steps of 2^-9 at the bottom, 448 at the top) maps to the same
 * code. fp8moe_scale_div_fast_ok says where the kernels may use it: s in [2^-100, 2^100] keeps the remainder of every
 * x whose quotient can reach an e4m3 code above 0 clear of underflow (tests/test_scale_div.c checks the e4m3 codes
 * against x / s over random and special operands). Compiled as C too, for that test. */
#ifndef FP8MOE_KERNELS_SCALE_DIV_H
#define FP8MOE_KERNELS_SCALE_DIV_H

#include <math.h>

#if defined(__CUDACC__)
#define FP8MOE_SCALE_DIV_FN __host__ __device__ __forceinline__
#else
#define FP8MOE_SCALE_DIV_FN static inline
#endif

FP8MOE_SCALE_DIV_FN int fp8moe_scale_div_fast_ok(float s) { return s >= 0x1p-100f && s <= 0x1p100f; }

/* The same for a group whose finite amax is known: also where it is 0 and s is in [2^-126, 2^100] (a dynamic
 * scale of an all-zero group is FLT_MIN = 2^-126, e.g. every padding row of GEMM1's tiles). Then every finite x of
 * the group is ±0 and r = 1/s is a finite normal number, so q0 = x·r is ±0 with x's sign, the remainder is +0 and
 * q0 is returned: x / s exactly; ±Inf gives ±Inf, NaN NaN, as the division does. Without this such groups took
 * the IEEE division per element (GEMM1's requantizing epilogue: a warp holding one padding row divided all its
 * 64 elements that way, a serial FCHK/branch chain; docs/GPU.md "The requantization of zero rows"). amax < 0 or
 * NaN (no amax known: a static scale) never selects it. */
FP8MOE_SCALE_DIV_FN int fp8moe_scale_div_fast_for(float s, float amax) {
  return fp8moe_scale_div_fast_ok(s) || (amax == 0.0f && s >= 0x1p-126f && s <= 0x1p100f);
}

/* r = the correctly rounded 1/s (device: __frcp_rn; C: 1.0f / s). ±0 stays ±0 (the correction would give +0 for
 * −0), NaN stays NaN, an infinite q0 is kept (the e4m3 encoding saturates it as it does x / s). */
FP8MOE_SCALE_DIV_FN float fp8moe_scale_div(float x, float s, float r) {
#if defined(__CUDA_ARCH__)
  const float q0 = __fmul_rn(x, r); /* never contracted into the FMAs below */
#else
  const float q0 = x * r;
#endif
  const float rem = fmaf(-q0, s, x);
  return (isfinite(q0) && rem != 0.0f) ? fmaf(rem, r, q0) : q0;
}

/* fp8moe_scale_div where the caller knows q0 = x·r is finite (GEMM1's requantization checks it once per warp: every
 * |x| ≤ the group's finite amax, and amax·r finite): the correction is applied unconditionally and the sign taken
 * from x. Where the remainder is 0 the correction adds ±0 to q0, which changes q0 only when q0 is ±0 (x = −0 would
 * give +0), and the sign restores that; elsewhere the quotient is nonzero with x's sign (s > 0), or ±0 with x's sign
 * after an underflow, so the sign changes nothing. Equal to fp8moe_scale_div bit for bit for every finite q0
 * (tests/test_scale_div.c), without its two tests and select per element. */
FP8MOE_SCALE_DIV_FN float fp8moe_scale_div_finite(float x, float s, float r) {
#if defined(__CUDA_ARCH__)
  const float q0 = __fmul_rn(x, r);
#else
  const float q0 = x * r;
#endif
  return copysignf(fmaf(fmaf(-q0, s, x), r, q0), x);
}

#endif /* FP8MOE_KERNELS_SCALE_DIV_H */
