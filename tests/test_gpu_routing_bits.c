/* test_gpu_routing_bits.c — the CPU and CUDA backends give bit-identical routing weights and ids (issue 11;
 * src/routing_math.h is their one formulation). For every logit-reading routing method, at least 10^5 logit
 * rows — random at several scales and adversarial (ties, ±Inf, NaN, huge and tiny magnitudes, values at exp's
 * overflow and underflow thresholds, fewer selectable experts than K, sigmoid keys on a fine grid; routing_rows.h) —
 * go through both backends, and
 * routing_ids_out and routing_weights_out are compared bit for bit; the first 1,200 rows of each method also one
 * token per run (T = 1: the prologue), as configured and with FALLBACK=a (a team of warps routes every E ≥ 33:
 * kernels/routing_team.cuh). Skipped (77) without a usable CUDA device.
 * Usage: test_gpu_routing_bits [rows per method] (default 100000). */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_problem.h"
#include "gpu_util.h"
#include "routing_rows.h"

#define CHUNK 20000

static unsigned char* arena;
static size_t arena_used, arena_bytes;
static uint32_t next_u32(void) { return routing_rows_u32(); }
static float uniform(void) { return routing_rows_uniform(); }

static void* data_fn(const baseline_problem* p, int32_t arg, fp8moe_dtype dt, int64_t n) {
  (void)p;
  size_t bytes = (size_t)(n > 0 ? n : 1) * (dt.bits / 8u);
  void* d = arena + arena_used;
  arena_used += (bytes + 255) / 256 * 256;
  if (arena_used > arena_bytes) return NULL;
  for (int64_t i = 0; i < n; ++i) {
    if (dt.code == FP8MOE_DTYPE_FLOAT8_E4M3FN) ((unsigned char*)d)[i] = (unsigned char)(next_u32() & 0xB7);
    else if (dt.code == FP8MOE_DTYPE_FLOAT && dt.bits == 32) ((float*)d)[i] = 0.005f + 0.01f * uniform();
    else if (dt.code == FP8MOE_DTYPE_BFLOAT) {
      float v = 2 * uniform() - 1;
      uint32_t u;
      memcpy(&u, &v, 4);
      ((uint16_t*)d)[i] = (uint16_t)(u >> 16);
    } else memset((char*)d + i * (dt.bits / 8), 0, dt.bits / 8);
  }
  (void)arg;
  return d;
}

/* The first rows of a chunk also go through the GPU one token per run: at T = 1 the one-block prologue routes
 * with a team of warps (kernels/routing_team.cuh) instead of the routing kernel, and must give the same bits. */
#define SINGLE_ROWS 1200

/* g's arguments narrowed to token r: T = 1 views of the [T, …] tensors, the rest shared. */
typedef struct row_view {
  fp8moe_moe_args args;
  fp8moe_tensor t[5];
  int64_t shape[5][2];
} row_view;

static void row_view_make(row_view* v, const gpu_problem* g, int64_t r) {
  const fp8moe_tensor* src[5] = {g->args.hidden_states, g->args.router_logits, g->args.output,
                                 g->args.routing_ids_out, g->args.routing_weights_out};
  v->args = g->args;
  for (int i = 0; i < 5; ++i) {
    v->t[i] = *src[i];
    v->shape[i][0] = 1;
    v->shape[i][1] = src[i]->shape[1];
    v->t[i].shape = v->shape[i];
    const int64_t row = src[i]->strides ? src[i]->strides[0] : src[i]->shape[1];
    v->t[i].byte_offset += (uint64_t)(r * row * (int64_t)(src[i]->dtype.bits / 8));
  }
  v->args.hidden_states = &v->t[0];
  v->args.router_logits = &v->t[1];
  v->args.output = &v->t[2];
  v->args.routing_ids_out = &v->t[3];
  v->args.routing_weights_out = &v->t[4];
}

/* Rows [0, n) of the GPU's ids/weights (host copies after gpu_fetch) against the CPU's; returns the rows' ids and
 * weights that differ through *ids_bad / *w_bad. */
static void compare_rows(const baseline_problem* p, int32_t method, int32_t K, size_t n, long first_row, const int32_t* cpu_ids,
                         const float* cpu_w, long* ids_bad, long* w_bad, const char* how) {
  const int32_t* ids = p->t[FP8MOE_ARG_ROUTING_IDS_OUT].t.data;
  const float* w = p->t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].t.data;
  for (size_t i = 0; i < n; ++i) {
    *ids_bad += ids[i] != cpu_ids[i];
    if (memcmp(&w[i], &cpu_w[i], sizeof(float)) != 0 && ++*w_bad <= 5)
      fprintf(stderr, "method %d (%s) row %lld slot %lld: cpu %a gpu %a\n", method, how,
              (long long)(first_row + (long)(i / (size_t)K)), (long long)(i % (size_t)K), (double)cpu_w[i],
              (double)w[i]);
  }
}

typedef struct method_case {
  int32_t method, E, K, n_group, topk_group, with_bias;
} method_case;

int main(int argc, char** argv) {
  long rows = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
  test_plugin tp;
  fp8moe_context *cpu = NULL, *gpu = NULL;
  fp8moe_backend_info bi;
  int rc = gpu_suite_open("test_gpu_routing_bits", &tp, &cpu, &gpu, &bi);
  if (rc != 0) return rc;
  if (!cpu || !gpu) return test_finish("test_gpu_routing_bits", test_checks_run + 1);
  /* The one-token runs also on a context with FALLBACK=a: a team of warps routes every E ≥ 33 there, not only past
   * 256 experts (kernels/routing_team.cuh; src/cuda/cuda_plan.c's team rule). */
  fp8moe_context* gpu_any = NULL;
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.backend = FP8MOE_BACKEND_CUDA;
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "a", 1); /* read at context creation only */
  CHECK(tp.api->context_create(&ca, &gpu_any) == FP8MOE_STATUS_OK, "context_create with FALLBACK=a");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  if (!gpu_any) return test_finish("test_gpu_routing_bits", test_checks_run);
  const method_case cases[] = {
      {FP8MOE_ROUTING_DEFAULT, 64, 4, 1, 1, 0},          {FP8MOE_ROUTING_RENORMALIZE, 128, 8, 1, 1, 0},
      {FP8MOE_ROUTING_DEEPSEEK_V3, 256, 8, 8, 4, 1},     {FP8MOE_ROUTING_LLAMA4, 16, 1, 1, 1, 0},
      {FP8MOE_ROUTING_RENORMALIZE_NAIVE, 384, 6, 1, 1, 0}, {FP8MOE_ROUTING_TOPK, 32, 2, 1, 1, 0},
      {FP8MOE_ROUTING_SIGMOID, 64, 4, 1, 1, 0},          {FP8MOE_ROUTING_SIGMOID_RENORM, 128, 8, 1, 1, 0},
      {FP8MOE_ROUTING_TOPK_SIGMOID, 64, 4, 1, 1, 0},
      /* DeepSeek-V3 without group limiting (kimi-k2, glm-4.5-air): the filtered selection's other floor, at 16 and
       * 4 experts per lane */
      {FP8MOE_ROUTING_DEEPSEEK_V3, 384, 8, 1, 1, 1},     {FP8MOE_ROUTING_DEEPSEEK_V3, 128, 8, 1, 1, 1},
      /* and with groups of 16 experts (not one register's worth) */
      {FP8MOE_ROUTING_DEEPSEEK_V3, 128, 8, 8, 4, 1},
  };
  arena_bytes = (size_t)1 << 30;
  arena = baseline_alloc256(arena_bytes);
  static baseline_problem p;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    const method_case* m = &cases[c];
    long done = 0, ids_bad = 0, w_bad = 0, rows1 = 0, ids_bad1 = 0, w_bad1 = 0;
    while (done < rows) {
      arena_used = 0;
      baseline_config cfg = baseline_config_default();
      cfg.method = m->method;
      cfg.format = FP8MOE_QUANT_FP8_PER_TENSOR;
      cfg.T = rows - done < CHUNK ? rows - done : CHUNK;
      cfg.H = 128;
      cfg.I = 128;
      cfg.E = m->E;
      cfg.K = m->K;
      cfg.n_group = m->n_group;
      cfg.topk_group = m->topk_group;
      cfg.with_bias = m->with_bias;
      cfg.E_local = 1; /* routing covers all E experts; only expert 0's FFN runs, which keeps the CPU side fast */
      baseline_build(&p, &cfg, data_fn);
      float* logits = (float*)p.t[FP8MOE_ARG_ROUTER_LOGITS].t.data;
      const float* bias = cfg.with_bias ? (const float*)p.t[FP8MOE_ARG_ROUTING_BIAS].t.data : NULL;
      for (int64_t t = 0; t < cfg.T; ++t)
        routing_rows_fill(logits + t * cfg.E, cfg.E, cfg.K, (uint32_t)((done + t) % ROUTING_ROW_KINDS), bias);
      void* ws = NULL;
      int32_t st = baseline_run_with_workspace(tp.api, cpu, &p, &ws);
      EXPECT(st == FP8MOE_STATUS_OK, "method %d: CPU query_workspace/run %d: %s", m->method, st, p.message);
      const size_t n = (size_t)(cfg.T * cfg.K);
      int32_t* cpu_ids = malloc(n * sizeof(int32_t));
      float* cpu_w = malloc(n * sizeof(float));
      memcpy(cpu_ids, p.t[FP8MOE_ARG_ROUTING_IDS_OUT].t.data, n * sizeof(int32_t));
      memcpy(cpu_w, p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].t.data, n * sizeof(float));
      p.args.workspace = NULL;
      p.args.workspace_size = 0;
      gpu_problem g;
      if (gpu_clone(&tp, gpu, &p.args, &g) == 0 && gpu_poison(&g, NULL) == 0) {
        st = tp.api->run(gpu, &g.args);
        EXPECT(st == FP8MOE_STATUS_OK, "method %d: GPU run %d: %s", m->method, st, p.message);
        EXPECT(gpu_fetch(&g) == 0, "method %d: fetch", m->method);
        compare_rows(&p, m->method, cfg.K, n, done, cpu_ids, cpu_w, &ids_bad, &w_bad, "all rows");
        for (int c1 = 0; c1 < 2 && done == 0; ++c1) { /* one token per run, as configured, then FALLBACK=a */
          const int64_t single = cfg.T < SINGLE_ROWS ? cfg.T : SINGLE_ROWS;
          EXPECT(gpu_poison(&g, NULL) == 0, "method %d: poison", m->method);
          for (int64_t r = 0; r < single; ++r) {
            row_view v;
            row_view_make(&v, &g, r);
            st = tp.api->run(c1 ? gpu_any : gpu, &v.args);
            EXPECT(st == FP8MOE_STATUS_OK, "method %d: GPU run of row %lld: %d", m->method, (long long)r, st);
          }
          EXPECT(gpu_fetch(&g) == 0, "method %d: fetch", m->method);
          compare_rows(&p, m->method, cfg.K, (size_t)(single * cfg.K), 0, cpu_ids, cpu_w, &ids_bad1, &w_bad1,
                       c1 ? "T = 1, FALLBACK=a" : "T = 1");
          rows1 += single;
        }
      } else {
        EXPECT(0, "method %d: gpu_clone", m->method);
      }
      gpu_free(&g);
      free(cpu_ids);
      free(cpu_w);
      free(ws);
      done += (long)cfg.T;
    }
    printf("method %d: %ld rows, ids differing %ld, weights differing (bits) %ld\n", m->method, done, ids_bad,
           w_bad);
    EXPECT(ids_bad == 0 && w_bad == 0, "method %d: %ld ids and %ld weights differ between CPU and CUDA", m->method,
           ids_bad, w_bad);
    printf("method %d: %ld rows one token per run (both contexts), ids differing %ld, weights differing (bits) %ld\n", m->method,
           rows1, ids_bad1, w_bad1);
    EXPECT(rows1 > 0 && ids_bad1 == 0 && w_bad1 == 0,
           "method %d: %ld ids and %ld weights differ between CPU and CUDA at T = 1 (%ld rows)", m->method, ids_bad1,
           w_bad1, rows1);
  }
  tp.api->context_destroy(cpu);
  tp.api->context_destroy(gpu);
  tp.api->context_destroy(gpu_any);
  free(arena);
  test_plugin_close(&tp);
  return test_finish("test_gpu_routing_bits", test_checks_run);
}
