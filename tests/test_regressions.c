/* test_regressions.c — the docs/TESTING.md regression cases (each a production bug elsewhere) on the CPU backend,
 * one named sub-check per case and method/format, each compared with ref64 where it computes something:
 *   R1 logits dtypes          R2 fp32 bias decides        R3 large bias, sigmoid methods
 *   R4 all-negative logits    R5 scaling applied once     R6 gate/up orders
 *   R7 DeepSeek refusals      R8 exact ties → lower index R9 block scales transposed
 *   R10 shape refusals        R11 PRECOMPUTED             R12 T = 0, 1, odd
 *   R13 NaN/Inf               R14 expert-parallel shards sum to the full output */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_check.h"

typedef struct env {
  test_plugin tp;
  fp8moe_context* ctx;
  fp8moe_capabilities caps;
  pg_tally tally;
} env;

/* Small shapes: every case runs in well under a second. */
#define RT 8
#define RH 128
#define RI 128
#define RE 16

static int gen(pg_problem* p, const pg_config* c) {
  int rc = pg_generate(p, c);
  CHECK(rc == 0, "problem generation failed");
  return rc == 0;
}

static int run_ok(env* e, pg_problem* p, const char* what) {
  pg_poison(p);
  int32_t st = pg_run(&e->tp, e->ctx, p);
  CHECK(st == FP8MOE_STATUS_OK, "%s: run status %d: %s", what, st, p->error);
  return st == FP8MOE_STATUS_OK;
}

static int matches_ref(pg_problem* p, const char* what) {
  pg_result r;
  int ok = pg_check(p, &r, NULL);
  CHECK(ok, "%s: against ref64: rel err %.3g, unwritten %lld, non-finite mismatches %lld, ids %lld, weights %lld", what,
        r.rel_err, (long long)r.unwritten, (long long)r.nonfinite_bad, (long long)r.ids_bad, (long long)r.weights_bad);
  return ok;
}

static int run_and_match(env* e, pg_problem* p, const char* what) { return run_ok(e, p, what) && matches_ref(p, what); }

/* run must refuse the (edited) args before any work: status, a message naming `arg`, output untouched.
 * The workspace is sized from the unedited problem so a short workspace cannot be the reason. */
static void expect_refused(env* e, pg_problem* p, size_t ws_bytes, const char* arg, const char* what) {
  pg_poison(p);
  p->error[0] = '\0';
  int32_t qs = e->tp.api->query_support(e->ctx, &p->args);
  void* ws = aligned_alloc(256, (ws_bytes + 255) / 256 * 256 + 256);
  p->args.workspace = ws;
  p->args.workspace_size = ws_bytes + 256;
  int32_t st = e->tp.api->run(e->ctx, &p->args);
  p->args.workspace = NULL;
  p->args.workspace_size = 0;
  free(ws);
  CHECK(st != FP8MOE_STATUS_OK, "%s: run accepted it", what);
  CHECK(qs == st, "%s: query_support says %d, run says %d", what, qs, st);
  CHECK(strstr(p->error, arg) != NULL, "%s: message does not name %s: \"%s\"", what, arg, p->error);
  CHECK(pg_output_untouched(p), "%s: output written on refusal", what);
  printf("         refused (%d): %s\n", st, p->error);
}

static size_t workspace_of(env* e, pg_problem* p) {
  size_t b = 0;
  int32_t st = e->tp.api->query_workspace(e->ctx, &p->args, &b);
  CHECK(st == FP8MOE_STATUS_OK, "query_workspace: %d %s", st, p->error);
  return b;
}

static const fp8moe_routing_method_info* method_row(const env* e, uint32_t i) { return &e->caps.routing_methods[i]; }

/* A configuration for method row m at the regression shapes, honoring the method's flags. */
static void config_for(pg_config* c, const fp8moe_routing_method_info* m, int32_t format, uint64_t seed) {
  int32_t K = (m->flags & FP8MOE_ROUTING_TOP1_ONLY) ? 1 : 4;
  pg_config_init(c, m->id, format, RT, RH, RI, RE, K);
  c->uses_logits = (m->flags & FP8MOE_ROUTING_USES_LOGITS) != 0;
  c->uses_bias = (m->flags & FP8MOE_ROUTING_USES_BIAS) != 0;
  c->uses_topk_input = (m->flags & FP8MOE_ROUTING_USES_TOPK_INPUT) != 0;
  c->weight_on_input = (m->flags & FP8MOE_ROUTING_WEIGHT_ON_INPUT) != 0;
  if (m->flags & FP8MOE_ROUTING_USES_GROUPS) {
    c->n_group = 4;
    c->topk_group = 2;
  }
  c->seed = seed;
}

static void set_logit(pg_problem* p, int64_t t, int64_t e, double v) {
  pg_set(p->logits, p->cfg.logits_dtype, t * p->cfg.E + e, v);
}

#define SUB_BEGIN(name)                                                                                      \
  do {                                                                                                       \
    pg_subcheck_begin(name, &sub_before_);                                                                   \
  } while (0)
#define SUB_END(name) pg_subcheck_end(&e->tally, name, sub_before_)

/* ---- R1: every logits method gives the same routing and output for fp32, bf16, fp16 logits holding the
 * same (exactly representable) values. */
static void r1_logits_dtypes(env* e) {
  int sub_before_;
  for (uint32_t mi = 0; mi < e->caps.routing_method_count; ++mi) {
    const fp8moe_routing_method_info* m = method_row(e, mi);
    if (!(m->flags & FP8MOE_ROUTING_USES_LOGITS)) continue;
    char name[160];
    snprintf(name, sizeof name, "R1 logits fp32/bf16/fp16 route alike: %s", m->name);
    SUB_BEGIN(name);
    pg_problem base;
    pg_config c;
    config_for(&c, m, FP8MOE_QUANT_FP8_BLOCK128, 100 + mi);
    if (gen(&base, &c)) {
      pg_rng r = {mi};
      for (int64_t t = 0; t < RT; ++t)
        for (int64_t x = 0; x < RE; ++x) set_logit(&base, t, x, (double)((int)(pg_next(&r) % 97) - 48) / 16.0);
      if (run_and_match(e, &base, name)) {
        const fp8moe_dtype others[2] = {TEST_BF16, TEST_F16};
        for (int d = 0; d < 2; ++d) {
          pg_problem q;
          pg_config cq = c;
          cq.logits_dtype = others[d];
          if (!gen(&q, &cq)) continue;
          for (int64_t i = 0; i < RT * RE; ++i) pg_set(q.logits, others[d], i, pg_get(base.logits, TEST_F32, i));
          if (run_ok(e, &q, name)) {
            CHECK(memcmp(q.ids_out, base.ids_out, sizeof(int32_t) * RT * (size_t)c.K) == 0,
                  "%s: %s logits select other experts than fp32", name, pg_dtype_name(others[d]));
            CHECK(memcmp(q.weights_out, base.weights_out, sizeof(float) * RT * (size_t)c.K) == 0,
                  "%s: %s logits give other weights than fp32", name, pg_dtype_name(others[d]));
            CHECK(memcmp(q.output, base.output, base.output_bytes) == 0, "%s: %s logits give another output", name,
                  pg_dtype_name(others[d]));
          }
          pg_free(&q);
        }
      }
      pg_free(&base);
    }
    SUB_END(name);
  }
}

/* ---- R2: a bias whose bf16 rounding ties two experts; fp32 must decide (and a bf16 bias tensor ties). */
static void r2_fp32_bias(env* e) {
  int sub_before_;
  const int groups[2][2] = {{1, 1}, {4, 2}};
  for (int g = 0; g < 2; ++g) {
    char name[160];
    snprintf(name, sizeof name, "R2 fp32 bias decides the selection (bf16 would tie): n_group %d", groups[g][0]);
    SUB_BEGIN(name);
    const fp8moe_dtype bias_dts[2] = {TEST_F32, TEST_BF16};
    for (int b = 0; b < 2; ++b) {
      pg_config c;
      pg_config_init(&c, FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_QUANT_FP8_PER_CHANNEL, RT, RH, RI, RE, 1);
      c.n_group = groups[g][0];
      c.topk_group = groups[g][1];
      c.bias_dtype = bias_dts[b];
      c.seed = 200 + (uint64_t)g;
      pg_problem p;
      if (!gen(&p, &c)) continue;
      for (int64_t t = 0; t < RT; ++t)
        for (int64_t x = 0; x < RE; ++x) set_logit(&p, t, x, x < 2 ? 0.25 : -4.0);
      /* 1 + 2^-20 is an fp32 value whose bf16 rounding is 1.0 */
      float b0 = 1.0f, b1 = 1.0f + 0x1p-20f;
      for (int64_t x = 0; x < RE; ++x) pg_set(p.bias, c.bias_dtype, x, x == 0 ? b0 : x == 1 ? b1 : 0.0);
      if (run_and_match(e, &p, name)) {
        int want = b == 0 ? 1 : 0; /* fp32: expert 1 is higher; bf16 tensor: an exact tie → lower index */
        for (int64_t t = 0; t < RT; ++t)
          CHECK(p.ids_out[t] == want, "%s: %s bias: token %lld picked expert %d, expected %d", name,
                pg_dtype_name(c.bias_dtype), (long long)t, p.ids_out[t], want);
      }
      pg_free(&p);
    }
    SUB_END(name);
  }
}

/* ---- R3: |bias| ≈ 1e4 (DEEPSEEK_V3) and |logit| ≈ 1e4 (SIGMOID*): finite weights summing to the scale. */
static void r3_large_bias(env* e) {
  int sub_before_;
  const int32_t methods[3] = {FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_ROUTING_SIGMOID_RENORM, FP8MOE_ROUTING_SIGMOID};
  for (int mi = 0; mi < 3; ++mi)
    for (int g = 0; g < (mi == 0 ? 2 : 1); ++g) {
      char name[160];
      snprintf(name, sizeof name, "R3 large bias/logits (1e4): finite weights summing to the scale: %s%s",
               mi == 0 ? "DEEPSEEK_V3" : mi == 1 ? "SIGMOID_RENORM" : "SIGMOID", g ? " n_group 4" : "");
      SUB_BEGIN(name);
      pg_config c;
      pg_config_init(&c, methods[mi], FP8MOE_QUANT_FP8_BLOCK128, RT, RH, RI, RE, 4);
      c.routed_scaling_factor = 2.5f;
      if (g) {
        c.n_group = 4;
        c.topk_group = 2;
      }
      c.seed = 300 + (uint64_t)(mi * 2 + g);
      pg_problem p;
      if (gen(&p, &c)) {
        pg_rng r = {c.seed};
        if (mi == 0) {
          for (int64_t x = 0; x < RE; ++x)
            pg_set(p.bias, c.bias_dtype, x, ((pg_next(&r) & 1) ? 1e4 : -1e4) * pg_uniform(&r, 0.5, 1.5));
        } else {
          for (int64_t t = 0; t < RT; ++t)
            for (int64_t x = 0; x < RE; ++x)
              set_logit(&p, t, x, (x % 3 ? -1e4 : 1e4) * pg_uniform(&r, 0.5, 1.5));
        }
        if (run_and_match(e, &p, name)) {
          for (int64_t t = 0; t < RT; ++t) {
            double sum = 0.0;
            for (int k = 0; k < 4; ++k) {
              CHECK(isfinite(p.weights_out[t * 4 + k]), "%s: token %lld weight %d not finite", name, (long long)t, k);
              sum += p.weights_out[t * 4 + k];
            }
            if (mi < 2)
              CHECK(fabs(sum - 2.5) <= 2.5e-6, "%s: token %lld weights sum to %.9g, expected 2.5", name, (long long)t,
                    sum);
          }
        }
        pg_free(&p);
      }
      SUB_END(name);
    }
}

/* ---- R4: all-negative logits with the softmax-then-renormalize methods. */
static void r4_all_negative(env* e) {
  int sub_before_;
  const int32_t methods[3] = {FP8MOE_ROUTING_RENORMALIZE, FP8MOE_ROUTING_RENORMALIZE_NAIVE, FP8MOE_ROUTING_DEFAULT};
  const char* names[3] = {"RENORMALIZE", "RENORMALIZE_NAIVE", "DEFAULT"};
  for (int mi = 0; mi < 3; ++mi) {
    char name[160];
    snprintf(name, sizeof name, "R4 all-negative logits: %s", names[mi]);
    SUB_BEGIN(name);
    pg_config c;
    pg_config_init(&c, methods[mi], FP8MOE_QUANT_FP8_PER_TENSOR, RT, RH, RI, RE, 4);
    c.seed = 400 + (uint64_t)mi;
    pg_problem p;
    if (gen(&p, &c)) {
      pg_rng r = {c.seed};
      for (int64_t t = 0; t < RT; ++t)
        for (int64_t x = 0; x < RE; ++x) set_logit(&p, t, x, pg_uniform(&r, -20.0, -10.0));
      if (run_and_match(e, &p, name))
        for (int64_t t = 0; t < RT && mi < 2; ++t) {
          double sum = 0.0;
          for (int k = 0; k < 4; ++k) {
            CHECK(p.weights_out[t * 4 + k] > 0.0f, "%s: token %lld slot %d weight %g", name, (long long)t, k,
                  (double)p.weights_out[t * 4 + k]);
            sum += p.weights_out[t * 4 + k];
          }
          CHECK(fabs(sum - 1.0) <= 1e-6, "%s: token %lld weights sum to %.9g", name, (long long)t, sum);
        }
      pg_free(&p);
    }
    SUB_END(name);
  }
}

/* ---- R5: routed_scaling_factor ≠ 1 is applied exactly once, for every method. */
static void r5_scaling_once(env* e) {
  int sub_before_;
  for (uint32_t mi = 0; mi < e->caps.routing_method_count; ++mi) {
    const fp8moe_routing_method_info* m = method_row(e, mi);
    char name[160];
    snprintf(name, sizeof name, "R5 routed_scaling_factor 2.5 applied once: %s", m->name);
    SUB_BEGIN(name);
    pg_config c;
    config_for(&c, m, FP8MOE_QUANT_FP8_BLOCK128, 500 + mi);
    pg_problem one, scaled;
    if (gen(&one, &c)) {
      c.routed_scaling_factor = 2.5f;
      if (gen(&scaled, &c)) {
        if (run_and_match(e, &one, name) && run_and_match(e, &scaled, name)) {
          for (int64_t i = 0; i < RT * c.K; ++i) {
            double w1 = one.weights_out[i], w2 = scaled.weights_out[i];
            CHECK(fabs(w2 - 2.5 * w1) <= 1e-6 * fabs(2.5 * w1), "%s: weight %lld: %.9g with 2.5, %.9g without", name,
                  (long long)i, w2, w1);
          }
          if (!c.weight_on_input) { /* the output is linear in the weights: exactly 2.5× up to fp32 rounding */
            double d2 = 0.0, r2 = 0.0;
            for (int64_t i = 0; i < RT * RH; ++i) {
              double a = pg_output_at(&scaled, i), b = 2.5 * pg_output_at(&one, i);
              d2 += (a - b) * (a - b);
              r2 += b * b;
            }
            CHECK(sqrt(d2 / r2) <= 1e-6, "%s: output with 2.5 is %.3g away from 2.5x the output with 1", name,
                  sqrt(d2 / r2));
          }
        }
        pg_free(&scaled);
      }
      pg_free(&one);
    }
    SUB_END(name);
  }
}

/* Swaps the gate and up halves of W13 rows (and their scale rows) of every expert in place. */
static void swap_gate_up(pg_problem* p) {
  const pg_config* c = &p->cfg;
  const int64_t I = c->I, H = c->H, El = c->E_local ? c->E_local : c->E;
  uint8_t* w = (uint8_t*)p->w13;
  for (int64_t x = 0; x < El; ++x)
    for (int64_t i = 0; i < I * H; ++i) {
      uint8_t t = w[x * 2 * I * H + i];
      w[x * 2 * I * H + i] = w[x * 2 * I * H + I * H + i];
      w[x * 2 * I * H + I * H + i] = t;
    }
  int64_t half = 0; /* scale elements per half of an expert's W13 scales */
  if (c->quant_format == FP8MOE_QUANT_FP8_BLOCK128) half = (I / 128) * (H / 128);
  if (c->quant_format == FP8MOE_QUANT_FP8_PER_CHANNEL) half = I;
  for (int64_t x = 0; x < El; ++x)
    for (int64_t i = 0; i < half; ++i) {
      double a = pg_get(p->w13_scale, c->scale_dtype, x * 2 * half + i);
      double b = pg_get(p->w13_scale, c->scale_dtype, x * 2 * half + half + i);
      pg_set(p->w13_scale, c->scale_dtype, x * 2 * half + i, b);
      pg_set(p->w13_scale, c->scale_dtype, x * 2 * half + half + i, a);
    }
}

/* ---- R6: both gate/up orders give the reference result for their layout (and the same numbers). */
static void r6_gate_up(env* e) {
  int sub_before_;
  for (uint32_t fi = 0; fi < e->caps.quant_format_count; ++fi)
    for (uint32_t ai = 0; ai < e->caps.activation_count; ++ai) {
      char name[160];
      snprintf(name, sizeof name, "R6 gate-first and up-first layouts: %s %s", e->caps.quant_formats[fi].name,
               e->caps.activations[ai].name);
      SUB_BEGIN(name);
      pg_config c;
      pg_config_init(&c, FP8MOE_ROUTING_RENORMALIZE, e->caps.quant_formats[fi].id, RT, RH, 256, RE, 4);
      c.activation = e->caps.activations[ai].id;
      c.seed = 600 + fi * 4 + ai;
      pg_problem p;
      if (gen(&p, &c)) {
        void* first = malloc(p.output_bytes);
        if (first && run_and_match(e, &p, name)) {
          memcpy(first, p.output, p.output_bytes);
          swap_gate_up(&p);
          p.cfg.gate_up_order = FP8MOE_GATE_UP_UP_FIRST;
          pg_describe(&p);
          if (run_and_match(e, &p, name)) {
            double d2 = 0.0, r2 = 0.0;
            for (int64_t i = 0; i < RT * RH; ++i) {
              double a = pg_output_at(&p, i), b = pg_get(first, p.cfg.output_dtype, i);
              d2 += (a - b) * (a - b);
              r2 += b * b;
            }
            CHECK(sqrt(d2 / r2) <= 1e-6, "%s: the two layouts differ by %.3g", name, sqrt(d2 / r2));
          }
        }
        free(first);
        pg_free(&p);
      }
      SUB_END(name);
    }
}

/* ---- R7: DeepSeek-V3 group arguments outside their limits are refused with a message. */
static void r7_deepseek_refusals(env* e) {
  int sub_before_;
  const struct {
    int32_t n_group, topk_group, K;
    const char *arg, *what;
  } cases[] = {
      {0, 1, 4, "n_group", "n_group = 0"},
      {3, 1, 4, "n_group", "n_group does not divide E"},
      {4, 5, 4, "topk_group", "topk_group > n_group"},
      {1, 1, 17, "top_k", "K > E"},
      {4, 1, 8, "top_k", "K > topk_group * E / n_group"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char name[160];
    snprintf(name, sizeof name, "R7 DEEPSEEK_V3 refused: %s", cases[i].what);
    SUB_BEGIN(name);
    pg_config c;
    pg_config_init(&c, FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_QUANT_FP8_BLOCK128, RT, RH, RI, RE, 4);
    c.n_group = 4;
    c.topk_group = 2;
    c.seed = 700 + i;
    pg_problem p;
    if (gen(&p, &c)) {
      size_t ws = workspace_of(e, &p);
      p.args.n_group = cases[i].n_group;
      p.args.topk_group = cases[i].topk_group;
      p.args.top_k = cases[i].K;
      expect_refused(e, &p, ws, cases[i].arg, name);
      pg_free(&p);
    }
    SUB_END(name);
  }
}

/* Expected ids for R8 per method kind. */
static void r8_one(env* e, const fp8moe_routing_method_info* m, int grouped) {
  int sub_before_;
  char name[160];
  snprintf(name, sizeof name, "R8 exact ties at the top-K boundary go to the lower index: %s%s", m->name,
           grouped ? " (tied groups)" : "");
  SUB_BEGIN(name);
  pg_config c;
  config_for(&c, m, FP8MOE_QUANT_FP8_PER_CHANNEL, 800 + (uint64_t)m->id * 2 + (uint64_t)grouped);
  if (!grouped) {
    c.n_group = 1;
    c.topk_group = 1;
  }
  int32_t K = c.K == 1 ? 1 : 3;
  c.K = K;
  pg_problem p;
  if (gen(&p, &c)) {
    if (c.uses_bias)
      for (int64_t x = 0; x < RE; ++x) pg_set(p.bias, c.bias_dtype, x, 0.0);
    int32_t want[3];
    for (int64_t t = 0; t < RT; ++t)
      for (int64_t x = 0; x < RE; ++x) {
        double v = -1.0;
        if (grouped) { /* group 0 leads; groups 1, 2, 3 tie; K = 3 takes experts 1, 2, then group 1's 5 */
          if (x == 1 || x == 2) v = 3.0;
          if (x == 5 || x == 6 || x == 9 || x == 10 || x == 13 || x == 14) v = 1.0;
        } else { /* 7 leads; 3, 5, 9, 12 tie for the remaining slots */
          if (x == 7) v = 2.0;
          if (x == 3 || x == 5 || x == 9 || x == 12) v = 1.0;
        }
        set_logit(&p, t, x, v);
      }
    if (grouped) {
      want[0] = 1, want[1] = 2, want[2] = 5;
    } else if (K == 1) {
      /* top-1: make the tie at the top itself */
      for (int64_t t = 0; t < RT; ++t) set_logit(&p, t, 7, 1.0);
      want[0] = 3;
    } else {
      want[0] = 7, want[1] = 3, want[2] = 5;
    }
    if (run_and_match(e, &p, name))
      for (int64_t t = 0; t < RT; ++t)
        for (int32_t k = 0; k < K; ++k)
          CHECK(p.ids_out[t * K + k] == want[k], "%s: token %lld slot %d: expert %d, expected %d", name, (long long)t,
                k, p.ids_out[t * K + k], want[k]);
    pg_free(&p);
  }
  SUB_END(name);
}

static void r8_ties(env* e) {
  for (uint32_t mi = 0; mi < e->caps.routing_method_count; ++mi) {
    const fp8moe_routing_method_info* m = method_row(e, mi);
    if (!(m->flags & FP8MOE_ROUTING_USES_LOGITS)) continue;
    r8_one(e, m, 0);
    if (m->flags & FP8MOE_ROUTING_USES_GROUPS) r8_one(e, m, 1);
  }
}

/* ---- R9: block activation scales as [T,H/128] and as a transposed view give the same output. */
static void r9_block_scales(env* e) {
  int sub_before_;
  const char* name = "R9 BLOCK128 hidden scales [T,H/128] vs transposed [H/128,T] view";
  SUB_BEGIN(name);
  pg_config c;
  pg_config_init(&c, FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_QUANT_FP8_BLOCK128, 13, 512, 256, RE, 4);
  c.n_group = 4;
  c.topk_group = 2;
  c.hidden_dtype = TEST_E4M3;
  c.seed = 900;
  pg_problem p;
  if (gen(&p, &c)) {
    const int64_t T = c.T, B = c.H / 128;
    void* first = malloc(p.output_bytes);
    float* tr = aligned_alloc(256, ((size_t)(T * B) * sizeof(float) + 255) / 256 * 256);
    if (first && tr && run_and_match(e, &p, name)) {
      memcpy(first, p.output, p.output_bytes);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t b = 0; b < B; ++b) tr[b * T + t] = (float)pg_get(p.hidden_scale, c.scale_dtype, t * B + b);
      void* keep = p.hidden_scale;
      p.hidden_scale = tr;
      p.cfg.hidden_scale_transposed = 1;
      pg_describe(&p);
      if (run_and_match(e, &p, name))
        CHECK(memcmp(first, p.output, p.output_bytes) == 0, "%s: the transposed view gives another output", name);
      p.hidden_scale = keep;
    }
    free(first);
    free(tr);
    pg_free(&p);
  }
  SUB_END(name);
}

/* ---- R10: weight dim 0 ≠ E_local and scales of the wrong shape are refused. */
static void r10_shape_refusals(env* e) {
  int sub_before_;
  for (int i = 0; i < 4; ++i) {
    static const char* const what[4] = {"w13 dim 0 != E_local", "w2 dim 0 != E_local (sharded call)",
                                        "w13_scale of the wrong shape (BLOCK128)", "w2_scale of the wrong shape"};
    static const char* const arg[4] = {"w13", "w2", "w13_scale", "w2_scale"};
    char name[160];
    snprintf(name, sizeof name, "R10 refused: %s", what[i]);
    SUB_BEGIN(name);
    pg_config c;
    pg_config_init(&c, FP8MOE_ROUTING_RENORMALIZE, i == 3 ? FP8MOE_QUANT_FP8_PER_TENSOR : FP8MOE_QUANT_FP8_BLOCK128, RT,
                   RH, RI, RE, 4);
    if (i == 1) {
      c.E_local = 8;
      c.local_offset = 8;
    }
    c.seed = 1000 + (uint64_t)i;
    pg_problem p;
    if (gen(&p, &c)) {
      size_t ws = workspace_of(e, &p);
      switch (i) {
        case 0: p.t_w13.shape[0] = RE - 1; break;
        case 1: p.t_w2.shape[0] = RE; break;
        case 2: p.t_w13s.shape[2] += 1; break;
        default: p.t_w2s.shape[0] = RE + 1; break;
      }
      expect_refused(e, &p, ws, arg[i], name);
      pg_free(&p);
    }
    SUB_END(name);
  }
}

/* ---- R11: PRECOMPUTED with int64 ids and bf16 weights (same result as int32/fp32), and bad ids. */
static void r11_precomputed(env* e) {
  int sub_before_;
  const char* name = "R11 PRECOMPUTED int64 ids + bf16 weights match int32 + fp32";
  SUB_BEGIN(name);
  pg_config c;
  pg_config_init(&c, FP8MOE_ROUTING_PRECOMPUTED, FP8MOE_QUANT_FP8_BLOCK128, RT, RH, RI, RE, 4);
  c.ids_dtype = TEST_I64;
  c.topk_weights_dtype = TEST_BF16;
  c.routed_scaling_factor = 1.5f;
  c.seed = 1100;
  pg_problem a, b;
  if (gen(&a, &c)) {
    pg_config c32 = c;
    c32.ids_dtype = TEST_I32;
    c32.topk_weights_dtype = TEST_F32;
    if (gen(&b, &c32)) {
      for (int64_t i = 0; i < RT * 4; ++i) {
        pg_set(b.topk_ids, TEST_I32, i, pg_get(a.topk_ids, TEST_I64, i));
        pg_set(b.topk_weights, TEST_F32, i, pg_get(a.topk_weights, TEST_BF16, i));
      }
      if (run_and_match(e, &a, name) && run_and_match(e, &b, name))
        CHECK(memcmp(a.output, b.output, a.output_bytes) == 0, "%s: int64/bf16 and int32/fp32 outputs differ", name);
      pg_free(&b);
    }
    SUB_END(name);

    const int64_t bad_ids[2] = {RE, -1};
    for (int i = 0; i < 2; ++i) {
      char n2[160];
      snprintf(n2, sizeof n2, "R11 PRECOMPUTED id %lld out of [0,E): DATA_ERROR, output untouched",
               (long long)bad_ids[i]);
      SUB_BEGIN(n2);
      int64_t keep = (int64_t)pg_get(a.topk_ids, TEST_I64, 13);
      pg_set(a.topk_ids, TEST_I64, 13, (double)bad_ids[i]);
      pg_poison(&a);
      int32_t st = pg_run(&e->tp, e->ctx, &a);
      CHECK(st == FP8MOE_STATUS_DATA_ERROR, "%s: status %d (%s), expected DATA_ERROR", n2, st, a.error);
      CHECK(strstr(a.error, "topk_ids") != NULL, "%s: message does not name topk_ids: \"%s\"", n2, a.error);
      CHECK(pg_output_untouched(&a), "%s: output written", n2);
      printf("         refused (%d): %s\n", st, a.error);
      pg_set(a.topk_ids, TEST_I64, 13, (double)keep);
      SUB_END(n2);
    }
    pg_free(&a);
  } else {
    SUB_END(name);
  }
}

/* ---- R12: T = 0 writes nothing; T = 1 and T not a multiple of any tile size match the reference. */
static void r12_token_counts(env* e) {
  int sub_before_;
  for (uint32_t fi = 0; fi < e->caps.quant_format_count; ++fi) {
    const int64_t Ts[4] = {0, 1, 37, 130};
    for (int ti = 0; ti < 4; ++ti) {
      char name[160];
      snprintf(name, sizeof name, "R12 T = %lld: %s", (long long)Ts[ti], e->caps.quant_formats[fi].name);
      SUB_BEGIN(name);
      pg_config c;
      pg_config_init(&c, FP8MOE_ROUTING_SIGMOID_RENORM, e->caps.quant_formats[fi].id, Ts[ti], RH, RI, RE, 4);
      c.seed = 1200 + fi * 4 + (uint64_t)ti;
      pg_problem p;
      if (gen(&p, &c)) {
        if (Ts[ti] == 0) {
          int32_t st = pg_run(&e->tp, e->ctx, &p);
          CHECK(st == FP8MOE_STATUS_OK, "%s: status %d: %s", name, st, p.error);
          const unsigned char* o = (const unsigned char*)p.output;
          int clean = 1;
          for (int i = 0; i < 256; ++i) clean &= o[i] == 0 && ((const unsigned char*)p.ids_out)[i] == 0;
          CHECK(clean, "%s: T = 0 wrote into the output or routing buffers", name);
        } else {
          run_and_match(e, &p, name);
        }
        pg_free(&p);
      }
      SUB_END(name);
    }
  }
}

/* ---- R13: NaN/±Inf logits never win (NaN, −Inf) or win as FLT_MAX (+Inf); non-finite hidden values
 * affect only their own token (NaN row, saturated Inf). */
static void r13_logits(env* e, const fp8moe_routing_method_info* m) {
  int sub_before_;
  char name[160];
  snprintf(name, sizeof name, "R13 NaN/-Inf/+Inf logits: %s", m->name);
  SUB_BEGIN(name);
  pg_config c;
  config_for(&c, m, FP8MOE_QUANT_FP8_BLOCK128, 1300 + (uint64_t)m->id);
  c.n_group = 1; /* keep "fewer selectable than K" inside one group */
  c.topk_group = 1;
  pg_problem p;
  if (gen(&p, &c)) {
    int32_t top[RT];
    for (int64_t t = 0; t < RT; ++t) { /* the expert that would win, made non-finite */
      top[t] = 0;
      for (int32_t x = 1; x < RE; ++x)
        if (pg_get(p.logits, c.logits_dtype, t * RE + x) > pg_get(p.logits, c.logits_dtype, t * RE + top[t]))
          top[t] = x;
    }
    set_logit(&p, 0, top[0], NAN);
    set_logit(&p, 1, top[1], -INFINITY);
    int plus_inf = m->id != FP8MOE_ROUTING_TOPK; /* TOPK's weight is the logit itself: FLT_MAX·y overflows */
    if (plus_inf) set_logit(&p, 2, (top[2] + 5) % RE, INFINITY);
    for (int32_t x = 2; x < RE; ++x) set_logit(&p, 3, x, x % 2 ? NAN : -INFINITY); /* 2 selectable < K */
    set_logit(&p, 4, 3, NAN);
    set_logit(&p, 4, 11, NAN);
    if (run_and_match(e, &p, name)) {
      for (int32_t k = 0; k < c.K; ++k) {
        CHECK(p.ids_out[0 * c.K + k] != top[0], "%s: a NaN logit was selected", name);
        CHECK(p.ids_out[1 * c.K + k] != top[1], "%s: a -Inf logit was selected", name);
      }
      if (plus_inf) CHECK(p.ids_out[2 * c.K] == (top[2] + 5) % RE, "%s: +Inf logit did not win slot 0", name);
      if (c.K > 2) {
        CHECK(p.ids_out[3 * c.K + 2] == 2 && p.weights_out[3 * c.K + 2] == 0.0f,
              "%s: 3rd slot with 2 selectable experts: expert %d weight %g (expected 2, 0)", name,
              p.ids_out[3 * c.K + 2], (double)p.weights_out[3 * c.K + 2]);
      }
      for (int64_t i = 0; i < RT * RH; ++i)
        if (!isfinite(pg_output_at(&p, i))) {
          CHECK(0, "%s: output[%lld] not finite", name, (long long)i);
          break;
        }
    }
    pg_free(&p);
  }
  SUB_END(name);
}

static void r13_hidden(env* e, int32_t format, const char* format_name, int fp8_hidden) {
  int sub_before_;
  char name[160];
  snprintf(name, sizeof name, "R13 NaN/+-Inf hidden states affect only their token: %s%s", format_name,
           fp8_hidden ? " (e4m3 hidden, NaN code)" : "");
  SUB_BEGIN(name);
  pg_config c;
  pg_config_init(&c, FP8MOE_ROUTING_RENORMALIZE, format, RT, RH, RI, RE, 4);
  c.hidden_dtype = fp8_hidden ? TEST_E4M3 : TEST_BF16;
  c.seed = 1350 + (uint64_t)format * 2 + (uint64_t)fp8_hidden;
  pg_problem p, clean;
  memset(&p, 0, sizeof p);
  memset(&clean, 0, sizeof clean);
  if (gen(&p, &c) && gen(&clean, &c)) {
    if (fp8_hidden) {
      ((uint8_t*)p.hidden)[2 * RH + 5] = 0x7F;
      ((uint8_t*)clean.hidden)[2 * RH + 5] = 0x00;
    } else {
      pg_set(p.hidden, c.hidden_dtype, 2 * RH + 5, NAN);
      pg_set(p.hidden, c.hidden_dtype, 4 * RH + 17, INFINITY);
      pg_set(p.hidden, c.hidden_dtype, 5 * RH, -INFINITY);
      pg_set(clean.hidden, c.hidden_dtype, 2 * RH + 5, 0.0);
      pg_set(clean.hidden, c.hidden_dtype, 4 * RH + 17, 0.0);
      pg_set(clean.hidden, c.hidden_dtype, 5 * RH, 0.0);
    }
    if (run_and_match(e, &p, name) && run_ok(e, &clean, name)) {
      for (int64_t t = 0; t < RT; ++t)
        for (int64_t h = 0; h < RH; ++h) {
          double v = pg_output_at(&p, t * RH + h);
          if (t == 2) {
            if (!isnan(v)) {
              CHECK(0, "%s: token 2 (NaN input) output[%lld] = %g, expected NaN", name, (long long)h, v);
              break;
            }
          } else if (!isfinite(v)) {
            CHECK(0, "%s: token %lld output[%lld] = %g", name, (long long)t, (long long)h, v);
            break;
          }
        }
      /* Per-token/per-group scales: tokens without bad values are bit-identical to a clean run. */
      if (format != FP8MOE_QUANT_FP8_PER_TENSOR) {
        size_t row = p.output_bytes / RT;
        for (int64_t t = 0; t < RT; ++t)
          if (t != 2 && (fp8_hidden || (t != 4 && t != 5)))
            CHECK(memcmp((char*)p.output + t * row, (char*)clean.output + t * row, row) == 0,
                  "%s: token %lld changed because another token held NaN/Inf", name, (long long)t);
      }
    }
  }
  pg_free(&p);
  pg_free(&clean);
  SUB_END(name);
}

static void r13_nonfinite(env* e) {
  for (uint32_t mi = 0; mi < e->caps.routing_method_count; ++mi)
    if (method_row(e, mi)->flags & FP8MOE_ROUTING_USES_LOGITS) r13_logits(e, method_row(e, mi));
  for (uint32_t fi = 0; fi < e->caps.quant_format_count; ++fi)
    r13_hidden(e, e->caps.quant_formats[fi].id, e->caps.quant_formats[fi].name, 0);
  r13_hidden(e, FP8MOE_QUANT_FP8_BLOCK128, "FP8_BLOCK128", 1);
}

/* ---- R14: E split into shards (sliced weights, local_expert_offset/local_num_experts): the partial
 * outputs sum to the full output. Static scales / per-group scales keep every shard's quantization equal
 * to the full call's. */
static void copy_expert_slice(void* dst, const void* src, int64_t offset, int64_t count, int64_t per_expert,
                              int elem) {
  memcpy(dst, (const char*)src + offset * per_expert * elem, (size_t)(count * per_expert * elem));
}

static void r14_one(env* e, int32_t method, int32_t format, int shards) {
  int sub_before_;
  char name[160];
  snprintf(name, sizeof name, "R14 %d shards sum to the full output: %s", shards,
           method == FP8MOE_ROUTING_RENORMALIZE   ? "RENORMALIZE FP8_PER_TENSOR (static scales)"
           : method == FP8MOE_ROUTING_DEEPSEEK_V3 ? "DEEPSEEK_V3 FP8_BLOCK128"
           : method == FP8MOE_ROUTING_LLAMA4      ? "LLAMA4 FP8_PER_TENSOR (static scales)"
                                                  : "SIGMOID_RENORM FP8_PER_CHANNEL");
  SUB_BEGIN(name);
  pg_config c;
  pg_config_init(&c, method, format, 11, RH, RI, RE, method == FP8MOE_ROUTING_LLAMA4 ? 1 : 4);
  if (method == FP8MOE_ROUTING_DEEPSEEK_V3) {
    c.n_group = 4;
    c.topk_group = 2;
  }
  c.a1_static = c.a2_static = format == FP8MOE_QUANT_FP8_PER_TENSOR;
  c.seed = 1400 + (uint64_t)(method * 16 + format * 4 + shards);
  pg_problem full;
  if (!gen(&full, &c)) {
    SUB_END(name);
    return;
  }
  const int64_t T = c.T, H = c.H, I = c.I, El = RE / shards;
  double* sum = calloc((size_t)(T * H), sizeof(double));
  if (sum && run_and_match(e, &full, name)) {
    int ss = ref_dt_size(pg_ref_dt(c.scale_dtype));
    /* scale elements per expert of w13 / w2 */
    int64_t s13 = 1, s2 = 1;
    if (format == FP8MOE_QUANT_FP8_BLOCK128) {
      s13 = (2 * I / 128) * (H / 128);
      s2 = (H / 128) * (I / 128);
    } else if (format == FP8MOE_QUANT_FP8_PER_CHANNEL) {
      s13 = 2 * I;
      s2 = H;
    }
    for (int s = 0; s < shards; ++s) {
      pg_config cs = c;
      cs.E_local = (int32_t)El;
      cs.local_offset = (int32_t)(s * El);
      cs.a1_static = cs.a2_static = 0;
      pg_problem p;
      if (!gen(&p, &cs)) break;
      memcpy(p.hidden, full.hidden, (size_t)(T * H) * (size_t)ref_dt_size(pg_ref_dt(c.hidden_dtype)));
      if (c.uses_logits)
        memcpy(p.logits, full.logits, (size_t)(T * RE) * (size_t)ref_dt_size(pg_ref_dt(c.logits_dtype)));
      if (c.uses_bias) memcpy(p.bias, full.bias, (size_t)RE * (size_t)ref_dt_size(pg_ref_dt(c.bias_dtype)));
      copy_expert_slice(p.w13, full.w13, s * El, El, 2 * I * H, 1);
      copy_expert_slice(p.w2, full.w2, s * El, El, H * I, 1);
      copy_expert_slice(p.w13_scale, full.w13_scale, s * El, El, s13, ss);
      copy_expert_slice(p.w2_scale, full.w2_scale, s * El, El, s2, ss);
      memcpy(p.a1_scale, full.a1_scale, (size_t)ss);
      memcpy(p.a2_scale, full.a2_scale, (size_t)ss);
      p.cfg.a1_static = p.cfg.a2_static = c.a1_static;
      pg_describe(&p);
      if (run_and_match(e, &p, name)) {
        CHECK(memcmp(p.ids_out, full.ids_out, sizeof(int32_t) * (size_t)(T * c.K)) == 0,
              "%s: shard %d routes differently from the full call", name, s);
        for (int64_t i = 0; i < T * H; ++i) sum[i] += pg_output_at(&p, i);
      }
      pg_free(&p);
    }
    double d2 = 0.0, r2 = 0.0;
    for (int64_t i = 0; i < T * H; ++i) {
      double f = pg_output_at(&full, i);
      d2 += (sum[i] - f) * (sum[i] - f);
      r2 += f * f;
    }
    CHECK(sqrt(d2 / r2) <= 1e-6, "%s: sum of shards is %.3g away from the full output", name, sqrt(d2 / r2));
    printf("         shards vs full: rel %.2e\n", sqrt(d2 / r2));
  }
  free(sum);
  pg_free(&full);
  SUB_END(name);
}

static void r14_shards(env* e) {
  const int shard_counts[2] = {2, 4};
  for (int s = 0; s < 2; ++s) {
    r14_one(e, FP8MOE_ROUTING_RENORMALIZE, FP8MOE_QUANT_FP8_PER_TENSOR, shard_counts[s]);
    r14_one(e, FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_QUANT_FP8_BLOCK128, shard_counts[s]);
    r14_one(e, FP8MOE_ROUTING_SIGMOID_RENORM, FP8MOE_QUANT_FP8_PER_CHANNEL, shard_counts[s]);
    r14_one(e, FP8MOE_ROUTING_LLAMA4, FP8MOE_QUANT_FP8_PER_TENSOR, shard_counts[s]);
  }
}

int main(void) {
  env e;
  memset(&e, 0, sizeof e);
  if (test_plugin_open(NULL, &e.tp) != 0) return 1;
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.backend = FP8MOE_BACKEND_CPU;
  ca.num_threads = 2;
  int32_t st = e.tp.api->context_create(&ca, &e.ctx);
  if (st != FP8MOE_STATUS_OK) {
    fprintf(stderr, "context_create(CPU): status %d\n", st);
    return 1;
  }
  e.caps.struct_size = sizeof e.caps;
  st = e.tp.api->query_capabilities(e.ctx, &e.caps);
  if (st != FP8MOE_STATUS_OK) {
    fprintf(stderr, "query_capabilities: status %d\n", st);
    return 1;
  }
  r1_logits_dtypes(&e);
  r2_fp32_bias(&e);
  r3_large_bias(&e);
  r4_all_negative(&e);
  r5_scaling_once(&e);
  r6_gate_up(&e);
  r7_deepseek_refusals(&e);
  r8_ties(&e);
  r9_block_scales(&e);
  r10_shape_refusals(&e);
  r11_precomputed(&e);
  r12_token_counts(&e);
  r13_nonfinite(&e);
  r14_shards(&e);
  e.tp.api->context_destroy(e.ctx);
  test_plugin_close(&e.tp);
  return pg_tally_finish(&e.tally, "test_regressions");
}
