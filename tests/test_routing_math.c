/* test_routing_math.c — the shared routing formulation (src/routing_math.h) against a float64 reference:
 * exp within 1.5 ulp and sigmoid within 2.5 ulp over a strided sweep of every float bit pattern, 10^6 random inputs and the
 * adversarial ones (thresholds, ±0, subnormals, ±Inf, NaN, multiples of ln 2 and the halfway points between
 * them); the warp-order softmax sum within a few ulp of the exact sum. Host unit test (includes src/). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plugin_host.h"
#include "routing_math.h"

static float from_bits(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* |got − ref| in units of the float ulp at ref (2^-149 below the normal range). */
static double ulp_error(float got, double ref) {
  if (isnan(ref)) return isnan(got) ? 0.0 : INFINITY;
  if (isinf(ref) || ref > (double)FLT_MAX * (1.0 + 0x1p-25)) return isinf(got) && got > 0 ? 0.0 : INFINITY;
  if (isinf(got)) return INFINITY;
  double a = fabs(ref);
  int e;
  frexp(a, &e);
  double ulp = a < 0x1p-126 ? 0x1p-149 : ldexp(1.0, e - 24);
  return fabs((double)got - ref) / ulp;
}

typedef struct stats {
  const char* name;
  long n;
  double worst;
  float worst_x;
} stats;

static void record(stats* s, float x, float got, double ref) {
  double u = ulp_error(got, ref);
  ++s->n;
  if (u > s->worst || (isnan(u))) {
    s->worst = u;
    s->worst_x = x;
  }
}

static double ref_exp(float x) { return exp((double)x); }
static double ref_sigmoid(float x) { return 1.0 / (1.0 + exp(-(double)x)); }

static void one(stats* se, stats* ss, float x) {
  record(se, x, fp8moe_rm_exp(x), ref_exp(x));
  record(ss, x, fp8moe_rm_sigmoid(x), ref_sigmoid(x));
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

int main(void) {
  stats se = {"exp", 0, 0.0, 0.0f}, ss = {"sigmoid", 0, 0.0, 0.0f};

  /* every 251st bit pattern of all floats (17 million inputs, both signs, NaN and Inf included) */
  for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 251) one(&se, &ss, from_bits((uint32_t)b));
  /* 10^6 random inputs in the range routing sees */
  for (int i = 0; i < 1000000; ++i) {
    float x = ((float)(next_u32() >> 8) / 16777216.0f) * 200.0f - 105.0f;
    one(&se, &ss, x);
  }
  /* adversarial: thresholds and their neighbours, zeros, subnormals, infinities, k·ln2 and halfway points */
  const float special[] = {0.0f, -0.0f, FLT_MIN, -FLT_MIN, 0x1p-149f, -0x1p-149f, FLT_MAX, -FLT_MAX, INFINITY,
                           -INFINITY, NAN, 88.72283172607421875f, 88.7228317260742188f, 88.72283935546875f, 89.0f,
                           -87.33654022216796875f, -103.2789306640625f, -103.97207641601562f, -104.0f, 1e-8f,
                           -1e-8f, 0.5f, -0.5f, 1.0f, -1.0f};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; ++i) {
    float x = special[i];
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    for (int d = -64; d <= 64; ++d) one(&se, &ss, from_bits(b + (uint32_t)d));
  }
  for (int k = -150; k <= 128; ++k) {
    for (int h = 0; h < 2; ++h) {
      float x = (float)(((double)k + 0.5 * h) * 0.69314718055994530942);
      uint32_t b;
      memcpy(&b, &x, sizeof b);
      for (int d = -8; d <= 8; ++d) one(&se, &ss, from_bits(b + (uint32_t)d));
    }
  }
  printf("exp: %ld inputs, worst %.3f ulp at %a\n", se.n, se.worst, (double)se.worst_x);
  printf("sigmoid: %ld inputs, worst %.3f ulp at %a\n", ss.n, ss.worst, (double)ss.worst_x);
  EXPECT(se.worst <= 1.5, "exp: %.3f ulp at %a (%.9g), expected <= 1.5", se.worst, (double)se.worst_x,
         (double)se.worst_x);
  EXPECT(ss.worst <= 2.5, "sigmoid: %.3f ulp at %a (%.9g), expected <= 2.5", ss.worst, (double)ss.worst_x,
         (double)ss.worst_x);
  /* special values exactly */
  EXPECT(fp8moe_rm_exp(0.0f) == 1.0f && fp8moe_rm_exp(-0.0f) == 1.0f, "exp(±0) != 1");
  EXPECT(isinf(fp8moe_rm_exp(INFINITY)) && fp8moe_rm_exp(-INFINITY) == 0.0f && isnan(fp8moe_rm_exp(NAN)),
         "exp(±Inf, NaN)");
  EXPECT(fp8moe_rm_sigmoid(0.0f) == 0.5f && fp8moe_rm_sigmoid(INFINITY) == 1.0f && fp8moe_rm_sigmoid(-INFINITY) == 0.0f,
         "sigmoid(0, ±Inf)");

  /* softmax rows: numerators and the warp-order sum against float64, 10^5 rows of E in {8..384} */
  double worst_sum = 0.0, worst_w = 0.0;
  static float v[512];
  for (int row = 0; row < 100000; ++row) {
    int32_t E = 8 + (int32_t)(next_u32() % 377);
    float scale = (float)(1 + next_u32() % 40);
    float m = -INFINITY;
    for (int32_t e = 0; e < E; ++e) {
      v[e] = ((float)(next_u32() >> 8) / 16777216.0f - 0.5f) * scale;
      if (v[e] > m) m = v[e];
    }
    double exact = 0.0;
    static float t[512];
    for (int32_t e = 0; e < E; ++e) {
      t[e] = fp8moe_rm_softmax_term(v[e], m);
      exact += (double)t[e];
    }
    float sum = fp8moe_rm_sum32(t, E);
    double u = ulp_error(sum, exact);
    if (u > worst_sum) worst_sum = u;
    /* a weight against the float64 softmax of the same fp32 differences x − max (their rounding is the
     * problem's conditioning, common to every fp32 softmax, not the formulation's error) */
    double dsum = 0.0;
    for (int32_t e = 0; e < E; ++e) dsum += exp((double)(float)(v[e] - m));
    int32_t e = (int32_t)(next_u32() % (uint32_t)E);
    double uw = ulp_error(t[e] / sum, exp((double)(float)(v[e] - m)) / dsum);
    if (uw > worst_w) worst_w = uw;
  }
  printf("softmax: 100000 rows, sum worst %.2f ulp of the exact sum of its terms, weight worst %.2f ulp\n",
         worst_sum, worst_w);
  EXPECT(worst_sum <= 4.0, "softmax sum: %.2f ulp", worst_sum);
  EXPECT(worst_w <= 4.0, "softmax weight: %.2f ulp", worst_w);
  return test_finish("test_routing_math", test_checks_run);
}
