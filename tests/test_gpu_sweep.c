/* test_gpu_sweep.c — the CUDA backend against the CPU backend (the oracle) through the public API, at
 * reduced shapes: every row of the capability table (routing × format × activation, with dtypes, layouts,
 * gate/up order, static scales and expert-parallel shards varied across rows), the docs/TESTING.md regression
 * cases that concern a backend (exact ties, non-finite logits and hidden states, PRECOMPUTED out-of-range
 * ids counted in device_status, T = 0, shards summing to the full layer), CUDA-graph capture + replay and
 * two streams running different problems on one context, and the kernel plan's large-M and decode rows.
 * Outputs are poisoned before every GPU run.
 * `--quick` runs a subset (for compute-sanitizer); `--large` only the large-M plan rows in full and a graph
 * capture at large M (run with FALLBACK=v: the 64-row GEMM1 items, vg: on the 64-row kernel; i: the 128-row GEMM2).
 * Skipped (77) without a usable CUDA device. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_check.h"
#include "gpu_util.h"
#include "problem_gen.h"

typedef struct suite {
  test_plugin tp;
  fp8moe_context* cpu;
  fp8moe_context* gpu;
  int quick;
  int checks;
  double max_rel[3]; /* per quant format */
} suite;

static const fp8moe_dtype* cycle_float(int i) {
  static const fp8moe_dtype* d[] = {&TEST_F32, &TEST_BF16, &TEST_F16};
  return d[i % 3];
}

/* Runs p on the CPU backend; snapshot into cpu_out. */
static int run_cpu(suite* s, pg_problem* p, run_outputs* cpu_out) {
  pg_poison(p);
  int32_t st = pg_run(&s->tp, s->cpu, p);
  CHECK(st == FP8MOE_STATUS_OK, "CPU run failed: status %d (%s)", (int)st, p->error);
  if (st != FP8MOE_STATUS_OK) return -1;
  return outputs_take(&p->args, cpu_out);
}

/* Runs p on the GPU (fresh device copies, poisoned outputs); snapshot into gpu_out. */
static int run_gpu(suite* s, pg_problem* p, run_outputs* gpu_out, int32_t* status_word) {
  gpu_problem g;
  int rc = -1;
  pg_poison(p);
  if (gpu_clone(&s->tp, s->gpu, &p->args, &g) == 0 && gpu_poison(&g, NULL) == 0) {
    int32_t st = s->tp.api->run(s->gpu, &g.args);
    CHECK(st == FP8MOE_STATUS_OK, "GPU run failed: status %d (%s)", (int)st, p->error);
    if (st == FP8MOE_STATUS_OK && gpu_fetch(&g) == 0) {
      if (status_word) *status_word = gpu_status_word(&g);
      rc = outputs_take(&p->args, gpu_out);
    }
  }
  gpu_free(&g);
  CHECK(rc == 0, "GPU run did not complete");
  return rc;
}

/* CPU vs GPU on one generated problem. */
static void compare_one(suite* s, pg_problem* p, const char* tag) {
  char cfg[512];
  pg_describe_config(&p->cfg, cfg, sizeof cfg);
  run_outputs c, g;
  memset(&c, 0, sizeof c);
  memset(&g, 0, sizeof g);
  ++s->checks;
  if (run_cpu(s, p, &c) == 0 && run_gpu(s, p, &g, NULL) == 0) {
    compare_result r;
    int ok = outputs_compare(&g, &c, NULL, p->cfg.T, cfg, &r);
    CHECK(ok, "%s: GPU differs from CPU [%s]", tag, cfg);
    int f = p->cfg.quant_format;
    if (f >= 0 && f < 3 && r.rel_err > s->max_rel[f]) s->max_rel[f] = r.rel_err;
    printf("%-10s rel_err %.3e  w_rel %.1e  %s\n", tag, r.rel_err, r.max_w_rel, cfg);
  }
  outputs_free(&c);
  outputs_free(&g);
}

/* Generates the problem c describes, lets route (unless NULL) pin its precomputed expert ids, and compares the
 * GPU with the CPU on it (a failed generation is a failure). */
static void generate_routed_and_compare(suite* s, const pg_config* c, const char* tag, void (*route)(pg_problem*)) {
  pg_problem p;
  if (pg_generate(&p, c) != 0) {
    CHECK(0, "pg_generate failed");
    return;
  }
  if (route) {
    route(&p);
    pg_describe(&p);
  }
  compare_one(s, &p, tag);
  pg_free(&p);
}

static void generate_and_compare(suite* s, const pg_config* c, const char* tag) {
  generate_routed_and_compare(s, c, tag, NULL);
}

static void base_config(pg_config* c, int32_t method, int32_t format, int i) {
  const int big = (i % 5) == 4; /* now and then a wider router */
  int32_t E = big ? 256 : 16, K = method == FP8MOE_ROUTING_LLAMA4 ? 1 : (big ? 8 : 4);
  /* i % 5 == 3: enough rows per expert for the 64-row GEMM tiles; otherwise the 16-row ones */
  pg_config_init(c, method, format, (i % 5) == 3 ? 301 : 37 + i % 5, 256, 256 + 128 * (i % 2), E, K);
  if (method == FP8MOE_ROUTING_DEEPSEEK_V3) {
    c->n_group = big ? 8 : 4;
    c->topk_group = big ? 4 : 2;
    c->routed_scaling_factor = 2.5f;
  } else if (i % 3 == 1) {
    c->routed_scaling_factor = 1.75f;
  }
  c->seed = 1000 + (uint64_t)i;
}

static void sweep(suite* s) {
  fp8moe_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  if (s->tp.api->query_capabilities(s->gpu, &caps) != FP8MOE_STATUS_OK) {
    CHECK(0, "query_capabilities failed");
    return;
  }
  CHECK(caps.flags == (FP8MOE_CAPABILITY_GRAPH_CAPTURABLE | FP8MOE_CAPABILITY_HOST_SYNC_FREE),
        "CUDA capability flags 0x%x", (unsigned)caps.flags);
  int i = 0;
  for (uint32_t m = 0; m < caps.routing_method_count; ++m) {
    const fp8moe_routing_method_info* rm = &caps.routing_methods[m];
    if (!(rm->backends & FP8MOE_BACKEND_MASK_CUDA)) continue;
    for (uint32_t f = 0; f < caps.quant_format_count; ++f) {
      const fp8moe_quant_format_info* qf = &caps.quant_formats[f];
      if (!(qf->backends & FP8MOE_BACKEND_MASK_CUDA)) continue;
      for (uint32_t a = 0; a < caps.activation_count; ++a, ++i) {
        const fp8moe_activation_info* ai = &caps.activations[a];
        if (!(ai->backends & FP8MOE_BACKEND_MASK_CUDA)) continue;
        if (s->quick && i % 4 != 0) continue;
        pg_config c;
        base_config(&c, rm->id, qf->id, i);
        c.activation = ai->id;
        c.gate_up_order = (i / 2) % 2 ? FP8MOE_GATE_UP_UP_FIRST : FP8MOE_GATE_UP_GATE_FIRST;
        c.logits_dtype = *cycle_float(i);
        c.bias_dtype = *cycle_float(i + 1);
        c.output_dtype = (i % 3 == 0) ? TEST_BF16 : (i % 3 == 1) ? TEST_F16 : TEST_F32;
        c.scale_dtype = (i % 7 == 3) ? TEST_BF16 : TEST_F32;
        c.hidden_dtype = (i % 4 == 1) ? TEST_E4M3 : (i % 4 == 2) ? TEST_F16 : TEST_BF16;
        c.hidden_scale_transposed = (i % 8 == 5);
        c.logits_layout = i % 3;
        c.output_row_pad = (i % 5 == 1) ? 8 : 0; /* output rows in a wider buffer (16-byte pitch, the contract's) */
        c.ids_dtype = (i % 2) ? TEST_I64 : TEST_I32;
        c.topk_weights_dtype = *cycle_float(i + 2);
        c.a1_static = (i % 2 == 0);
        c.a2_static = (i % 4 < 2);
        if (i % 6 == 2 && rm->id != FP8MOE_ROUTING_LLAMA4) { /* an expert-parallel shard */
          c.E_local = c.E / 2;
          c.local_offset = c.E / 4;
        }
        if (i % 9 == 7 && c.K == 1 && rm->id != FP8MOE_ROUTING_LLAMA4) {
          c.flags = FP8MOE_FLAG_WEIGHT_ON_INPUT;
          c.weight_on_input = 1;
        }
        generate_and_compare(s, &c, "table");
      }
    }
  }
}

/* The kernel plan's large-M rows (docs/GPU.md): every format × activation × gate/up order with enough rows
 * per expert for 64-row tiles (on Hopper the wgmma kernels), both e4m3 and bf16 inputs and static and dynamic
 * scales; H = 384, where GEMM2 takes the mma.sync row (H not a multiple of 256) behind the wgmma GEMM1; the
 * input-side token weight on an e4m3 input; the MEDIUM regime's 64-row tiles at 25 rows per expert; and
 * enough tiles for several groups of the sm90 GEMMs' grouped item order. */
static void plan_rows(suite* s) {
  static const int32_t formats[] = {FP8MOE_QUANT_FP8_PER_TENSOR, FP8MOE_QUANT_FP8_BLOCK128,
                                    FP8MOE_QUANT_FP8_PER_CHANNEL};
  int i = 0;
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f)
    for (int32_t act = FP8MOE_ACTIVATION_SWIGLU; act <= FP8MOE_ACTIVATION_GEGLU; ++act)
      for (int32_t order = FP8MOE_GATE_UP_GATE_FIRST; order <= FP8MOE_GATE_UP_UP_FIRST; ++order)
        for (int64_t H = 256; H <= 384; H += 128, ++i) {
          if (H == 384 && (act != FP8MOE_ACTIVATION_SWIGLU || order != FP8MOE_GATE_UP_GATE_FIRST)) continue;
          if (s->quick && i % 3 != 0) continue;
          pg_config c;
          base_config(&c, FP8MOE_ROUTING_RENORMALIZE, formats[f], 3); /* T = 301, E = 16, K = 4 */
          c.H = H;
          c.I = 256 + 128 * (i % 3);
          c.activation = act;
          c.gate_up_order = order;
          c.hidden_dtype = (i % 3 == 1) ? TEST_E4M3 : TEST_BF16;
          c.a1_static = (i % 2 == 0);
          c.a2_static = (i % 4 < 2);
          c.seed = 5000 + (uint64_t)i;
          generate_and_compare(s, &c, "plan");
        }
  /* The token weight on an e4m3 input, applied in GEMM1's epilogue (LLAMA4 routing, K = 1): T = 600 gives
   * 37 rows per expert, the large-M rows. */
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f, ++i) {
    if (s->quick && f != 1) continue;
    pg_config c;
    base_config(&c, FP8MOE_ROUTING_LLAMA4, formats[f], 3);
    c.T = 600;
    c.hidden_dtype = TEST_E4M3;
    c.gate_up_order = f % 2 ? FP8MOE_GATE_UP_UP_FIRST : FP8MOE_GATE_UP_GATE_FIRST;
    c.seed = 5000 + (uint64_t)i;
    generate_and_compare(s, &c, "plan");
  }
  /* The MEDIUM regime (16 to 32 rows per expert): T = 100, E = 16, K = 4 gives 25 rows per expert, the
   * 64-row wgmma tiles on Hopper (each tile more than half padding), 16-row mma.sync tiles elsewhere. */
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f, ++i) {
    if (s->quick && f != 1) continue;
    pg_config c;
    base_config(&c, FP8MOE_ROUTING_RENORMALIZE, formats[f], 3);
    c.T = 100;
    c.activation = f == 2 ? FP8MOE_ACTIVATION_GEGLU : FP8MOE_ACTIVATION_SWIGLU;
    c.gate_up_order = f % 2 ? FP8MOE_GATE_UP_UP_FIRST : FP8MOE_GATE_UP_GATE_FIRST;
    c.seed = 5000 + (uint64_t)i;
    generate_and_compare(s, &c, "plan");
  }
  /* The sm90 GEMMs' grouped item order across several groups (src/cuda/cuda_plan.c: 64 tiles per group at
   * these K): T = 2400, E = 16, K = 4 gives ~150 tiles of ~10 per expert, so groups cut experts, the last
   * group is short, and both GEMMs run several waves (GEMM1 3 column blocks, GEMM2 3: an odd item count
   * whenever the tile count is odd). Under FP8MOE_CUDA_GEMM_FALLBACK=m (test_gpu_sweep_sm90_m) both GEMMs'
   * 2-CTA clusters meet pairs of one expert (B multicast), pairs across an expert boundary or across column
   * blocks in the short last group (no multicast), and with an odd count a shadow item; the old orders run
   * it under "u" (test_gpu_sweep_sm90_u). */
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f, ++i) {
    if (s->quick && f != 1) continue;
    pg_config c;
    base_config(&c, FP8MOE_ROUTING_RENORMALIZE, formats[f], 3);
    c.T = 2400;
    c.H = 768;
    c.I = 384;
    c.gate_up_order = f % 2 ? FP8MOE_GATE_UP_UP_FIRST : FP8MOE_GATE_UP_GATE_FIRST;
    c.seed = 5000 + (uint64_t)i;
    generate_and_compare(s, &c, "plan");
  }
  /* An expert-parallel shard at large M (half the experts, offset by a quarter): the local tiles and the
   * 128-row GEMM1's pairs (FALLBACK=v) of the local experts only. */
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f, ++i) {
    if (s->quick && f != 1) continue;
    pg_config c;
    base_config(&c, FP8MOE_ROUTING_RENORMALIZE, formats[f], 3);
    c.E_local = c.E / 2;
    c.local_offset = c.E / 4;
    c.activation = f == 1 ? FP8MOE_ACTIVATION_GEGLU : FP8MOE_ACTIVATION_SWIGLU;
    c.gate_up_order = f % 2 ? FP8MOE_GATE_UP_GATE_FIRST : FP8MOE_GATE_UP_UP_FIRST;
    c.seed = 5000 + (uint64_t)i;
    generate_and_compare(s, &c, "plan");
  }
}

/* docs/TESTING.md 8 and 1: exact ties (few distinct logit values, exactly representable in every dtype). */
static void regression_ties(suite* s) {
  static const int32_t methods[] = {FP8MOE_ROUTING_DEFAULT, FP8MOE_ROUTING_RENORMALIZE, FP8MOE_ROUTING_DEEPSEEK_V3,
                                    FP8MOE_ROUTING_LLAMA4, FP8MOE_ROUTING_RENORMALIZE_NAIVE, FP8MOE_ROUTING_TOPK,
                                    FP8MOE_ROUTING_SIGMOID, FP8MOE_ROUTING_SIGMOID_RENORM, FP8MOE_ROUTING_TOPK_SIGMOID};
  for (size_t m = 0; m < sizeof methods / sizeof methods[0]; ++m) {
    for (int d = 0; d < 3; ++d) {
      if (s->quick && d > 0) continue;
      pg_config c;
      base_config(&c, methods[m], FP8MOE_QUANT_FP8_BLOCK128, (int)m);
      c.logits_dtype = *cycle_float(d);
      if (methods[m] == FP8MOE_ROUTING_DEEPSEEK_V3) c.uses_bias = 0;
      pg_problem p;
      if (pg_generate(&p, &c) != 0) continue;
      for (int64_t t = 0; t < c.T; ++t)
        for (int32_t e = 0; e < c.E; ++e)
          pg_set(p.logits, c.logits_dtype, c.logits_layout == PG_LOGITS_TRANSPOSED ? e * c.T + t : t * c.E + e,
                 0.25 * (double)((e * 7 + t) % 3) - 0.5);
      pg_describe(&p);
      compare_one(s, &p, "ties");
      pg_free(&p);
    }
  }
}

/* docs/TESTING.md 13: NaN / ±Inf in logits and hidden states behave identically on CPU and GPU. */
static void regression_nonfinite(suite* s) {
  static const int32_t methods[] = {FP8MOE_ROUTING_DEFAULT, FP8MOE_ROUTING_RENORMALIZE, FP8MOE_ROUTING_DEEPSEEK_V3,
                                    FP8MOE_ROUTING_SIGMOID_RENORM, FP8MOE_ROUTING_TOPK};
  static const int32_t formats[] = {FP8MOE_QUANT_FP8_PER_TENSOR, FP8MOE_QUANT_FP8_BLOCK128,
                                    FP8MOE_QUANT_FP8_PER_CHANNEL};
  for (size_t m = 0; m < sizeof methods / sizeof methods[0]; ++m)
    for (size_t f = 0; f < 3; ++f) {
      if (s->quick && f != m % 3) continue;
      pg_config c;
      base_config(&c, methods[m], formats[f], 0);
      c.logits_layout = PG_LOGITS_COMPACT;
      pg_problem p;
      if (pg_generate(&p, &c) != 0) continue;
      const int32_t E = c.E;
      /* token 0: one NaN, one −Inf, one +Inf logit; token 1: all logits NaN but two; token 2: all −Inf */
      pg_set(p.logits, c.logits_dtype, 0 * E + 3, NAN);
      pg_set(p.logits, c.logits_dtype, 0 * E + 5, -INFINITY);
      pg_set(p.logits, c.logits_dtype, 0 * E + 7, INFINITY);
      for (int32_t e = 2; e < E; ++e) pg_set(p.logits, c.logits_dtype, 1 * E + e, NAN);
      for (int32_t e = 0; e < E; ++e) pg_set(p.logits, c.logits_dtype, 2 * E + e, -INFINITY);
      /* token 3: a NaN hidden value; token 4: +Inf; token 5: −Inf */
      pg_set(p.hidden, c.hidden_dtype, 3 * c.H + 17, NAN);
      pg_set(p.hidden, c.hidden_dtype, 4 * c.H + 200, INFINITY);
      pg_set(p.hidden, c.hidden_dtype, 5 * c.H + 1, -INFINITY);
      pg_describe(&p);
      compare_one(s, &p, "nonfinite");
      pg_free(&p);
    }
}

/* Block scales at the edges of the wgmma kernels' folded promotion (kernels/gemm/wgmma_sm90.cuh,
 * promote_stage_folded; docs/GPU.md "The pair kernels' consumer chain"): it multiplies a partial by s_row·s_w
 * only where that moves a result by at most a rounding from the CPU backend's (p·s_row)·s_w, and random data
 * never leaves that range, so here GEMM1's scales sit outside it and the CPU association must run: activation
 * row scales below 2^-108 (bf16 rows ×2^-112) and above 2^100 (×2^110, with subnormal weight scales), host
 * block scales below 2^-108 on an e4m3 input, and a zero and a NaN weight block scale (NaN outputs for those
 * tokens on both backends; an Inf scale is left out: its sign would follow a partial sum's, which the backends
 * need not round alike near 0). Case 4 takes GEMM2's a2 row scales out of the range: w13's up blocks ×2^-110
 * make the activated rows ~2^-110 and their row scales ~2^-118, and w2's blocks ×2^110 bring the outputs back.
 * The weight scales make up the row scale's factor, so outputs stay normal numbers and the norm-relative check
 * sees every token. Sizes: 301 tokens (the 64-/128-row tiles), 4 tokens over 64 experts (the decode rows), and
 * under --large 2,400 tokens. */
static void regression_block_scales(suite* s, int large) {
  static const int64_t Ts[] = {301, 4};
  for (int kase = 0; kase < 5; ++kase)
    for (size_t ti = 0; ti < (large ? 1 : sizeof Ts / sizeof Ts[0]); ++ti) {
      if (s->quick && (kase + (int)ti) % 2) continue;
      pg_config c;
      base_config(&c, FP8MOE_ROUTING_RENORMALIZE, FP8MOE_QUANT_FP8_BLOCK128, 3);
      c.T = large ? 2400 : Ts[ti];
      if (c.T == 4) {
        c.E = 64;
        c.K = 6;
      }
      if (kase == 2) c.hidden_dtype = TEST_E4M3;
      c.logits_layout = PG_LOGITS_COMPACT;
      c.seed = 7000 + (uint64_t)(10 * kase + (int)ti) + (large ? 100 : 0);
      pg_problem p;
      if (pg_generate(&p, &c) != 0) {
        CHECK(0, "pg_generate failed");
        continue;
      }
      const int64_t n_hidden = c.T * c.H, n_w13s = (int64_t)c.E * (2 * c.I / 128) * (c.H / 128);
      const int64_t n_hs = c.T * (c.H / 128), n_w2s = (int64_t)c.E * (c.H / 128) * (c.I / 128);
      double row_factor = 1.0; /* applied to the hidden rows (or their host scales); w13's scales get 1/it */
      if (kase == 0) row_factor = 0x1p-112;
      /* s_row ≈ 2^102 (a partial ≤ 2^18.6 times it stays finite), s_w ≈ 2^-10 · 2^-117: subnormal */
      if (kase == 1) row_factor = 0x1p110;
      if (kase == 2) row_factor = 0x1p-112;
      if (kase == 2)
        for (int64_t i = 0; i < n_hs; ++i)
          pg_set(p.hidden_scale, c.scale_dtype, i, pg_get(p.hidden_scale, c.scale_dtype, i) * row_factor);
      else
        for (int64_t i = 0; i < n_hidden; ++i)
          pg_set(p.hidden, c.hidden_dtype, i, pg_get(p.hidden, c.hidden_dtype, i) * row_factor);
      const double w_factor = kase == 1 ? 0x1p-117 : 1.0 / row_factor;
      for (int64_t i = 0; i < n_w13s; ++i)
        pg_set(p.w13_scale, c.scale_dtype, i, pg_get(p.w13_scale, c.scale_dtype, i) * w_factor);
      if (kase == 4) { /* [E][2I/128][H/128]: the up half's column blocks ×2^-110, all of w2's ×2^110 */
        const int64_t nb = 2 * c.I / 128, kb = c.H / 128;
        const int64_t up0 = c.gate_up_order == FP8MOE_GATE_UP_GATE_FIRST ? nb / 2 : 0;
        for (int64_t e = 0; e < c.E; ++e)
          for (int64_t n = up0; n < up0 + nb / 2; ++n)
            for (int64_t k = 0; k < kb; ++k) {
              const int64_t i = (e * nb + n) * kb + k;
              pg_set(p.w13_scale, c.scale_dtype, i, pg_get(p.w13_scale, c.scale_dtype, i) * 0x1p-110);
            }
        for (int64_t i = 0; i < n_w2s; ++i)
          pg_set(p.w2_scale, c.scale_dtype, i, pg_get(p.w2_scale, c.scale_dtype, i) * 0x1p110);
      }
      if (kase == 3) { /* one block each, on different experts: zero and NaN in w13, NaN in w2 */
        const int64_t per13 = n_w13s / c.E, per2 = n_w2s / c.E;
        pg_set(p.w13_scale, c.scale_dtype, 1 * per13 + 1, 0.0);
        pg_set(p.w13_scale, c.scale_dtype, 5 * per13 + per13 - 1, NAN);
        pg_set(p.w2_scale, c.scale_dtype, 9 * per2 + 1, NAN);
        /* tokens 0..2 pick experts 1, 5 and 9 first (4 tokens over 64 experts might miss them) */
        for (int64_t t = 0; t < 3; ++t) pg_set(p.logits, c.logits_dtype, t * c.E + 1 + 4 * t, 20.0);
      }
      pg_describe(&p);
      compare_one(s, &p, kase == 3 ? "scale-nf" : "scale-edge");
      /* The comparison skips non-finite outputs, so a case that overflowed everywhere would pass unseen: most
       * outputs must be finite and nonzero (kase 3: some NaN, from the NaN scales, and some finite). */
      int64_t finite = 0, nan_out = 0;
      for (int64_t i = 0; i < c.T * c.H; ++i) {
        const double v = pg_output_at(&p, i);
        finite += isfinite(v) && v != 0.0;
        nan_out += isnan(v);
      }
      ++s->checks;
      CHECK(kase == 3 ? finite > 0 && nan_out > 0 : 2 * finite > c.T * c.H,
            "block scales case %d, T=%lld: %lld of %lld outputs finite and nonzero, %lld NaN", kase, (long long)c.T,
            (long long)finite, (long long)(c.T * c.H), (long long)nan_out);
      pg_free(&p);
    }
}

/* The kernel plan's decode rows (docs/GPU.md, at most half a row per expert: 2·T·K ≤ E): these experts are far
 * below the plan's size rule, so the default context runs the register pair (as FP8MOE_CUDA_GEMM_FALLBACK=k,
 * test_gpu_sweep_stream_k) and FALLBACK=l (test_gpu_sweep_sizes_l) on an H200 the stream pair
 * (kernels/gemm/gemm_stream_sm90.cu: a TMA weight ring across units, stream-K splits fixed up through the
 * workspace): every format, (a) one expert holding 12
 * of a tile's 16 rows (both token halves) with H = 384, so one consumer warp of each CTA has no K block and
 * GEMM2's warps split 2 blocks unevenly, mixed scale dtypes; (b) 16 tokens over 128 experts, more items than
 * resident CTAs (each CTA's ring runs on into its next items), e4m3 input with f16 scales, GeGLU and up-first
 * order; (c) K long enough that one GEMM1 item wraps the ring (H = 2304: 5 stages, the last with 2 of its 4
 * blocks) and GEMM2's last stage holds 1 block (I = 640). The plan's choice for these shapes is checked on
 * the host (test_cuda_plan.c). */
/* (a)'s routing: slot 0 of every token on expert 7, slot 1 on distinct others. */
static void route_one_expert_full(pg_problem* p) {
  const pg_config* c = &p->cfg;
  for (int64_t t = 0; t < c->T; ++t) {
    pg_set(p->topk_ids, c->ids_dtype, t * c->K, 7.0);
    pg_set(p->topk_ids, c->ids_dtype, t * c->K + 1, (double)(8 + t));
  }
}

/* (d)'s routing (T = 25, K = 2): tiles of 8, 9 and one real row on slot 0, of 16 and one on slot 1. */
static void route_tile_edges(pg_problem* p) {
  const pg_config* c = &p->cfg;
  for (int64_t t = 0; t < c->T; ++t) {
    const int64_t e0 = t < 8 ? 3 : t < 17 ? 5 : 20 + t, e1 = t < 16 ? 9 : 60 + t;
    pg_set(p->topk_ids, c->ids_dtype, t * c->K, (double)e0);
    pg_set(p->topk_ids, c->ids_dtype, t * c->K + 1, (double)e1);
  }
}

/* (g)'s routing (T = 96, K = 2): slot 0 of every token on expert 7 (six tiles), slot 1 of token t on expert
 * 8 + t % 4 (24 rows: two tiles each). */
static void route_experts_many_tiles(pg_problem* p) {
  const pg_config* c = &p->cfg;
  for (int64_t t = 0; t < c->T; ++t) {
    pg_set(p->topk_ids, c->ids_dtype, t * c->K, 7.0);
    pg_set(p->topk_ids, c->ids_dtype, t * c->K + 1, (double)(8 + t % 4));
  }
}

/* (h)'s routing (T = 512, K = 4): slot k of token t on expert (4t + k) mod 40 (51 or 52 rows each: four tiles). */
static void route_forty_experts(pg_problem* p) {
  const pg_config* c = &p->cfg;
  for (int64_t t = 0; t < c->T; ++t)
    for (int64_t k = 0; k < c->K; ++k) pg_set(p->topk_ids, c->ids_dtype, t * c->K + k, (double)((4 * t + k) % 40));
}

/* One routed problem (T, H, I, E, K; PRECOMPUTED ids from `route`) in every format of the decode rows, seeds seed + f;
 * under --quick only format `quick_format`. */
static void routed_in_formats(suite* s, const char* tag, size_t quick_format, int64_t T, int64_t H, int64_t I,
                              int32_t E, int32_t K, uint64_t seed, void (*route)(pg_problem*)) {
  static const int32_t formats[] = {FP8MOE_QUANT_FP8_PER_TENSOR, FP8MOE_QUANT_FP8_BLOCK128,
                                    FP8MOE_QUANT_FP8_PER_CHANNEL};
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f) {
    if (s->quick && f != quick_format) continue;
    pg_config c;
    pg_config_init(&c, FP8MOE_ROUTING_PRECOMPUTED, formats[f], T, H, I, E, K);
    c.seed = seed + (uint64_t)f;
    generate_routed_and_compare(s, &c, tag, route);
  }
}

static void decode_rows_on(suite* s, const char* tag) {
  static const int32_t formats[] = {FP8MOE_QUANT_FP8_PER_TENSOR, FP8MOE_QUANT_FP8_BLOCK128,
                                    FP8MOE_QUANT_FP8_PER_CHANNEL};
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f) {
    if (s->quick && f != 1) continue;
    pg_config c;
    pg_config_init(&c, FP8MOE_ROUTING_PRECOMPUTED, formats[f], 12, 384, 256, 64, 2);
    c.scale_dtype = TEST_BF16; /* weight scales bf16, the library's input scales fp32 */
    c.seed = 7000 + (uint64_t)f;
    generate_routed_and_compare(s, &c, tag, route_one_expert_full);
  }
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f) {
    if (s->quick && f != 1) continue;
    pg_config c;
    pg_config_init(&c, FP8MOE_ROUTING_RENORMALIZE, formats[f], 16, 256, 256 + 128 * (int64_t)(f % 2), 128, 4);
    c.hidden_dtype = TEST_E4M3;
    c.scale_dtype = TEST_F16;
    c.activation = f == 2 ? FP8MOE_ACTIVATION_GEGLU : FP8MOE_ACTIVATION_SWIGLU;
    c.gate_up_order = f == 1 ? FP8MOE_GATE_UP_UP_FIRST : FP8MOE_GATE_UP_GATE_FIRST;
    c.seed = 7100 + (uint64_t)f;
    generate_and_compare(s, &c, tag);
  }
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f) {
    if (s->quick && f != 1) continue;
    pg_config c;
    pg_config_init(&c, FP8MOE_ROUTING_RENORMALIZE, formats[f], 2, 2304, 640, 8, 2);
    c.seed = 7200 + (uint64_t)f;
    generate_and_compare(s, &c, tag);
  }
  /* (d) tiles with exactly 1, 8, 9 and 16 real rows (N = 8 at the edge, N = 16 just past it and full), every
   * requantization the format's static/dynamic flags give, both gate/up orders and activations, the
   * input-side token weight on an e4m3 input (K = 1 routing is not TINY here, so it rides on (e) instead),
   * and an expert-parallel shard whose non-local slots the GEMMs never see: T = 25, E = 128, K = 2, slot 0 of
   * tokens 0–7 on expert 3, of 8–16 on expert 5, of 17–24 on experts 37–44 (one row each), slot 1 of
   * tokens 0–15 on expert 9, of 16–24 on experts 76–84. */
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f)
    for (int shard = 0; shard < 2; ++shard) {
      if (s->quick && f != 1 && shard == 1) continue;
      pg_config c;
      pg_config_init(&c, FP8MOE_ROUTING_PRECOMPUTED, formats[f], 25, 256, 256, 128, 2);
      c.activation = shard ? FP8MOE_ACTIVATION_GEGLU : FP8MOE_ACTIVATION_SWIGLU;
      c.gate_up_order = (f + (size_t)shard) % 2 ? FP8MOE_GATE_UP_UP_FIRST : FP8MOE_GATE_UP_GATE_FIRST;
      c.hidden_dtype = shard ? TEST_E4M3 : TEST_BF16;
      c.a1_static = (int)(f % 2);
      c.a2_static = shard;
      if (shard) {
        c.E_local = 64;
        c.local_offset = 0;
      }
      c.seed = 7300 + (uint64_t)(2 * f) + (uint64_t)shard;
      generate_routed_and_compare(s, &c, tag, route_tile_edges);
    }
  /* (e) T = 1 with K = 4 over E = 64 (four one-row tiles: more units than a small grid's CTAs are cut into
   * stream-K segments), H = 512 (two full GEMM2 units), I = 384 (three GEMM1 groups, GEMM2 K of 3 blocks). */
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f) {
    if (s->quick && f != 1) continue;
    pg_config c;
    pg_config_init(&c, FP8MOE_ROUTING_RENORMALIZE, formats[f], 1, 512, 384, 64, 4);
    c.a2_static = (int)(f == 2);
    c.seed = 7400 + (uint64_t)f;
    generate_and_compare(s, &c, tag);
  }
  /* (f) the token weight on an e4m3 input, applied in GEMM1's epilogue (LLAMA4 routing, K = 1): T = 8 over
   * E = 16 is TINY. */
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; ++f) {
    if (s->quick && f != 1) continue;
    pg_config c;
    base_config(&c, FP8MOE_ROUTING_LLAMA4, formats[f], 3);
    c.T = 8;
    c.hidden_dtype = TEST_E4M3;
    c.gate_up_order = f % 2 ? FP8MOE_GATE_UP_UP_FIRST : FP8MOE_GATE_UP_GATE_FIRST;
    c.seed = 7500 + (uint64_t)f;
    generate_and_compare(s, &c, tag);
  }
  /* (g) experts holding several tiles (SMALL: 192 rows over 16 experts, T > 16): 14 tiles of 5 experts, more units
   * than CTAs in both GEMMs on 132 CTAs (GEMM1 14 × 20 groups, GEMM2 14 × 10 column units), so the stream GEMMs
   * take the expert-aligned split (9 CTAs a tile), and with units of two tiles (FALLBACK=l: 7 entries) GEMM1 does
   * (kernels/gemm/stream_split.h). */
  routed_in_formats(s, tag, 1, 96, 2560, 2560, 16, 2, 7600, route_experts_many_tiles);
  /* (h) more entries than CTAs (SMALL: 2,048 rows over 256 experts): 160 tiles of 40 experts, so on 132 CTAs both
   * GEMMs take the expert-aligned split in two rounds on 80 CTAs (fp8moe_split_rounds); with units of two tiles
   * (FALLBACK=l) 80 entries spread one a CTA. */
  routed_in_formats(s, tag, 0, 512, 256, 256, 256, 4, 7700, route_forty_experts);
}

/* The decode rows on the suite's context (the register pair; under FALLBACK=l on cc 9.0 the stream pair). */
static void decode_rows(suite* s) { decode_rows_on(s, "decode"); }

/* docs/TESTING.md 11: PRECOMPUTED with an out-of-range id: the GPU skips and counts it; the CPU oracle gets the
 * same slots as weight-0 in-range ids, which contribute exactly nothing. */
static void regression_precomputed_range(suite* s) {
  pg_config c;
  base_config(&c, FP8MOE_ROUTING_PRECOMPUTED, FP8MOE_QUANT_FP8_BLOCK128, 1);
  c.ids_dtype = TEST_I64;
  c.topk_weights_dtype = TEST_BF16;
  pg_problem p;
  if (pg_generate(&p, &c) != 0) return;
  const int64_t bad[3][3] = {{0, 1, -1}, {5, 3, 16}, {9, 0, 1000000}}; /* t, k, id */
  for (int b = 0; b < 3; ++b) pg_set(p.topk_ids, c.ids_dtype, bad[b][0] * c.K + bad[b][1], (double)bad[b][2]);
  pg_describe(&p);
  run_outputs g, cpu;
  memset(&g, 0, sizeof g);
  memset(&cpu, 0, sizeof cpu);
  int32_t word = -1;
  ++s->checks;
  if (run_gpu(s, &p, &g, &word) == 0) {
    CHECK(word == 3, "device_status: got %d; expected 3 skipped ids", (int)word);
    /* The CPU refuses the out-of-range ids (DATA_ERROR) ... */
    pg_poison(&p);
    int32_t st = pg_run(&s->tp, s->cpu, &p);
    CHECK(st == FP8MOE_STATUS_DATA_ERROR, "CPU with out-of-range ids: status %d; expected DATA_ERROR", (int)st);
    /* ... and computes the same layer with the slots made inert. */
    for (int b = 0; b < 3; ++b) {
      pg_set(p.topk_ids, c.ids_dtype, bad[b][0] * c.K + bad[b][1], 0.0);
      pg_set(p.topk_weights, c.topk_weights_dtype, bad[b][0] * c.K + bad[b][1], 0.0);
    }
    pg_describe(&p);
    if (run_cpu(s, &p, &cpu) == 0) {
      free(g.ids);
      free(cpu.ids);
      free(g.w);
      free(cpu.w);
      g.ids = cpu.ids = NULL;
      g.w = cpu.w = NULL;
      compare_result r;
      CHECK(outputs_compare(&g, &cpu, NULL, c.T, "precomputed out-of-range", &r), "out-of-range ids");
      printf("%-10s rel_err %.3e  device_status %d\n", "oob-ids", r.rel_err, (int)word);
    }
  }
  outputs_free(&g);
  outputs_free(&cpu);
  pg_free(&p);
}

/* docs/TESTING.md 12: T = 0 is a valid call that writes nothing. */
static void regression_t0(suite* s) {
  pg_config c;
  base_config(&c, FP8MOE_ROUTING_RENORMALIZE, FP8MOE_QUANT_FP8_PER_TENSOR, 0);
  c.T = 0;
  pg_problem p;
  if (pg_generate(&p, &c) != 0) {
    CHECK(0, "pg_generate T=0");
    return;
  }
  gpu_problem g;
  ++s->checks;
  if (gpu_clone(&s->tp, s->gpu, &p.args, &g) == 0) {
    int32_t st = s->tp.api->run(s->gpu, &g.args);
    CHECK(st == FP8MOE_STATUS_OK, "T=0 run: status %d", (int)st);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "T=0 sync");
    CHECK(gpu_status_word(&g) == 0x5A5A5A5A, "T=0 wrote device_status");
    printf("%-10s ok\n", "T=0");
  }
  gpu_free(&g);
  pg_free(&p);
}

/* docs/TESTING.md 14: the shards of an expert-parallel split sum to the full layer (GPU alone). */
static void regression_shards(suite* s) {
  pg_config c;
  base_config(&c, FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_QUANT_FP8_BLOCK128, 2);
  c.output_dtype = TEST_F32;
  c.logits_layout = PG_LOGITS_COMPACT; /* the shard copies below assume compact fp32 logits and bf16 hidden */
  pg_problem full;
  if (pg_generate(&full, &c) != 0) return;
  run_outputs f;
  memset(&f, 0, sizeof f);
  ++s->checks;
  if (run_gpu(s, &full, &f, NULL) != 0) {
    pg_free(&full);
    return;
  }
  double* sum = calloc((size_t)(c.T * c.H), sizeof(double));
  const int shards = 4;
  for (int sh = 0; sh < shards && sum; ++sh) {
    pg_config cs = c;
    cs.E_local = c.E / shards;
    cs.local_offset = sh * cs.E_local;
    pg_problem p;
    if (pg_generate(&p, &cs) != 0) continue;
    /* same hidden, logits and bias; this shard's slice of the weights */
    memcpy(p.hidden, full.hidden, (size_t)(c.T * c.H * 2));
    memcpy(p.logits, full.logits, (size_t)(c.T * c.E * 4));
    memcpy(p.bias, full.bias, (size_t)c.E * 4);
    const size_t w13e = (size_t)(2 * c.I * c.H), w2e = (size_t)(c.H * c.I);
    const size_t s13 = (size_t)((2 * c.I / 128) * (c.H / 128)) * 4, s2 = (size_t)((c.H / 128) * (c.I / 128)) * 4;
    memcpy(p.w13, (char*)full.w13 + w13e * (size_t)cs.local_offset, w13e * (size_t)cs.E_local);
    memcpy(p.w2, (char*)full.w2 + w2e * (size_t)cs.local_offset, w2e * (size_t)cs.E_local);
    memcpy(p.w13_scale, (char*)full.w13_scale + s13 * (size_t)cs.local_offset, s13 * (size_t)cs.E_local);
    memcpy(p.w2_scale, (char*)full.w2_scale + s2 * (size_t)cs.local_offset, s2 * (size_t)cs.E_local);
    pg_describe(&p);
    run_outputs o;
    memset(&o, 0, sizeof o);
    if (run_gpu(s, &p, &o, NULL) == 0)
      for (int64_t i = 0; i < c.T * c.H; ++i) sum[i] += o.out[i];
    outputs_free(&o);
    pg_free(&p);
  }
  double d2 = 0, r2 = 0;
  for (int64_t i = 0; sum && i < c.T * c.H; ++i) {
    d2 += (sum[i] - f.out[i]) * (sum[i] - f.out[i]);
    r2 += f.out[i] * f.out[i];
  }
  double rel = r2 > 0 ? sqrt(d2 / r2) : 1.0;
  CHECK(sum && rel <= 1e-5, "expert-parallel shards sum: rel %.3e", rel);
  printf("%-10s rel_err %.3e (4 shards summed vs full, GPU)\n", "shards", rel);
  free(sum);
  outputs_free(&f);
  pg_free(&full);
}

/* A captured run replayed from a CUDA graph equals the direct run, bit for bit. T = 0 keeps the base
 * configuration's 301 tokens (the one-block permutation); 1024 tokens × 6 = 6,144 routed rows take the
 * chunked permutation (kernel plan, src/cuda/cuda_plan.c: three PDL launches captured as programmatic edges);
 * 4 tokens × 6 = 24 rows over 64 experts are the decode rows. */
static void graph_capture(suite* s, int64_t T) {
  pg_config c;
  base_config(&c, FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_QUANT_FP8_BLOCK128, 3);
  if (T > 0) c.T = T;
  c.E = 64;
  c.K = 6;
  c.n_group = 8;
  c.topk_group = 4;
  pg_problem p;
  if (pg_generate(&p, &c) != 0) return;
  ++s->checks;
  gpu_problem g;
  cudaStream_t st = NULL;
  run_outputs direct, replay;
  memset(&direct, 0, sizeof direct);
  memset(&replay, 0, sizeof replay);
  if (gpu_clone(&s->tp, s->gpu, &p.args, &g) == 0 && cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess) {
    g.args.stream = st;
    gpu_poison(&g, st);
    CHECK(s->tp.api->run(s->gpu, &g.args) == FP8MOE_STATUS_OK, "direct run");
    gpu_fetch(&g);
    outputs_take(&p.args, &direct);
    gpu_poison(&g, st);
    cudaStreamSynchronize(st);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
    int32_t rs = s->tp.api->run(s->gpu, &g.args);
    cudaError_t ce = cudaStreamEndCapture(st, &graph);
    CHECK(rs == FP8MOE_STATUS_OK && ce == cudaSuccess, "run under capture: status %d, %s", (int)rs, cudaGetErrorString(ce));
    size_t nodes = 0;
    if (graph) cudaGraphGetNodes(graph, NULL, &nodes);
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    for (int rep = 0; rep < 3 && exec; ++rep) {
      gpu_poison(&g, st);
      CHECK(cudaGraphLaunch(exec, st) == cudaSuccess, "graph launch");
    }
    gpu_fetch(&g);
    outputs_take(&p.args, &replay);
    CHECK(direct.out && replay.out && outputs_identical(&direct, &replay), "graph replay differs from the direct run");
    printf("%-10s T=%lld %s (%zu graph nodes, 3 replays)\n", "graph", (long long)c.T, direct.out && replay.out && outputs_identical(&direct, &replay) ? "identical" : "DIFFERENT", nodes);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
  if (st) cudaStreamDestroy(st);
  outputs_free(&direct);
  outputs_free(&replay);
  gpu_free(&g);
  pg_free(&p);
}

/* Two different problems on two streams of one context, interleaved: each equals its own direct run. */
static void two_streams(suite* s) {
  pg_config c1, c2;
  base_config(&c1, FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_QUANT_FP8_BLOCK128, 4);
  base_config(&c2, FP8MOE_ROUTING_RENORMALIZE, FP8MOE_QUANT_FP8_PER_TENSOR, 5);
  c2.T = 301;
  pg_problem p1, p2;
  if (pg_generate(&p1, &c1) != 0) return;
  if (pg_generate(&p2, &c2) != 0) {
    pg_free(&p1);
    return;
  }
  ++s->checks;
  gpu_problem g1, g2;
  cudaStream_t s1 = NULL, s2 = NULL;
  run_outputs d1, d2, r1, r2;
  memset(&d1, 0, sizeof d1);
  memset(&d2, 0, sizeof d2);
  memset(&r1, 0, sizeof r1);
  memset(&r2, 0, sizeof r2);
  if (gpu_clone(&s->tp, s->gpu, &p1.args, &g1) == 0 && gpu_clone(&s->tp, s->gpu, &p2.args, &g2) == 0 &&
      cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess &&
      cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess) {
    g1.args.stream = s1;
    g2.args.stream = s2;
    gpu_poison(&g1, s1);
    CHECK(s->tp.api->run(s->gpu, &g1.args) == FP8MOE_STATUS_OK, "run 1");
    gpu_fetch(&g1);
    outputs_take(&p1.args, &d1);
    gpu_poison(&g2, s2);
    CHECK(s->tp.api->run(s->gpu, &g2.args) == FP8MOE_STATUS_OK, "run 2");
    gpu_fetch(&g2);
    outputs_take(&p2.args, &d2);
    for (int rep = 0; rep < 4; ++rep) {
      gpu_poison(&g1, s1);
      gpu_poison(&g2, s2);
      CHECK(s->tp.api->run(s->gpu, &g1.args) == FP8MOE_STATUS_OK, "concurrent run 1");
      CHECK(s->tp.api->run(s->gpu, &g2.args) == FP8MOE_STATUS_OK, "concurrent run 2");
    }
    gpu_fetch(&g1);
    gpu_fetch(&g2);
    outputs_take(&p1.args, &r1);
    outputs_take(&p2.args, &r2);
    int ok = d1.out && r1.out && d2.out && r2.out && outputs_identical(&d1, &r1) && outputs_identical(&d2, &r2);
    CHECK(ok, "two streams: a concurrent run differs from its direct run");
    printf("%-10s %s\n", "streams", ok ? "identical" : "DIFFERENT");
  }
  if (s1) cudaStreamDestroy(s1);
  if (s2) cudaStreamDestroy(s2);
  outputs_free(&d1);
  outputs_free(&d2);
  outputs_free(&r1);
  outputs_free(&r2);
  gpu_free(&g1);
  gpu_free(&g2);
  pg_free(&p1);
  pg_free(&p2);
}

int main(int argc, char** argv) {
  suite s;
  memset(&s, 0, sizeof s);
  setvbuf(stdout, NULL, _IONBF, 0); /* a crash must not swallow the lines before it */
  s.quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  /* --large: only the large-M plan rows, in full (the variants FALLBACK=v, vg, y, vy and i run them too). */
  const int large_only = argc > 1 && strcmp(argv[1], "--large") == 0;
  fp8moe_backend_info bi;
  int open_rc = gpu_suite_open("test_gpu_sweep", &s.tp, &s.cpu, &s.gpu, &bi);
  if (open_rc != 0) return open_rc;
  if (s.cpu && s.gpu) {
    printf("device: %s\n", bi.device_name);
    fp8moe_context_info ci;
    memset(&ci, 0, sizeof ci);
    ci.struct_size = sizeof ci;
    ++s.checks;
    CHECK(s.tp.api->context_info(s.gpu, &ci) == FP8MOE_STATUS_OK && ci.backend == FP8MOE_BACKEND_CUDA &&
              ci.device_ordinal == 0 && ci.graph_capturable == 1 && ci.sm_count > 0 && ci.compute_capability >= 90,
          "context_info: backend %d ordinal %d capturable %d sms %d cc %d", (int)ci.backend, (int)ci.device_ordinal,
          (int)ci.graph_capturable, (int)ci.sm_count, (int)ci.compute_capability);
    printf("context: %s, %d SMs, cc %d\n", ci.device_name, (int)ci.sm_count, (int)ci.compute_capability);
    if (large_only) {
      plan_rows(&s);
      regression_block_scales(&s, 1);
      graph_capture(&s, 2400);
    } else {
      sweep(&s);
      plan_rows(&s);
      decode_rows(&s);
    regression_ties(&s);
    regression_nonfinite(&s);
    regression_block_scales(&s, 0);
    regression_precomputed_range(&s);
    regression_t0(&s);
    regression_shards(&s);
    graph_capture(&s, 0);
    graph_capture(&s, 1024);
    graph_capture(&s, 4); /* 2·T·K ≤ E: the decode rows (under FALLBACK=l on cc 9.0 the stream pair: its
                             counters and split fixup must give the same bits on every replay) */
    two_streams(&s);
    }
    printf("max rel_err vs CPU: FP8_PER_TENSOR %.3e, FP8_BLOCK128 %.3e, FP8_PER_CHANNEL %.3e\n", s.max_rel[0],
           s.max_rel[1], s.max_rel[2]);
  }
  s.tp.api->context_destroy(s.gpu);
  s.tp.api->context_destroy(s.cpu);
  test_plugin_close(&s.tp);
  return test_finish("test_gpu_sweep", s.checks);
}
