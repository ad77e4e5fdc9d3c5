/* test_scale_div.c — the requantization's division by a scale through its reciprocal (kernels/scale_div.h) gives
 * the e4m3 codes that x / s gives, on the host (no GPU): random operands over the whole exponent range (subnormal x
 * included), quotients on and next to the e4m3 grid, quotients near 448 and beyond, and the special values (±0, ±Inf,
 * NaN), for every scale fp8moe_scale_div_fast_ok admits, and all-zero groups down to FLT_MIN
 * (fp8moe_scale_div_fast_for). Also shown: the fp32 quotients themselves differ for tiny
 * x (so the codes are what is compared), and scales below 2^-100 are refused, where the codes do differ. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "numeric_internal.h"
#include "plugin_host.h"
#include "scale_div.h"

static uint64_t g_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}
/* A float of random mantissa and sign with its exponent drawn from [lo, hi] (lo = −127: subnormal). */
static float random_float(int lo, int hi) {
  const uint32_t e = (uint32_t)(lo + (int)(next_u64() % (uint64_t)(hi - lo + 1)) + 127);
  const uint32_t b = ((uint32_t)next_u64() & 0x807FFFFFu) | (e << 23);
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}
static uint32_t bits_of(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}
/* The midpoint between two neighbouring positive e4m3 values (where x / s decides the rounding), one ulp off at
 * random. */
static float e4m3_midpoint(void) {
  const uint8_t c = (uint8_t)(1 + next_u64() % 0x7D); /* 0x01 .. 0x7D: its successor is finite */
  const float m = 0.5f * (fp8moe_e4m3_to_f32(c) + fp8moe_e4m3_to_f32((uint8_t)(c + 1)));
  const uint64_t k = next_u64() % 3;
  return k == 0 ? m : nextafterf(m, k == 1 ? INFINITY : 0.0f);
}
static int codes_differ(float x, float s) {
  const float r = 1.0f / s;
  return fp8moe_f32_to_e4m3(fp8moe_scale_div(x, s, r)) != fp8moe_f32_to_e4m3(x / s);
}

int main(void) {
  long mismatches = 0, fp32_differ = 0, n = 0, finite_n = 0, finite_differ = 0;
  for (long i = 0; i < 20000000L; ++i) {
    const float s = fabsf(random_float(-100, 100));
    if (!fp8moe_scale_div_fast_ok(s)) continue;
    float x;
    switch (i % 5) {
      case 0: x = random_float(-127, 127); break;                                               /* anything */
      case 1: x = s * (float)(next_u64() % 8192) * 0x1p-10f * ((i & 4) ? 1.0f : -1.0f); break; /* on the grid */
      case 2: x = s * random_float(-12, 9); break;                                              /* the codes' range */
      case 3: x = nextafterf(s * (float)(next_u64() % 4096) * 0x1p-9f, (i & 8) ? INFINITY : 0.0f); break;
      default: x = s * e4m3_midpoint(); break;                                                  /* rounding ties */
    }
    ++n;
    if (codes_differ(x, s)) {
      if (mismatches < 5) printf("  e4m3 codes differ: x = %a, s = %a\n", x, s);
      ++mismatches;
    }
    if (bits_of(fp8moe_scale_div(x, s, 1.0f / s)) != bits_of(x / s)) ++fp32_differ;
    if (isfinite(x * (1.0f / s))) {
      ++finite_n;
      finite_differ += bits_of(fp8moe_scale_div_finite(x, s, 1.0f / s)) != bits_of(fp8moe_scale_div(x, s, 1.0f / s));
    }
  }
  EXPECT(n > 10000000L, "random operands: %ld", n);
  EXPECT(mismatches == 0, "e4m3 codes of the reciprocal path against x / s: %ld of %ld differ", mismatches, n);
  EXPECT(fp32_differ > 0, "the fp32 quotients differ somewhere (tiny x), so the codes are what the test compares");
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 448.0f, -448.0f, 0x1p-126f, 0x1p-149f, 3.0e38f};
  const float scales[] = {0x1p-100f, 1.1754944e-30f, 0x1p-9f, 1.0f / 448.0f, 1.0f, 3.7f, 0x1p100f};
  for (size_t a = 0; a < sizeof specials / sizeof specials[0]; ++a)
    for (size_t b = 0; b < sizeof scales / sizeof scales[0]; ++b)
      EXPECT(!codes_differ(specials[a], scales[b]), "special x = %a, s = %a", specials[a], scales[b]);
  EXPECT(bits_of(fp8moe_scale_div(-0.0f, 1.0f, 1.0f)) == bits_of(-0.0f), "−0 stays −0");
  EXPECT(finite_n > n / 2 && finite_differ == 0,
         "fp8moe_scale_div_finite equals fp8moe_scale_div wherever x·r is finite: %ld of %ld differ", finite_differ,
         finite_n);
  for (size_t a = 0; a < sizeof specials / sizeof specials[0]; ++a)
    for (size_t b = 0; b < sizeof scales / sizeof scales[0]; ++b) {
      const float x = specials[a], sc = scales[b];
      if (isfinite(x * (1.0f / sc)))
        EXPECT(bits_of(fp8moe_scale_div_finite(x, sc, 1.0f / sc)) == bits_of(fp8moe_scale_div(x, sc, 1.0f / sc)),
               "fp8moe_scale_div_finite, special x = %a, s = %a", x, sc);
    }
  /* Scales the kernels keep on IEEE division: near FLT_MIN the remainder underflows and codes do differ. */
  EXPECT(!fp8moe_scale_div_fast_ok(0x1p-101f) && !fp8moe_scale_div_fast_ok(1.17549435e-38f) &&
             !fp8moe_scale_div_fast_ok(0x1p101f) && !fp8moe_scale_div_fast_ok(NAN) && fp8moe_scale_div_fast_ok(1.0f),
         "the fast range is [2^-100, 2^100]");
  /* All-zero groups (finite amax 0: GEMM1's padding rows, whose dynamic scale is FLT_MIN): every finite x is ±0, so
   * fp8moe_scale_div_fast_for also admits scales down to 2^-126 there; the quotients are x / s bit for bit, and so
   * are ±Inf and NaN (excluded from the amax). */
  const float zero_group[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
  const float low_scales[] = {0x1p-126f, 1.17549435e-38f, 0x1.8p-126f, 0x1p-113f, 0x1p-101f, 1.0f, 0x1p100f};
  for (size_t a = 0; a < sizeof zero_group / sizeof zero_group[0]; ++a)
    for (size_t b = 0; b < sizeof low_scales / sizeof low_scales[0]; ++b) {
      const float x = zero_group[a], sc = low_scales[b], q = fp8moe_scale_div(x, sc, 1.0f / sc);
      EXPECT(fp8moe_scale_div_fast_for(sc, 0.0f), "an all-zero group may take the reciprocal path at s = %a", sc);
      EXPECT(!codes_differ(x, sc), "all-zero group: x = %a, s = %a", x, sc);
      EXPECT(isnan(x) ? isnan(q) : bits_of(q) == bits_of(x / sc), "all-zero group: the fp32 quotient of %a / %a", x,
             sc);
    }
  EXPECT(!fp8moe_scale_div_fast_for(0x1p-101f, 0x1p-120f) && !fp8moe_scale_div_fast_for(0x1p-127f, 0.0f) &&
             !fp8moe_scale_div_fast_for(0x1p101f, 0.0f) && !fp8moe_scale_div_fast_for(NAN, 0.0f) &&
             !fp8moe_scale_div_fast_for(0x1p-126f, NAN) && !fp8moe_scale_div_fast_for(0x1p-126f, -0x1p-126f) &&
             fp8moe_scale_div_fast_for(1.0f, NAN),
         "a nonzero, unknown or negative amax keeps the fast range; an all-zero group widens it to [2^-126, 2^100]");
  long below = 0;
  for (long i = 0; i < 2000000L; ++i) {
    const float s = fabsf(random_float(-126, -120)), x = s * e4m3_midpoint();
    below += codes_differ(x, s);
  }
  EXPECT(below > 0, "near FLT_MIN the reciprocal path does give other codes (%ld), which is why it is refused", below);
  return test_finish("test_scale_div", test_checks_run);
}
