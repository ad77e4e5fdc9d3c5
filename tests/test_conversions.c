/* test_conversions.c — TESTING level 1 host units for src/numeric_internal.h (the one suite that includes
 * src/): every e4m3fn code decodes to the value computed from its sign/exponent/mantissa and re-encodes to
 * itself, rounding is nearest-even at every midpoint and exact just beside it, saturation to ±448, signed
 * zeros and subnormals; bf16 and fp16 the same way, including NaN → 0x7FFF and fp16 overflow to Inf. The
 * expectations come from brute-force encoders written here (nearest value, ties to the even code). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "e2e_check.h"
#include "numeric_internal.h"

/* ---- independent decoders (ldexp from the bit fields) ---- */
static double e4m3_value(int code) {
  int e = (code >> 3) & 15, m = code & 7;
  double s = (code & 0x80) ? -1.0 : 1.0;
  if (e == 15 && m == 7) return NAN;
  return e == 0 ? s * ldexp(m, -9) : s * ldexp(8 + m, e - 10);
}

static double ieee16_value(int code, int mant, int ebits) {
  int emax = (1 << ebits) - 1, bias = emax / 2;
  int e = (code >> mant) & emax, m = code & ((1 << mant) - 1);
  double s = (code & 0x8000) ? -1.0 : 1.0;
  if (e == emax) return m ? NAN : s * INFINITY;
  return e == 0 ? s * ldexp(m, 1 - bias - mant) : s * ldexp((1 << mant) + m, e - bias - mant);
}
static double bf16_value(int code) { return ieee16_value(code, 7, 8); }
static double f16_value(int code) { return ieee16_value(code, 10, 5); }

/* ---- brute-force encoders ---- */
/* e4m3fn: the nearest of all finite codes by |value − x|, ties to the even code; |x| > 448 saturates. */
static int brute_e4m3(float xf) {
  double x = xf;
  if (isnan(x)) return 0x7F;
  int sign = signbit(x) ? 0x80 : 0;
  double a = fabs(x);
  if (a > 448.0) return sign | 0x7E;
  int best = 0;
  for (int c = 1; c <= 0x7E; ++c) {
    double d = fabs(e4m3_value(c) - a), db = fabs(e4m3_value(best) - a);
    if (d < db || (d == db && (c & 1) == 0 && (best & 1) == 1)) best = c;
  }
  return sign | best;
}

/* bf16 / fp16: binary search for the largest positive code not above |x| (values are monotone in the code),
 * then the nearer of it and the next code, ties to even; the code past the largest finite stands for
 * 2^(emax+1), so rounding to it is overflow to Inf. */
static int brute_ieee16(float xf, int mant, int ebits) {
  double x = xf;
  if (isnan(x)) return 0x7FFF;
  int sign = signbit(x) ? 0x8000 : 0;
  double a = fabs(x);
  int inf_code = ((1 << ebits) - 1) << mant;
  double top = ldexp(1.0, (1 << (ebits - 1)));
  if (a >= top) return sign | inf_code;
  int lo = 0, hi = inf_code - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (ieee16_value(mid, mant, ebits) <= a) lo = mid;
    else hi = mid - 1;
  }
  double v0 = ieee16_value(lo, mant, ebits);
  double v1 = lo + 1 == inf_code ? top : ieee16_value(lo + 1, mant, ebits);
  double d0 = a - v0, d1 = v1 - a;
  int c = (d1 < d0 || (d1 == d0 && (lo & 1))) ? lo + 1 : lo;
  return sign | c;
}
static int brute_bf16(float x) { return brute_ieee16(x, 7, 8); }
static int brute_f16(float x) { return brute_ieee16(x, 10, 5); }

static int same_value(double a, double b) {
  return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static uint32_t rng32(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- e4m3fn ---- */
static void e4m3_codes(void) {
  for (int c = 0; c < 256; ++c) {
    float v = fp8moe_e4m3_to_f32((uint8_t)c);
    CHECK(same_value(v, e4m3_value(c)), "e4m3 decode 0x%02X: got %a, expected %a", c, (double)v, e4m3_value(c));
    int back = fp8moe_f32_to_e4m3(v);
    int want = ((c & 0x7F) == 0x7F) ? 0x7F : c;
    CHECK(back == want, "e4m3 re-encode of 0x%02X (%a): got 0x%02X, expected 0x%02X", c, (double)v, back, want);
  }
}

static void e4m3_midpoints(void) {
  for (int sgn = 0; sgn < 2; ++sgn)
    for (int c = 0; c < 0x7E; ++c) {
      double lo = e4m3_value(c), hi = e4m3_value(c + 1);
      float mid = (float)((lo + hi) / 2); /* exact: at most 5 significant bits */
      int even = (c & 1) ? c + 1 : c;
      int s = sgn ? 0x80 : 0;
      float sm = sgn ? -mid : mid;
      CHECK(fp8moe_f32_to_e4m3(sm) == (s | even), "e4m3 midpoint %a: got 0x%02X, expected 0x%02X (ties to even)",
            (double)sm, fp8moe_f32_to_e4m3(sm), s | even);
      float below = nextafterf(sm, 0.0f), above = nextafterf(sm, sgn ? -INFINITY : INFINITY);
      CHECK(fp8moe_f32_to_e4m3(below) == (s | c), "e4m3 just below midpoint %a: got 0x%02X, expected 0x%02X",
            (double)below, fp8moe_f32_to_e4m3(below), s | c);
      CHECK(fp8moe_f32_to_e4m3(above) == (s | (c + 1)), "e4m3 just above midpoint %a: got 0x%02X, expected 0x%02X",
            (double)above, fp8moe_f32_to_e4m3(above), s | (c + 1));
    }
}

static void e4m3_saturation(void) {
  const float big[] = {448.0f, 449.0f, 456.0f, 464.0f, 464.5f, 480.0f, 512.0f, 1e9f, FLT_MAX, INFINITY};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; ++i) {
    CHECK(fp8moe_f32_to_e4m3(big[i]) == 0x7E, "e4m3(%g) = 0x%02X, expected 0x7E", (double)big[i],
          fp8moe_f32_to_e4m3(big[i]));
    CHECK(fp8moe_f32_to_e4m3(-big[i]) == 0xFE, "e4m3(%g) = 0x%02X, expected 0xFE", (double)-big[i],
          fp8moe_f32_to_e4m3(-big[i]));
  }
  CHECK(fp8moe_f32_to_e4m3(nextafterf(448.0f, 0.0f)) == 0x7E, "just below 448");
  CHECK(fp8moe_f32_to_e4m3(432.0f) == 0x7E, "432 is the midpoint of 416 and 448: ties to even 0x7E");
}

static void e4m3_subnormals_and_zero(void) {
  const struct {
    float x;
    int code;
  } cases[] = {
      {0.0f, 0x00},           {-0.0f, 0x80},          {0x1p-9f, 0x01},         {-0x1p-9f, 0x81},
      {0x1p-10f, 0x00},       {-0x1p-10f, 0x80},      {0x1.000002p-10f, 0x01}, {0x1.fffffep-11f, 0x00},
      {0x1p-11f, 0x00},       {-0x1p-30f, 0x80},      {0x1.8p-9f, 0x02},       {0x1.4p-8f, 0x02},
      {0x1.cp-7f, 0x07},      {0x1.ep-7f, 0x08},      {0x1p-6f, 0x08},         {0x1.cp-6f, 0x0E},
      {FLT_MIN, 0x00},        {-FLT_MIN, 0x80},       {0x1p-149f, 0x00},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    CHECK(fp8moe_f32_to_e4m3(cases[i].x) == cases[i].code, "e4m3(%a) = 0x%02X, expected 0x%02X", (double)cases[i].x,
          fp8moe_f32_to_e4m3(cases[i].x), cases[i].code);
  CHECK(fp8moe_e4m3_to_f32(0x01) == 0x1p-9f, "smallest subnormal is 2^-9");
  CHECK(signbit(fp8moe_e4m3_to_f32(0x80)) && fp8moe_e4m3_to_f32(0x80) == 0.0f, "0x80 is -0");
}

static void e4m3_nan(void) {
  const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7FBFFFFFu};
  for (size_t i = 0; i < sizeof nans / sizeof nans[0]; ++i)
    CHECK(fp8moe_f32_to_e4m3(bits_f32(nans[i])) == 0x7F, "e4m3(NaN 0x%08X) = 0x%02X, expected 0x7F", nans[i],
          fp8moe_f32_to_e4m3(bits_f32(nans[i])));
  CHECK(isnan(fp8moe_e4m3_to_f32(0x7F)) && isnan(fp8moe_e4m3_to_f32(0xFF)), "0x7F/0xFF decode to NaN");
}

static void e4m3_random_sweep(void) {
  uint64_t s = 11;
  int bad = 0;
  for (int i = 0; i < 400000; ++i) {
    /* exponents 2^-12 … 2^10 cover subnormals, normals and saturation */
    uint32_t u = (rng32(&s) & 0x807FFFFFu) | ((uint32_t)(115 + rng32(&s) % 23) << 23);
    float x = bits_f32(u);
    int got = fp8moe_f32_to_e4m3(x), want = brute_e4m3(x);
    if (got != want && ++bad <= 5) CHECK(0, "e4m3(%a) = 0x%02X, brute force 0x%02X", (double)x, got, want);
  }
  CHECK(bad == 0, "%d random e4m3 encodings differ from brute force", bad);
}

/* ---- bf16 / fp16 ---- */
typedef uint16_t (*enc16_fn)(float);
typedef float (*dec16_fn)(uint16_t);

static void ieee16_codes(const char* name, enc16_fn enc, dec16_fn dec, double (*value)(int)) {
  int bad = 0;
  for (int c = 0; c < 65536; ++c) {
    float v = dec((uint16_t)c);
    int ok = same_value(v, value(c));
    int want = isnan(value(c)) ? 0x7FFF : c;
    int back = enc(v);
    if ((!ok || back != want) && ++bad <= 5)
      CHECK(0, "%s code 0x%04X: decodes to %a (expected %a), re-encodes to 0x%04X (expected 0x%04X)", name, c,
            (double)v, value(c), back, want);
  }
  CHECK(bad == 0, "%s: %d codes fail decode/round-trip", name, bad);
}

static void ieee16_midpoints(const char* name, enc16_fn enc, double (*value)(int), int last_finite) {
  int bad = 0;
  for (int sgn = 0; sgn < 2; ++sgn)
    for (int c = 0; c < last_finite; ++c) {
      int s = sgn ? 0x8000 : 0;
      float mid = (float)((value(c) + value(c + 1)) / 2);
      if (sgn) mid = -mid;
      float below = nextafterf(mid, 0.0f), above = nextafterf(mid, sgn ? -INFINITY : INFINITY);
      int even = (c & 1) ? c + 1 : c;
      if ((enc(mid) != (s | even) || enc(below) != (s | c) || enc(above) != (s | (c + 1))) && ++bad <= 5)
        CHECK(0, "%s around midpoint %a: got 0x%04X/0x%04X/0x%04X, expected 0x%04X/0x%04X/0x%04X", name,
              (double)mid, enc(below), enc(mid), enc(above), s | c, s | even, s | (c + 1));
    }
  CHECK(bad == 0, "%s: %d midpoints round wrongly", name, bad);
}

static void ieee16_random_sweep(const char* name, enc16_fn enc, int (*brute)(float)) {
  uint64_t s = 29;
  int bad = 0;
  for (int i = 0; i < 400000; ++i) {
    uint32_t u = rng32(&s);
    if ((u & 0x7F800000u) == 0x7F800000u) continue; /* NaN/Inf have their own checks */
    if (i % 2) u = (u & 0x807FFFFFu) | ((uint32_t)(95 + rng32(&s) % 60) << 23); /* near fp16's range */
    float x = bits_f32(u);
    int got = enc(x), want = brute(x);
    if (got != want && ++bad <= 5) CHECK(0, "%s(%a) = 0x%04X, brute force 0x%04X", name, (double)x, got, want);
  }
  CHECK(bad == 0, "%s: %d random encodings differ from brute force", name, bad);
}

static void bf16_specials(void) {
  CHECK(fp8moe_f32_to_bf16(bits_f32(0x7FC00000u)) == 0x7FFF, "bf16(NaN) = 0x%04X, expected 0x7FFF",
        fp8moe_f32_to_bf16(bits_f32(0x7FC00000u)));
  CHECK(fp8moe_f32_to_bf16(bits_f32(0xFF800001u)) == 0x7FFF, "bf16(-sNaN) = 0x%04X, expected 0x7FFF",
        fp8moe_f32_to_bf16(bits_f32(0xFF800001u)));
  CHECK(fp8moe_f32_to_bf16(INFINITY) == 0x7F80 && fp8moe_f32_to_bf16(-INFINITY) == 0xFF80, "bf16(±Inf)");
  CHECK(fp8moe_f32_to_bf16(FLT_MAX) == 0x7F80, "bf16(FLT_MAX) rounds to Inf: 0x%04X", fp8moe_f32_to_bf16(FLT_MAX));
  CHECK(fp8moe_f32_to_bf16(bits_f32(0x7F7F7FFFu)) == 0x7F7F, "bf16 just below the overflow midpoint");
  CHECK(fp8moe_f32_to_bf16(-0.0f) == 0x8000, "bf16(-0)");
  CHECK(fp8moe_f32_to_bf16(0x1p-149f) == 0x0000, "bf16 of the smallest fp32 subnormal (tie to even 0)");
  CHECK(fp8moe_f32_to_bf16(bits_f32(0x00018000u)) == 0x0002, "bf16 subnormal tie 1.5 ulp → even");
}

static void f16_specials(void) {
  const struct {
    float x;
    int code;
  } cases[] = {
      {0x1p-24f, 0x0001},  {0x1p-25f, 0x0000},      {0x1.000002p-25f, 0x0001}, {0x1.8p-24f, 0x0002},
      {-0x1p-25f, 0x8000}, {0x1p-14f, 0x0400},      {0x1.ff8p-15f, 0x03FF},    {65504.0f, 0x7BFF},
      {65519.0f, 0x7BFF},  {65520.0f, 0x7C00},      {65536.0f, 0x7C00},        {1e9f, 0x7C00},
      {INFINITY, 0x7C00},  {-65520.0f, 0xFC00},     {-INFINITY, 0xFC00},       {-0.0f, 0x8000},
      {FLT_MAX, 0x7C00},   {0x1.ffcp-15f, 0x0400},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    CHECK(fp8moe_f32_to_f16(cases[i].x) == cases[i].code, "f16(%a) = 0x%04X, expected 0x%04X", (double)cases[i].x,
          fp8moe_f32_to_f16(cases[i].x), cases[i].code);
  CHECK(fp8moe_f32_to_f16(bits_f32(0x7FC00000u)) == 0x7FFF, "f16(NaN) = 0x%04X, expected 0x7FFF",
        fp8moe_f32_to_f16(bits_f32(0x7FC00000u)));
  CHECK(fp8moe_f32_to_f16(bits_f32(0xFFC00001u)) == 0x7FFF, "f16(-NaN) = 0x%04X, expected 0x7FFF",
        fp8moe_f32_to_f16(bits_f32(0xFFC00001u)));
  CHECK(fp8moe_f16_to_f32(0x0001) == 0x1p-24f, "smallest f16 subnormal is 2^-24");
}

int main(void) {
  pg_tally tally = {0, 0};
  int before;
  struct {
    const char* name;
    void (*fn)(void);
  } const units[] = {
      {"e4m3: all 256 codes decode exactly and re-encode to themselves (NaN -> 0x7F)", e4m3_codes},
      {"e4m3: ties to even at every midpoint; exact just below/above", e4m3_midpoints},
      {"e4m3: saturation to +-448 (448, 464, 480, 1e9, Inf)", e4m3_saturation},
      {"e4m3: subnormals (2^-9 smallest) and signed zero", e4m3_subnormals_and_zero},
      {"e4m3: NaN inputs", e4m3_nan},
      {"e4m3: random sweep against the brute-force encoder", e4m3_random_sweep},
      {"bf16: specials (NaN -> 0x7FFF, Inf, overflow, -0, subnormal ties)", bf16_specials},
      {"f16: specials (subnormals, overflow to Inf, NaN -> 0x7FFF)", f16_specials},
  };
  for (size_t i = 0; i < sizeof units / sizeof units[0]; ++i) {
    pg_subcheck_begin(units[i].name, &before);
    units[i].fn();
    pg_subcheck_end(&tally, units[i].name, before);
  }
  pg_subcheck_begin("bf16: all 65536 codes decode exactly and round-trip", &before);
  ieee16_codes("bf16", fp8moe_f32_to_bf16, fp8moe_bf16_to_f32, bf16_value);
  pg_subcheck_end(&tally, "bf16: all 65536 codes decode exactly and round-trip", before);
  pg_subcheck_begin("bf16: every midpoint ties to even; exact beside it", &before);
  ieee16_midpoints("bf16", fp8moe_f32_to_bf16, bf16_value, 0x7F7F);
  pg_subcheck_end(&tally, "bf16: every midpoint ties to even; exact beside it", before);
  pg_subcheck_begin("bf16: random sweep against the brute-force encoder", &before);
  ieee16_random_sweep("bf16", fp8moe_f32_to_bf16, brute_bf16);
  pg_subcheck_end(&tally, "bf16: random sweep against the brute-force encoder", before);
  pg_subcheck_begin("f16: all 65536 codes decode exactly and round-trip", &before);
  ieee16_codes("f16", fp8moe_f32_to_f16, fp8moe_f16_to_f32, f16_value);
  pg_subcheck_end(&tally, "f16: all 65536 codes decode exactly and round-trip", before);
  pg_subcheck_begin("f16: every midpoint ties to even (65520 -> Inf); exact beside it", &before);
  ieee16_midpoints("f16", fp8moe_f32_to_f16, f16_value, 0x7BFF);
  CHECK(fp8moe_f32_to_f16(65520.0f) == 0x7C00 && fp8moe_f32_to_f16(nextafterf(65520.0f, 0.0f)) == 0x7BFF,
        "f16 overflow midpoint");
  pg_subcheck_end(&tally, "f16: every midpoint ties to even (65520 -> Inf); exact beside it", before);
  pg_subcheck_begin("f16: random sweep against the brute-force encoder", &before);
  ieee16_random_sweep("f16", fp8moe_f32_to_f16, brute_f16);
  pg_subcheck_end(&tally, "f16: random sweep against the brute-force encoder", before);
  return pg_tally_finish(&tally, "test_conversions");
}
