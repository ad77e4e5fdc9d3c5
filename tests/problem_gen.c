/* problem_gen.c — see problem_gen.h. */
#include "problem_gen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t pg_next(pg_rng* r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double pg_uniform(pg_rng* r, double lo, double hi) {
  return lo + (hi - lo) * ((double)(pg_next(r) >> 11) * 0x1.0p-53);
}

ref_dt pg_ref_dt(fp8moe_dtype dt) {
  if (dt.lanes != 1) return REF_NONE;
  if (dt.code == FP8MOE_DTYPE_FLOAT && dt.bits == 32) return REF_F32;
  if (dt.code == FP8MOE_DTYPE_FLOAT && dt.bits == 16) return REF_F16;
  if (dt.code == FP8MOE_DTYPE_BFLOAT && dt.bits == 16) return REF_BF16;
  if (dt.code == FP8MOE_DTYPE_FLOAT8_E4M3FN && dt.bits == 8) return REF_E4M3;
  if (dt.code == FP8MOE_DTYPE_INT && dt.bits == 32) return REF_I32;
  if (dt.code == FP8MOE_DTYPE_INT && dt.bits == 64) return REF_I64;
  return REF_NONE;
}

const char* pg_dtype_name(fp8moe_dtype dt) { return ref_dt_name(pg_ref_dt(dt)); }

void pg_set(void* data, fp8moe_dtype dt, int64_t i, double x) { ref_store(data, pg_ref_dt(dt), i, x); }
double pg_get(const void* data, fp8moe_dtype dt, int64_t i) { return ref_load(data, pg_ref_dt(dt), i); }

static const char* method_name(int32_t m) {
  static const char* const names[] = {"DEFAULT", "RENORMALIZE", "DEEPSEEK_V3", "LLAMA4", "RENORMALIZE_NAIVE",
                                      "TOPK", "SIGMOID", "SIGMOID_RENORM", "TOPK_SIGMOID", "PRECOMPUTED"};
  return (m >= 0 && m < 10) ? names[m] : "method?";
}

static const char* format_name(int32_t f) {
  static const char* const names[] = {"FP8_PER_TENSOR", "FP8_BLOCK128", "FP8_PER_CHANNEL"};
  return (f >= 0 && f < 3) ? names[f] : "format?";
}

void pg_config_init(pg_config* c, int32_t method, int32_t format, int64_t T, int64_t H, int64_t I, int32_t E,
                    int32_t K) {
  memset(c, 0, sizeof(*c));
  c->routing_method = method;
  c->quant_format = format;
  c->activation = FP8MOE_ACTIVATION_SWIGLU;
  c->gate_up_order = FP8MOE_GATE_UP_GATE_FIRST;
  c->T = T;
  c->H = H;
  c->I = I;
  c->E = E;
  c->K = K;
  c->n_group = 1;
  c->topk_group = 1;
  c->logits_dtype = TEST_F32;
  c->bias_dtype = TEST_F32;
  c->hidden_dtype = TEST_BF16;
  c->output_dtype = TEST_F32;
  c->scale_dtype = TEST_F32;
  c->ids_dtype = TEST_I32;
  c->topk_weights_dtype = TEST_F32;
  c->uses_logits = method != FP8MOE_ROUTING_PRECOMPUTED;
  c->uses_bias = method == FP8MOE_ROUTING_DEEPSEEK_V3;
  c->uses_topk_input = method == FP8MOE_ROUTING_PRECOMPUTED;
  c->weight_on_input = method == FP8MOE_ROUTING_LLAMA4;
  c->want_routing_out = 1;
  c->seed = 1;
}

static void* buf_alloc(size_t bytes) {
  size_t n = (bytes + 255) / 256 * 256 + 256;
  void* b = aligned_alloc(256, n);
  if (b) memset(b, 0, n);
  return b;
}

static int64_t e_local(const pg_config* c) { return c->E_local ? c->E_local : c->E; }

/* Weight scale tensor element counts and the matching [rows, cols] of a weight. */
static int64_t scale_count(const pg_config* c, int64_t rows, int64_t cols) {
  switch (c->quant_format) {
    case FP8MOE_QUANT_FP8_PER_TENSOR: return e_local(c);
    case FP8MOE_QUANT_FP8_BLOCK128: return e_local(c) * (rows / 128) * (cols / 128);
    default: return e_local(c) * rows;
  }
}

/* fp8 weights drawn as codes with exponents 2^0 … 2^7 (never zero, never NaN: e4m3 0x7F needs exponent 15)
 * and any mantissa and sign, with scales that keep each output O(1) (rms of such codes ≈ 77). */
static void gen_weight(pg_rng* r, const pg_config* c, uint8_t* w, void* sc, int64_t rows, int64_t cols) {
  int64_t n = e_local(c) * rows * cols;
  for (int64_t i = 0; i < n; i += 4) {
    uint64_t bits = pg_next(r);
    for (int64_t j = i; j < i + 4 && j < n; ++j, bits >>= 16)
      w[j] = (uint8_t)((bits & 0x87u) | ((7u + ((bits >> 3) & 7u)) << 3));
  }
  double base = 1.5 / (sqrt((double)cols) * 77.0);
  int64_t ns = scale_count(c, rows, cols);
  for (int64_t i = 0; i < ns; ++i) pg_set(sc, c->scale_dtype, i, base * pg_uniform(r, 0.5, 1.5));
}

static int64_t hidden_scale_count(const pg_config* c) {
  switch (c->quant_format) {
    case FP8MOE_QUANT_FP8_PER_TENSOR: return 1;
    case FP8MOE_QUANT_FP8_BLOCK128: return c->T * (c->H / 128);
    default: return c->T;
  }
}

/* Element index of hidden_scale for (t, block) in its storage layout. */
static int64_t hidden_scale_index(const pg_config* c, int64_t t, int64_t h) {
  switch (c->quant_format) {
    case FP8MOE_QUANT_FP8_PER_TENSOR: return 0;
    case FP8MOE_QUANT_FP8_BLOCK128:
      return c->hidden_scale_transposed ? (h / 128) * c->T + t : t * (c->H / 128) + h / 128;
    default: return t;
  }
}

/* Hidden states: bf16/fp16 values in (−2, 2), or e4m3 codes with per-group scales of the format. */
static void gen_hidden(pg_rng* r, pg_problem* p) {
  const pg_config* c = &p->cfg;
  int64_t n = c->T * c->H;
  if (pg_ref_dt(c->hidden_dtype) != REF_E4M3) {
    for (int64_t i = 0; i < n; ++i) pg_set(p->hidden, c->hidden_dtype, i, pg_uniform(r, -2.0, 2.0));
    return;
  }
  double* x = malloc(sizeof(double) * (size_t)(n + 1));
  double* amax = calloc((size_t)hidden_scale_count(c) + 1, sizeof(double));
  if (!x || !amax) {
    free(x);
    free(amax);
    return;
  }
  for (int64_t i = 0; i < n; ++i) x[i] = pg_uniform(r, -2.0, 2.0);
  for (int64_t t = 0; t < c->T; ++t)
    for (int64_t h = 0; h < c->H; ++h) {
      int64_t s = hidden_scale_index(c, t, h);
      if (fabs(x[t * c->H + h]) > amax[s]) amax[s] = fabs(x[t * c->H + h]);
    }
  for (int64_t s = 0; s < hidden_scale_count(c); ++s)
    pg_set(p->hidden_scale, c->scale_dtype, s, amax[s] / 448.0 * pg_uniform(r, 1.0, 1.2));
  for (int64_t t = 0; t < c->T; ++t)
    for (int64_t h = 0; h < c->H; ++h) {
      double s = pg_get(p->hidden_scale, c->scale_dtype, hidden_scale_index(c, t, h));
      ((uint8_t*)p->hidden)[t * c->H + h] = ref_encode_e4m3(x[t * c->H + h] / s);
    }
  free(x);
  free(amax);
}

static int64_t logits_storage(const pg_config* c) {
  if (c->logits_layout == PG_LOGITS_PADDED) return c->T * (c->E + 3);
  return c->T * c->E;
}

static int64_t logits_index(const pg_config* c, int64_t t, int64_t e) {
  switch (c->logits_layout) {
    case PG_LOGITS_PADDED: return t * (c->E + 3) + e;
    case PG_LOGITS_TRANSPOSED: return e * c->T + t;
    default: return t * c->E + e;
  }
}

static void gen_routing(pg_rng* r, pg_problem* p) {
  const pg_config* c = &p->cfg;
  if (c->uses_logits) {
    for (int64_t i = 0; i < logits_storage(c); ++i) pg_set(p->logits, c->logits_dtype, i, NAN); /* padding */
    for (int64_t t = 0; t < c->T; ++t)
      for (int64_t e = 0; e < c->E; ++e)
        pg_set(p->logits, c->logits_dtype, logits_index(c, t, e), pg_uniform(r, -3.0, 3.0));
  }
  if (c->uses_bias)
    for (int64_t e = 0; e < c->E; ++e) pg_set(p->bias, c->bias_dtype, e, pg_uniform(r, -0.2, 0.2));
  if (c->uses_topk_input) {
    int32_t* perm = malloc(sizeof(int32_t) * (size_t)c->E);
    if (!perm) return;
    for (int64_t t = 0; t < c->T; ++t) {
      for (int32_t e = 0; e < c->E; ++e) perm[e] = e;
      for (int32_t k = 0; k < c->K; ++k) { /* distinct ids: a partial Fisher-Yates shuffle */
        int32_t j = k + (int32_t)(pg_next(r) % (uint64_t)(c->E - k));
        int32_t tmp = perm[k];
        perm[k] = perm[j];
        perm[j] = tmp;
        pg_set(p->topk_ids, c->ids_dtype, t * c->K + k, perm[k]);
        pg_set(p->topk_weights, c->topk_weights_dtype, t * c->K + k, pg_uniform(r, 0.05, 1.0));
      }
    }
    free(perm);
  }
}

/* Static scales from the data: a1 over the inputs, a2 over the intermediates of a reference pass. */
static int choose_static_scales(pg_problem* p) {
  pg_config* c = &p->cfg;
  if (c->quant_format != FP8MOE_QUANT_FP8_PER_TENSOR || pg_ref_dt(c->hidden_dtype) == REF_E4M3) {
    c->a1_static = 0;
    if (c->quant_format != FP8MOE_QUANT_FP8_PER_TENSOR) c->a2_static = 0;
  }
  if (!c->a1_static && !c->a2_static) return 0;
  int a2_wanted = c->a2_static;
  c->a2_static = 0;
  int a1_wanted = c->a1_static;
  c->a1_static = 0;
  pg_describe(p);
  int64_t TK = c->T * c->K;
  int32_t* ids = malloc(sizeof(int32_t) * (size_t)(TK + 1));
  double* w = malloc(sizeof(double) * (size_t)(TK + 1));
  double* out = malloc(sizeof(double) * (size_t)(c->T * c->H + 1));
  int rc = -1;
  ref_stats st;
  if (ids && w && out) {
    ref_route(&p->ref, ids, w);
    if (ref_forward(&p->ref, ids, w, out, &st) == 0) {
      if (a1_wanted) {
        pg_set(p->a1_scale, c->scale_dtype, 0, st.a1_amax > 0 ? st.a1_amax / 448.0 * 1.25 : 1.0);
        c->a1_static = 1;
        pg_describe(p);
        ref_forward(&p->ref, ids, w, out, &st); /* a2 follows the quantization a1 gives */
      }
      if (a2_wanted) {
        pg_set(p->a2_scale, c->scale_dtype, 0, st.a2_amax > 0 ? st.a2_amax / 448.0 * 1.25 : 1.0);
        c->a2_static = 1;
      }
      rc = 0;
    }
  }
  free(ids);
  free(w);
  free(out);
  return rc;
}

int pg_generate(pg_problem* p, const pg_config* c) {
  memset(p, 0, sizeof(*p));
  p->cfg = *c;
  pg_rng r = {c->seed * 0x2545F4914F6CDD1Dull + 7};
  const int64_t T = c->T, H = c->H, I = c->I, K = c->K, El = e_local(c);
  int hidden_fp8 = pg_ref_dt(c->hidden_dtype) == REF_E4M3;
  int ss = ref_dt_size(pg_ref_dt(c->scale_dtype));
  p->hidden = buf_alloc((size_t)(T * H) * (size_t)ref_dt_size(pg_ref_dt(c->hidden_dtype)));
  p->hidden_scale = buf_alloc((size_t)(hidden_scale_count(c) * ss));
  p->logits = buf_alloc((size_t)(logits_storage(c) * ref_dt_size(pg_ref_dt(c->logits_dtype))));
  p->bias = buf_alloc((size_t)c->E * (size_t)ref_dt_size(pg_ref_dt(c->bias_dtype)));
  p->topk_ids = buf_alloc((size_t)(T * K * ref_dt_size(pg_ref_dt(c->ids_dtype))));
  p->topk_weights = buf_alloc((size_t)(T * K * ref_dt_size(pg_ref_dt(c->topk_weights_dtype))));
  p->w13 = buf_alloc((size_t)(El * 2 * I * H));
  p->w2 = buf_alloc((size_t)(El * H * I));
  p->w13_scale = buf_alloc((size_t)(scale_count(c, 2 * I, H) * ss));
  p->w2_scale = buf_alloc((size_t)(scale_count(c, H, I) * ss));
  p->a1_scale = buf_alloc((size_t)ss);
  p->a2_scale = buf_alloc((size_t)ss);
  p->output_bytes = (size_t)(T * (H + c->output_row_pad) * ref_dt_size(pg_ref_dt(c->output_dtype)));
  p->output = buf_alloc(p->output_bytes);
  p->ids_out = buf_alloc(sizeof(int32_t) * (size_t)(T * K));
  p->weights_out = buf_alloc(sizeof(float) * (size_t)(T * K));
  if (!p->hidden || !p->hidden_scale || !p->logits || !p->bias || !p->topk_ids || !p->topk_weights || !p->w13 ||
      !p->w2 || !p->w13_scale || !p->w2_scale || !p->a1_scale || !p->a2_scale || !p->output || !p->ids_out ||
      !p->weights_out) {
    pg_free(p);
    return -1;
  }
  if (!hidden_fp8 || c->quant_format != FP8MOE_QUANT_FP8_BLOCK128) p->cfg.hidden_scale_transposed = 0;
  gen_hidden(&r, p);
  gen_routing(&r, p);
  gen_weight(&r, c, (uint8_t*)p->w13, p->w13_scale, 2 * I, H);
  gen_weight(&r, c, (uint8_t*)p->w2, p->w2_scale, H, I);
  if (choose_static_scales(p) != 0) {
    pg_free(p);
    return -1;
  }
  pg_describe(p);
  pg_poison(p);
  return 0;
}

static void to_ref_array(ref_array* a, const test_tensor* tt, int present) {
  memset(a, 0, sizeof(*a));
  if (!present) return;
  a->data = tt->t.data;
  a->dt = pg_ref_dt(tt->t.dtype);
  a->ndim = tt->t.ndim;
  int64_t stride = 1;
  for (int32_t d = a->ndim - 1; d >= 0; --d) {
    a->shape[d] = tt->t.shape[d];
    a->strides[d] = tt->t.strides ? tt->t.strides[d] : stride;
    stride *= tt->t.shape[d];
  }
}

void pg_describe(pg_problem* p) {
  const pg_config* c = &p->cfg;
  const int64_t T = c->T, H = c->H, I = c->I, K = c->K, E = c->E, El = e_local(c);
  int hidden_fp8 = pg_ref_dt(c->hidden_dtype) == REF_E4M3;
  fp8moe_moe_args* a = &p->args;
  memset(a, 0, sizeof(*a));
  a->struct_size = sizeof(*a);
  a->error_message = p->error;
  a->error_message_size = sizeof(p->error);
  a->routing_method = c->routing_method;
  a->quant_format = c->quant_format;
  a->activation = c->activation;
  a->gate_up_order = c->gate_up_order;
  a->flags = c->flags;
  a->num_experts = c->E;
  a->top_k = c->K;
  a->local_expert_offset = c->local_offset;
  a->local_num_experts = c->E_local;
  a->n_group = c->n_group;
  a->topk_group = c->topk_group;
  a->routed_scaling_factor = c->routed_scaling_factor;

  a->hidden_states = test_tensor_init(&p->t_hidden, p->hidden, c->hidden_dtype, 2, (int64_t[]){T, H}, NULL);
  if (hidden_fp8) {
    if (c->quant_format == FP8MOE_QUANT_FP8_PER_TENSOR)
      a->hidden_scale = test_tensor_init(&p->t_hidden_scale, p->hidden_scale, c->scale_dtype,
                                         c->alt_scale_shapes ? 0 : 1, (int64_t[]){1}, NULL);
    else if (c->quant_format == FP8MOE_QUANT_FP8_BLOCK128)
      a->hidden_scale = test_tensor_init(&p->t_hidden_scale, p->hidden_scale, c->scale_dtype, 2,
                                         (int64_t[]){T, H / 128},
                                         c->hidden_scale_transposed ? (int64_t[]){1, T} : NULL);
    else
      a->hidden_scale = test_tensor_init(&p->t_hidden_scale, p->hidden_scale, c->scale_dtype,
                                         c->alt_scale_shapes ? 2 : 1, (int64_t[]){T, 1}, NULL);
  }
  if (c->uses_logits) {
    int64_t padded[2] = {E + 3, 1}, transposed[2] = {1, T};
    const int64_t* st = NULL;
    if (c->logits_layout == PG_LOGITS_PADDED) st = padded;
    if (c->logits_layout == PG_LOGITS_TRANSPOSED) st = transposed;
    a->router_logits = test_tensor_init(&p->t_logits, p->logits, c->logits_dtype, 2, (int64_t[]){T, E}, st);
  }
  if (c->uses_bias) a->routing_bias = test_tensor_init(&p->t_bias, p->bias, c->bias_dtype, 1, (int64_t[]){E}, NULL);
  if (c->uses_topk_input) {
    a->topk_ids = test_tensor_init(&p->t_ids, p->topk_ids, c->ids_dtype, 2, (int64_t[]){T, K}, NULL);
    a->topk_weights = test_tensor_init(&p->t_tw, p->topk_weights, c->topk_weights_dtype, 2, (int64_t[]){T, K}, NULL);
  }
  a->w13 = test_tensor_init(&p->t_w13, p->w13, TEST_E4M3, 3, (int64_t[]){El, 2 * I, H}, NULL);
  a->w2 = test_tensor_init(&p->t_w2, p->w2, TEST_E4M3, 3, (int64_t[]){El, H, I}, NULL);
  switch (c->quant_format) {
    case FP8MOE_QUANT_FP8_PER_TENSOR:
      a->w13_scale = test_tensor_init(&p->t_w13s, p->w13_scale, c->scale_dtype, 1, (int64_t[]){El}, NULL);
      a->w2_scale = test_tensor_init(&p->t_w2s, p->w2_scale, c->scale_dtype, 1, (int64_t[]){El}, NULL);
      break;
    case FP8MOE_QUANT_FP8_BLOCK128:
      a->w13_scale = test_tensor_init(&p->t_w13s, p->w13_scale, c->scale_dtype, 3,
                                      (int64_t[]){El, 2 * I / 128, H / 128}, NULL);
      a->w2_scale = test_tensor_init(&p->t_w2s, p->w2_scale, c->scale_dtype, 3, (int64_t[]){El, H / 128, I / 128},
                                     NULL);
      break;
    default:
      a->w13_scale = test_tensor_init(&p->t_w13s, p->w13_scale, c->scale_dtype, 2, (int64_t[]){El, 2 * I}, NULL);
      a->w2_scale = test_tensor_init(&p->t_w2s, p->w2_scale, c->scale_dtype, 2, (int64_t[]){El, H}, NULL);
      break;
  }
  if (c->a1_static)
    a->a1_scale = test_tensor_init(&p->t_a1, p->a1_scale, c->scale_dtype, c->alt_scale_shapes ? 1 : 0,
                                   (int64_t[]){1}, NULL);
  if (c->a2_static)
    a->a2_scale = test_tensor_init(&p->t_a2, p->a2_scale, c->scale_dtype, c->alt_scale_shapes ? 0 : 1,
                                   (int64_t[]){1}, NULL);
  a->output = test_tensor_init(&p->t_out, p->output, c->output_dtype, 2, (int64_t[]){T, H},
                               c->output_row_pad ? (int64_t[]){H + c->output_row_pad, 1} : NULL);
  if (c->want_routing_out) {
    a->routing_ids_out = test_tensor_init(&p->t_ids_out, p->ids_out, TEST_I32, 2, (int64_t[]){T, K}, NULL);
    a->routing_weights_out = test_tensor_init(&p->t_w_out, p->weights_out, TEST_F32, 2, (int64_t[]){T, K}, NULL);
  }

  ref_problem* r = &p->ref;
  memset(r, 0, sizeof(*r));
  r->T = T;
  r->H = H;
  r->I = I;
  r->E = c->E;
  r->E_local = (int32_t)El;
  r->local_offset = c->local_offset;
  r->K = c->K;
  r->routing_method = c->routing_method;
  r->quant_format = c->quant_format;
  r->activation = c->activation;
  r->gate_up_order = c->gate_up_order;
  r->n_group = c->routing_method == FP8MOE_ROUTING_DEEPSEEK_V3 ? c->n_group : 1;
  r->topk_group = c->routing_method == FP8MOE_ROUTING_DEEPSEEK_V3 ? c->topk_group : 1;
  r->routed_scaling_factor = c->routed_scaling_factor != 0.0f ? (double)c->routed_scaling_factor : 1.0;
  r->weight_on_input = c->weight_on_input;
  to_ref_array(&r->hidden, &p->t_hidden, 1);
  to_ref_array(&r->hidden_scale, &p->t_hidden_scale, hidden_fp8);
  to_ref_array(&r->logits, &p->t_logits, c->uses_logits);
  to_ref_array(&r->bias, &p->t_bias, c->uses_bias);
  to_ref_array(&r->topk_ids, &p->t_ids, c->uses_topk_input);
  to_ref_array(&r->topk_weights, &p->t_tw, c->uses_topk_input);
  to_ref_array(&r->w13, &p->t_w13, 1);
  to_ref_array(&r->w13_scale, &p->t_w13s, 1);
  to_ref_array(&r->w2, &p->t_w2, 1);
  to_ref_array(&r->w2_scale, &p->t_w2s, 1);
  to_ref_array(&r->a1_scale, &p->t_a1, c->a1_static);
  to_ref_array(&r->a2_scale, &p->t_a2, c->a2_static);
}

void pg_free(pg_problem* p) {
  void* bufs[] = {p->hidden, p->hidden_scale, p->logits, p->bias, p->topk_ids, p->topk_weights, p->w13,
                  p->w13_scale, p->w2, p->w2_scale, p->a1_scale, p->a2_scale, p->output, p->ids_out,
                  p->weights_out};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); ++i) free(bufs[i]);
  memset(p, 0, sizeof(*p));
}

void pg_poison(pg_problem* p) {
  memset(p->output, 0xFF, p->output_bytes);
  memset(p->ids_out, 0xFF, sizeof(int32_t) * (size_t)(p->cfg.T * p->cfg.K));
  memset(p->weights_out, 0xFF, sizeof(float) * (size_t)(p->cfg.T * p->cfg.K));
}

/* Storage index of output element i (row-major over [T,H]). */
static int64_t output_index(const pg_problem* p, int64_t i) {
  return i / p->cfg.H * (p->cfg.H + p->cfg.output_row_pad) + i % p->cfg.H;
}

int pg_output_is_poison(const pg_problem* p, int64_t i) {
  int sz = ref_dt_size(pg_ref_dt(p->cfg.output_dtype));
  const unsigned char* b = (const unsigned char*)p->output + output_index(p, i) * sz;
  for (int j = 0; j < sz; ++j)
    if (b[j] != 0xFF) return 0;
  return 1;
}

int pg_output_untouched(const pg_problem* p) {
  for (int64_t i = 0; i < p->cfg.T * p->cfg.H; ++i)
    if (!pg_output_is_poison(p, i)) return 0;
  return 1;
}

double pg_output_at(const pg_problem* p, int64_t i) {
  return pg_get(p->output, p->cfg.output_dtype, output_index(p, i));
}

void pg_describe_config(const pg_config* c, char* buf, size_t size) {
  static const char* const layouts[] = {"", "(padded)", "(transposed)"};
  snprintf(buf, size,
           "%s/%s/%s %s T=%lld H=%lld I=%lld E=%d K=%d groups=%d/%d El=%d@%d scale=%g logits=%s%s bias=%s "
           "hidden=%s%s out=%s%s scales=%s%s a1=%s a2=%s%s%s seed=%llu",
           method_name(c->routing_method), format_name(c->quant_format),
           c->activation == FP8MOE_ACTIVATION_GEGLU ? "GEGLU" : "SWIGLU",
           c->gate_up_order == FP8MOE_GATE_UP_UP_FIRST ? "up_first" : "gate_first", (long long)c->T,
           (long long)c->H, (long long)c->I, c->E, c->K, c->n_group, c->topk_group, c->E_local, c->local_offset,
           (double)c->routed_scaling_factor, c->uses_logits ? pg_dtype_name(c->logits_dtype) : "-",
           c->uses_logits ? layouts[c->logits_layout % 3] : "", c->uses_bias ? pg_dtype_name(c->bias_dtype) : "-",
           pg_dtype_name(c->hidden_dtype),
           c->hidden_scale_transposed && pg_ref_dt(c->hidden_dtype) == REF_E4M3 &&
                   c->quant_format == FP8MOE_QUANT_FP8_BLOCK128
               ? "(scales transposed)"
               : "",
           pg_dtype_name(c->output_dtype), c->output_row_pad ? "(rows padded)" : "", pg_dtype_name(c->scale_dtype),
           c->alt_scale_shapes ? "(alt shapes)" : "",
           c->a1_static ? "static" : "dyn",
           c->a2_static ? "static" : "dyn", c->uses_topk_input ? " ids=" : "",
           c->uses_topk_input ? pg_dtype_name(c->ids_dtype) : "", (unsigned long long)c->seed);
}
