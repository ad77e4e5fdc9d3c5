/* test_cpu_e2e.c — TESTING level 3: the CPU backend against the independent float64 reference (ref64) for
 * every routing method × quant format × activation row of the capability table the plugin reports, with
 * every accepted dtype of logits, bias, hidden states, scales, precomputed ids/weights and output rotated
 * through those rows, both gate/up orders, static and dynamic PER_TENSOR scales, strided logits, block
 * scales in transposed layout, every accepted scale shape and expert-parallel slices. The table is
 * iterated, so a new row is tested without new test code (and fails until ref64 models it). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "e2e_check.h"

/* Fewer combinations than this means the table iteration silently skipped most of the product. */
#define MIN_COMBINATIONS 300
#define VARIANTS 6

typedef struct dtype_set {
  const fp8moe_dtype* d;
  uint32_t n;
} dtype_set;

static dtype_set accepted(const fp8moe_capabilities* caps, int32_t arg) {
  for (uint32_t i = 0; i < caps->argument_count; ++i)
    if (caps->arguments[i].id == arg) return (dtype_set){caps->arguments[i].dtypes, caps->arguments[i].dtype_count};
  return (dtype_set){NULL, 0};
}

static uint32_t arg_flags(const fp8moe_capabilities* caps, int32_t arg) {
  for (uint32_t i = 0; i < caps->argument_count; ++i)
    if (caps->arguments[i].id == arg) return caps->arguments[i].flags;
  return 0;
}

/* The i-th accepted dtype, cyclically (fp32 when the table lists none: check_dtypes_known reports that). */
static fp8moe_dtype pick(dtype_set s, int64_t i) { return s.n ? s.d[(uint64_t)i % s.n] : TEST_F32; }

typedef struct format_stats {
  double max_rel;
  int runs;
} format_stats;

typedef struct e2e_env {
  const test_plugin* tp;
  fp8moe_context* ctx;
  const fp8moe_capabilities* caps;
  pg_tally tally;
  int combos_run;
  /* seen[kind][row][dtype]: combinations that ran with accepted dtype #dtype of argument kind (logits,
   * hidden, output) and routing method row (row < 32) or quant format row (32 + row). */
  unsigned char seen[3][40][8];
  format_stats by_format[8];
  format_stats by_output[3];
  double max_weight_rel;
  int64_t near_ties;
} e2e_env;

static int output_slot(fp8moe_dtype d) {
  ref_dt r = pg_ref_dt(d);
  return r == REF_BF16 ? 0 : r == REF_F16 ? 1 : 2;
}

/* Generates, runs and checks one configuration as a named sub-check. */
static const int32_t coverage_args[3] = {FP8MOE_ARG_ROUTER_LOGITS, FP8MOE_ARG_HIDDEN_STATES, FP8MOE_ARG_OUTPUT};

static int dtype_index(dtype_set s, fp8moe_dtype d) {
  for (uint32_t i = 0; i < s.n && i < 8; ++i)
    if (s.d[i].code == d.code && s.d[i].bits == d.bits) return (int)i;
  return -1;
}

static void mark_seen(e2e_env* env, const pg_config* c, int method_row, int format_row) {
  const fp8moe_dtype used[3] = {c->logits_dtype, c->hidden_dtype, c->output_dtype};
  for (int k = 0; k < 3; ++k) {
    if (k == 0 && !c->uses_logits) continue;
    int d = dtype_index(accepted(env->caps, coverage_args[k]), used[k]);
    if (d < 0) continue;
    if (method_row >= 0 && method_row < 32) env->seen[k][method_row][d] = 1;
    if (format_row >= 0 && format_row < 8) env->seen[k][32 + format_row][d] = 1;
  }
}

/* Each accepted logits/hidden/output dtype must have run with each method (logits: each method reading
 * them) and each format. */
static void check_coverage(const e2e_env* env) {
  const fp8moe_capabilities* caps = env->caps;
  for (int k = 0; k < 3; ++k) {
    dtype_set s = accepted(caps, coverage_args[k]);
    for (uint32_t d = 0; d < s.n && d < 8; ++d) {
      for (uint32_t m = 0; m < caps->routing_method_count && m < 32; ++m) {
        if (k == 0 && !(caps->routing_methods[m].flags & FP8MOE_ROUTING_USES_LOGITS)) continue;
        if (!(caps->routing_methods[m].backends & FP8MOE_BACKEND_MASK_CPU)) continue;
        CHECK(env->seen[k][m][d], "argument %d dtype %s never ran with method %s", coverage_args[k],
              pg_dtype_name(s.d[d]), caps->routing_methods[m].name);
      }
      for (uint32_t f = 0; f < caps->quant_format_count && f < 8; ++f) {
        if (!(caps->quant_formats[f].backends & FP8MOE_BACKEND_MASK_CPU)) continue;
        CHECK(env->seen[k][32 + f][d], "argument %d dtype %s never ran with format %s", coverage_args[k],
              pg_dtype_name(s.d[d]), caps->quant_formats[f].name);
      }
    }
  }
}

static void run_case(e2e_env* env, const pg_config* c, int method_row, int32_t format_row) {
  char name[600];
  pg_describe_config(c, name, sizeof name);
  int before;
  pg_subcheck_begin(name, &before);
  pg_problem p;
  if (pg_generate(&p, c) != 0) {
    CHECK(0, "problem generation failed (out of memory) for %s", name);
    pg_subcheck_end(&env->tally, name, before);
    return;
  }
  int32_t st = env->tp->api->query_support(env->ctx, &p.args);
  CHECK(st == FP8MOE_STATUS_OK, "query_support refused a combination the table lists for the CPU: %d %s", st,
        p.error);
  st = pg_run(env->tp, env->ctx, &p);
  CHECK(st == FP8MOE_STATUS_OK, "run: status %d: %s", st, p.error);
  if (st == FP8MOE_STATUS_OK) {
    pg_result r;
    int ok = pg_check(&p, &r, NULL);
    CHECK(ok, "rel err %.3g (tol %.0e), unwritten %lld, non-finite mismatches %lld, ids %lld, weights %lld%s",
          r.rel_err, PG_OUTPUT_TOL, (long long)r.unwritten, (long long)r.nonfinite_bad, (long long)r.ids_bad,
          (long long)r.weights_bad, r.ref_failed ? ", reference failed" : "");
    CHECK(isfinite(r.rel_err), "non-finite error measure");
    format_stats* fs = &env->by_format[format_row & 7];
    if (r.rel_err > fs->max_rel) fs->max_rel = r.rel_err;
    ++fs->runs;
    format_stats* os = &env->by_output[output_slot(c->output_dtype)];
    if (r.rel_err > os->max_rel) os->max_rel = r.rel_err;
    ++os->runs;
    if (r.max_weight_rel > env->max_weight_rel) env->max_weight_rel = r.max_weight_rel;
    env->near_ties += r.near_ties;
    printf("         rel err %.3e, max weight rel %.2e, near-ties %lld\n", r.rel_err, r.max_weight_rel,
           (long long)r.near_ties);
    ++env->combos_run;
    mark_seen(env, c, method_row, format_row);
  }
  pg_free(&p);
  pg_subcheck_end(&env->tally, name, before);
}

/* One configuration of the product: indices select the row; v rotates dtypes, orders and layouts so each
 * accepted dtype meets each method and each format. */
static void make_config(const e2e_env* env, pg_config* c, int mi, int fi, int ai, int v) {
  const fp8moe_capabilities* caps = env->caps;
  const fp8moe_routing_method_info* m = &caps->routing_methods[mi];
  const fp8moe_quant_format_info* f = &caps->quant_formats[fi];
  static const int64_t token_counts[4] = {1, 7, 33, 70};
  int64_t km = f->k_multiple > 0 ? f->k_multiple : 1;
  int64_t H = ((v % 3 == 2 ? 384 : 256) + km - 1) / km * km;
  int64_t I = (((mi + fi) % 2 ? 384 : 256) + km - 1) / km * km;
  int32_t K = (m->flags & FP8MOE_ROUTING_TOP1_ONLY) ? 1 : 4;
  pg_config_init(c, m->id, f->id, token_counts[(v + mi) % 4], H, I, 16, K);
  c->activation = caps->activations[ai].id;
  c->uses_logits = (m->flags & FP8MOE_ROUTING_USES_LOGITS) != 0;
  c->uses_bias = (m->flags & FP8MOE_ROUTING_USES_BIAS) != 0;
  c->uses_topk_input = (m->flags & FP8MOE_ROUTING_USES_TOPK_INPUT) != 0;
  c->weight_on_input = (m->flags & FP8MOE_ROUTING_WEIGHT_ON_INPUT) != 0;
  if (m->flags & FP8MOE_ROUTING_USES_GROUPS) {
    c->n_group = v % 3 == 2 ? 1 : 4; /* DeepSeek-V3 style and MiniMax/GLM style (one group) */
    c->topk_group = v % 3 == 2 ? 1 : 2;
  }
  c->logits_dtype = pick(accepted(caps, FP8MOE_ARG_ROUTER_LOGITS), v + mi + ai);
  c->bias_dtype = pick(accepted(caps, FP8MOE_ARG_ROUTING_BIAS), v + fi);
  c->hidden_dtype = pick(accepted(caps, FP8MOE_ARG_HIDDEN_STATES), v + fi + 2 * ai + mi);
  c->output_dtype = pick(accepted(caps, FP8MOE_ARG_OUTPUT), v + 2 * mi + fi);
  c->scale_dtype = pick(accepted(caps, FP8MOE_ARG_W13_SCALE), v + ai + fi + 2 * mi);
  c->ids_dtype = pick(accepted(caps, FP8MOE_ARG_TOPK_IDS), v + fi + ai);
  c->topk_weights_dtype = pick(accepted(caps, FP8MOE_ARG_TOPK_WEIGHTS), v + 2 * fi + ai);
  c->gate_up_order = (v + ai + mi) % 2 ? FP8MOE_GATE_UP_UP_FIRST : FP8MOE_GATE_UP_GATE_FIRST;
  c->a1_static = (v + mi) % 2 == 0;
  c->a2_static = (v + mi + ai) % 2 == 1;
  c->logits_layout = (arg_flags(caps, FP8MOE_ARG_ROUTER_LOGITS) & FP8MOE_ARGUMENT_ANY_STRIDES) ? (v + fi) % 3
                                                                                                  : PG_LOGITS_COMPACT;
  c->hidden_scale_transposed =
      (arg_flags(caps, FP8MOE_ARG_HIDDEN_SCALE) & FP8MOE_ARGUMENT_ANY_STRIDES) && (v + mi) % 2 == 1;
  c->routed_scaling_factor = v % 3 == 1 ? 2.5f : 0.0f;
  c->output_row_pad = (v + fi) % 4 == 1 ? 8 : 0; /* output rows in a wider buffer (16-byte pitch, the contract's) */
  c->alt_scale_shapes = (v + ai) % 2;
  if (v == VARIANTS - 1) { /* expert parallel: this call owns the upper half of the experts */
    c->E_local = 8;
    c->local_offset = 8;
  }
  c->seed = (uint64_t)(((mi * 16 + fi) * 8 + ai) * 8 + v) + 1;
}

/* Every dtype the table lists must be one the reference can read, or the rotation would test nothing. */
static void check_dtypes_known(const fp8moe_capabilities* caps) {
  const int32_t args[] = {FP8MOE_ARG_ROUTER_LOGITS, FP8MOE_ARG_ROUTING_BIAS, FP8MOE_ARG_HIDDEN_STATES,
                          FP8MOE_ARG_OUTPUT, FP8MOE_ARG_W13_SCALE, FP8MOE_ARG_TOPK_IDS, FP8MOE_ARG_TOPK_WEIGHTS};
  for (size_t i = 0; i < sizeof args / sizeof args[0]; ++i) {
    dtype_set s = accepted(caps, args[i]);
    CHECK(s.n > 0, "argument %d: no accepted dtypes in the capability table", args[i]);
    for (uint32_t j = 0; j < s.n; ++j)
      CHECK(pg_ref_dt(s.d[j]) != REF_NONE, "argument %d accepts dtype code %u bits %u, which ref64 cannot read",
            args[i], s.d[j].code, s.d[j].bits);
  }
}

int main(void) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  test_plugin tp;
  if (test_plugin_open(NULL, &tp) != 0) return 1;
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.backend = FP8MOE_BACKEND_CPU;
  ca.num_threads = 2;
  fp8moe_context* ctx = NULL;
  int32_t st = tp.api->context_create(&ca, &ctx);
  if (st != FP8MOE_STATUS_OK) {
    fprintf(stderr, "context_create(CPU): status %d\n", st);
    return 1;
  }
  fp8moe_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  st = tp.api->query_capabilities(ctx, &caps);
  if (st != FP8MOE_STATUS_OK) {
    fprintf(stderr, "query_capabilities: status %d\n", st);
    return 1;
  }
  e2e_env env;
  memset(&env, 0, sizeof env);
  env.tp = &tp;
  env.ctx = ctx;
  env.caps = &caps;
  int before;
  const char* known = "every dtype in the capability table is one ref64 reads";
  pg_subcheck_begin(known, &before);
  check_dtypes_known(&caps);
  pg_subcheck_end(&env.tally, known, before);

  int skipped = 0;
  for (uint32_t mi = 0; mi < caps.routing_method_count; ++mi)
    for (uint32_t fi = 0; fi < caps.quant_format_count; ++fi)
      for (uint32_t ai = 0; ai < caps.activation_count; ++ai) {
        uint32_t mask = caps.routing_methods[mi].backends & caps.quant_formats[fi].backends &
                        caps.activations[ai].backends;
        if (!(mask & FP8MOE_BACKEND_MASK_CPU)) {
          printf("[ SKIP ] %s/%s/%s: not offered by the CPU backend (mask 0x%x)\n",
                 caps.routing_methods[mi].name, caps.quant_formats[fi].name, caps.activations[ai].name, mask);
          ++skipped;
          continue;
        }
        for (int v = 0; v < VARIANTS; ++v) {
          pg_config c;
          make_config(&env, &c, (int)mi, (int)fi, (int)ai, v);
          run_case(&env, &c, (int)mi, (int)fi);
        }
      }

  /* FLAG_WEIGHT_ON_INPUT on a K = 1 call of a method that weighs the output by default, per format. */
  for (uint32_t fi = 0; fi < caps.quant_format_count; ++fi) {
    if (!(caps.quant_formats[fi].backends & FP8MOE_BACKEND_MASK_CPU)) continue;
    pg_config c;
    pg_config_init(&c, FP8MOE_ROUTING_TOPK_SIGMOID, caps.quant_formats[fi].id, 9, 256, 256, 16, 1);
    c.flags = FP8MOE_FLAG_WEIGHT_ON_INPUT;
    c.weight_on_input = 1;
    c.hidden_dtype = fi == 1 ? TEST_E4M3 : TEST_BF16;
    c.seed = 900 + fi;
    run_case(&env, &c, -1, (int)fi);
  }

  const char* cov = "coverage: enough combinations ran; every logits/hidden/output dtype met every method and format";
  pg_subcheck_begin(cov, &before);
  check_coverage(&env);
  CHECK(env.combos_run >= MIN_COMBINATIONS, "only %d combinations ran (%d table rows skipped); at least %d expected",
        env.combos_run, skipped, MIN_COMBINATIONS);
  pg_subcheck_end(&env.tally, cov, before);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("\ncombinations run: %d, table rows skipped (no CPU): %d, near-ties followed: %lld\n", env.combos_run,
         skipped, (long long)env.near_ties);
  for (uint32_t fi = 0; fi < caps.quant_format_count && fi < 8; ++fi)
    printf("  %-16s runs %3d  max rel err %.3e\n", caps.quant_formats[fi].name, env.by_format[fi].runs,
           env.by_format[fi].max_rel);
  static const char* const outs[3] = {"output bf16", "output fp16", "output fp32"};
  for (int i = 0; i < 3; ++i)
    printf("  %-16s runs %3d  max rel err %.3e\n", outs[i], env.by_output[i].runs, env.by_output[i].max_rel);
  printf("  routing weights  max rel err %.3e\n", env.max_weight_rel);
  printf("  time %.1f s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  tp.api->context_destroy(ctx);
  test_plugin_close(&tp);
  return pg_tally_finish(&env.tally, "test_cpu_e2e");
}
