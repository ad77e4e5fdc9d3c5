/* test_gpu_prologue.c — the fused small-T prologue (kernels/prologue.cu), both variants, against the separate
 * launches it replaces (routing or PRECOMPUTED intake, permute.cu, quantize_input.cu, the memsets). Three CUDA
 * contexts run every problem: one as configured (the kernel plan's prologue rule: the one-block variant at the
 * smallest T, the routing cluster up to its edge), one created with FP8MOE_CUDA_GEMM_FALLBACK=c (the cluster
 * wherever the rule fuses) and one with FP8MOE_CUDA_GEMM_FALLBACK=p (separate launches at every T); a fourth,
 * FALLBACK=a, runs the problems a team of warps routes only there (T = 1, 33 ≤ E ≤ 256). Per problem and fused
 * context:
 *   - routing ids/weights, the final output and device_status are bit-identical to the separate launches';
 *   - the expert-sorted outputs read back from the workspace (src/cuda/cuda_layout.c gives the slices): ids,
 *     weights, num_tiles and tile_expert identical; the fused sorted_slots/slot_row equal the stable list
 *     (rows of an expert in ascending slot order) built here from the ids; the separate launches' list holds
 *     the same slots per expert, and its slot_row points back at each slot;
 *   - both agree with the CPU backend (ids exact, output within docs/TESTING.md's tolerance).
 * Shapes: every routing method at T = 1 / 2 / 5 / 8 (the one-block edge) / 9 (past it: cluster) / 64 (the
 * rule's edge) / 65 (past it: all separate), exact ties, NaN/±Inf logits, T = 1 (team routing: every method a team
 * takes on random, tied and non-finite logits and with fillers), 257–512 experts (the one-block variant to T = 8),
 * expert parallelism (local_offset,
 * E_local), PRECOMPUTED (with out-of-range ids counted in device_status), the weight applied to the input in
 * every quantization mode, e4m3 hidden states, T = 0 — each on both sides of the one-block edge.
 * Skipped (77) without a usable CUDA device. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_internal.h"
#include "cuda_internal.h"
#include "cuda_plan.h"
#include "e2e_check.h"
#include "gpu_util.h"
#include "problem_gen.h"

typedef struct suite {
  test_plugin tp;
  fp8moe_context* cpu;
  fp8moe_context* fused;    /* the plan's choice (one block at the smallest T, else the cluster) */
  fp8moe_context* cluster;  /* FP8MOE_CUDA_GEMM_FALLBACK=c: the cluster wherever the rule fuses */
  fp8moe_context* separate; /* FP8MOE_CUDA_GEMM_FALLBACK=p */
  fp8moe_context* team_any; /* FP8MOE_CUDA_GEMM_FALLBACK=a: the team wherever it can route (T = 1, E ≥ 33) */
  int checks, block_cases, cluster_cases, team_cases;
  int32_t cc; /* the device's compute capability (the layout's tile height depends on it) */
} suite;

/* The workspace slices the prologue writes, read back after a run. */
typedef struct ws_copy {
  fp8moe_cuda_layout l;
  int32_t num_tiles;
  int32_t *ids, *slot_row, *sorted, *tile_expert;
  float* weights;
  int32_t status;
} ws_copy;

static void ws_free(ws_copy* w) {
  free(w->ids);
  free(w->slot_row);
  free(w->sorted);
  free(w->tile_expert);
  free(w->weights);
  memset(w, 0, sizeof *w);
}

/* The sizes cuda_layout.c reads, from the generator's configuration. */
static fp8moe_problem layout_problem(const pg_config* c) {
  fp8moe_problem p;
  memset(&p, 0, sizeof p);
  p.T = c->T;
  p.H = c->H;
  p.I = c->I;
  p.E = c->E;
  p.E_local = c->E_local ? c->E_local : c->E;
  p.local_offset = c->local_offset;
  p.K = c->K;
  p.routing_method = c->routing_method;
  p.n_group = c->n_group;
  p.topk_group = c->topk_group;
  p.weight_on_input = c->weight_on_input;
  p.quant_format = c->quant_format;
  p.hidden_is_fp8 = c->hidden_dtype.code == TEST_E4M3.code && c->hidden_dtype.bits == 8;
  p.a2_static = c->a2_static && c->quant_format == FP8MOE_QUANT_FP8_PER_TENSOR;
  p.geom = *fp8moe_contract_quant_geometry(c->quant_format);
  p.requant = fp8moe_requant_of(&p.geom, p.a2_static);
  return p;
}

static int d2h(void* dst, const void* src, size_t bytes) {
  return bytes == 0 || cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

/* Runs p on ctx (fresh device copies, poisoned outputs); snapshot of the outputs and the workspace. */
static int run_on(suite* s, fp8moe_context* ctx, pg_problem* p, run_outputs* out, ws_copy* w) {
  gpu_problem g;
  int rc = -1;
  memset(w, 0, sizeof *w);
  pg_poison(p);
  if (gpu_clone(&s->tp, ctx, &p->args, &g) == 0 && gpu_poison(&g, NULL) == 0 &&
      cudaMemset(g.workspace, 0xA5, g.workspace_size) == cudaSuccess) {
    const int32_t st = s->tp.api->run(ctx, &g.args);
    CHECK(st == FP8MOE_STATUS_OK, "GPU run failed: status %d", (int)st);
    if (st == FP8MOE_STATUS_OK && gpu_fetch(&g) == 0) {
      const fp8moe_problem lp = layout_problem(&p->cfg);
      fp8moe_cuda_layout_make(&lp, s->cc, &w->l);
      const size_t TK = (size_t)(lp.T * lp.K), rows = (size_t)w->l.rows, tiles = (size_t)w->l.max_tiles;
      const char* ws = (const char*)g.workspace;
      w->ids = calloc(TK + 1, 4);
      w->weights = calloc(TK + 1, 4);
      w->slot_row = calloc(TK + 1, 4);
      w->sorted = calloc(rows + 1, 4);
      w->tile_expert = calloc(tiles + 1, 4);
      w->status = gpu_status_word(&g);
      if (w->ids && w->weights && w->slot_row && w->sorted && w->tile_expert &&
          d2h(&w->num_tiles, ws + w->l.scalars + 4 * FP8MOE_CUDA_S_NUM_TILES, 4) &&
          d2h(w->ids, ws + w->l.ids, TK * 4) && d2h(w->weights, ws + w->l.weights, TK * 4) &&
          d2h(w->slot_row, ws + w->l.slot_row, TK * 4) && d2h(w->sorted, ws + w->l.sorted_slots, rows * 4) &&
          d2h(w->tile_expert, ws + w->l.tile_expert, tiles * 4))
        rc = outputs_take(&p->args, out);
    }
  }
  gpu_free(&g);
  CHECK(rc == 0, "GPU run did not complete");
  return rc;
}

/* The stable expert-sorted list of ids (what the fused path must write exactly): start[e] per local expert. */
static int check_sorted(const pg_config* c, const ws_copy* f, const ws_copy* sep, const char* cfg) {
  const int32_t El = c->E_local ? c->E_local : c->E, off = c->local_offset, tm = f->l.tile_m;
  const int64_t TK = c->T * c->K;
  int32_t* count = calloc((size_t)El + 1, 4);
  int32_t* start = calloc((size_t)El + 1, 4);
  int32_t* want = malloc(((size_t)f->l.rows + 1) * 4);
  int ok = count && start && want;
  if (!ok) goto done;
  for (int64_t i = 0; i < TK; ++i)
    if (f->ids[i] >= off && f->ids[i] < off + El) ++count[f->ids[i] - off];
  int32_t tiles = 0;
  for (int32_t e = 0; e < El; ++e) {
    start[e] = tiles * tm;
    tiles += (count[e] + tm - 1) / tm;
  }
  for (int64_t r = 0; r < f->l.rows; ++r) want[r] = -1;
  for (int32_t e = 0; e < El; ++e) count[e] = 0;
  for (int64_t i = 0; i < TK; ++i)
    if (f->ids[i] >= off && f->ids[i] < off + El) {
      const int32_t e = f->ids[i] - off;
      want[start[e] + count[e]++] = (int32_t)i;
    }
  CHECK(f->num_tiles == tiles && sep->num_tiles == tiles, "num_tiles: fused %d, separate %d; expected %d [%s]",
        (int)f->num_tiles, (int)sep->num_tiles, (int)tiles, cfg);
  if (f->num_tiles != tiles || sep->num_tiles != tiles) {
    ok = 0;
    goto done;
  }
  for (int32_t e = 0; e < El; ++e)
    for (int32_t j = start[e] / tm; j < start[e] / tm + (count[e] + tm - 1) / tm; ++j)
      if (f->tile_expert[j] != e || sep->tile_expert[j] != e) ok = 0;
  CHECK(ok, "tile_expert differs from the expert order [%s]", cfg);
  int fused_exact = 1, sep_same = 1;
  for (int64_t r = 0; r < (int64_t)tiles * tm; ++r) fused_exact &= f->sorted[r] == want[r];
  for (int64_t i = 0; i < TK; ++i) {
    const int local = f->ids[i] >= off && f->ids[i] < off + El;
    const int32_t fr = f->slot_row[i];
    fused_exact &= local ? fr >= 0 && fr < (int32_t)tiles * tm && f->sorted[fr] == i && want[fr] == i : fr == -1;
    /* the separate launches: the slot sits in its expert's segment and slot_row points at it */
    if (local) {
      const int32_t e = f->ids[i] - off, r = sep->slot_row[i];
      sep_same &= r >= start[e] && r < start[e] + count[e] && sep->sorted[r] == i;
    } else {
      sep_same &= sep->slot_row[i] == -1;
    }
  }
  for (int32_t e = 0; e < El; ++e)
    for (int32_t r = start[e] + count[e]; r < start[e] + (count[e] + tm - 1) / tm * tm; ++r) sep_same &= sep->sorted[r] == -1;
  CHECK(fused_exact, "fused sorted_slots/slot_row differ from the stable expert-sorted list [%s]", cfg);
  CHECK(sep_same, "separate launches' sorted_slots hold other slots per expert [%s]", cfg);
  ok = fused_exact && sep_same;
done:
  free(count);
  free(start);
  free(want);
  return ok;
}

/* One fused context's run of p against the separate launches' (sp, ws); and against the CPU (cpu non-NULL). */
static void compare_fused(suite* s, fp8moe_context* ctx, const char* path, pg_problem* p, const char* tag,
                          const run_outputs* sp, const ws_copy* ws, const run_outputs* cpu, int32_t expect_status) {
  char cfg[512];
  pg_describe_config(&p->cfg, cfg, sizeof cfg);
  const pg_config* c = &p->cfg;
  run_outputs f;
  ws_copy wf;
  memset(&f, 0, sizeof f);
  memset(&wf, 0, sizeof wf);
  ++s->checks;
  if (run_on(s, ctx, p, &f, &wf) == 0) {
    const size_t TK = (size_t)(c->T * c->K);
    CHECK(outputs_identical(&f, sp), "%s: %s and separate outputs differ [%s]", tag, path, cfg);
    CHECK(memcmp(wf.ids, ws->ids, TK * 4) == 0 && memcmp(wf.weights, ws->weights, TK * 4) == 0,
          "%s: %s workspace ids/weights differ [%s]", tag, path, cfg);
    CHECK(wf.status == ws->status, "%s: device_status %s %d, separate %d [%s]", tag, path, (int)wf.status,
          (int)ws->status, cfg);
    if (expect_status >= 0)
      CHECK(wf.status == expect_status, "%s: %s device_status %d; expected %d", tag, path, (int)wf.status,
            (int)expect_status);
    check_sorted(c, &wf, ws, cfg);
    if (cpu) {
      compare_result r;
      CHECK(outputs_compare(&f, cpu, NULL, c->T, cfg, &r), "%s: %s path differs from the CPU [%s]", tag, path, cfg);
    }
  }
  outputs_free(&f);
  ws_free(&wf);
}

static const char* variant_name(uint32_t v) {
  return v == FP8MOE_PROLOGUE_BLOCK ? "block" : v == FP8MOE_PROLOGUE_CLUSTER ? "cluster" : "separate";
}

/* Both fused contexts vs separate (and vs the CPU unless with_cpu is 0); expect_status ≥ 0: the device_status
 * all give. */
static void compare_paths(suite* s, pg_problem* p, const char* tag, int with_cpu, int32_t expect_status) {
  char cfg[512];
  pg_describe_config(&p->cfg, cfg, sizeof cfg);
  const pg_config* c = &p->cfg;
  const fp8moe_problem lp = layout_problem(c);
  const uint32_t all = FP8MOE_PROLOGUE_CLUSTER | FP8MOE_PROLOGUE_BLOCK | FP8MOE_PROLOGUE_TEAM;
  const uint32_t plan = fp8moe_cuda_plan_prologue(&lp, all);
  const uint32_t plan_a = fp8moe_cuda_plan_prologue(&lp, all | FP8MOE_PROLOGUE_TEAM_ANY);
  const int team_a = fp8moe_cuda_plan_prologue_team(&lp, all | FP8MOE_PROLOGUE_TEAM_ANY);
  s->team_cases += team_a;
  const uint32_t plan_c = fp8moe_cuda_plan_prologue(&lp, FP8MOE_PROLOGUE_CLUSTER);
  s->block_cases += plan == FP8MOE_PROLOGUE_BLOCK;
  s->cluster_cases += plan_c == FP8MOE_PROLOGUE_CLUSTER;
  run_outputs sp, cpu;
  ws_copy ws;
  memset(&sp, 0, sizeof sp);
  memset(&cpu, 0, sizeof cpu);
  memset(&ws, 0, sizeof ws);
  ++s->checks;
  int have_cpu = 0;
  if (run_on(s, s->separate, p, &sp, &ws) == 0) {
    if (with_cpu) {
      pg_poison(p);
      const int32_t st = pg_run(&s->tp, s->cpu, p);
      CHECK(st == FP8MOE_STATUS_OK, "CPU run failed: status %d (%s)", (int)st, p->error);
      have_cpu = st == FP8MOE_STATUS_OK && outputs_take(&p->args, &cpu) == 0;
    }
    compare_fused(s, s->fused, variant_name(plan), p, tag, &sp, &ws, have_cpu ? &cpu : NULL, expect_status);
    compare_fused(s, s->cluster, variant_name(plan_c), p, tag, &sp, &ws, have_cpu ? &cpu : NULL, expect_status);
    if (team_a) compare_fused(s, s->team_any, "team", p, tag, &sp, &ws, have_cpu ? &cpu : NULL, expect_status);
    printf("%-10s %-8s/%-8s%s tiles %d  %s\n", tag, variant_name(plan), variant_name(plan_c), team_a ? "/team" : "",
           (int)ws.num_tiles, cfg);
    (void)plan_a;
  }
  outputs_free(&sp);
  outputs_free(&cpu);
  ws_free(&ws);
}

static void config(pg_config* c, int32_t method, int32_t format, int64_t T, int32_t E, int32_t K, uint64_t seed) {
  pg_config_init(c, method, format, T, 256, 256, E, K);
  if (method == FP8MOE_ROUTING_DEEPSEEK_V3 && E >= 16) {
    c->n_group = E >= 256 ? 8 : 4;
    c->topk_group = E >= 256 ? 4 : 2;
    c->routed_scaling_factor = 2.5f;
  }
  c->want_routing_out = 1;
  c->seed = seed;
}

static void every_method(suite* s) {
  static const int32_t methods[] = {FP8MOE_ROUTING_DEFAULT, FP8MOE_ROUTING_RENORMALIZE, FP8MOE_ROUTING_DEEPSEEK_V3,
                                    FP8MOE_ROUTING_LLAMA4, FP8MOE_ROUTING_RENORMALIZE_NAIVE, FP8MOE_ROUTING_TOPK,
                                    FP8MOE_ROUTING_SIGMOID, FP8MOE_ROUTING_SIGMOID_RENORM, FP8MOE_ROUTING_TOPK_SIGMOID};
  static const int64_t Ts[] = {1, 2, 5, 8, 9, 64, 65}; /* 8: the one-block edge at K = 8 (T·K = 64); 64: the rule's */
  static const int32_t formats[] = {FP8MOE_QUANT_FP8_BLOCK128, FP8MOE_QUANT_FP8_PER_TENSOR,
                                    FP8MOE_QUANT_FP8_PER_CHANNEL};
  for (size_t m = 0; m < sizeof methods / sizeof methods[0]; ++m)
    for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; ++t) {
      const int wide = (m + t) % 2 == 0;
      const int32_t E = wide ? 256 : (t % 2 ? 16 : 8);
      const int32_t K = methods[m] == FP8MOE_ROUTING_LLAMA4 ? 1 : (wide ? 8 : 2);
      pg_config c;
      config(&c, methods[m], formats[(m + t) % 3], Ts[t], E, K, 100 + 10 * m + t);
      pg_problem p;
      if (pg_generate(&p, &c) != 0) continue;
      compare_paths(s, &p, "method", 1, -1);
      pg_free(&p);
    }
}

/* Exact ties and non-finite logits, on the grouped DeepSeek-V3 router and a softmax one. */
static void ties_and_nonfinite(suite* s) {
  static const int32_t methods[] = {FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_ROUTING_DEFAULT, FP8MOE_ROUTING_RENORMALIZE};
  for (size_t m = 0; m < 3; ++m)
    for (int run = 0; run < 4; ++run) { /* ties, then non-finite; T = 7 (one block), then T = 12 (the cluster) */
      const int kind = run % 2;
      pg_config c;
      config(&c, methods[m], FP8MOE_QUANT_FP8_BLOCK128, run < 2 ? 7 : 12, 256, 8, 300 + m * 4 + (uint64_t)run);
      c.logits_layout = PG_LOGITS_COMPACT;
      if (kind == 0) c.uses_bias = 0;
      pg_problem p;
      if (pg_generate(&p, &c) != 0) continue;
      const int32_t E = c.E;
      if (kind == 0) {
        for (int64_t t = 0; t < c.T; ++t)
          for (int32_t e = 0; e < E; ++e) pg_set(p.logits, c.logits_dtype, t * E + e, 0.25 * (double)((e * 7 + t) % 3) - 0.5);
      } else {
        pg_set(p.logits, c.logits_dtype, 0 * E + 3, NAN);
        pg_set(p.logits, c.logits_dtype, 0 * E + 5, -INFINITY);
        pg_set(p.logits, c.logits_dtype, 0 * E + 7, INFINITY);
        for (int32_t e = 2; e < E; ++e) pg_set(p.logits, c.logits_dtype, 1 * E + e, NAN);
        for (int32_t e = 0; e < E; ++e) pg_set(p.logits, c.logits_dtype, 2 * E + e, -INFINITY);
      }
      pg_describe(&p);
      compare_paths(s, &p, kind == 0 ? "ties" : "nonfinite", 1, -1);
      pg_free(&p);
    }
}

/* A routing method at a size, and the problem of it that one_token and wide_experts run: T tokens, block or
 * per-tensor quantization by the parity of `variant`, compact logits. Returns pg_generate's status. */
typedef struct routing_case {
  int32_t method, E, K, n_group, topk_group;
} routing_case;

static int generate_case(pg_problem* p, const routing_case* rc, int64_t T, size_t variant, uint64_t seed) {
  pg_config c;
  config(&c, rc->method, variant % 2 ? FP8MOE_QUANT_FP8_PER_TENSOR : FP8MOE_QUANT_FP8_BLOCK128, T, rc->E, rc->K, seed);
  if (rc->method == FP8MOE_ROUTING_DEEPSEEK_V3) {
    c.n_group = rc->n_group;
    c.topk_group = rc->topk_group;
  }
  c.logits_layout = PG_LOGITS_COMPACT;
  return pg_generate(p, &c);
}

/* T = 1, where the one-block prologue routes with a team of warps (kernels/routing_team.cuh): every method, at E
 * multiple of 32 and not (lanes past E), grouped and ungrouped DeepSeek-V3, E past 256 (kimi-k2's 384 and 500: the
 * team alone routes those in one launch, the separate launches compare), K from 1 to 8, each on
 * random logits, exact ties, sprinkled NaN/±Inf, all NaN but two, all −Inf (every slot a filler) and three
 * selectable experts (fillers after them; grouped: their group and three all −Inf groups picked). */
static void one_token(suite* s) {
  static const routing_case cases[] = {
      {FP8MOE_ROUTING_DEEPSEEK_V3, 256, 8, 8, 4}, {FP8MOE_ROUTING_DEEPSEEK_V3, 256, 8, 1, 1},
      {FP8MOE_ROUTING_DEEPSEEK_V3, 128, 6, 4, 2}, {FP8MOE_ROUTING_RENORMALIZE, 100, 6, 1, 1},
      {FP8MOE_ROUTING_TOPK, 256, 8, 1, 1},        {FP8MOE_ROUTING_SIGMOID, 64, 4, 1, 1},
      {FP8MOE_ROUTING_SIGMOID_RENORM, 128, 8, 1, 1}, {FP8MOE_ROUTING_TOPK_SIGMOID, 200, 3, 1, 1},
      {FP8MOE_ROUTING_LLAMA4, 16, 1, 1, 1},       {FP8MOE_ROUTING_DEEPSEEK_V3, 384, 8, 1, 1},
      {FP8MOE_ROUTING_DEEPSEEK_V3, 384, 8, 12, 4}, {FP8MOE_ROUTING_RENORMALIZE_NAIVE, 384, 6, 1, 1},
      {FP8MOE_ROUTING_DEFAULT, 256, 8, 1, 1},     {FP8MOE_ROUTING_RENORMALIZE_NAIVE, 128, 8, 1, 1},
      {FP8MOE_ROUTING_DEFAULT, 500, 4, 1, 1},
  };
  static const char* const tags[] = {"t1-random", "t1-ties", "t1-nonfin", "t1-nan", "t1-neginf", "t1-sparse"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    for (int pat = 0; pat < 6; ++pat) {
      pg_problem p;
      if (generate_case(&p, &cases[i], 1, i + (size_t)pat, 800 + 10 * (uint64_t)i + (uint64_t)pat) != 0) continue;
      const pg_config c = p.cfg;
      const int32_t E = c.E;
      for (int32_t e = 0; e < E && pat > 0; ++e) {
        double v = pat == 1 ? 0.25 * (double)((e * 7) % 3) - 0.5 : pat == 3 ? NAN : pat >= 4 ? -INFINITY : 0.0;
        if (pat == 2) v = e % 11 == 3 ? NAN : e % 11 == 5 ? -INFINITY : e % 11 == 7 ? INFINITY : 0.01 * (double)(e % 17);
        if (pat == 3 && (e == 1 || e == E - 2)) v = 0.5 * (double)e;
        if (pat == 5 && (e == 3 || e == E / 2 + 1 || e == E - 1)) v = 0.1 * (double)(e % 5);
        pg_set(p.logits, c.logits_dtype, e, v);
      }
      pg_describe(&p);
      compare_paths(s, &p, tags[pat], 1, -1);
      pg_free(&p);
    }
}

/* 257–512 experts: the one-block variant up to T = 8 (route_token with 16 experts per lane; a team at T = 1),
 * separate launches past it: ungrouped (kimi-k2), groups of 32 and of 48 experts, the softmax over all experts,
 * the weight on the input (the quantizing block routes its token too), random and tied logits. */
static void wide_experts(suite* s) {
  static const routing_case cases[] = {
      {FP8MOE_ROUTING_DEEPSEEK_V3, 384, 8, 1, 1}, {FP8MOE_ROUTING_DEEPSEEK_V3, 384, 8, 12, 4},
      {FP8MOE_ROUTING_DEEPSEEK_V3, 384, 8, 8, 4}, {FP8MOE_ROUTING_RENORMALIZE_NAIVE, 384, 6, 1, 1},
      {FP8MOE_ROUTING_RENORMALIZE, 500, 8, 1, 1}, {FP8MOE_ROUTING_LLAMA4, 384, 1, 1, 1},
  };
  static const int64_t Ts[] = {1, 2, 5, 8, 9};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; ++t) {
      const int ties = (i + t) % 3 == 2;
      pg_problem p;
      if (generate_case(&p, &cases[i], Ts[t], i + t, 900 + 10 * (uint64_t)i + (uint64_t)t) != 0) continue;
      const pg_config c = p.cfg;
      for (int64_t tok = 0; tok < c.T && ties; ++tok)
        for (int32_t e = 0; e < c.E; ++e)
          pg_set(p.logits, c.logits_dtype, tok * c.E + e, 0.25 * (double)((e * 7 + tok) % 3) - 0.5);
      if (ties) pg_describe(&p);
      compare_paths(s, &p, ties ? "wide-ties" : "wide", 1, -1);
      pg_free(&p);
    }
}

/* Expert parallelism: this call owns E_local experts from local_offset. */
static void expert_parallel(suite* s) {
  static const int32_t shards[][2] = {{64, 128}, {16, 0}, {64, 192}, {16, 240}}; /* E_local, local_offset (E = 256) */
  static const int64_t Ts[] = {1, 33, 33, 8}; /* one block, cluster, cluster, one block */
  for (int i = 0; i < 4; ++i) {
    pg_config c;
    config(&c, i % 2 ? FP8MOE_ROUTING_RENORMALIZE : FP8MOE_ROUTING_DEEPSEEK_V3,
           i == 2 ? FP8MOE_QUANT_FP8_PER_CHANNEL : FP8MOE_QUANT_FP8_BLOCK128, Ts[i], 256, 8, 400 + (uint64_t)i);
    c.E_local = shards[i][0];
    c.local_offset = shards[i][1];
    pg_problem p;
    if (pg_generate(&p, &c) != 0) continue;
    compare_paths(s, &p, "ep", 1, -1);
    pg_free(&p);
  }
}

/* PRECOMPUTED ids and weights; out-of-range ids are skipped and counted in device_status (the CPU refuses
 * them, so that case compares the two GPU paths only). */
static void precomputed(suite* s) {
  /* T = 9 (the cluster: T·K = 36 but T > 8), T = 2 (one block), T = 1 (one block, warp 0's slot list alone: with
   * ids out of range and one expert named twice) */
  for (int run = 0; run < 6; ++run) {
    const int bad = run % 2;
    const int64_t T = run < 2 ? 9 : run < 4 ? 2 : 1;
    pg_config c;
    config(&c, FP8MOE_ROUTING_PRECOMPUTED, FP8MOE_QUANT_FP8_BLOCK128, T, 16, 4, 500 + (uint64_t)run);
    c.ids_dtype = bad ? TEST_I64 : TEST_I32;
    c.topk_weights_dtype = TEST_BF16;
    pg_problem p;
    if (pg_generate(&p, &c) != 0) continue;
    if (bad) {
      const int64_t ids[3][3] = {{0, 1, -1}, {1, 3, 16}, {c.T - 1, 0, 1000000}}; /* t, k, id */
      const int64_t one[3][3] = {{0, 1, -1}, {0, 2, 5}, {0, 3, 5}};              /* T = 1: −1, expert 5 twice */
      for (int b = 0; b < 3; ++b) {
        const int64_t* v = T == 1 ? one[b] : ids[b];
        pg_set(p.topk_ids, c.ids_dtype, v[0] * c.K + v[1], (double)v[2]);
      }
      pg_describe(&p);
    }
    compare_paths(s, &p, bad ? "pre-oob" : "pre", !bad, bad ? (T == 1 ? 1 : 3) : 0);
    pg_free(&p);
  }
}

/* The routing weight applied to the input (K = 1) in every input-quantization mode, and e4m3 hidden states. */
static void weight_on_input(suite* s) {
  for (int run = 0; run < 12; ++run) { /* every mode at T = 6 (one block), then T = 12 (the cluster) */
    const int mode = run % 6;
    pg_config c;
    const int32_t fmt = mode < 2 ? FP8MOE_QUANT_FP8_PER_TENSOR
                                 : (mode == 2 || mode == 5) ? FP8MOE_QUANT_FP8_BLOCK128 : FP8MOE_QUANT_FP8_PER_CHANNEL;
    config(&c, mode == 4 ? FP8MOE_ROUTING_PRECOMPUTED : FP8MOE_ROUTING_LLAMA4, fmt, run < 6 ? 6 : 12, 16, 1,
           600 + (uint64_t)run);
    if (mode == 4) {
      c.flags = FP8MOE_FLAG_WEIGHT_ON_INPUT;
      c.weight_on_input = 1;
      c.ids_dtype = TEST_I32;
      c.topk_weights_dtype = TEST_F32;
    }
    c.a1_static = mode == 1;                      /* mode 0: the dynamic per-tensor scale (amax pass) */
    if (mode == 5) c.hidden_dtype = TEST_E4M3;    /* no input quantization */
    pg_problem p;
    if (pg_generate(&p, &c) != 0) continue;
    compare_paths(s, &p, "w-input", 1, mode == 4 ? 0 : -1);
    pg_free(&p);
  }
}

/* T = 0 writes nothing on either path. */
static void empty(suite* s) {
  pg_config c;
  config(&c, FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_QUANT_FP8_BLOCK128, 0, 256, 8, 700);
  pg_problem p;
  if (pg_generate(&p, &c) != 0) {
    CHECK(0, "pg_generate T=0");
    return;
  }
  fp8moe_context* ctx[3] = {s->fused, s->cluster, s->separate};
  for (int i = 0; i < 3; ++i) {
    gpu_problem g;
    ++s->checks;
    if (gpu_clone(&s->tp, ctx[i], &p.args, &g) == 0) {
      const int32_t st = s->tp.api->run(ctx[i], &g.args);
      CHECK(st == FP8MOE_STATUS_OK, "T=0 run: status %d", (int)st);
      CHECK(cudaDeviceSynchronize() == cudaSuccess, "T=0 sync");
      CHECK(gpu_status_word(&g) == 0x5A5A5A5A, "T=0 wrote device_status");
    }
    gpu_free(&g);
  }
  printf("%-10s ok\n", "T=0");
  pg_free(&p);
}

int main(void) {
  suite s;
  memset(&s, 0, sizeof s);
  setvbuf(stdout, NULL, _IONBF, 0);
  fp8moe_backend_info bi;
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  const int open_rc = gpu_suite_open("test_gpu_prologue", &s.tp, &s.cpu, &s.fused, &bi);
  if (open_rc != 0) return open_rc;
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.backend = FP8MOE_BACKEND_CUDA;
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "p", 1); /* read at context creation only */
  int32_t st = s.tp.api->context_create(&ca, &s.separate);
  ++s.checks;
  CHECK(st == FP8MOE_STATUS_OK, "context_create (separate launches): status %d", (int)st);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "c", 1);
  st = s.tp.api->context_create(&ca, &s.cluster);
  ++s.checks;
  CHECK(st == FP8MOE_STATUS_OK, "context_create (cluster prologue only): status %d", (int)st);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "a", 1);
  st = s.tp.api->context_create(&ca, &s.team_any);
  ++s.checks;
  CHECK(st == FP8MOE_STATUS_OK, "context_create (team wherever it routes): status %d", (int)st);
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  fp8moe_context_info ci;
  memset(&ci, 0, sizeof ci);
  ci.struct_size = sizeof ci;
  if (s.fused && s.tp.api->context_info(s.fused, &ci) == FP8MOE_STATUS_OK) s.cc = ci.compute_capability;
  ++s.checks;
  CHECK(s.cc >= 90, "context_info: compute capability %d", (int)s.cc);
  if (s.cpu && s.fused && s.cluster && s.separate && s.team_any && s.cc >= 90) {
    printf("device: %s, cc %d\n", bi.device_name, (int)s.cc);
    every_method(&s);
    ties_and_nonfinite(&s);
    one_token(&s);
    wide_experts(&s);
    expert_parallel(&s);
    precomputed(&s);
    weight_on_input(&s);
    empty(&s);
    CHECK(s.block_cases >= 40 && s.cluster_cases >= 60 && s.team_cases >= 60,
          "only %d problems in the one-block variant's bounds, %d inside the prologue rule, %d routed by a team",
          s.block_cases, s.cluster_cases, s.team_cases);
    printf("one-block cases %d (a team routes %d), cluster cases (FALLBACK=c) %d\n", s.block_cases, s.team_cases,
           s.cluster_cases);
  }
  if (s.separate) s.tp.api->context_destroy(s.separate);
  if (s.team_any) s.tp.api->context_destroy(s.team_any);
  if (s.cluster) s.tp.api->context_destroy(s.cluster);
  s.tp.api->context_destroy(s.fused);
  s.tp.api->context_destroy(s.cpu);
  test_plugin_close(&s.tp);
  return test_finish("test_gpu_prologue", s.checks);
}
