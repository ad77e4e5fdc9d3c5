/* test_contract_sweep.c — the capability table, read through the public query_capabilities, must be what
 * query_support enforces: every row named with its pinned id; every accepted dtype of every argument
 * accepted and a sample of others refused with a message naming the argument and the accepted set; every
 * limit accepted at its bound and refused past it; every method × format × activation row accepted on the
 * CPU backend. query_support reads no tensor data, so the tensors here carry aligned dummy pointers. The
 * test iterates the table: a new row is covered without new test code (new methods need a rule in
 * method_config only when they read new arguments). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "baseline_problem.h"
#include "fp8moe.h"
#include "plugin_host.h"

static const fp8moe_api* api;
static fp8moe_context* ctx;
static fp8moe_capabilities caps;

/* ---- a problem description with dummy data pointers ---- */

typedef baseline_config config;
typedef baseline_problem problem;

/* Distinct, 64 KiB-aligned, never dereferenced (query_support reads no data), and 1 TiB apart so that even
 * tensors at the limits do not overlap (outputs may not alias inputs). */
static void* dummy(const problem* p, int32_t arg, fp8moe_dtype dt, int64_t n) {
  (void)p;
  (void)dt;
  (void)n;
  return (void*)(uintptr_t)(((uint64_t)1 << 44) + ((uint64_t)1 << 40) * (uint64_t)arg);
}

/* Makes c a valid call for its method (group and K rules, PRECOMPUTED inputs). */
static void method_config(config* c, const fp8moe_routing_method_info* m) {
  c->method = m->id;
  if (m->flags & FP8MOE_ROUTING_TOP1_ONLY) c->K = 1;
  if (m->flags & FP8MOE_ROUTING_USES_GROUPS) {
    c->E = 16;
    c->n_group = 4;
    c->topk_group = 2;
    c->K = 4;
  }
  if (m->flags & FP8MOE_ROUTING_USES_BIAS) c->with_bias = 1;
}

static void build(problem* p, const config* c) { baseline_build(p, c, dummy); }

static int32_t support(problem* p) {
  p->message[0] = '\0';
  return api->query_support(ctx, &p->args);
}

/* ---- the table's rows ---- */

typedef struct pinned {
  const char* name;
  int32_t id;
} pinned;

static const pinned pinned_methods[] = {
    {"DEFAULT", FP8MOE_ROUTING_DEFAULT},
    {"RENORMALIZE", FP8MOE_ROUTING_RENORMALIZE},
    {"DEEPSEEK_V3", FP8MOE_ROUTING_DEEPSEEK_V3},
    {"LLAMA4", FP8MOE_ROUTING_LLAMA4},
    {"RENORMALIZE_NAIVE", FP8MOE_ROUTING_RENORMALIZE_NAIVE},
    {"TOPK", FP8MOE_ROUTING_TOPK},
    {"SIGMOID", FP8MOE_ROUTING_SIGMOID},
    {"SIGMOID_RENORM", FP8MOE_ROUTING_SIGMOID_RENORM},
    {"TOPK_SIGMOID", FP8MOE_ROUTING_TOPK_SIGMOID},
    {"PRECOMPUTED", FP8MOE_ROUTING_PRECOMPUTED},
};
static const pinned pinned_formats[] = {
    {"FP8_PER_TENSOR", FP8MOE_QUANT_FP8_PER_TENSOR},
    {"FP8_BLOCK128", FP8MOE_QUANT_FP8_BLOCK128},
    {"FP8_PER_CHANNEL", FP8MOE_QUANT_FP8_PER_CHANNEL},
};
static const pinned pinned_activations[] = {
    {"SWIGLU", FP8MOE_ACTIVATION_SWIGLU},
    {"GEGLU", FP8MOE_ACTIVATION_GEGLU},
};
/* The argument names are the fields of fp8moe_moe_args, as every message spells them. */
static const pinned pinned_arguments[] = {
    {"hidden_states", FP8MOE_ARG_HIDDEN_STATES},
    {"hidden_scale", FP8MOE_ARG_HIDDEN_SCALE},
    {"router_logits", FP8MOE_ARG_ROUTER_LOGITS},
    {"routing_bias", FP8MOE_ARG_ROUTING_BIAS},
    {"topk_ids", FP8MOE_ARG_TOPK_IDS},
    {"topk_weights", FP8MOE_ARG_TOPK_WEIGHTS},
    {"w13", FP8MOE_ARG_W13},
    {"w13_scale", FP8MOE_ARG_W13_SCALE},
    {"w2", FP8MOE_ARG_W2},
    {"w2_scale", FP8MOE_ARG_W2_SCALE},
    {"a1_scale", FP8MOE_ARG_A1_SCALE},
    {"a2_scale", FP8MOE_ARG_A2_SCALE},
    {"output", FP8MOE_ARG_OUTPUT},
    {"routing_ids_out", FP8MOE_ARG_ROUTING_IDS_OUT},
    {"routing_weights_out", FP8MOE_ARG_ROUTING_WEIGHTS_OUT},
    {"device_status", FP8MOE_ARG_DEVICE_STATUS},
};
#define COUNT(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

/* Checks that `rows` (ids and names read through the table) hold every pinned entry exactly once. */
static void check_pinned(const char* kind, const pinned* want, uint32_t n_want, const int32_t* ids,
                         const char* const* names, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT(names[i] != NULL && names[i][0] != '\0', "%s row %u has no name", kind, i);
    EXPECT(ids[i] >= 0, "%s row %u has id %d", kind, i, ids[i]);
    for (uint32_t j = 0; j < i; ++j) EXPECT(ids[i] != ids[j], "%s rows %u and %u share id %d", kind, j, i, ids[i]);
  }
  for (uint32_t w = 0; w < n_want; ++w) {
    int found = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (names[i] && strcmp(names[i], want[w].name) == 0) {
        ++found;
        EXPECT(ids[i] == want[w].id, "%s %s has id %d, pinned %d", kind, want[w].name, ids[i], want[w].id);
      }
    }
    EXPECT(found == 1, "%s %s appears %d times in the table", kind, want[w].name, found);
  }
}

static void check_rows(void) {
  int32_t ids[64];
  const char* names[64];
  EXPECT(caps.routing_method_count > 0 && caps.routing_method_count <= 64 && caps.routing_methods,
         "routing_method_count %u", caps.routing_method_count);
  EXPECT(caps.quant_format_count > 0 && caps.quant_format_count <= 64 && caps.quant_formats,
         "quant_format_count %u", caps.quant_format_count);
  EXPECT(caps.activation_count > 0 && caps.activation_count <= 64 && caps.activations, "activation_count %u",
         caps.activation_count);
  EXPECT(caps.argument_count >= FP8MOE_ARG_COUNT_V1_0 && caps.argument_count <= 64 && caps.arguments,
         "argument_count %u", caps.argument_count);
  if (test_failures) return;

  for (uint32_t i = 0; i < caps.routing_method_count; ++i) {
    const fp8moe_routing_method_info* m = &caps.routing_methods[i];
    ids[i] = m->id;
    names[i] = m->name;
    EXPECT(m->summary && m->summary[0], "method %s has no summary", m->name ? m->name : "?");
    EXPECT(m->backends & FP8MOE_BACKEND_MASK_CPU, "method %s lacks the CPU reference", m->name ? m->name : "?");
    EXPECT(!(m->flags & FP8MOE_ROUTING_USES_TOPK_INPUT) || !(m->flags & FP8MOE_ROUTING_USES_LOGITS),
           "method %s reads both logits and topk input", m->name ? m->name : "?");
  }
  check_pinned("routing method", pinned_methods, COUNT(pinned_methods), ids, names, caps.routing_method_count);

  for (uint32_t i = 0; i < caps.quant_format_count; ++i) {
    const fp8moe_quant_format_info* q = &caps.quant_formats[i];
    ids[i] = q->id;
    names[i] = q->name;
    EXPECT(q->summary && q->summary[0], "format %s has no summary", q->name ? q->name : "?");
    EXPECT(q->k_multiple >= 1, "format %s has k_multiple %d", q->name ? q->name : "?", q->k_multiple);
    EXPECT(q->backends & FP8MOE_BACKEND_MASK_CPU, "format %s lacks the CPU reference", q->name ? q->name : "?");
  }
  check_pinned("quant format", pinned_formats, COUNT(pinned_formats), ids, names, caps.quant_format_count);

  for (uint32_t i = 0; i < caps.activation_count; ++i) {
    ids[i] = caps.activations[i].id;
    names[i] = caps.activations[i].name;
    EXPECT(caps.activations[i].backends & FP8MOE_BACKEND_MASK_CPU, "activation %s lacks the CPU reference",
           names[i] ? names[i] : "?");
  }
  check_pinned("activation", pinned_activations, COUNT(pinned_activations), ids, names, caps.activation_count);

  for (uint32_t i = 0; i < caps.argument_count; ++i) {
    const fp8moe_argument_info* a = &caps.arguments[i];
    ids[i] = a->id;
    names[i] = a->name;
    EXPECT(a->dtype_count > 0 && a->dtypes, "argument %s has no dtypes", a->name ? a->name : "?");
    EXPECT(a->alignment >= 1 && (a->alignment & (a->alignment - 1)) == 0, "argument %s alignment %u",
           a->name ? a->name : "?", a->alignment);
    EXPECT(a->shape && a->shape[0] && a->when && a->when[0], "argument %s lacks shape/when text",
           a->name ? a->name : "?");
    EXPECT(!((a->flags & FP8MOE_ARGUMENT_ANY_STRIDES) && (a->flags & FP8MOE_ARGUMENT_INNER_CONTIGUOUS)),
           "argument %s is both ANY_STRIDES and INNER_CONTIGUOUS", a->name ? a->name : "?");
    for (uint32_t d = 0; d < a->dtype_count && a->dtypes; ++d)
      EXPECT(a->dtypes[d].lanes == 1, "argument %s lists a vector dtype", a->name ? a->name : "?");
  }
  check_pinned("argument", pinned_arguments, COUNT(pinned_arguments), ids, names, caps.argument_count);
}

/* ---- dtypes per argument ---- */

static const char* dtype_name(fp8moe_dtype d) {
  if (d.lanes != 1) return NULL;
  if (d.code == FP8MOE_DTYPE_FLOAT && d.bits == 32) return "float32";
  if (d.code == FP8MOE_DTYPE_FLOAT && d.bits == 16) return "float16";
  if (d.code == FP8MOE_DTYPE_BFLOAT && d.bits == 16) return "bfloat16";
  if (d.code == FP8MOE_DTYPE_FLOAT8_E4M3FN && d.bits == 8) return "float8_e4m3fn";
  if (d.code == FP8MOE_DTYPE_INT && d.bits == 32) return "int32";
  if (d.code == FP8MOE_DTYPE_INT && d.bits == 64) return "int64";
  return NULL;
}

static int same_dtype(fp8moe_dtype a, fp8moe_dtype b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

static int accepts(const fp8moe_argument_info* a, fp8moe_dtype d) {
  for (uint32_t i = 0; i < a->dtype_count; ++i)
    if (same_dtype(a->dtypes[i], d)) return 1;
  return 0;
}

/* A valid call in which argument `arg` is present. */
static config config_for_argument(int32_t arg) {
  config c = baseline_config_default();
  switch (arg) {
    case FP8MOE_ARG_HIDDEN_SCALE: c.hidden_dt = TEST_E4M3; break;
    case FP8MOE_ARG_ROUTING_BIAS:
      c.method = FP8MOE_ROUTING_DEEPSEEK_V3;
      c.E = 16;
      c.n_group = 4;
      c.topk_group = 2;
      c.K = 4;
      c.with_bias = 1;
      break;
    case FP8MOE_ARG_TOPK_IDS:
    case FP8MOE_ARG_TOPK_WEIGHTS: c.method = FP8MOE_ROUTING_PRECOMPUTED; break;
    case FP8MOE_ARG_A1_SCALE:
    case FP8MOE_ARG_A2_SCALE:
      c.format = FP8MOE_QUANT_FP8_PER_TENSOR;
      c.with_static_scales = 1;
      break;
    default: break;
  }
  return c;
}

static void check_argument_dtypes(void) {
  const fp8moe_dtype universe[] = {
      TEST_F32, TEST_BF16, TEST_F16, TEST_E4M3, TEST_I32, TEST_I64, TEST_I8, TEST_E5M2,
      {FP8MOE_DTYPE_FLOAT, 64, 1},  /* fp64 */
      {FP8MOE_DTYPE_UINT, 8, 1},    /* uint8 */
      {FP8MOE_DTYPE_FLOAT, 32, 2},  /* float32 x2 */
      {FP8MOE_DTYPE_BFLOAT, 16, 2}, /* bfloat16 x2 */
      {7, 8, 1},                    /* an unassigned code */
  };
  problem p;
  for (uint32_t i = 0; i < caps.argument_count; ++i) {
    const fp8moe_argument_info* a = &caps.arguments[i];
    if (a->id < 0 || a->id >= FP8MOE_ARG_COUNT_V1_0) continue; /* rows of later minors: no builder yet */
    config c = config_for_argument(a->id);
    build(&p, &c);
    int32_t st = support(&p);
    EXPECT(st == FP8MOE_STATUS_OK, "%s: baseline refused (%d): %s", a->name, st, p.message);
    for (uint32_t d = 0; d < a->dtype_count; ++d) {
      build(&p, &c);
      p.t[a->id].t.dtype = a->dtypes[d];
      /* e4m3fn hidden states come with their scales (build() described them already) */
      if (a->id == FP8MOE_ARG_HIDDEN_STATES && a->dtypes[d].code == FP8MOE_DTYPE_FLOAT8_E4M3FN)
        p.args.hidden_scale = &p.t[FP8MOE_ARG_HIDDEN_SCALE].t;
      st = support(&p);
      EXPECT(st == FP8MOE_STATUS_OK, "%s: accepted dtype %s refused (%d): %s", a->name,
             dtype_name(a->dtypes[d]) ? dtype_name(a->dtypes[d]) : "?", st, p.message);
    }
    for (uint32_t u = 0; u < COUNT(universe); ++u) {
      if (accepts(a, universe[u])) continue;
      build(&p, &c);
      p.t[a->id].t.dtype = universe[u];
      st = support(&p);
      EXPECT(st == FP8MOE_STATUS_UNSUPPORTED_DTYPE, "%s: dtype code %u bits %u lanes %u gave %d, expected "
             "UNSUPPORTED_DTYPE: %s", a->name, universe[u].code, universe[u].bits, universe[u].lanes, st, p.message);
      EXPECT(strstr(p.message, a->name) != NULL, "%s: message does not name the argument: %s", a->name, p.message);
      for (uint32_t d = 0; d < a->dtype_count; ++d) {
        const char* n = dtype_name(a->dtypes[d]);
        EXPECT(n && strstr(p.message, n), "%s (code %u bits %u lanes %u): message does not list accepted %s: %s",
               a->name, universe[u].code, universe[u].bits, universe[u].lanes, n ? n : "?", p.message);
      }
    }
  }
}

/* ---- limits ---- */

static void expect_refused(problem* p, const char* what) {
  int32_t st = support(p);
  EXPECT(st == FP8MOE_STATUS_UNSUPPORTED || st == FP8MOE_STATUS_INVALID_ARGUMENT,
         "%s: status %d, expected a refusal (UNSUPPORTED/INVALID_ARGUMENT)", what, st);
  EXPECT(p->message[0] != '\0', "%s: refused without a message", what);
}

static void expect_accepted(problem* p, const char* what) {
  int32_t st = support(p);
  EXPECT(st == FP8MOE_STATUS_OK, "%s: refused (%d): %s", what, st, p->message);
}

static void check_limits(void) {
  const fp8moe_limits L = caps.limits;
  EXPECT(L.max_tokens > 0 && L.max_hidden > 0 && L.max_intermediate > 0 && L.max_experts > 0 && L.max_top_k > 0 &&
             L.max_groups > 0 && L.min_group_size >= 1 && L.max_group_size >= L.min_group_size,
         "limits not all positive");
  EXPECT(L.max_experts >= 384 && L.max_top_k >= 8, "limits below the model shapes (E 384, K 8)");
  problem p;
  char what[128];
  for (uint32_t f = 0; f < caps.quant_format_count; ++f) {
    const fp8moe_quant_format_info* q = &caps.quant_formats[f];
    const int64_t km = q->k_multiple;
    config c = baseline_config_default();
    c.format = q->id;
    c.H = c.I = 2 * km > 256 ? 2 * km : 256;
    c.H -= c.H % km;
    c.I = c.H;

    config t = c;
    t.T = L.max_tokens;
    build(&p, &t);
    snprintf(what, sizeof what, "%s T = max_tokens %lld", q->name, (long long)L.max_tokens);
    expect_accepted(&p, what);
    t.T = L.max_tokens + 1;
    build(&p, &t);
    snprintf(what, sizeof what, "%s T = max_tokens + 1", q->name);
    expect_refused(&p, what);

    t = c;
    t.H = L.max_hidden - L.max_hidden % km;
    build(&p, &t);
    snprintf(what, sizeof what, "%s H = %lld (max_hidden %lld)", q->name, (long long)t.H, (long long)L.max_hidden);
    expect_accepted(&p, what);
    t.H = L.max_hidden + 1;
    build(&p, &t);
    snprintf(what, sizeof what, "%s H = max_hidden + 1", q->name);
    expect_refused(&p, what);
    t.H = L.max_hidden - L.max_hidden % km + km;
    build(&p, &t);
    snprintf(what, sizeof what, "%s H = %lld (aligned, past max_hidden)", q->name, (long long)t.H);
    expect_refused(&p, what);

    t = c;
    t.I = L.max_intermediate - L.max_intermediate % km;
    build(&p, &t);
    snprintf(what, sizeof what, "%s I = %lld (max_intermediate)", q->name, (long long)t.I);
    expect_accepted(&p, what);
    t.I = L.max_intermediate + 1;
    build(&p, &t);
    snprintf(what, sizeof what, "%s I = max_intermediate + 1", q->name);
    expect_refused(&p, what);
    t.I = L.max_intermediate - L.max_intermediate % km + km;
    build(&p, &t);
    snprintf(what, sizeof what, "%s I = %lld (aligned, past max_intermediate)", q->name, (long long)t.I);
    expect_refused(&p, what);

    if (km > 1) {
      t = c;
      t.H = c.H + km / 2;
      build(&p, &t);
      snprintf(what, sizeof what, "%s H = %lld (not a multiple of k_multiple %lld)", q->name, (long long)t.H,
               (long long)km);
      expect_refused(&p, what);
      t = c;
      t.I = c.I + km / 2;
      build(&p, &t);
      snprintf(what, sizeof what, "%s I = %lld (not a multiple of k_multiple %lld)", q->name, (long long)t.I,
               (long long)km);
      expect_refused(&p, what);
      t = c;
      t.H = km;
      t.I = km;
      build(&p, &t);
      snprintf(what, sizeof what, "%s H = I = k_multiple", q->name);
      expect_accepted(&p, what);
    }
  }

  config c = baseline_config_default();
  c.E = L.max_experts;
  build(&p, &c);
  expect_accepted(&p, "E = max_experts");
  c.E = L.max_experts + 1;
  build(&p, &c);
  expect_refused(&p, "E = max_experts + 1");

  c = baseline_config_default();
  c.E = L.max_top_k + 1 > 8 ? L.max_top_k + 1 : 8;
  c.K = L.max_top_k;
  build(&p, &c);
  expect_accepted(&p, "K = max_top_k");
  c.K = L.max_top_k + 1;
  build(&p, &c);
  expect_refused(&p, "K = max_top_k + 1");

  /* groups: DEEPSEEK_V3 with n_group at and past max_groups, group sizes at and past their bounds */
  config g = baseline_config_default();
  g.method = FP8MOE_ROUTING_DEEPSEEK_V3;
  g.with_bias = 1;
  g.K = 1;
  g.topk_group = 1;
  g.n_group = L.max_groups;
  g.E = L.max_groups * (L.min_group_size > 2 ? L.min_group_size : 2);
  if (g.E <= L.max_experts) {
    build(&p, &g);
    snprintf(what, sizeof what, "n_group = max_groups %d (E %d)", L.max_groups, g.E);
    expect_accepted(&p, what);
  }
  g.n_group = L.max_groups + 1;
  g.E = (L.max_groups + 1) * (L.min_group_size > 2 ? L.min_group_size : 2);
  build(&p, &g);
  snprintf(what, sizeof what, "n_group = max_groups + 1 (E %d)", g.E);
  expect_refused(&p, what);

  if (L.min_group_size > 1) {
    g.n_group = 4;
    g.E = 4 * L.min_group_size;
    build(&p, &g);
    snprintf(what, sizeof what, "group size = min_group_size %d", L.min_group_size);
    expect_accepted(&p, what);
    g.E = 4 * (L.min_group_size - 1);
    build(&p, &g);
    snprintf(what, sizeof what, "group size = min_group_size - 1 (E %d, n_group 4)", g.E);
    expect_refused(&p, what);
  }
  /* n_group = 1 (MiniMax/GLM/Kimi style) is legal at any E */
  g.n_group = 1;
  g.E = 384;
  build(&p, &g);
  expect_accepted(&p, "DEEPSEEK_V3 n_group 1, E 384");
  if ((int64_t)L.max_group_size + 1 <= L.max_experts) {
    g.E = L.max_group_size;
    build(&p, &g);
    expect_accepted(&p, "group size = max_group_size");
    g.E = L.max_group_size + 1;
    build(&p, &g);
    expect_refused(&p, "group size = max_group_size + 1");
  }
}

/* ---- every method × format × activation of the table ---- */

static void check_combinations(void) {
  problem p;
  char what[160];
  for (uint32_t m = 0; m < caps.routing_method_count; ++m) {
    const fp8moe_routing_method_info* mi = &caps.routing_methods[m];
    if (!(mi->backends & FP8MOE_BACKEND_MASK_CPU)) continue;
    for (uint32_t f = 0; f < caps.quant_format_count; ++f) {
      const fp8moe_quant_format_info* qi = &caps.quant_formats[f];
      if (!(qi->backends & FP8MOE_BACKEND_MASK_CPU)) continue;
      for (uint32_t a = 0; a < caps.activation_count; ++a) {
        const fp8moe_activation_info* ai = &caps.activations[a];
        if (!(ai->backends & FP8MOE_BACKEND_MASK_CPU)) continue;
        for (int variant = 0; variant < 4; ++variant) {
          config c = baseline_config_default();
          c.format = qi->id;
          c.activation = ai->id;
          c.H = c.I = qi->k_multiple > 128 ? qi->k_multiple : 128;
          c.H *= 2;
          method_config(&c, mi);
          const char* vname = "bf16 hidden";
          if (variant == 1) {
            c.hidden_dt = TEST_E4M3;
            c.hidden_scale_ndim = -1;
            vname = "e4m3 hidden, first scale form";
          } else if (variant == 2) {
            c.hidden_dt = TEST_E4M3;
            c.hidden_scale_ndim = qi->id == FP8MOE_QUANT_FP8_PER_CHANNEL ? 2 : 1;
            vname = "e4m3 hidden, second scale form";
          } else if (variant == 3) {
            c.hidden_dt = TEST_F16;
            c.with_outputs = 0;
            c.E_local = c.E / 2;
            vname = "fp16 hidden, half the experts local";
            if (qi->id == FP8MOE_QUANT_FP8_PER_TENSOR) c.with_static_scales = 1;
          }
          if (variant == 2 && qi->id == FP8MOE_QUANT_FP8_BLOCK128) continue; /* one form only */
          build(&p, &c);
          if (variant == 3) p.args.local_expert_offset = c.E / 2;
          snprintf(what, sizeof what, "%s x %s x %s (%s)", mi->name, qi->name, ai->name, vname);
          expect_accepted(&p, what);
        }
      }
    }
  }
  /* ids outside the table are refused with a message naming the field */
  const int32_t bad_ids[] = {-1, 999, 1000, 0x7fffffff};
  for (uint32_t b = 0; b < COUNT(bad_ids); ++b) {
    config c = baseline_config_default();
    build(&p, &c);
    p.args.routing_method = bad_ids[b];
    int32_t st = support(&p);
    EXPECT(st != FP8MOE_STATUS_OK && strstr(p.message, "routing_method"), "routing_method %d: %d %s", bad_ids[b], st,
           p.message);
    build(&p, &c);
    p.args.quant_format = bad_ids[b];
    st = support(&p);
    EXPECT(st != FP8MOE_STATUS_OK && strstr(p.message, "quant_format"), "quant_format %d: %d %s", bad_ids[b], st,
           p.message);
    build(&p, &c);
    p.args.activation = bad_ids[b];
    st = support(&p);
    EXPECT(st != FP8MOE_STATUS_OK && strstr(p.message, "activation"), "activation %d: %d %s", bad_ids[b], st,
           p.message);
  }
}

int main(void) {
  test_plugin plugin;
  if (test_plugin_open(NULL, &plugin) != 0) return 1;
  api = plugin.api;

  int32_t st = baseline_cpu_context(api, 1, &ctx);
  EXPECT(st == FP8MOE_STATUS_OK && ctx, "CPU context_create: %d", st);
  if (!ctx) {
    return test_finish("test_contract_sweep", test_checks_run);
  }

  /* the table with no context describes the CPU backend; the CPU context's table is the same data */
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  st = api->query_capabilities(NULL, &caps);
  EXPECT(st == FP8MOE_STATUS_OK && caps.backend == FP8MOE_BACKEND_CPU, "query_capabilities(NULL): %d backend %d", st,
         caps.backend);
  fp8moe_capabilities cpu_caps;
  memset(&cpu_caps, 0, sizeof cpu_caps);
  cpu_caps.struct_size = sizeof cpu_caps;
  st = api->query_capabilities(ctx, &cpu_caps);
  EXPECT(st == FP8MOE_STATUS_OK && cpu_caps.backend == FP8MOE_BACKEND_CPU, "query_capabilities(cpu): %d", st);
  EXPECT(cpu_caps.struct_size == sizeof cpu_caps, "query_capabilities overwrote struct_size");
  EXPECT(cpu_caps.routing_methods == caps.routing_methods && cpu_caps.arguments == caps.arguments &&
             cpu_caps.routing_method_count == caps.routing_method_count &&
             memcmp(&cpu_caps.limits, &caps.limits, sizeof caps.limits) == 0,
         "the CPU context's table differs from the context-free table");
  EXPECT(api->query_capabilities(NULL, NULL) == FP8MOE_STATUS_INVALID_ARGUMENT, "query_capabilities(NULL, NULL)");

  check_rows();
  if (!test_failures) {
    check_argument_dtypes();
    check_limits();
    check_combinations();
  }

  api->context_destroy(ctx);
  test_plugin_close(&plugin);
  return test_finish("test_contract_sweep", test_checks_run);
}
