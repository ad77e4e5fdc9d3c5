/* gpu_util.c — see gpu_util.h. */
#include "gpu_util.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t elem_bytes(fp8moe_dtype d) { return (size_t)d.bits / 8; }

/* Bytes from data (before byte_offset) to one past the last element. */
static size_t tensor_extent(const fp8moe_tensor* t) {
  int64_t last = 0;
  int64_t compact = 1;
  for (int32_t d = t->ndim - 1; d >= 0; --d) {
    if (t->shape[d] == 0) return (size_t)t->byte_offset;
    int64_t s = t->strides ? t->strides[d] : compact;
    last += (t->shape[d] - 1) * s;
    compact *= t->shape[d];
  }
  return (size_t)t->byte_offset + (size_t)(last + 1) * elem_bytes(t->dtype);
}

static int cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, "gpu_util: %s: %s\n", what, cudaGetErrorString(e));
  return 0;
}

/* The tensor fields of fp8moe_moe_args in order (inputs, then outputs). */
static const fp8moe_tensor** field(fp8moe_moe_args* a, int i) {
  const fp8moe_tensor** in[] = {&a->hidden_states, &a->hidden_scale, &a->router_logits, &a->routing_bias,
                                &a->topk_ids, &a->topk_weights, &a->w13, &a->w13_scale, &a->w2, &a->w2_scale,
                                &a->a1_scale, &a->a2_scale, (const fp8moe_tensor**)&a->output,
                                (const fp8moe_tensor**)&a->routing_ids_out,
                                (const fp8moe_tensor**)&a->routing_weights_out,
                                (const fp8moe_tensor**)&a->device_status};
  return in[i];
}

int gpu_clone(const test_plugin* tp, fp8moe_context* ctx, const fp8moe_moe_args* host, gpu_problem* g) {
  memset(g, 0, sizeof *g);
  g->args = *host;
  g->host = host;
  fp8moe_context_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (tp->api->context_info(ctx, &info) != FP8MOE_STATUS_OK) return -1;
  for (int i = 0; i < GPU_MAX_TENSORS; ++i) {
    const fp8moe_tensor* src = *field(&g->args, i);
    if (src == NULL || i == 15) continue;
    g->t[i] = *src;
    g->bytes[i] = tensor_extent(src);
    size_t n = g->bytes[i] ? g->bytes[i] : 1;
    if (!cuda_ok(cudaMalloc(&g->dev[i], n), "cudaMalloc")) return -1;
    if (i < 12 && g->bytes[i] && !cuda_ok(cudaMemcpy(g->dev[i], src->data, g->bytes[i], cudaMemcpyHostToDevice), "H2D"))
      return -1;
    g->t[i].data = g->dev[i];
    g->t[i].device.device_type = FP8MOE_DEVICE_CUDA;
    g->t[i].device.device_id = info.device_ordinal;
    *field(&g->args, i) = &g->t[i];
  }
  /* device_status: always present on the GPU run, so every suite checks it. */
  static int64_t one[1] = {1};
  if (!cuda_ok(cudaMalloc((void**)&g->status, sizeof(int32_t)), "cudaMalloc status")) return -1;
  if (!cuda_ok(cudaMemset(g->status, 0x5A, sizeof(int32_t)), "memset status")) return -1;
  g->t[15].data = g->status;
  g->t[15].device.device_type = FP8MOE_DEVICE_CUDA;
  g->t[15].device.device_id = info.device_ordinal;
  g->t[15].ndim = 1;
  g->t[15].dtype = (fp8moe_dtype){FP8MOE_DTYPE_INT, 32, 1};
  g->t[15].shape = one;
  g->t[15].strides = NULL;
  g->t[15].byte_offset = 0;
  g->args.device_status = &g->t[15];
  size_t ws = 0;
  g->args.workspace = NULL;
  g->args.workspace_size = 0;
  int32_t st = tp->api->query_workspace(ctx, &g->args, &ws);
  if (st != FP8MOE_STATUS_OK) {
    fprintf(stderr, "gpu_util: query_workspace: status %d\n", (int)st);
    return -1;
  }
  if (ws && !cuda_ok(cudaMalloc(&g->workspace, ws), "cudaMalloc workspace")) return -1;
  g->workspace_size = ws;
  g->args.workspace = g->workspace;
  g->args.workspace_size = ws;
  return 0;
}

void gpu_free(gpu_problem* g) {
  for (int i = 0; i < GPU_MAX_TENSORS; ++i) (void)cudaFree(g->dev[i]);
  (void)cudaFree(g->status);
  (void)cudaFree(g->workspace);
  memset(g, 0, sizeof *g);
}

int gpu_poison(gpu_problem* g, void* stream) {
  for (int i = 12; i < 15; ++i)
    if (g->dev[i] && !cuda_ok(cudaMemsetAsync(g->dev[i], 0xFF, g->bytes[i], (cudaStream_t)stream), "poison"))
      return -1;
  return 0;
}

int gpu_fetch(gpu_problem* g) {
  if (!cuda_ok(cudaDeviceSynchronize(), "synchronize")) return -1;
  fp8moe_tensor* outs[3] = {g->host->output, g->host->routing_ids_out, g->host->routing_weights_out};
  for (int i = 12; i < 15; ++i)
    if (g->dev[i] && !cuda_ok(cudaMemcpy(outs[i - 12]->data, g->dev[i], g->bytes[i], cudaMemcpyDeviceToHost), "D2H"))
      return -1;
  return 0;
}

int32_t gpu_status_word(const gpu_problem* g) {
  int32_t v = -12345;
  if (!cuda_ok(cudaMemcpy(&v, g->status, sizeof v, cudaMemcpyDeviceToHost), "status D2H")) return -12345;
  return v;
}

/* Element i (row-major index over the tensor's shape) of a rank-2 host tensor, as double; poison → NaN. */
static double read_elem(const fp8moe_tensor* t, int64_t r, int64_t c, int* poison) {
  int64_t s0 = t->strides ? t->strides[0] : t->shape[1], s1 = t->strides ? t->strides[1] : 1;
  const unsigned char* b = (const unsigned char*)t->data + t->byte_offset + (size_t)(r * s0 + c * s1) * elem_bytes(t->dtype);
  int all = 1;
  for (size_t j = 0; j < elem_bytes(t->dtype); ++j) all &= b[j] == 0xFF;
  *poison = all;
  if (t->dtype.code == FP8MOE_DTYPE_FLOAT && t->dtype.bits == 32) {
    float f;
    memcpy(&f, b, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, b, 2);
  if (t->dtype.code == FP8MOE_DTYPE_BFLOAT) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  /* fp16 */
  uint32_t sign = (h & 0x8000u) ? 1u : 0u, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp((double)(m | 0x400u), (int)e - 25);
  return sign ? -v : v;
}

int outputs_take(const fp8moe_moe_args* a, run_outputs* o) {
  memset(o, 0, sizeof *o);
  const fp8moe_tensor* t = a->output;
  o->T = t->shape[0];
  o->H = t->shape[1];
  o->K = a->top_k;
  o->out = malloc(sizeof(double) * (size_t)(o->T * o->H + 1));
  o->poison = malloc((size_t)(o->T * o->H + 1));
  if (!o->out || !o->poison) return -1;
  for (int64_t r = 0; r < o->T; ++r)
    for (int64_t c = 0; c < o->H; ++c) {
      int p;
      o->out[r * o->H + c] = read_elem(t, r, c, &p);
      o->poison[r * o->H + c] = (uint8_t)p;
    }
  if (a->routing_ids_out && a->routing_weights_out) {
    o->ids = malloc(sizeof(int32_t) * (size_t)(o->T * o->K + 1));
    o->w = malloc(sizeof(float) * (size_t)(o->T * o->K + 1));
    if (!o->ids || !o->w) return -1;
    memcpy(o->ids, a->routing_ids_out->data, sizeof(int32_t) * (size_t)(o->T * o->K));
    memcpy(o->w, a->routing_weights_out->data, sizeof(float) * (size_t)(o->T * o->K));
  }
  return 0;
}

void outputs_free(run_outputs* o) {
  free(o->out);
  free(o->poison);
  free(o->ids);
  free(o->w);
  memset(o, 0, sizeof *o);
}

int outputs_compare(const run_outputs* gpu, const run_outputs* cpu, const int64_t* rows, int64_t nrows,
                    const char* label, compare_result* r) {
  memset(r, 0, sizeof *r);
  double d2 = 0.0, c2 = 0.0;
  /* The row that adds most to the error, reported on failure: a whole token wrong, or an error spread thin. */
  double worst_d2 = -1.0, worst_c2 = 0.0;
  int64_t worst_row = -1;
  const int64_t H = gpu->H, K = gpu->K;
  for (int64_t i = 0; i < nrows; ++i) {
    const int64_t gr = rows ? rows[i] : i;
    const double d2_before = d2, c2_before = c2;
    /* A row whose CPU output is partly non-finite keeps only a biased part finite (a FLT_MAX routing weight,
     * from a +Inf logit, leaves just the slot's values below 1 in magnitude): its finite values are held to
     * the row's largest one (max-norm, 1e-1) and kept out of the norm-relative error, where they would
     * outweigh every other row (docs/GPU.md "Weight-streaming decode GEMMs"). */
    int partial = 0;
    for (int64_t h = 0; h < H && !partial; ++h) partial = !isfinite(cpu->out[i * H + h]);
    double row_dmax = 0.0, row_cmax = 0.0;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t gi = gr * H + h, ci = i * H + h;
      if (gpu->poison[gi]) {
        if (++r->unwritten <= 3) fprintf(stderr, "  [%s] output[%lld][%lld] never written\n", label, (long long)gr, (long long)h);
        continue;
      }
      double g = gpu->out[gi], c = cpu->out[ci];
      if (isnan(g) != isnan(c) || (isinf(g) != isinf(c)) || (isinf(c) && g != c)) {
        if (++r->nonfinite_bad <= 3)
          fprintf(stderr, "  [%s] output[%lld][%lld]: gpu %g, cpu %g\n", label, (long long)gr, (long long)h, g, c);
        continue;
      }
      if (!isfinite(c)) continue;
      if (partial) {
        row_dmax = fmax(row_dmax, fabs(g - c));
        row_cmax = fmax(row_cmax, fabs(c));
        continue;
      }
      d2 += (g - c) * (g - c);
      c2 += c * c;
    }
    if (partial && row_dmax > 1e-1 * row_cmax) {
      if (++r->partial_bad <= 3)
        fprintf(stderr, "  [%s] row %lld (partly non-finite): max |gpu − cpu| %g against max |cpu| %g\n", label,
                (long long)gr, row_dmax, row_cmax);
    }
    if (d2 - d2_before > worst_d2) {
      worst_d2 = d2 - d2_before;
      worst_c2 = c2 - c2_before;
      worst_row = gr;
    }
    if (gpu->ids && cpu->ids)
      for (int64_t k = 0; k < K; ++k) {
        int32_t gid = gpu->ids[gr * K + k], cid = cpu->ids[i * K + k];
        if (gid != cid) {
          if (++r->ids_bad <= 3)
            fprintf(stderr, "  [%s] ids[%lld][%lld]: gpu %d, cpu %d\n", label, (long long)gr, (long long)k, gid, cid);
          continue;
        }
        double gw = gpu->w[gr * K + k], cw = cpu->w[i * K + k];
        double err = fabs(gw - cw), rel = cw != 0.0 ? err / fabs(cw) : err;
        if (rel > r->max_w_rel || isnan(rel)) r->max_w_rel = isnan(rel) ? INFINITY : rel;
        if (!(err <= 1e-6 * fabs(cw)) && !(gw == cw)) {
          if (++r->weights_bad <= 3)
            fprintf(stderr, "  [%s] weight[%lld][%lld]: gpu %.9g, cpu %.9g\n", label, (long long)gr, (long long)k, gw, cw);
        }
      }
  }
  r->rel_err = c2 > 0.0 ? sqrt(d2 / c2) : sqrt(d2);
  int ok = r->rel_err <= 2e-2 && r->unwritten == 0 && r->nonfinite_bad == 0 && r->partial_bad == 0 && r->ids_bad == 0 &&
           r->weights_bad == 0;
  if (!ok)
    fprintf(stderr, "  [%s] rel_err %.3e unwritten %lld nonfinite %lld ids %lld weights %lld\n", label, r->rel_err,
            (long long)r->unwritten, (long long)r->nonfinite_bad, (long long)r->ids_bad, (long long)r->weights_bad);
  if (!ok && worst_row >= 0)
    fprintf(stderr, "  [%s] worst row %lld: %.1f %% of the squared error, its own rel_err %.3e\n", label,
            (long long)worst_row, d2 > 0.0 ? 100.0 * worst_d2 / d2 : 0.0,
            worst_c2 > 0.0 ? sqrt(worst_d2 / worst_c2) : sqrt(worst_d2));
  return ok;
}

int outputs_identical(const run_outputs* a, const run_outputs* b) {
  const int64_t n = a->T * a->H;
  for (int64_t i = 0; i < n; ++i) {
    if (a->poison[i] != b->poison[i]) return 0;
    if (memcmp(&a->out[i], &b->out[i], sizeof(double)) != 0 && !(isnan(a->out[i]) && isnan(b->out[i]))) return 0;
  }
  if (a->ids && b->ids && memcmp(a->ids, b->ids, sizeof(int32_t) * (size_t)(a->T * a->K)) != 0) return 0;
  if (a->w && b->w && memcmp(a->w, b->w, sizeof(float) * (size_t)(a->T * a->K)) != 0) return 0;
  return 1;
}

int gpu_suite_open(const char* name, test_plugin* tp, fp8moe_context** cpu, fp8moe_context** gpu,
                   fp8moe_backend_info* bi) {
  *cpu = NULL;
  *gpu = NULL;
  if (test_plugin_open(NULL, tp) != 0) return 1;
  memset(bi, 0, sizeof *bi);
  bi->struct_size = sizeof *bi;
  bi->backend = FP8MOE_BACKEND_CUDA;
  if (tp->api->backend_info(bi) != FP8MOE_STATUS_OK || !bi->available) {
    printf("%s: skipped: CUDA backend unavailable (%s)\n", name, bi->reason);
    test_plugin_close(tp);
    return TEST_SKIP_CODE;
  }
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.backend = FP8MOE_BACKEND_CPU;
  int32_t st1 = tp->api->context_create(&ca, cpu);
  ca.backend = FP8MOE_BACKEND_CUDA;
  int32_t st2 = tp->api->context_create(&ca, gpu);
  CHECK(st1 == FP8MOE_STATUS_OK && st2 == FP8MOE_STATUS_OK, "context_create: cpu %d, cuda %d", (int)st1, (int)st2);
  return 0;
}
