/* bench_problem.c — see bench_problem.h. */
#define _POSIX_C_SOURCE 200809L
#include "bench_problem.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const fp8moe_dtype F32 = {FP8MOE_DTYPE_FLOAT, 32, 1}, BF16 = {FP8MOE_DTYPE_BFLOAT, 16, 1},
                          E4M3 = {FP8MOE_DTYPE_FLOAT8_E4M3FN, 8, 1}, I32 = {FP8MOE_DTYPE_INT, 32, 1};

static uint64_t mix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double uniform(uint64_t* s, double lo, double hi) { return lo + (hi - lo) * (double)(mix(s) >> 11) * 0x1.0p-53; }
static double normal(uint64_t* s) {
  const double u = uniform(s, 0x1.0p-53, 1.0), v = uniform(s, 0.0, 1.0);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- weights ---- */
typedef struct fill_job {
  uint8_t* p;
  size_t n;
  uint64_t seed;
} fill_job;

/* Random e4m3 codes with bit 3 cleared, so none is NaN (0x7F/0xFF). */
static void* fill_codes(void* arg) {
  fill_job* j = arg;
  uint64_t s = j->seed;
  size_t i = 0;
  for (; i + 8 <= j->n; i += 8) {
    const uint64_t v = mix(&s) & ~0x0808080808080808ull;
    memcpy(j->p + i, &v, 8);
  }
  for (; i < j->n; ++i) j->p[i] = (uint8_t)(mix(&s) & 0xF7u);
  return NULL;
}

static void fill_parallel(uint8_t* p, size_t n, uint64_t seed) {
  enum { kMaxThreads = 64 };
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = cores < 1 ? 1 : cores > kMaxThreads ? kMaxThreads : (int)cores;
  pthread_t th[kMaxThreads];
  fill_job jobs[kMaxThreads];
  int started[kMaxThreads];
  const size_t chunk = (n / (size_t)nt + 7) / 8 * 8;
  for (int t = 0; t < nt; ++t) {
    const size_t lo = chunk * (size_t)t < n ? chunk * (size_t)t : n, hi = lo + chunk < n ? lo + chunk : n;
    jobs[t] = (fill_job){p + lo, hi - lo, seed * 1000003u + (uint64_t)t};
    started[t] = pthread_create(&th[t], NULL, fill_codes, &jobs[t]) == 0;
    if (!started[t]) fill_codes(&jobs[t]);
  }
  for (int t = 0; t < nt; ++t)
    if (started[t]) pthread_join(th[t], NULL);
}

int bench_weights_make(const bench_model* m, uint64_t seed, bench_weights* w) {
  memset(w, 0, sizeof *w);
  w->model = m;
  w->format = -1;
  w->n13 = (size_t)m->E * 2 * (size_t)m->I * (size_t)m->H;
  w->n2 = (size_t)m->E * (size_t)m->H * (size_t)m->I;
  w->shape13[0] = w->shape2[0] = m->E;
  w->shape13[1] = 2 * m->I;
  w->shape13[2] = m->H;
  w->shape2[1] = m->H;
  w->shape2[2] = m->I;
  w->h13 = malloc(w->n13);
  w->h2 = malloc(w->n2);
  if (!w->h13 || !w->h2) return -1;
  fill_parallel(w->h13, w->n13, seed);
  fill_parallel(w->h2, w->n2, seed + 1);
  if (cudaMalloc(&w->d13, w->n13) != cudaSuccess || cudaMalloc(&w->d2, w->n2) != cudaSuccess ||
      cudaMemcpy(w->d13, w->h13, w->n13, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(w->d2, w->h2, w->n2, cudaMemcpyHostToDevice) != cudaSuccess)
    return -1;
  return 0;
}

int bench_weights_set_format(bench_weights* w, int32_t format, uint64_t seed, int plant_wrong) {
  const bench_model* m = w->model;
  free(w->hs13);
  free(w->hs2);
  cudaFree(w->ds13);
  cudaFree(w->ds2);
  w->hs13 = w->hs2 = NULL;
  w->ds13 = w->ds2 = NULL;
  w->format = format;
  w->sshape13[0] = w->sshape2[0] = m->E;
  switch (format) {
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
  w->hs13 = malloc(w->ns13 * 4);
  w->hs2 = malloc(w->ns2 * 4);
  float* planted = malloc(w->ns2 * 4);
  if (!w->hs13 || !w->hs2 || !planted) {
    free(planted);
    return -1;
  }
  /* Random codes have RMS ≈ 110; these scales keep each GEMM's output O(1) for O(1) inputs. */
  uint64_t s = seed;
  for (size_t i = 0; i < w->ns13; ++i) w->hs13[i] = (float)(uniform(&s, 0.5, 1.5) / (110.0 * sqrt((double)m->H)));
  for (size_t i = 0; i < w->ns2; ++i) w->hs2[i] = (float)(uniform(&s, 0.5, 1.5) / (110.0 * sqrt((double)m->I)));
  for (size_t i = 0; i < w->ns2; ++i) planted[i] = plant_wrong ? w->hs2[i] * 1.25f : w->hs2[i];
  int rc = cudaMalloc(&w->ds13, w->ns13 * 4) == cudaSuccess && cudaMalloc(&w->ds2, w->ns2 * 4) == cudaSuccess &&
                   cudaMemcpy(w->ds13, w->hs13, w->ns13 * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
                   cudaMemcpy(w->ds2, planted, w->ns2 * 4, cudaMemcpyHostToDevice) == cudaSuccess
               ? 0
               : -1;
  free(planted);
  return rc;
}

void bench_weights_free(bench_weights* w) {
  free(w->h13);
  free(w->h2);
  free(w->hs13);
  free(w->hs2);
  cudaFree(w->d13);
  cudaFree(w->d2);
  cudaFree(w->ds13);
  cudaFree(w->ds2);
  memset(w, 0, sizeof *w);
}

/* ---- descriptors ---- */
static fp8moe_tensor tensor(void* data, fp8moe_dtype dt, int32_t ndim, int64_t* shape, int on_device) {
  fp8moe_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dt;
  t.ndim = ndim;
  t.shape = shape;
  t.device.device_type = on_device ? FP8MOE_DEVICE_CUDA : FP8MOE_DEVICE_CPU;
  return t;
}

void bench_call_describe(bench_call* c, const bench_weights* w, const bench_buffers* b, int64_t T, int dev) {
  const bench_model* m = w->model;
  memset(c, 0, sizeof *c);
  c->sh_hidden[0] = c->sh_logits[0] = c->sh_out[0] = c->sh_routing[0] = T;
  c->sh_hidden[1] = c->sh_out[1] = m->H;
  c->sh_logits[1] = c->sh_bias[0] = m->E;
  c->sh_routing[1] = m->K;
  c->sh_scalar[0] = 1;
  bench_weights* mw = (bench_weights*)w; /* descriptors point at its shape arrays, never written */
  c->hidden = tensor(b->hidden, BF16, 2, c->sh_hidden, dev);
  c->logits = tensor(b->logits, F32, 2, c->sh_logits, dev);
  c->bias = tensor(b->bias, F32, 1, c->sh_bias, dev);
  c->w13 = tensor(dev ? w->d13 : w->h13, E4M3, 3, mw->shape13, dev);
  c->w2 = tensor(dev ? w->d2 : w->h2, E4M3, 3, mw->shape2, dev);
  c->s13 = tensor(dev ? w->ds13 : w->hs13, F32, w->sndim, mw->sshape13, dev);
  c->s2 = tensor(dev ? w->ds2 : w->hs2, F32, w->sndim, mw->sshape2, dev);
  c->a1 = tensor(b->a1, F32, 1, c->sh_scalar, dev);
  c->a2 = tensor(b->a2, F32, 1, c->sh_scalar, dev);
  c->out = tensor(b->out, BF16, 2, c->sh_out, dev);
  c->ids_out = tensor(b->ids_out, I32, 2, c->sh_routing, dev);
  c->w_out = tensor(b->w_out, F32, 2, c->sh_routing, dev);
  fp8moe_moe_args* a = &c->a;
  a->struct_size = sizeof *a;
  a->routing_method = m->method;
  a->quant_format = w->format;
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
  /* Per-tensor runs with static activation scales, as FP8 per-tensor checkpoints ship them; it keeps every
   * token independent, so sampled tokens can be checked alone (dynamic per-tensor scales span all tokens). */
  const int static_a = w->format == FP8MOE_QUANT_FP8_PER_TENSOR;
  a->a1_scale = static_a ? &c->a1 : NULL;
  a->a2_scale = static_a ? &c->a2 : NULL;
  a->output = &c->out;
  a->routing_ids_out = &c->ids_out;
  a->routing_weights_out = &c->w_out;
}

/* ---- inputs ---- */
int bench_inputs_make(const bench_model* m, int64_t T, uint64_t seed, bench_inputs* in) {
  memset(in, 0, sizeof *in);
  in->T = T;
  in->hidden = malloc(sizeof(uint16_t) * (size_t)(T * m->H));
  in->logits = malloc(sizeof(float) * (size_t)(T * m->E));
  if (!in->hidden || !in->logits) return -1;
  uint64_t s = seed;
  double amax = 0;
  for (int64_t i = 0; i < T * m->H; ++i) {
    in->hidden[i] = to_bf16((float)uniform(&s, -2.0, 2.0));
    amax = fmax(amax, fabs(from_bf16(in->hidden[i])));
  }
  for (int32_t e = 0; e < m->E && e < 2048; ++e) in->bias[e] = (float)uniform(&s, -0.2, 0.2);
  in->a_scales[0] = (float)(amax / 448.0);
  in->a_scales[1] = 0.02f;
  return 0;
}

void bench_inputs_route(const bench_model* m, int routing, uint64_t seed, bench_inputs* in) {
  uint64_t s = seed;
  /* Skewed: a fixed set of hot experts (max(K+1, E/16) of them, spread by a permutation so DeepSeek's
   * groups all hold some) gets +3 on every token's logit, so they take most of the traffic. */
  int32_t n_hot = m->K + 1 > m->E / 16 ? m->K + 1 : m->E / 16;
  if (n_hot > m->E) n_hot = m->E;
  uint8_t hot[2048] = {0};
  if (routing == BENCH_ROUTING_SKEWED) {
    uint64_t hs = 0xC0FFEEull;
    for (int32_t placed = 0; placed < n_hot;) {
      const int32_t e = (int32_t)(mix(&hs) % (uint64_t)m->E);
      if (!hot[e]) hot[e] = 1, ++placed;
    }
  }
  for (int64_t t = 0; t < in->T; ++t)
    for (int32_t e = 0; e < m->E; ++e) in->logits[t * m->E + e] = (float)(normal(&s) + (hot[e] ? 3.0 : 0.0));
}

void bench_inputs_free(bench_inputs* in) {
  free(in->hidden);
  free(in->logits);
  memset(in, 0, sizeof *in);
}

int64_t bench_sample_rows(int64_t T, int n, uint64_t seed, int64_t* rows) {
  if (n <= 0) return 0;
  if (T <= n) {
    for (int64_t t = 0; t < T; ++t) rows[t] = t;
    return T;
  }
  int64_t S = 0;
  rows[S++] = 0;
  if (n > 1) rows[S++] = T - 1;
  uint64_t s = seed;
  while (S < n) rows[S++] = 1 + (int64_t)(mix(&s) % (uint64_t)(T - 2));
  return S;
}

/* ---- the oracle ---- */
int32_t bench_check_against_cpu(const fp8moe_api* api, fp8moe_context* cpu, const bench_weights* w,
                                const bench_inputs* in, const int64_t* rows, int64_t S, const uint16_t* gpu_out,
                                const int32_t* gpu_ids, bench_check* r) {
  const bench_model* m = w->model;
  const int64_t H = m->H, E = m->E, K = m->K;
  memset(r, 0, sizeof *r);
  bench_buffers hb;
  memset(&hb, 0, sizeof hb);
  hb.hidden = malloc((size_t)(S * H) * 2);
  hb.logits = malloc((size_t)(S * E) * 4);
  hb.out = malloc((size_t)(S * H) * 2);
  hb.ids_out = malloc((size_t)(S * K) * 4);
  hb.w_out = malloc((size_t)(S * K) * 4);
  hb.bias = (void*)in->bias;
  hb.a1 = (void*)&in->a_scales[0];
  hb.a2 = (void*)&in->a_scales[1];
  int32_t st = FP8MOE_STATUS_OUT_OF_MEMORY;
  void* ws = NULL;
  if (hb.hidden && hb.logits && hb.out && hb.ids_out && hb.w_out) {
    for (int64_t i = 0; i < S; ++i) {
      memcpy((uint16_t*)hb.hidden + i * H, in->hidden + rows[i] * H, (size_t)H * 2);
      memcpy((float*)hb.logits + i * E, in->logits + rows[i] * E, (size_t)E * 4);
    }
    bench_call c;
    bench_call_describe(&c, w, &hb, S, 0);
    size_t bytes = 0;
    st = api->query_workspace(cpu, &c.a, &bytes);
    if (st == FP8MOE_STATUS_OK && bytes) {
      ws = aligned_alloc(256, (bytes + 255) / 256 * 256);
      if (!ws) st = FP8MOE_STATUS_OUT_OF_MEMORY;
    }
    c.a.workspace = ws;
    c.a.workspace_size = bytes;
    if (st == FP8MOE_STATUS_OK) st = api->run(cpu, &c.a);
  }
  if (st == FP8MOE_STATUS_OK) {
    double num = 0, den = 0;
    const uint16_t* co = hb.out;
    const int32_t* ci = hb.ids_out;
    for (int64_t i = 0; i < S; ++i) {
      for (int64_t h = 0; h < H; ++h) {
        const uint16_t gb = gpu_out[rows[i] * H + h];
        const double g = from_bf16(gb), c = from_bf16(co[i * H + h]);
        if (gb == 0xFFFFu) ++r->unwritten; /* the poison pattern, which no computation produces */
        else if (!isfinite(g) || !isfinite(c)) r->nonfinite_bad += (isfinite(g) != isfinite(c));
        else num += (g - c) * (g - c), den += c * c;
      }
      for (int64_t k = 0; k < K; ++k) r->ids_mismatch += gpu_ids[rows[i] * K + k] != ci[i * K + k];
    }
    r->rel_err = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
    /* The end-to-end tolerance of the GPU suites for FP8 paths against the CPU backend (docs/GPU.md). */
    r->ok = r->rel_err <= 2e-2 && r->unwritten == 0 && r->nonfinite_bad == 0;
  }
  free(ws);
  free(hb.hidden);
  free(hb.logits);
  free(hb.out);
  free(hb.ids_out);
  free(hb.w_out);
  return st;
}
