/* bench_roofline.c — the ceilings every point is judged against, measured in the same process
 * (docs/PERFORMANCE.md "Protocol", "Floor"): HBM streaming read with the bench's own kernel, device-to-device
 * copy, and cuBLASLt FP8 GEMMs with per-tensor and with 1×128 · 128×128 block scales. cuBLASLt is dlopened
 * here only: the plugin itself never depends on it. */
#define _POSIX_C_SOURCE 200809L
#include <cublasLt.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "bench_gpu.h"

#define READ_BYTES ((size_t)8 << 30)
#define REPS 10
#define CLOCK_WINDOW_MS 100.0

static double median_of(double* v, int n) {
  double med, p90;
  bench_stats(v, n, &med, &p90);
  return med;
}

void bench_default_rooflines(bench_rooflines* r) {
  memset(r, 0, sizeof *r);
  r->read_gbs = 4570;
  r->copy_gbs = 4280;
  r->dense.m = r->dense.n = r->dense.k = 8192;
  r->dense.tensor_tflops = 1521;
  r->dense.block_tflops = 1285;
  snprintf(r->gemm_note, sizeof r->gemm_note, "not measured (--no-rooflines): docs/PERFORMANCE.md's H200 readings");
}

/* Median time in ms of REPS runs of what fn enqueues, after bench_warm_up's warm-up (2 runs, then more until
 * warmup_ms of device time are behind). Every point is timed after the same warm-up, in the sustained state a loaded
 * GPU reaches within tens of milliseconds (its power cap lowers the SM clock: docs/PERFORMANCE.md "Protocol"), so its
 * ceilings are measured in that state too; ten back-to-back runs alone read the boost clocks. *clock: the SM clock
 * over the REPS runs. */
static int time_ms(bench_enqueue_fn fn, void* ctx, cudaStream_t s, int warmup_ms, bench_clocks* clocks,
                   bench_clock_summary* clock, double* ms_out) {
  cudaEvent_t e[2 * REPS];
  double ms[REPS];
  for (int i = 0; i < 2 * REPS; ++i) cudaEventCreate(&e[i]);
  int rc = bench_warm_up(fn, ctx, s, 2, warmup_ms, e[0], e[1]);
  bench_clocks_start(clocks);
  for (int i = 0; i < REPS && rc == 0; ++i) {
    cudaEventRecord(e[2 * i], s);
    rc = fn(ctx, i, s);
    cudaEventRecord(e[2 * i + 1], s);
  }
  if (rc == 0 && cudaStreamSynchronize(s) != cudaSuccess) rc = -1;
  for (int i = 0; i < REPS && rc == 0; ++i) {
    float f = 0;
    cudaEventElapsedTime(&f, e[2 * i], e[2 * i + 1]);
    ms[i] = f;
  }
  if (rc == 0) *ms_out = median_of(ms, REPS);
  /* REPS runs of a ceiling take a few ms, too short for NVML's readings: the window stays open over more runs, in the
   * same state, until CLOCK_WINDOW_MS (their times are not read). */
  if (rc == 0 && clocks && *ms_out > 0 && *ms_out * REPS < CLOCK_WINDOW_MS) {
    const double more = (CLOCK_WINDOW_MS - *ms_out * REPS) / *ms_out + 1;
    for (int i = 0; i < (more < 100000 ? (int)more : 100000) && rc == 0; ++i) rc = fn(ctx, REPS + i, s);
    if (rc == 0 && cudaStreamSynchronize(s) != cudaSuccess) rc = -1;
  }
  bench_clocks_stop(clocks, clock);
  for (int i = 0; i < 2 * REPS; ++i) cudaEventDestroy(e[i]);
  return rc;
}

typedef struct read_ctx {
  void* buf;
  unsigned long long* sink;
  int blocks;
} read_ctx;
static int enqueue_read(void* c, int i, cudaStream_t s) {
  (void)i;
  read_ctx* r = c;
  return bench_launch_read(r->buf, READ_BYTES, r->sink, r->blocks, s);
}
static int enqueue_copy(void* c, int i, cudaStream_t s) {
  (void)i;
  read_ctx* r = c;
  return cudaMemcpyAsync((char*)r->buf + READ_BYTES / 2, r->buf, READ_BYTES / 2, cudaMemcpyDeviceToDevice, s);
}

/* ---- cuBLASLt, resolved at run time ---- */
typedef struct lt_api {
  void* so;
  cublasStatus_t (*create)(cublasLtHandle_t*);
  cublasStatus_t (*destroy)(cublasLtHandle_t);
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t);
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*, size_t);
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t, int64_t);
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t*);
  cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void*, size_t);
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t*, int*);
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
                           const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t);
  cublasLtHandle_t h;
} lt_api;

static int lt_open(lt_api* lt, char* note, size_t n) {
  static const char* const kNames[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  memset(lt, 0, sizeof *lt);
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0] && !lt->so; ++i) lt->so = dlopen(kNames[i], RTLD_NOW | RTLD_LOCAL);
  if (!lt->so) {
    snprintf(note, n, "cuBLASLt not found (%s): compute floors unavailable", dlerror());
    return -1;
  }
#define SYM(field, name) *(void**)(&lt->field) = dlsym(lt->so, name)
  SYM(create, "cublasLtCreate");
  SYM(destroy, "cublasLtDestroy");
  SYM(desc_create, "cublasLtMatmulDescCreate");
  SYM(desc_destroy, "cublasLtMatmulDescDestroy");
  SYM(desc_set, "cublasLtMatmulDescSetAttribute");
  SYM(layout_create, "cublasLtMatrixLayoutCreate");
  SYM(layout_destroy, "cublasLtMatrixLayoutDestroy");
  SYM(pref_create, "cublasLtMatmulPreferenceCreate");
  SYM(pref_destroy, "cublasLtMatmulPreferenceDestroy");
  SYM(pref_set, "cublasLtMatmulPreferenceSetAttribute");
  SYM(heuristic, "cublasLtMatmulAlgoGetHeuristic");
  SYM(matmul, "cublasLtMatmul");
#undef SYM
  if (!lt->create || !lt->destroy || !lt->desc_create || !lt->desc_destroy || !lt->desc_set || !lt->layout_create ||
      !lt->layout_destroy || !lt->pref_create || !lt->pref_destroy || !lt->pref_set || !lt->heuristic || !lt->matmul ||
      lt->create(&lt->h) != CUBLAS_STATUS_SUCCESS) {
    snprintf(note, n, "cuBLASLt found but incomplete or failed to initialize");
    dlclose(lt->so);
    lt->so = NULL;
    return -1;
  }
  return 0;
}

static void lt_close(lt_api* lt) {
  if (!lt->so) return;
  lt->destroy(lt->h);
  dlclose(lt->so);
  memset(lt, 0, sizeof *lt);
}

/* D[m,n] (bf16) = A[m,k]·B[n,k]ᵀ in e4m3, both K-contiguous (the weight and activation layouts of a MoE
 * GEMM: A = weight rows, B = token rows). */
typedef struct gemm_ctx {
  lt_api* lt;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulHeuristicResult_t algo;
  void *a, *b, *d, *ws;
  float *sa, *sb;
  size_t ws_size;
} gemm_ctx;

static int enqueue_gemm(void* c, int i, cudaStream_t s) {
  (void)i;
  gemm_ctx* g = c;
  const float alpha = 1.0f, beta = 0.0f;
  return g->lt->matmul(g->lt->h, g->desc, &alpha, g->a, g->la, g->b, g->lb, &beta, g->d, g->ld, g->d, g->ld,
                       &g->algo.algo, g->ws, g->ws_size, s) == CUBLAS_STATUS_SUCCESS
             ? 0
             : -1;
}

/* TFLOP/s of one GEMM shape, or ≤ 0 when cuBLASLt offers no algorithm for it (block: 1×128 · 128×128); *sm_mhz: the
 * median SM clock of its timed runs (≤ 0: not sampled). */
static double gemm_tflops(lt_api* lt, int64_t m, int64_t n, int64_t k, int block, int warmup_ms, bench_clocks* clocks,
                          double* sm_mhz, cudaStream_t s) {
  gemm_ctx g;
  memset(&g, 0, sizeof g);
  g.lt = lt;
  g.ws_size = (size_t)32 << 20;
  double result = -1.0;
  const size_t sa_n = (size_t)((m + 127) / 128) * (size_t)((k + 127) / 128), sb_n = (size_t)n * (size_t)((k + 127) / 128);
  if (cudaMalloc(&g.a, (size_t)(m * k)) != cudaSuccess || cudaMalloc(&g.b, (size_t)(n * k)) != cudaSuccess ||
      cudaMalloc(&g.d, (size_t)(m * n) * 2) != cudaSuccess || cudaMalloc(&g.ws, g.ws_size) != cudaSuccess ||
      cudaMalloc((void**)&g.sa, sa_n * 4) != cudaSuccess || cudaMalloc((void**)&g.sb, sb_n * 4) != cudaSuccess)
    goto done;
  bench_launch_fill_e4m3(g.a, (size_t)(m * k), 11, s);
  bench_launch_fill_e4m3(g.b, (size_t)(n * k), 12, s);
  bench_launch_fill_f32(g.sa, sa_n, 1.0f / 64, s);
  bench_launch_fill_f32(g.sb, sb_n, 1.0f / 64, s);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  if (lt->desc_create(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) goto done;
  lt->desc_set(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  lt->desc_set(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  lt->desc_set(g.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.sa, sizeof g.sa);
  lt->desc_set(g.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.sb, sizeof g.sb);
  if (block) {
    const int32_t ma = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, mb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    if (lt->desc_set(g.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma) != CUBLAS_STATUS_SUCCESS ||
        lt->desc_set(g.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb) != CUBLAS_STATUS_SUCCESS)
      goto done;
  } else {
    const int8_t fast = 1;
    lt->desc_set(g.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
  }
  if (lt->layout_create(&g.la, CUDA_R_8F_E4M3, (uint64_t)k, (uint64_t)m, k) != CUBLAS_STATUS_SUCCESS ||
      lt->layout_create(&g.lb, CUDA_R_8F_E4M3, (uint64_t)k, (uint64_t)n, k) != CUBLAS_STATUS_SUCCESS ||
      lt->layout_create(&g.ld, CUDA_R_16BF, (uint64_t)m, (uint64_t)n, m) != CUBLAS_STATUS_SUCCESS)
    goto done;
  cublasLtMatmulPreference_t pref = NULL;
  int found = 0;
  if (lt->pref_create(&pref) == CUBLAS_STATUS_SUCCESS) {
    const uint64_t wsz = g.ws_size;
    lt->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz);
    if (lt->heuristic(lt->h, g.desc, g.la, g.lb, g.ld, g.ld, pref, 1, &g.algo, &found) != CUBLAS_STATUS_SUCCESS) found = 0;
    lt->pref_destroy(pref);
  }
  double ms = 0;
  bench_clock_summary clock;
  bench_clock_none(&clock);
  if (found > 0 && time_ms(enqueue_gemm, &g, s, warmup_ms, clocks, &clock, &ms) == 0 && ms > 0)
    result = 2.0 * (double)m * (double)n * (double)k / (ms * 1e-3) / 1e12;
  *sm_mhz = clock.sm_mhz_median;
done:
  if (g.desc) lt->desc_destroy(g.desc);
  if (g.la) lt->layout_destroy(g.la);
  if (g.lb) lt->layout_destroy(g.lb);
  if (g.ld) lt->layout_destroy(g.ld);
  cudaFree(g.a);
  cudaFree(g.b);
  cudaFree(g.d);
  cudaFree(g.ws);
  cudaFree(g.sa);
  cudaFree(g.sb);
  cudaGetLastError(); /* a refused shape leaves no sticky error */
  return result;
}

int bench_measure_rooflines(bench_rooflines* r, uint32_t case_mask, int warmup_ms, bench_clocks* clocks, char* err,
                            size_t n) {
  memset(r, 0, sizeof *r);
  r->measured = 1;
  r->warmup_ms = warmup_ms;
  r->read_bytes = (double)READ_BYTES;
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    snprintf(err, n, "stream: %s", cudaGetErrorString(cudaGetLastError()));
    return -1;
  }
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  read_ctx rc = {NULL, NULL, 2 * (sms > 0 ? sms : 132)};
  double ms = 0;
  bench_clock_summary ignored; /* the read and copy ceilings are not clock-bound */
  if (cudaMalloc(&rc.buf, READ_BYTES) != cudaSuccess || cudaMalloc((void**)&rc.sink, 8) != cudaSuccess ||
      cudaMemsetAsync(rc.buf, 0x5A, READ_BYTES, s) != cudaSuccess ||
      time_ms(enqueue_read, &rc, s, warmup_ms, NULL, &ignored, &ms) != 0) {
    snprintf(err, n, "read roofline: %s", cudaGetErrorString(cudaGetLastError()));
    cudaFree(rc.buf);
    cudaFree(rc.sink);
    cudaStreamDestroy(s);
    return -1;
  }
  r->read_gbs = (double)READ_BYTES / (ms * 1e-3) / 1e9;
  if (time_ms(enqueue_copy, &rc, s, warmup_ms, NULL, &ignored, &ms) == 0)
    r->copy_gbs = (double)READ_BYTES / (ms * 1e-3) / 1e9; /* read + write */
  cudaFree(rc.buf);
  cudaFree(rc.sink);

  lt_api lt;
  if (lt_open(&lt, r->gemm_note, sizeof r->gemm_note) == 0) {
    r->dense.m = r->dense.n = r->dense.k = 8192;
    r->dense.tensor_tflops = gemm_tflops(&lt, 8192, 8192, 8192, 0, warmup_ms, clocks, &r->dense.tensor_sm_mhz, s);
    r->dense.block_tflops = gemm_tflops(&lt, 8192, 8192, 8192, 1, warmup_ms, clocks, &r->dense.block_sm_mhz, s);
    for (size_t i = 0; i < bench_case_count(); ++i) {
      if (!(case_mask & (1u << i))) continue;
      const bench_case* c = bench_case_at(i);
      bench_gemm_rate* g = &r->per_case[i];
      g->m = 2 * c->model->I;
      g->n = 8192;
      g->k = c->model->H;
      /* Cases of one model share the shape: measure it once. */
      for (size_t j = 0; j < i; ++j)
        if (r->per_case[j].m && bench_case_at(j)->model == c->model) *g = r->per_case[j];
      if (g->tensor_tflops == 0)
        g->tensor_tflops = gemm_tflops(&lt, g->m, g->n, g->k, 0, warmup_ms, clocks, &g->tensor_sm_mhz, s);
      if (g->block_tflops == 0)
        g->block_tflops = gemm_tflops(&lt, g->m, g->n, g->k, 1, warmup_ms, clocks, &g->block_sm_mhz, s);
    }
    if (r->dense.block_tflops <= 0)
      snprintf(r->gemm_note, sizeof r->gemm_note,
               "cuBLASLt offers no 1x128 x 128x128 block-scaled FP8 GEMM here: block floors use the per-tensor rate");
    lt_close(&lt);
  }
  cudaStreamDestroy(s);
  return 0;
}
