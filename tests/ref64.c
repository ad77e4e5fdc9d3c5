/* ref64.c — see ref64.h. Written from docs/DESIGN.md only; nothing here comes from src/. */
#include "ref64.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ABI's enum values, restated so this file depends on no header of the library. */
enum {
  R_DEFAULT = 0, R_RENORMALIZE = 1, R_DEEPSEEK_V3 = 2, R_LLAMA4 = 3, R_RENORMALIZE_NAIVE = 4, R_TOPK = 5,
  R_SIGMOID = 6, R_SIGMOID_RENORM = 7, R_TOPK_SIGMOID = 8, R_PRECOMPUTED = 9
};
enum { Q_PER_TENSOR = 0, Q_BLOCK128 = 1, Q_PER_CHANNEL = 2 };
enum { A_SWIGLU = 0, A_GEGLU = 1 };
enum { GU_GATE_FIRST = 0 };

/* ------------------------------------------------------------------------------------------------ */
/* Number formats                                                                                     */
/* ------------------------------------------------------------------------------------------------ */

int ref_dt_size(ref_dt dt) {
  switch (dt) {
    case REF_F32: case REF_I32: return 4;
    case REF_BF16: case REF_F16: return 2;
    case REF_E4M3: return 1;
    case REF_I64: return 8;
    case REF_NONE: break;
  }
  return 0;
}

const char* ref_dt_name(ref_dt dt) {
  switch (dt) {
    case REF_F32: return "float32";
    case REF_BF16: return "bfloat16";
    case REF_F16: return "float16";
    case REF_E4M3: return "float8_e4m3fn";
    case REF_I32: return "int32";
    case REF_I64: return "int64";
    case REF_NONE: break;
  }
  return "none";
}

/* |x| rounded to nearest-even on the grid of a binary format with `mant` fraction bits and smallest normal
 * exponent emin (subnormals below), unbounded above. The grid step is a power of two, so x/q is exact and
 * nearbyint (default mode: ties to even) does the rounding. */
/* GEMM2's slot outputs are kept as bf16 before the combine (docs/DESIGN.md "Combine"): the fp32 value, RNE to
 * bf16; a finite value above the largest finite bf16 keeps that value, NaN and ±Inf stay. Written out here
 * independently of src/numeric_internal.h. */
static double slot_bf16(double v) {
  const float f = fabs(v) > FLT_MAX ? (v > 0 ? INFINITY : -INFINITY) : (float)v; /* no out-of-range cast */
  if (isnan(f) || isinf(f)) return f;
  const float bf16_max = 3.38953139e38f;
  if (fabsf(f) > bf16_max) return f < 0 ? -bf16_max : bf16_max;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  memcpy(&r, &u, sizeof r);
  return r;
}

static double round_grid(double a, int mant, int emin) {
  if (a == 0.0) return a;
  int e;
  frexp(a, &e);
  e -= 1; /* a in [2^e, 2^(e+1)) */
  if (e < emin) e = emin;
  double q = ldexp(1.0, e - mant);
  return nearbyint(a / q) * q;
}

/* Bit pattern (without sign) of a positive value r that lies on the grid of the format. */
static uint32_t grid_bits(double r, int mant, int emin, int bias) {
  if (r == 0.0) return 0;
  int e;
  double m = frexp(r, &e);
  e -= 1;
  if (e < emin) return (uint32_t)(r / ldexp(1.0, emin - mant)); /* subnormal: r = f · 2^(emin−mant) */
  uint32_t frac = (uint32_t)((2.0 * m - 1.0) * (double)(1u << mant));
  return ((uint32_t)(e + bias) << mant) | frac;
}

uint8_t ref_encode_e4m3(double x) {
  if (isnan(x)) return 0x7F;
  uint8_t sign = signbit(x) ? 0x80 : 0x00;
  double a = fabs(x);
  double r = isinf(a) ? 448.0 : round_grid(a, 3, -6);
  if (r > 448.0) r = 448.0; /* satfinite */
  return (uint8_t)(sign | grid_bits(r, 3, -6, 7));
}

double ref_decode_e4m3(uint8_t c) {
  int e = (c >> 3) & 15, m = c & 7;
  double s = (c & 0x80) ? -1.0 : 1.0;
  if (e == 15 && m == 7) return NAN;
  if (e == 0) return s * ldexp((double)m, -9);
  return s * ldexp(1.0 + m / 8.0, e - 7);
}

/* Shared by bf16 and binary16: RNE, overflow to Inf past the largest finite value. */
static uint16_t encode_ieee16(double x, int mant, int emin, int bias, double max_finite, uint16_t inf_bits) {
  if (isnan(x)) return 0x7FFF;
  uint16_t sign = signbit(x) ? 0x8000 : 0x0000;
  double a = fabs(x);
  if (isinf(a)) return (uint16_t)(sign | inf_bits);
  double r = round_grid(a, mant, emin);
  if (r > max_finite) return (uint16_t)(sign | inf_bits);
  return (uint16_t)(sign | grid_bits(r, mant, emin, bias));
}

static double decode_ieee16(uint16_t b, int mant, int ebits, int bias) {
  int emax = (1 << ebits) - 1;
  int e = (b >> mant) & emax;
  int m = b & ((1 << mant) - 1);
  double s = (b & 0x8000) ? -1.0 : 1.0;
  if (e == emax) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexp((double)m, 1 - bias - mant);
  return s * ldexp(1.0 + ldexp((double)m, -mant), e - bias);
}

uint16_t ref_encode_bf16(double x) { return encode_ieee16(x, 7, -126, 127, ldexp(255.0, 120), 0x7F80); }
double ref_decode_bf16(uint16_t b) { return decode_ieee16(b, 7, 8, 127); }
uint16_t ref_encode_f16(double x) { return encode_ieee16(x, 10, -14, 15, 65504.0, 0x7C00); }
double ref_decode_f16(uint16_t b) { return decode_ieee16(b, 10, 5, 15); }

void ref_store(void* data, ref_dt dt, int64_t i, double x) {
  unsigned char* b = (unsigned char*)data;
  switch (dt) {
    case REF_F32: {
      float f = (float)x;
      memcpy(b + i * 4, &f, 4);
      break;
    }
    case REF_BF16: {
      uint16_t h = ref_encode_bf16(x);
      memcpy(b + i * 2, &h, 2);
      break;
    }
    case REF_F16: {
      uint16_t h = ref_encode_f16(x);
      memcpy(b + i * 2, &h, 2);
      break;
    }
    case REF_E4M3: b[i] = ref_encode_e4m3(x); break;
    case REF_I32: {
      int32_t v = (int32_t)llround(x);
      memcpy(b + i * 4, &v, 4);
      break;
    }
    case REF_I64: {
      int64_t v = (int64_t)llround(x);
      memcpy(b + i * 8, &v, 8);
      break;
    }
    case REF_NONE: break;
  }
}

double ref_load(const void* data, ref_dt dt, int64_t i) {
  const unsigned char* b = (const unsigned char*)data;
  switch (dt) {
    case REF_F32: {
      float f;
      memcpy(&f, b + i * 4, 4);
      return f;
    }
    case REF_BF16: {
      uint16_t h;
      memcpy(&h, b + i * 2, 2);
      return ref_decode_bf16(h);
    }
    case REF_F16: {
      uint16_t h;
      memcpy(&h, b + i * 2, 2);
      return ref_decode_f16(h);
    }
    case REF_E4M3: return ref_decode_e4m3(b[i]);
    case REF_I32: {
      int32_t v;
      memcpy(&v, b + i * 4, 4);
      return v;
    }
    case REF_I64: {
      int64_t v;
      memcpy(&v, b + i * 8, 8);
      return (double)v;
    }
    case REF_NONE: break;
  }
  return 0.0;
}

double ref_get(const ref_array* a, int64_t i0, int64_t i1, int64_t i2) {
  int64_t idx[3] = {i0, i1, i2};
  int64_t off = 0;
  for (int32_t d = 0; d < a->ndim && d < 3; ++d) off += idx[d] * a->strides[d];
  return ref_load(a->data, a->dt, off);
}

/* ------------------------------------------------------------------------------------------------ */
/* Routing (DESIGN.md "Routing")                                                                      */
/* ------------------------------------------------------------------------------------------------ */

int ref_supported(const ref_problem* p, char* why, size_t why_size) {
  if (p->routing_method < R_DEFAULT || p->routing_method > R_PRECOMPUTED) {
    snprintf(why, why_size, "ref64 has no model of routing method %d", p->routing_method);
    return -1;
  }
  if (p->quant_format < Q_PER_TENSOR || p->quant_format > Q_PER_CHANNEL) {
    snprintf(why, why_size, "ref64 has no model of quant format %d", p->quant_format);
    return -1;
  }
  if (p->activation != A_SWIGLU && p->activation != A_GEGLU) {
    snprintf(why, why_size, "ref64 has no model of activation %d", p->activation);
    return -1;
  }
  return 0;
}

static double sigmoid(double s) { return 1.0 / (1.0 + exp(-s)); }

/* The logit as routing reads it: NaN and −Inf are unselectable (returned as NaN), +Inf is FLT_MAX. */
static double read_logit(const ref_problem* p, int64_t t, int32_t e) {
  double s = ref_get(&p->logits, t, e, 0);
  if (isnan(s) || s == -INFINITY) return NAN;
  if (s == INFINITY) return FLT_MAX;
  return s;
}

static int is_softmax_all(int32_t m) { return m == R_DEFAULT || m == R_RENORMALIZE_NAIVE; }

/* Keys before DeepSeek's group masking; −Inf for unselectable experts. */
static void raw_keys(const ref_problem* p, int64_t t, double* key) {
  const int32_t E = p->E;
  double m = -INFINITY, sum = 0.0;
  if (is_softmax_all(p->routing_method)) {
    for (int32_t e = 0; e < E; ++e) {
      double s = read_logit(p, t, e);
      if (!isnan(s) && s > m) m = s;
    }
    for (int32_t e = 0; e < E; ++e) {
      double s = read_logit(p, t, e);
      if (!isnan(s)) sum += exp(s - m);
    }
  }
  for (int32_t e = 0; e < E; ++e) {
    double s = read_logit(p, t, e);
    if (isnan(s)) {
      key[e] = -INFINITY;
      continue;
    }
    switch (p->routing_method) {
      case R_DEFAULT:
      case R_RENORMALIZE_NAIVE: key[e] = exp(s - m) / sum; break;
      case R_SIGMOID:
      case R_SIGMOID_RENORM: key[e] = sigmoid(s); break;
      case R_DEEPSEEK_V3:
        key[e] = sigmoid(s) + (p->bias.data ? ref_get(&p->bias, e, 0, 0) : 0.0);
        break;
      default: key[e] = s; break; /* RENORMALIZE, TOPK, TOPK_SIGMOID, LLAMA4 select on the raw logit */
    }
  }
}

static double group_score_of(const ref_problem* p, const double* key, int32_t g) {
  int32_t gs = p->E / p->n_group;
  double b1 = -INFINITY, b2 = -INFINITY;
  for (int32_t e = g * gs; e < (g + 1) * gs; ++e) {
    if (key[e] > b1) {
      b2 = b1;
      b1 = key[e];
    } else if (key[e] > b2) {
      b2 = key[e];
    }
  }
  return gs == 1 ? b1 : b1 + b2;
}

double ref_group_score(const ref_problem* p, int64_t t, int32_t g) {
  double* key = malloc(sizeof(double) * (size_t)p->E);
  if (!key) return NAN;
  raw_keys(p, t, key);
  double s = group_score_of(p, key, g);
  free(key);
  return s;
}

static int is_grouped(const ref_problem* p) { return p->routing_method == R_DEEPSEEK_V3 && p->n_group > 1; }

/* Masks (−Inf) the experts of every group outside the best topk_group (ties → lower group). */
static void mask_groups(const ref_problem* p, double* key) {
  if (!is_grouped(p)) return;
  int32_t G = p->n_group, gs = p->E / p->n_group;
  double score[64];
  int kept[64] = {0};
  for (int32_t g = 0; g < G && g < 64; ++g) score[g] = group_score_of(p, key, g);
  for (int32_t r = 0; r < p->topk_group; ++r) {
    int32_t best = -1;
    for (int32_t g = 0; g < G; ++g)
      if (!kept[g] && (best < 0 || score[g] > score[best])) best = g;
    if (best >= 0) kept[best] = 1;
  }
  for (int32_t g = 0; g < G; ++g)
    if (!kept[g])
      for (int32_t e = g * gs; e < (g + 1) * gs; ++e) key[e] = -INFINITY;
}

double ref_key(const ref_problem* p, int64_t t, int32_t e) {
  double* key = malloc(sizeof(double) * (size_t)p->E);
  if (!key) return NAN;
  raw_keys(p, t, key);
  mask_groups(p, key);
  double k = key[e];
  free(key);
  return k;
}

void ref_select(const ref_problem* p, int64_t t, int32_t* ids) {
  const int32_t K = p->K, E = p->E;
  if (p->routing_method == R_PRECOMPUTED) {
    for (int32_t k = 0; k < K; ++k) ids[k] = (int32_t)ref_get(&p->topk_ids, t, k, 0);
    return;
  }
  double* key = malloc(sizeof(double) * (size_t)E);
  char* taken = calloc((size_t)E, 1);
  if (!key || !taken) {
    for (int32_t k = 0; k < K; ++k) ids[k] = -1;
    free(key);
    free(taken);
    return;
  }
  raw_keys(p, t, key);
  mask_groups(p, key);
  for (int32_t k = 0; k < K; ++k) {
    int32_t best = -1;
    for (int32_t e = 0; e < E; ++e)
      if (!taken[e] && key[e] > -INFINITY && (best < 0 || key[e] > key[best])) best = e;
    if (best < 0) /* fewer selectable than K: the lowest-index experts left, weight 0 */
      for (int32_t e = 0; e < E && best < 0; ++e)
        if (!taken[e]) best = e;
    ids[k] = best;
    taken[best] = 1;
  }
  free(key);
  free(taken);
}

void ref_weigh(const ref_problem* p, int64_t t, const int32_t* ids, double* w) {
  const int32_t K = p->K, m = p->routing_method;
  double sum = 0.0, mx = -INFINITY;
  if (m == R_PRECOMPUTED) {
    for (int32_t k = 0; k < K; ++k) w[k] = ref_get(&p->topk_weights, t, k, 0) * p->routed_scaling_factor;
    return;
  }
  double* key = malloc(sizeof(double) * (size_t)p->E);
  if (!key) {
    for (int32_t k = 0; k < K; ++k) w[k] = NAN;
    return;
  }
  raw_keys(p, t, key);
  for (int32_t k = 0; k < K; ++k) {
    double s = (ids[k] >= 0 && ids[k] < p->E) ? read_logit(p, t, ids[k]) : NAN;
    if (!isnan(s) && s > mx) mx = s;
  }
  for (int32_t k = 0; k < K; ++k) {
    int32_t e = ids[k];
    double s = (e >= 0 && e < p->E) ? read_logit(p, t, e) : NAN;
    if (isnan(s)) {
      w[k] = 0.0;
      continue;
    }
    switch (m) {
      case R_DEFAULT:
      case R_RENORMALIZE_NAIVE: w[k] = key[e]; break;
      case R_RENORMALIZE: w[k] = exp(s - mx); break;
      case R_DEEPSEEK_V3:
      case R_LLAMA4:
      case R_SIGMOID:
      case R_SIGMOID_RENORM:
      case R_TOPK_SIGMOID: w[k] = sigmoid(s); break;
      default: w[k] = s; break; /* TOPK */
    }
    sum += w[k];
  }
  free(key);
  double div = 1.0;
  if (m == R_RENORMALIZE) div = sum;
  if (m == R_RENORMALIZE_NAIVE || m == R_DEEPSEEK_V3 || m == R_SIGMOID_RENORM) div = sum + 1e-20;
  for (int32_t k = 0; k < K; ++k) w[k] = w[k] / div * p->routed_scaling_factor;
}

void ref_route(const ref_problem* p, int32_t* ids, double* w) {
  for (int64_t t = 0; t < p->T; ++t) {
    ref_select(p, t, ids + t * p->K);
    ref_weigh(p, t, ids + t * p->K, w + t * p->K);
  }
}

/* a and b equal within tol_ulps fp32 ulps of the larger magnitude. */
static int near_f32(double a, double b, double tol_ulps) {
  if (a == b) return 1;
  if (!isfinite(a) || !isfinite(b)) return 0;
  double mag = fmax(fabs(a), fabs(b));
  return fabs(a - b) <= tol_ulps * ldexp(mag, -23) + 1e-300;
}

/* key_a ≥ key_b up to a near-tie, also accepting a near-tie of the logits the key derives from. */
static int geq_near(const ref_problem* p, int64_t t, const double* key, int32_t a, int32_t b, double tol) {
  if (key[a] >= key[b] || near_f32(key[a], key[b], tol)) return 1;
  double la = read_logit(p, t, a), lb = read_logit(p, t, b);
  return !isnan(la) && !isnan(lb) && near_f32(la, lb, tol);
}

int ref_selection_acceptable(const ref_problem* p, int64_t t, const int32_t* ids, double tol_ulps) {
  const int32_t E = p->E, K = p->K;
  if (p->routing_method == R_PRECOMPUTED) {
    int32_t want[64];
    ref_select(p, t, want);
    return memcmp(want, ids, sizeof(int32_t) * (size_t)K) == 0;
  }
  double* key = malloc(sizeof(double) * (size_t)E);
  char* taken = calloc((size_t)E, 1);
  char* allowed = malloc((size_t)E);
  int ok = key && taken && allowed;
  if (ok) {
    raw_keys(p, t, key);
    memset(allowed, 1, (size_t)E);
    for (int32_t k = 0; k < K && ok; ++k) {
      if (ids[k] < 0 || ids[k] >= E || taken[ids[k]]) ok = 0;
      else taken[ids[k]] = 1;
    }
  }
  if (ok && is_grouped(p)) {
    /* The groups used, completed greedily by score, must be a best-topk_group set within tolerance. */
    int32_t G = p->n_group, gs = E / G;
    char in_g[64] = {0};
    double score[64];
    int32_t used = 0;
    for (int32_t g = 0; g < G; ++g) score[g] = group_score_of(p, key, g);
    for (int32_t k = 0; k < K; ++k) {
      int32_t g = ids[k] / gs;
      if (key[ids[k]] > -INFINITY && !in_g[g]) {
        in_g[g] = 1;
        ++used;
      }
    }
    if (used > p->topk_group) ok = 0;
    while (ok && used < p->topk_group) {
      int32_t best = -1;
      for (int32_t g = 0; g < G; ++g)
        if (!in_g[g] && (best < 0 || score[g] > score[best])) best = g;
      in_g[best] = 1;
      ++used;
    }
    for (int32_t g = 0; g < G && ok; ++g)
      for (int32_t h = 0; h < G && ok; ++h)
        if (in_g[g] && !in_g[h] && !(score[g] >= score[h] || near_f32(score[g], score[h], tol_ulps))) ok = 0;
    for (int32_t e = 0; e < E; ++e) allowed[e] = in_g[e / gs];
  }
  for (int32_t k = 0; k < K && ok; ++k) {
    int32_t a = ids[k];
    if (key[a] == -INFINITY) {
      /* a filler: only when no allowed selectable expert was left out */
      for (int32_t e = 0; e < E && ok; ++e)
        if (!taken[e] && allowed[e] && key[e] > -INFINITY) ok = 0;
      continue;
    }
    if (!allowed[a]) ok = 0;
    for (int32_t e = 0; e < E && ok; ++e)
      if (!taken[e] && allowed[e] && !geq_near(p, t, key, a, e, tol_ulps)) ok = 0;
    if (ok && k + 1 < K && key[ids[k + 1]] > -INFINITY && !geq_near(p, t, key, a, ids[k + 1], tol_ulps)) ok = 0;
  }
  free(key);
  free(taken);
  free(allowed);
  return ok;
}

/* ------------------------------------------------------------------------------------------------ */
/* The expert FFN (DESIGN.md "The computation")                                                       */
/* ------------------------------------------------------------------------------------------------ */

/* fp32 amax of the finite values → s = max(amax / 448, FLT_MIN), both steps in fp32. */
static float dynamic_scale(float amax) {
  float s = (float)((double)amax / 448.0);
  return s < FLT_MIN ? FLT_MIN : s;
}

/* e4m3(x / s) with x / s an fp32 division (exact in double, then rounded once to fp32), dequantized. */
static double quant_dequant(float x, float s) {
  float q = (float)((double)x / (double)s);
  return ref_decode_e4m3(ref_encode_e4m3(q)) * (double)s;
}

static float amax_finite(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (isfinite(x[i]) && fabsf(x[i]) > m) m = fabsf(x[i]);
  return m;
}

/* Quantizes rows[n_rows][len] in place (fp32 in, dequantized values out) with the format's activation
 * grouping; static_scale > 0 means a given per-tensor scale. */
static void quantize_rows(const ref_problem* p, const float* in, double* out, int64_t n_rows, int64_t len,
                          double static_scale) {
  if (p->quant_format == Q_PER_TENSOR) {
    float s = static_scale > 0 ? (float)static_scale : dynamic_scale(amax_finite(in, n_rows * len));
    for (int64_t i = 0; i < n_rows * len; ++i) out[i] = quant_dequant(in[i], s);
    return;
  }
  int64_t g = p->quant_format == Q_BLOCK128 ? 128 : len;
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t j0 = 0; j0 < len; j0 += g) {
      const float* x = in + r * len + j0;
      float s = dynamic_scale(amax_finite(x, g));
      for (int64_t j = 0; j < g; ++j) out[r * len + j0 + j] = quant_dequant(x[j], s);
    }
}

static double weight_scale(const ref_problem* p, const ref_array* sc, int32_t e, int64_t n, int64_t k) {
  switch (p->quant_format) {
    case Q_PER_TENSOR: return ref_get(sc, e, 0, 0);
    case Q_BLOCK128: return ref_get(sc, e, n / 128, k / 128);
    default: return ref_get(sc, e, n, 0);
  }
}

/* Dequantized [rows][cols] weight matrix of local expert e. lut holds the 256 e4m3 values (weights are
 * e4m3 by contract); the scale is read once per row and 128-column block. */
static void dequant_weight(const ref_problem* p, const ref_array* w, const ref_array* sc, int32_t e, int64_t rows,
                           int64_t cols, const double* lut, double* out) {
  const uint8_t* base = (const uint8_t*)w->data;
  int64_t step = p->quant_format == Q_BLOCK128 ? 128 : cols;
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k0 = 0; k0 < cols; k0 += step) {
      double s = weight_scale(p, sc, e, n, k0);
      const uint8_t* row = base + e * w->strides[0] + n * w->strides[1];
      for (int64_t k = k0; k < k0 + step && k < cols; ++k) out[n * cols + k] = lut[row[k * w->strides[2]]] * s;
    }
}

static double hidden_scale_at(const ref_problem* p, int64_t t, int64_t h) {
  switch (p->quant_format) {
    case Q_PER_TENSOR: return ref_get(&p->hidden_scale, 0, 0, 0);
    case Q_BLOCK128: return ref_get(&p->hidden_scale, t, h / 128, 0);
    default: return ref_get(&p->hidden_scale, t, 0, 0);
  }
}

static double activation(const ref_problem* p, double g, double u) {
  if (p->activation == A_GEGLU) return 0.5 * g * (1.0 + erf(g / sqrt(2.0))) * u;
  return g / (1.0 + exp(-g)) * u;
}

static double dot(const double* a, const double* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

/* GEMM1 input: dequantized fp8 values xq[T][H]. */
static void quantize_input(const ref_problem* p, const double* w, double* xq, float* xf, ref_stats* stats) {
  const int64_t T = p->T, H = p->H;
  int hidden_fp8 = p->hidden.dt == REF_E4M3;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double x = ref_get(&p->hidden, t, h, 0);
      if (hidden_fp8) {
        xq[t * H + h] = x * hidden_scale_at(p, t, h);
      } else {
        float xf32 = (float)x; /* bf16/fp16 are exact in fp32 */
        if (p->weight_on_input) xf32 = (float)((double)(float)w[t * p->K] * (double)xf32);
        xf[t * H + h] = xf32;
      }
    }
  if (hidden_fp8) return;
  if (stats) stats->a1_amax = amax_finite(xf, T * H);
  double a1 = p->a1_scale.data ? ref_get(&p->a1_scale, 0, 0, 0) : 0.0;
  quantize_rows(p, xf, xq, T, H, a1);
}

typedef struct row_ref {
  int64_t t;
  int32_t k, e; /* slot, local expert */
} row_ref;

int ref_forward(const ref_problem* p, const int32_t* ids, const double* w, double* out, ref_stats* stats) {
  const int64_t T = p->T, H = p->H, I = p->I, K = p->K;
  int rc = -1;
  int64_t n_rows = 0;
  for (int64_t i = 0; i < T * K; ++i)
    if (ids[i] >= p->local_offset && ids[i] < p->local_offset + p->E_local) ++n_rows;
  double* xq = malloc(sizeof(double) * (size_t)(T * H + 1));
  float* xf = malloc(sizeof(float) * (size_t)(T * H + 1));
  row_ref* rows = malloc(sizeof(row_ref) * (size_t)(n_rows + 1));
  float* af = malloc(sizeof(float) * (size_t)(n_rows * I + 1));
  double* aq = malloc(sizeof(double) * (size_t)(n_rows * I + 1));
  double* y = malloc(sizeof(double) * (size_t)(n_rows * H + 1));
  double* wd = malloc(sizeof(double) * (size_t)(2 * I * H));
  double* h = malloc(sizeof(double) * (size_t)(2 * I));
  if (!xq || !xf || !rows || !af || !aq || !y || !wd || !h) goto done;
  if (stats) memset(stats, 0, sizeof(*stats));
  double lut[256];
  for (int c = 0; c < 256; ++c) lut[c] = ref_decode_e4m3((uint8_t)c);

  quantize_input(p, w, xq, xf, stats);
  n_rows = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int32_t k = 0; k < K; ++k) {
      int32_t g = ids[t * K + k];
      if (g >= p->local_offset && g < p->local_offset + p->E_local)
        rows[n_rows++] = (row_ref){t, k, g - p->local_offset};
    }

  /* GEMM1 + activation, one local expert's weights at a time (bounded memory at model shapes). */
  int gate_first = p->gate_up_order == GU_GATE_FIRST;
  for (int32_t e = 0; e < p->E_local; ++e) {
    int used = 0;
    for (int64_t r = 0; r < n_rows && !used; ++r) used = rows[r].e == e;
    if (!used) continue;
    dequant_weight(p, &p->w13, &p->w13_scale, e, 2 * I, H, lut, wd);
    for (int64_t r = 0; r < n_rows; ++r) {
      if (rows[r].e != e) continue;
      double tw = (double)(float)w[rows[r].t * K + rows[r].k];
      for (int64_t n = 0; n < 2 * I; ++n) {
        h[n] = dot(xq + rows[r].t * H, wd + n * H, H);
        if (p->hidden.dt == REF_E4M3 && p->weight_on_input) h[n] *= tw;
      }
      for (int64_t i = 0; i < I; ++i) {
        double g = gate_first ? h[i] : h[I + i], u = gate_first ? h[I + i] : h[i];
        af[r * I + i] = (float)activation(p, g, u);
      }
    }
  }
  if (stats) stats->a2_amax = amax_finite(af, n_rows * I);
  quantize_rows(p, af, aq, n_rows, I, p->a2_scale.data ? ref_get(&p->a2_scale, 0, 0, 0) : 0.0);

  /* GEMM2 */
  for (int32_t e = 0; e < p->E_local; ++e) {
    int used = 0;
    for (int64_t r = 0; r < n_rows && !used; ++r) used = rows[r].e == e;
    if (!used) continue;
    dequant_weight(p, &p->w2, &p->w2_scale, e, H, I, lut, wd);
    for (int64_t r = 0; r < n_rows; ++r)
      if (rows[r].e == e)
        for (int64_t n = 0; n < H; ++n) y[r * H + n] = slot_bf16(dot(aq + r * I, wd + n * I, I));
  }

  /* Combine in slot order (rows are already in (t, k) order). */
  for (int64_t i = 0; i < T * H; ++i) out[i] = 0.0;
  for (int64_t r = 0; r < n_rows; ++r) {
    double cw = p->weight_on_input ? 1.0 : w[rows[r].t * K + rows[r].k];
    for (int64_t n = 0; n < H; ++n) out[rows[r].t * H + n] += cw * y[r * H + n];
  }
  rc = 0;
done:
  free(xq);
  free(xf);
  free(rows);
  free(af);
  free(aq);
  free(y);
  free(wd);
  free(h);
  return rc;
}
