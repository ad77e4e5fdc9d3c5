/* test_gpu_models.c — every docs/TESTING.md model shape at T ∈ {1, 7, 64, 300, 2048} on the CUDA backend,
 * checked against the CPU backend. Full-size weights are random e4m3 codes (made fast, on all cores);
 * hidden states, logits and bias are fresh per T; outputs are poisoned before every GPU run. The CPU oracle
 * recomputes every token up to T = 64 and, above, the first, the last and 30 random tokens (docs/TESTING.md:
 * tokens are independent except through a dynamic per-tensor amax, so above T = 64 the per-tensor shape
 * runs with static a1/a2 scales; its dynamic path is checked at T ≤ 64 on all tokens).
 * Prints the relative error per shape, T and format. Skipped (77) without a usable CUDA device. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "plugin_host.h"

typedef struct model {
  const char* name;
  int32_t E, K;
  int64_t H, I;
  int32_t method, n_group, topk_group;
  float scale;
  int32_t format;
} model;

static const model kModels[] = {
    {"deepseek-v3", 256, 8, 7168, 2048, FP8MOE_ROUTING_DEEPSEEK_V3, 8, 4, 2.5f, FP8MOE_QUANT_FP8_BLOCK128},
    {"kimi-k2", 384, 8, 7168, 2048, FP8MOE_ROUTING_DEEPSEEK_V3, 1, 1, 2.827f, FP8MOE_QUANT_FP8_BLOCK128},
    {"qwen3-30b-a3b", 128, 8, 2048, 768, FP8MOE_ROUTING_RENORMALIZE_NAIVE, 1, 1, 0.0f, FP8MOE_QUANT_FP8_BLOCK128},
    {"qwen3-235b-a22b", 128, 8, 4096, 1536, FP8MOE_ROUTING_RENORMALIZE_NAIVE, 1, 1, 0.0f, FP8MOE_QUANT_FP8_BLOCK128},
    {"glm-4.5-air", 128, 8, 4096, 1408, FP8MOE_ROUTING_DEEPSEEK_V3, 1, 1, 1.0f, FP8MOE_QUANT_FP8_BLOCK128},
    {"mixtral-8x7b", 8, 2, 4096, 14336, FP8MOE_ROUTING_RENORMALIZE, 1, 1, 0.0f, FP8MOE_QUANT_FP8_PER_TENSOR},
    {"llama4-scout", 16, 1, 5120, 8192, FP8MOE_ROUTING_LLAMA4, 1, 1, 0.0f, FP8MOE_QUANT_FP8_PER_CHANNEL},
};
static const int64_t kTokens[] = {1, 7, 64, 300, 2048};
static const char* const kFormatNames[] = {"FP8_PER_TENSOR", "FP8_BLOCK128", "FP8_PER_CHANNEL"};

static uint64_t mix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double uniform(uint64_t* s, double lo, double hi) { return lo + (hi - lo) * (double)(mix(s) >> 11) * 0x1.0p-53; }

/* Random e4m3 codes, 8 at a time; bit 3 (the lowest exponent bit) cleared so no code is NaN (0x7F/0xFF). */
typedef struct fill_job {
  uint8_t* p;
  size_t n;
  uint64_t seed;
} fill_job;
static void* fill_codes(void* arg) {
  fill_job* j = arg;
  uint64_t s = j->seed;
  size_t i = 0;
  for (; i + 8 <= j->n; i += 8) {
    uint64_t v = mix(&s) & ~0x0808080808080808ull;
    memcpy(j->p + i, &v, 8);
  }
  for (; i < j->n; ++i) j->p[i] = (uint8_t)(mix(&s) & 0xF7u);
  return NULL;
}
static void fill_weights(uint8_t* p, size_t n, uint64_t seed) {
  enum { kThreads = 16 };
  pthread_t th[kThreads];
  fill_job jobs[kThreads];
  size_t chunk = (n / kThreads + 7) / 8 * 8;
  for (int t = 0; t < kThreads; ++t) {
    size_t lo = chunk * (size_t)t < n ? chunk * (size_t)t : n;
    size_t hi = lo + chunk < n ? lo + chunk : n;
    jobs[t] = (fill_job){p + lo, hi - lo, seed * 1000003u + (uint64_t)t};
    if (pthread_create(&th[t], NULL, fill_codes, &jobs[t]) != 0) fill_codes(&jobs[t]), th[t] = 0;
  }
  for (int t = 0; t < kThreads; ++t)
    if (th[t]) pthread_join(th[t], NULL);
}

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static const fp8moe_dtype F32 = {FP8MOE_DTYPE_FLOAT, 32, 1}, BF16 = {FP8MOE_DTYPE_BFLOAT, 16, 1},
                          E4M3 = {FP8MOE_DTYPE_FLOAT8_E4M3FN, 8, 1}, I32 = {FP8MOE_DTYPE_INT, 32, 1};

/* Host copies of one model's weights and scales. */
typedef struct weights {
  uint8_t *w13, *w2;
  float *s13, *s2;
  size_t n13, n2, ns13, ns2;
  int64_t shape13[3], shape2[3], sshape13[3], sshape2[3];
  int32_t sndim;
} weights;

static int make_weights(const model* m, weights* w, uint64_t seed) {
  memset(w, 0, sizeof *w);
  w->n13 = (size_t)m->E * 2 * (size_t)m->I * (size_t)m->H;
  w->n2 = (size_t)m->E * (size_t)m->H * (size_t)m->I;
  w->shape13[0] = w->shape2[0] = m->E;
  w->shape13[1] = 2 * m->I;
  w->shape13[2] = m->H;
  w->shape2[1] = m->H;
  w->shape2[2] = m->I;
  w->sshape13[0] = w->sshape2[0] = m->E;
  switch (m->format) {
    case FP8MOE_QUANT_FP8_BLOCK128:
      w->sndim = 3;
      w->sshape13[1] = 2 * m->I / 128;
      w->sshape13[2] = m->H / 128;
      w->sshape2[1] = m->H / 128;
      w->sshape2[2] = m->I / 128;
      break;
    case FP8MOE_QUANT_FP8_PER_CHANNEL:
      w->sndim = 2;
      w->sshape13[1] = 2 * m->I;
      w->sshape2[1] = m->H;
      break;
    default:
      w->sndim = 1;
      break;
  }
  w->ns13 = w->ns2 = 1;
  for (int d = 0; d < w->sndim; ++d) {
    w->ns13 *= (size_t)w->sshape13[d];
    w->ns2 *= (size_t)w->sshape2[d];
  }
  w->w13 = malloc(w->n13);
  w->w2 = malloc(w->n2);
  w->s13 = malloc(w->ns13 * 4);
  w->s2 = malloc(w->ns2 * 4);
  if (!w->w13 || !w->w2 || !w->s13 || !w->s2) return -1;
  fill_weights(w->w13, w->n13, seed);
  fill_weights(w->w2, w->n2, seed + 1);
  /* Random codes have RMS ≈ 110; these scales keep each GEMM output O(1) for O(1) inputs. */
  uint64_t s = seed;
  for (size_t i = 0; i < w->ns13; ++i) w->s13[i] = (float)(uniform(&s, 0.5, 1.5) / (110.0 * sqrt((double)m->H)));
  for (size_t i = 0; i < w->ns2; ++i) w->s2[i] = (float)(uniform(&s, 0.5, 1.5) / (110.0 * sqrt((double)m->I)));
  return 0;
}

static void free_weights(weights* w) {
  free(w->w13);
  free(w->w2);
  free(w->s13);
  free(w->s2);
  memset(w, 0, sizeof *w);
}

/* One call's descriptors over given buffers (host or device). */
typedef struct call {
  fp8moe_moe_args a;
  fp8moe_tensor hidden, logits, bias, w13, s13, w2, s2, a1, a2, out, ids_out, w_out;
  int64_t sh_hidden[2], sh_logits[2], sh_bias[1], sh_out[2], sh_routing[2], sh_scalar[1];
} call;

static fp8moe_tensor tensor(void* data, fp8moe_dtype dt, int32_t ndim, int64_t* shape, int32_t dev_type) {
  fp8moe_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dt;
  t.ndim = ndim;
  t.shape = shape;
  t.device.device_type = dev_type;
  return t;
}

typedef struct buffers {
  void *hidden, *logits, *bias, *w13, *s13, *w2, *s2, *a1, *a2, *out, *ids_out, *w_out;
} buffers;

static void describe(call* c, const model* m, weights* w, const buffers* b, int64_t T, int dev, int static_a) {
  memset(&c->a, 0, sizeof c->a);
  const int32_t dt = dev ? FP8MOE_DEVICE_CUDA : FP8MOE_DEVICE_CPU;
  c->sh_hidden[0] = T;
  c->sh_hidden[1] = m->H;
  c->sh_logits[0] = T;
  c->sh_logits[1] = m->E;
  c->sh_bias[0] = m->E;
  c->sh_out[0] = T;
  c->sh_out[1] = m->H;
  c->sh_routing[0] = T;
  c->sh_routing[1] = m->K;
  c->sh_scalar[0] = 1;
  c->hidden = tensor(b->hidden, BF16, 2, c->sh_hidden, dt);
  c->logits = tensor(b->logits, F32, 2, c->sh_logits, dt);
  c->bias = tensor(b->bias, F32, 1, c->sh_bias, dt);
  c->w13 = tensor(b->w13, E4M3, 3, w->shape13, dt);
  c->w2 = tensor(b->w2, E4M3, 3, w->shape2, dt);
  c->s13 = tensor(b->s13, F32, w->sndim, w->sshape13, dt);
  c->s2 = tensor(b->s2, F32, w->sndim, w->sshape2, dt);
  c->a1 = tensor(b->a1, F32, 1, c->sh_scalar, dt);
  c->a2 = tensor(b->a2, F32, 1, c->sh_scalar, dt);
  c->out = tensor(b->out, BF16, 2, c->sh_out, dt);
  c->ids_out = tensor(b->ids_out, I32, 2, c->sh_routing, dt);
  c->w_out = tensor(b->w_out, F32, 2, c->sh_routing, dt);
  fp8moe_moe_args* a = &c->a;
  a->struct_size = sizeof *a;
  a->routing_method = m->method;
  a->quant_format = m->format;
  a->num_experts = m->E;
  a->top_k = m->K;
  a->n_group = m->n_group;
  a->topk_group = m->topk_group;
  a->routed_scaling_factor = m->scale;
  a->hidden_states = &c->hidden;
  a->router_logits = &c->logits;
  a->routing_bias = m->method == FP8MOE_ROUTING_DEEPSEEK_V3 ? &c->bias : NULL;
  a->w13 = &c->w13;
  a->w13_scale = &c->s13;
  a->w2 = &c->w2;
  a->w2_scale = &c->s2;
  a->a1_scale = static_a ? &c->a1 : NULL;
  a->a2_scale = static_a ? &c->a2 : NULL;
  a->output = &c->out;
  a->routing_ids_out = &c->ids_out;
  a->routing_weights_out = &c->w_out;
}

typedef struct suite {
  test_plugin tp;
  fp8moe_context *cpu, *gpu;
  int checks;
} suite;

static int cuda_ok(cudaError_t e, const char* what) {
  CHECK(e == cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

static int32_t run_with_workspace(suite* s, fp8moe_context* ctx, fp8moe_moe_args* a, int dev, double* gpu_us) {
  size_t bytes = 0;
  int32_t st = s->tp.api->query_workspace(ctx, a, &bytes);
  if (st != FP8MOE_STATUS_OK) return st;
  void* ws = NULL;
  if (bytes) {
    if (dev) {
      if (!cuda_ok(cudaMalloc(&ws, bytes), "workspace")) return FP8MOE_STATUS_OUT_OF_MEMORY;
    } else {
      ws = aligned_alloc(256, (bytes + 255) / 256 * 256);
      if (!ws) return FP8MOE_STATUS_OUT_OF_MEMORY;
    }
  }
  a->workspace = ws;
  a->workspace_size = bytes;
  st = s->tp.api->run(ctx, a);
  if (dev && st == FP8MOE_STATUS_OK && gpu_us) {
    /* a second run, timed (informational: one run, weights warm in L2 where they fit) */
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0, NULL);
    st = s->tp.api->run(ctx, a);
    cudaEventRecord(e1, NULL);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    *gpu_us = ms * 1000.0;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  if (dev) {
    cuda_ok(cudaDeviceSynchronize(), "synchronize");
    cudaFree(ws);
  } else {
    free(ws);
  }
  a->workspace = NULL;
  return st;
}

static void run_model(suite* s, const model* m, uint64_t seed, int64_t only_T) {
  weights w;
  if (make_weights(m, &w, seed) != 0) {
    CHECK(0, "%s: out of host memory for weights", m->name);
    free_weights(&w);
    return;
  }
  buffers dw;
  memset(&dw, 0, sizeof dw);
  int ok = cuda_ok(cudaMalloc(&dw.w13, w.n13), "w13") && cuda_ok(cudaMalloc(&dw.w2, w.n2), "w2") &&
           cuda_ok(cudaMalloc(&dw.s13, w.ns13 * 4), "s13") && cuda_ok(cudaMalloc(&dw.s2, w.ns2 * 4), "s2") &&
           cuda_ok(cudaMemcpy(dw.w13, w.w13, w.n13, cudaMemcpyHostToDevice), "w13 H2D") &&
           cuda_ok(cudaMemcpy(dw.w2, w.w2, w.n2, cudaMemcpyHostToDevice), "w2 H2D") &&
           cuda_ok(cudaMemcpy(dw.s13, w.s13, w.ns13 * 4, cudaMemcpyHostToDevice), "s13 H2D") &&
           cuda_ok(cudaMemcpy(dw.s2, w.s2, w.ns2 * 4, cudaMemcpyHostToDevice), "s2 H2D");
  for (size_t ti = 0; ok && ti < sizeof kTokens / sizeof kTokens[0]; ++ti) {
    const int64_t T = kTokens[ti], H = m->H, E = m->E, K = m->K;
    if (only_T > 0 && T != only_T) continue;
    const int static_a = m->format == FP8MOE_QUANT_FP8_PER_TENSOR && T > 64;
    uint64_t rs = seed * 7919u + (uint64_t)T;
    uint16_t* hidden = malloc(sizeof(uint16_t) * (size_t)(T * H));
    float* logits = malloc(sizeof(float) * (size_t)(T * E));
    float bias[2048];
    uint16_t* out = malloc(sizeof(uint16_t) * (size_t)(T * H));
    int32_t* ids = malloc(sizeof(int32_t) * (size_t)(T * K));
    float* wts = malloc(sizeof(float) * (size_t)(T * K));
    float a_scales[2] = {1.0f, 0.02f};
    if (!hidden || !logits || !out || !ids || !wts) {
      CHECK(0, "host memory");
      ok = 0;
    }
    double amax = 0;
    for (int64_t i = 0; ok && i < T * H; ++i) {
      hidden[i] = to_bf16((float)uniform(&rs, -2.0, 2.0));
      amax = fmax(amax, fabs((double)from_bf16(hidden[i])));
    }
    a_scales[0] = (float)amax / 448.0f;
    for (int64_t i = 0; ok && i < T * E; ++i) logits[i] = (float)uniform(&rs, -3.0, 3.0);
    for (int64_t e = 0; e < E; ++e) bias[e] = (float)uniform(&rs, -0.2, 0.2);
    buffers db = dw;
    if (ok)
      ok = cuda_ok(cudaMalloc(&db.hidden, (size_t)(T * H) * 2), "hidden") &&
           cuda_ok(cudaMalloc(&db.logits, (size_t)(T * E) * 4), "logits") &&
           cuda_ok(cudaMalloc(&db.bias, (size_t)E * 4), "bias") && cuda_ok(cudaMalloc(&db.a1, 8), "a1") &&
           cuda_ok(cudaMalloc(&db.out, (size_t)(T * H) * 2), "out") &&
           cuda_ok(cudaMalloc(&db.ids_out, (size_t)(T * K) * 4), "ids_out") &&
           cuda_ok(cudaMalloc(&db.w_out, (size_t)(T * K) * 4), "w_out") &&
           cuda_ok(cudaMemcpy(db.hidden, hidden, (size_t)(T * H) * 2, cudaMemcpyHostToDevice), "H2D") &&
           cuda_ok(cudaMemcpy(db.logits, logits, (size_t)(T * E) * 4, cudaMemcpyHostToDevice), "H2D") &&
           cuda_ok(cudaMemcpy(db.bias, bias, (size_t)E * 4, cudaMemcpyHostToDevice), "H2D") &&
           cuda_ok(cudaMemcpy(db.a1, a_scales, 8, cudaMemcpyHostToDevice), "H2D") &&
           cuda_ok(cudaMemset(db.out, 0xFF, (size_t)(T * H) * 2), "poison") &&
           cuda_ok(cudaMemset(db.ids_out, 0xFF, (size_t)(T * K) * 4), "poison") &&
           cuda_ok(cudaMemset(db.w_out, 0xFF, (size_t)(T * K) * 4), "poison");
    db.a2 = db.a1 ? (char*)db.a1 + 4 : NULL;
    call gc;
    double us = 0;
    ++s->checks;
    if (ok) {
      describe(&gc, m, &w, &db, T, 1, static_a);
      int32_t st = run_with_workspace(s, s->gpu, &gc.a, 1, &us);
      CHECK(st == FP8MOE_STATUS_OK, "%s T=%lld: GPU run status %d", m->name, (long long)T, (int)st);
      ok = st == FP8MOE_STATUS_OK &&
           cuda_ok(cudaMemcpy(out, db.out, (size_t)(T * H) * 2, cudaMemcpyDeviceToHost), "D2H") &&
           cuda_ok(cudaMemcpy(ids, db.ids_out, (size_t)(T * K) * 4, cudaMemcpyDeviceToHost), "D2H") &&
           cuda_ok(cudaMemcpy(wts, db.w_out, (size_t)(T * K) * 4, cudaMemcpyDeviceToHost), "D2H");
    }
    /* CPU oracle on the sampled tokens. */
    int64_t rows[64];
    int64_t S = 0;
    if (T <= 64) {
      for (int64_t t = 0; t < T; ++t) rows[S++] = t;
    } else {
      rows[S++] = 0;
      rows[S++] = T - 1;
      while (S < 32) rows[S++] = 1 + (int64_t)(mix(&rs) % (uint64_t)(T - 2));
    }
    if (ok) {
      buffers hb = {0};
      hb.hidden = malloc((size_t)(S * H) * 2);
      hb.logits = malloc((size_t)(S * E) * 4);
      hb.bias = bias;
      hb.w13 = w.w13;
      hb.w2 = w.w2;
      hb.s13 = w.s13;
      hb.s2 = w.s2;
      hb.a1 = &a_scales[0];
      hb.a2 = &a_scales[1];
      hb.out = malloc((size_t)(S * H) * 2);
      hb.ids_out = malloc((size_t)(S * K) * 4);
      hb.w_out = malloc((size_t)(S * K) * 4);
      if (hb.hidden && hb.logits && hb.out && hb.ids_out && hb.w_out) {
        for (int64_t i = 0; i < S; ++i) {
          memcpy((uint16_t*)hb.hidden + i * H, hidden + rows[i] * H, (size_t)H * 2);
          memcpy((float*)hb.logits + i * E, logits + rows[i] * E, (size_t)E * 4);
        }
        call cc;
        describe(&cc, m, &w, &hb, S, 0, static_a);
        int32_t st = run_with_workspace(s, s->cpu, &cc.a, 0, NULL);
        CHECK(st == FP8MOE_STATUS_OK, "%s T=%lld: CPU run status %d", m->name, (long long)T, (int)st);
        /* The GPU result, described on the host for the comparison. */
        call gh;
        buffers gb = hb;
        gb.out = out;
        gb.ids_out = ids;
        gb.w_out = wts;
        describe(&gh, m, &w, &gb, T, 0, static_a);
        run_outputs go, co;
        char label[160];
        snprintf(label, sizeof label, "%s T=%lld", m->name, (long long)T);
        if (st == FP8MOE_STATUS_OK && outputs_take(&gh.a, &go) == 0 && outputs_take(&cc.a, &co) == 0) {
          compare_result r;
          int good = outputs_compare(&go, &co, rows, S, label, &r);
          CHECK(good, "%s: GPU differs from CPU", label);
          printf("model %-16s T=%-5lld %-15s%s rel_err %.3e  w_rel %.1e  oracle %lld tokens  gpu %.0f us\n", m->name,
                 (long long)T, kFormatNames[m->format], static_a ? "(static a1/a2)" : "", r.rel_err, r.max_w_rel,
                 (long long)S, us);
        }
        outputs_free(&go);
        outputs_free(&co);
      } else {
        CHECK(0, "host memory");
      }
      free(hb.hidden);
      free(hb.logits);
      free(hb.out);
      free(hb.ids_out);
      free(hb.w_out);
    }
    cudaFree(db.hidden);
    cudaFree(db.logits);
    cudaFree(db.bias);
    cudaFree(db.a1);
    cudaFree(db.out);
    cudaFree(db.ids_out);
    cudaFree(db.w_out);
    free(hidden);
    free(logits);
    free(out);
    free(ids);
    free(wts);
  }
  cudaFree(dw.w13);
  cudaFree(dw.w2);
  cudaFree(dw.s13);
  cudaFree(dw.s2);
  free_weights(&w);
}

int main(int argc, char** argv) {
  suite s;
  memset(&s, 0, sizeof s);
  setvbuf(stdout, NULL, _IONBF, 0);
  fp8moe_backend_info bi;
  int open_rc = gpu_suite_open("test_gpu_models", &s.tp, &s.cpu, &s.gpu, &bi);
  if (open_rc != 0) return open_rc;
  /* optional: one model by name, and one T (for profiling) */
  const char* only = argc > 1 ? argv[1] : NULL;
  const int64_t only_T = argc > 2 ? atoll(argv[2]) : 0;
  for (size_t i = 0; s.cpu && s.gpu && i < sizeof kModels / sizeof kModels[0]; ++i)
    if (!only || strcmp(only, kModels[i].name) == 0) run_model(&s, &kModels[i], 77 + i, only_T);
  s.tp.api->context_destroy(s.gpu);
  s.tp.api->context_destroy(s.cpu);
  test_plugin_close(&s.tp);
  return test_finish("test_gpu_models", s.checks);
}
