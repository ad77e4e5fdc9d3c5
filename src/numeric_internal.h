/* numeric_internal.h — bit-exact number format conversions (fp8 e4m3fn, bf16, fp16 ↔ fp32) as the NVIDIA
 * hardware does them (cvt.rn.satfinite for e4m3fn, cvt.rn for bf16/fp16), and strided element reads of a
 * view. Pure integer/IEEE arithmetic in the default rounding mode: no libm, so CPU and GPU agree bit for bit.
 * NOTES: e4m3fn has no infinities; 0x7F/0xFF are NaN; the largest finite value is 448 (0x7E). */
#ifndef FP8MOE_NUMERIC_INTERNAL_H
#define FP8MOE_NUMERIC_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "tensor_internal.h"

static inline uint32_t fp8moe_f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static inline float fp8moe_bits_f32(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* Round a non-negative float below 2^22 to the nearest integer, ties to even: adding 2^23 leaves no
 * fraction bits, so the FPU's round-to-nearest-even does the rounding. */
static inline float fp8moe_rint_small(float a) {
  return (a + 8388608.0f) - 8388608.0f;
}

/* fp32 → e4m3fn, round-to-nearest-even, ±Inf and finite overflow saturate to ±448, NaN → 0x7F,
 * -0 and negative values that round to zero keep their sign. */
static inline uint8_t fp8moe_f32_to_e4m3(float x) {
  uint32_t u = fp8moe_f32_bits(x);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a > 0x43E00000u) return (uint8_t)(sign | 0x7Eu); /* |x| > 448 (or Inf) */
  if (a < 0x3C800000u) {                               /* |x| < 2^-6: subnormal e4m3, steps of 2^-9 */
    /* ×512 is exact; the rounded integer 0..8 is the code (8 = 0x08, the smallest normal). */
    float q = fp8moe_rint_small(fp8moe_bits_f32(a) * 512.0f);
    return (uint8_t)(sign | (uint8_t)q);
  }
  /* Normal: keep 3 mantissa bits with RNE on the 20 dropped bits; a carry moves into the exponent. */
  uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
  r -= (127u - 7u) << 3; /* rebias the exponent from 127 to 7 */
  if (r > 0x7Eu) r = 0x7Eu;
  return (uint8_t)(sign | r);
}

/* e4m3fn → fp32 for all 256 codes; 0x7F/0xFF → NaN (with the code's sign). */
static inline float fp8moe_e4m3_to_f32(uint8_t c) {
  uint32_t sign = ((uint32_t)c & 0x80u) << 24;
  uint32_t e = ((uint32_t)c >> 3) & 0xFu;
  uint32_t m = (uint32_t)c & 7u;
  if (e == 0xFu && m == 7u) return fp8moe_bits_f32(sign | 0x7FC00000u);
  if (e == 0u) {
    float v = (float)m * (1.0f / 512.0f); /* exact: m·2^-9 */
    return fp8moe_bits_f32(sign | fp8moe_f32_bits(v));
  }
  return fp8moe_bits_f32(sign | ((e + 120u) << 23) | (m << 20));
}

/* fp32 → bf16, round-to-nearest-even; overflow rounds to ±Inf; NaN → 0x7FFF. */
static inline uint16_t fp8moe_f32_to_bf16(float x) {
  uint32_t u = fp8moe_f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static inline float fp8moe_bf16_to_f32(uint16_t h) {
  return fp8moe_bits_f32((uint32_t)h << 16);
}

/* A slot output y as both backends keep it between GEMM2 and the combine (docs/DESIGN.md "Combine"): bf16,
 * RNE, except that a finite value above the largest finite bf16 keeps that value (with its sign); NaN and
 * ±Inf stay as they are. Same rule as the CUDA kernels' y_bf16x2 (kernels/common.cuh). */
#define FP8MOE_BF16_MAX 3.38953139e38f /* 0x7F7F0000 */
static inline float fp8moe_slot_bf16(float x) {
  const uint32_t mag = fp8moe_f32_bits(x) & 0x7FFFFFFFu;
  if (mag >= 0x7F800000u) return x;                                     /* NaN, ±Inf */
  if (mag > 0x7F7F0000u) return x < 0.0f ? -FP8MOE_BF16_MAX : FP8MOE_BF16_MAX; /* would round to Inf */
  return fp8moe_bf16_to_f32(fp8moe_f32_to_bf16(x));
}

/* fp32 → fp16 (IEEE binary16), round-to-nearest-even with subnormals; overflow → ±Inf; NaN → 0x7FFF. */
static inline uint16_t fp8moe_f32_to_f16(float x) {
  uint32_t u = fp8moe_f32_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7FFF;
  if (a >= 0x47800000u) return (uint16_t)(sign | 0x7C00u); /* |x| ≥ 2^16 (or Inf) */
  if (a < 0x38800000u) {                                     /* |x| < 2^-14: subnormal, steps of 2^-24 */
    float q = fp8moe_rint_small(fp8moe_bits_f32(a) * 16777216.0f); /* ×2^24 exact; 1024 = smallest normal */
    return (uint16_t)(sign | (uint16_t)q);
  }
  uint32_t r = (a + 0xFFFu + ((a >> 13) & 1u)) >> 13; /* a carry past 65504 lands exactly on 0x7C00 */
  r -= (127u - 15u) << 10;
  return (uint16_t)(sign | r);
}

static inline float fp8moe_f16_to_f32(uint16_t h) {
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
  uint32_t e = ((uint32_t)h >> 10) & 0x1Fu;
  uint32_t m = (uint32_t)h & 0x3FFu;
  if (e == 0u) {
    float v = (float)m * (1.0f / 16777216.0f); /* exact: m·2^-24 */
    return fp8moe_bits_f32(sign | fp8moe_f32_bits(v));
  }
  if (e == 0x1Fu) return fp8moe_bits_f32(sign | 0x7F800000u | (m << 13));
  return fp8moe_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* Element at element offset off (strides already applied) of any float-ish or integer view, as fp32.
 * Integers convert as C does; an absent view reads 0. */
static inline float fp8moe_view_read_f32(const fp8moe_view* v, int64_t off) {
  const unsigned char* base = (const unsigned char*)v->data;
  switch (v->dt) {
    case FP8MOE_DT_F32: {
      float x;
      memcpy(&x, base + off * 4, sizeof x);
      return x;
    }
    case FP8MOE_DT_BF16: {
      uint16_t h;
      memcpy(&h, base + off * 2, sizeof h);
      return fp8moe_bf16_to_f32(h);
    }
    case FP8MOE_DT_F16: {
      uint16_t h;
      memcpy(&h, base + off * 2, sizeof h);
      return fp8moe_f16_to_f32(h);
    }
    case FP8MOE_DT_E4M3:
      return fp8moe_e4m3_to_f32(base[off]);
    case FP8MOE_DT_I32: {
      int32_t i;
      memcpy(&i, base + off * 4, sizeof i);
      return (float)i;
    }
    case FP8MOE_DT_I64: {
      int64_t i;
      memcpy(&i, base + off * 8, sizeof i);
      return (float)i;
    }
    case FP8MOE_DT_NONE:
      break;
  }
  return 0.0f;
}

/* Element at element offset off of an integer view as int64 (float views truncate toward zero; callers use
 * it for int32/int64 id tensors). */
static inline int64_t fp8moe_view_read_i64(const fp8moe_view* v, int64_t off) {
  const unsigned char* base = (const unsigned char*)v->data;
  switch (v->dt) {
    case FP8MOE_DT_I32: {
      int32_t i;
      memcpy(&i, base + off * 4, sizeof i);
      return i;
    }
    case FP8MOE_DT_I64: {
      int64_t i;
      memcpy(&i, base + off * 8, sizeof i);
      return i;
    }
    default:
      break;
  }
  float f = fp8moe_view_read_f32(v, off);
  if (!(f > -9.2e18f && f < 9.2e18f)) return 0; /* NaN or out of int64 range */
  return (int64_t)f;
}

#endif /* FP8MOE_NUMERIC_INTERNAL_H */
