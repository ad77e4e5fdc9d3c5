/* test_threads.c — CPU determinism and concurrency (DESIGN.md "Determinism"): the same problem gives
 * bit-identical output, routing ids and weights with 1, 2, 3 and 8 worker threads; and `run` called
 * concurrently from 4 host threads on one context, each with its own problem, gives each the result it gets
 * alone. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_check.h"

#define HOST_THREADS 4
#define REPEATS 4

static fp8moe_context* make_context(const test_plugin* tp, int32_t threads) {
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.backend = FP8MOE_BACKEND_CPU;
  ca.num_threads = threads;
  fp8moe_context* ctx = NULL;
  int32_t st = tp->api->context_create(&ca, &ctx);
  CHECK(st == FP8MOE_STATUS_OK, "context_create(num_threads %d): status %d", threads, st);
  if (st != FP8MOE_STATUS_OK) return NULL;
  fp8moe_context_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  st = tp->api->context_info(ctx, &info);
  CHECK(st == FP8MOE_STATUS_OK && info.num_threads == threads, "context_info: status %d, num_threads %d (asked %d)",
        st, info.num_threads, threads);
  return ctx;
}

/* A copy of a run's results, to compare bit for bit. */
typedef struct snapshot {
  void* output;
  int32_t ids[4096];
  float weights[4096];
  size_t output_bytes, routing_count;
} snapshot;

static int take(snapshot* s, const pg_problem* p) {
  s->output_bytes = p->output_bytes;
  s->routing_count = (size_t)(p->cfg.T * p->cfg.K);
  s->output = malloc(p->output_bytes);
  if (!s->output || s->routing_count > 4096) return 0;
  memcpy(s->output, p->output, p->output_bytes);
  memcpy(s->ids, p->ids_out, sizeof(int32_t) * s->routing_count);
  memcpy(s->weights, p->weights_out, sizeof(float) * s->routing_count);
  return 1;
}

static int same(const snapshot* s, const pg_problem* p) {
  return memcmp(s->output, p->output, s->output_bytes) == 0 &&
         memcmp(s->ids, p->ids_out, sizeof(int32_t) * s->routing_count) == 0 &&
         memcmp(s->weights, p->weights_out, sizeof(float) * s->routing_count) == 0;
}

/* The problems: one per format, with the reductions that could depend on the split (dynamic per-tensor amax
 * over all tokens and all intermediate rows), T not a multiple of any thread count. */
static void problem_config(pg_config* c, int i) {
  static const int32_t methods[HOST_THREADS] = {FP8MOE_ROUTING_DEEPSEEK_V3, FP8MOE_ROUTING_RENORMALIZE,
                                                FP8MOE_ROUTING_SIGMOID_RENORM, FP8MOE_ROUTING_LLAMA4};
  static const int32_t formats[HOST_THREADS] = {FP8MOE_QUANT_FP8_BLOCK128, FP8MOE_QUANT_FP8_PER_TENSOR,
                                                FP8MOE_QUANT_FP8_PER_CHANNEL, FP8MOE_QUANT_FP8_PER_TENSOR};
  pg_config_init(c, methods[i], formats[i], 61 + 10 * i, 256, 256, 16, methods[i] == FP8MOE_ROUTING_LLAMA4 ? 1 : 4);
  if (methods[i] == FP8MOE_ROUTING_DEEPSEEK_V3) {
    c->n_group = 4;
    c->topk_group = 2;
  }
  c->output_dtype = i % 2 ? TEST_F32 : TEST_BF16;
  c->seed = 3000 + (uint64_t)i;
}

typedef struct worker {
  const test_plugin* tp;
  fp8moe_context* ctx;
  pg_problem* p;
  const snapshot* alone;
  int32_t status[REPEATS];
  int identical[REPEATS];
} worker;

static void* worker_main(void* arg) {
  worker* w = (worker*)arg;
  for (int r = 0; r < REPEATS; ++r) {
    pg_poison(w->p);
    w->status[r] = pg_run(w->tp, w->ctx, w->p);
    w->identical[r] = w->status[r] == FP8MOE_STATUS_OK && same(w->alone, w->p);
  }
  return NULL;
}

int main(void) {
  test_plugin tp;
  if (test_plugin_open(NULL, &tp) != 0) return 1;
  pg_tally tally = {0, 0};
  int before;
  const int32_t thread_counts[4] = {1, 2, 3, 8};
  fp8moe_context* ctxs[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < 4; ++i) ctxs[i] = make_context(&tp, thread_counts[i]);
  if (!ctxs[0] || !ctxs[1] || !ctxs[2] || !ctxs[3]) return test_finish("test_threads", 1);

  pg_problem probs[HOST_THREADS];
  snapshot alone[HOST_THREADS];
  memset(alone, 0, sizeof alone);
  for (int i = 0; i < HOST_THREADS; ++i) {
    pg_config c;
    problem_config(&c, i);
    char name[600], cfg[512];
    pg_describe_config(&c, cfg, sizeof cfg);
    snprintf(name, sizeof name, "bit-identical with 1, 2, 3, 8 threads: %s", cfg);
    pg_subcheck_begin(name, &before);
    int ok = pg_generate(&probs[i], &c) == 0;
    CHECK(ok, "problem generation failed");
    for (int n = 0; ok && n < 4; ++n) {
      pg_poison(&probs[i]);
      int32_t st = pg_run(&tp, ctxs[n], &probs[i]);
      CHECK(st == FP8MOE_STATUS_OK, "%d threads: status %d: %s", thread_counts[n], st, probs[i].error);
      if (st != FP8MOE_STATUS_OK) {
        ok = 0;
        break;
      }
      if (n == 0) {
        pg_result r;
        CHECK(pg_check(&probs[i], &r, NULL), "1 thread against ref64: rel err %.3g", r.rel_err);
        ok = take(&alone[i], &probs[i]);
        CHECK(ok, "snapshot failed");
      } else {
        CHECK(same(&alone[i], &probs[i]), "%d threads: output or routing differs from 1 thread", thread_counts[n]);
      }
    }
    pg_subcheck_end(&tally, name, before);
  }

  const char* cname = "concurrent run from 4 host threads on one context matches each problem alone";
  pg_subcheck_begin(cname, &before);
  worker w[HOST_THREADS];
  pthread_t th[HOST_THREADS];
  int started[HOST_THREADS] = {0};
  for (int i = 0; i < HOST_THREADS; ++i) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].tp = &tp;
    w[i].ctx = ctxs[2];
    w[i].p = &probs[i];
    w[i].alone = &alone[i];
    if (alone[i].output) started[i] = pthread_create(&th[i], NULL, worker_main, &w[i]) == 0;
    CHECK(started[i], "problem %d: no thread started", i);
  }
  for (int i = 0; i < HOST_THREADS; ++i) {
    if (!started[i]) continue;
    pthread_join(th[i], NULL);
    for (int r = 0; r < REPEATS; ++r)
      CHECK(w[i].status[r] == FP8MOE_STATUS_OK && w[i].identical[r],
            "problem %d, repeat %d: status %d, identical %d", i, r, w[i].status[r], w[i].identical[r]);
  }
  pg_subcheck_end(&tally, cname, before);

  for (int i = 0; i < HOST_THREADS; ++i) {
    free(alone[i].output);
    pg_free(&probs[i]);
  }
  for (int i = 0; i < 4; ++i) tp.api->context_destroy(ctxs[i]);
  test_plugin_close(&tp);
  return pg_tally_finish(&tally, "test_threads");
}
