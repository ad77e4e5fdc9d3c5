/* deepseek_host.c — a complete fp8moe host in plain C: dlopen the plugin, negotiate the ABI, create a
 * context, ask what it supports, and run one DeepSeek-V3-shaped MoE layer (256 experts, top-8 in 4 of 8
 * groups, routed scaling 2.5, FP8 128x128 block weights) at a reduced hidden size so it runs in a second
 * on a CPU.
 *
 *   fp8moe_example_deepseek [--backend auto|cpu|cuda] [LIBRARY]
 *
 * LIBRARY defaults to the SONAME libfp8moe.so.1 (from the build tree, the example's build RPATH finds the
 * build's library). --backend auto (the default) lets the plugin pick CUDA when a GPU is usable and says why
 * it did not otherwise; cuda insists on it. On CUDA the example places its tensors in device memory through the
 * CUDA runtime, which it also
 * loads with dlopen (the host never links CUDA, like the plugin itself). Exits 0 when the run and its checks
 * pass, 1 on any error, 2 on a usage error. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fp8moe.h"

/* The layer: DeepSeek-V3's routing and format; H and I reduced from 7168 / 2048. */
enum { T = 16, H = 1024, I = 256, E = 256, K = 8, N_GROUP = 8, TOPK_GROUP = 4 };
static const float ROUTED_SCALING_FACTOR = 2.5f;

/* ---- where the tensors live: host memory, or CUDA device memory through a dlopen'ed cudart ---- */

typedef struct memory {
  int32_t device_type;
  void* cudart;
  int (*cuda_malloc)(void**, size_t);
  int (*cuda_free)(void*);
  int (*cuda_memcpy)(void*, const void*, size_t, int);
  int (*cuda_synchronize)(void);
  const char* (*cuda_error_string)(int);
} memory;

#define CUDA_MEMCPY_HOST_TO_DEVICE 1
#define CUDA_MEMCPY_DEVICE_TO_HOST 2

static int memory_init_cuda(memory* m) {
  const char* names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !m->cudart; ++i)
    m->cudart = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!m->cudart) {
    fprintf(stderr, "the context runs on CUDA but no CUDA runtime (libcudart) could be loaded\n");
    return -1;
  }
  m->cuda_malloc = (int (*)(void**, size_t))(uintptr_t)dlsym(m->cudart, "cudaMalloc");
  m->cuda_free = (int (*)(void*))(uintptr_t)dlsym(m->cudart, "cudaFree");
  m->cuda_memcpy = (int (*)(void*, const void*, size_t, int))(uintptr_t)dlsym(m->cudart, "cudaMemcpy");
  m->cuda_synchronize = (int (*)(void))(uintptr_t)dlsym(m->cudart, "cudaDeviceSynchronize");
  m->cuda_error_string = (const char* (*)(int))(uintptr_t)dlsym(m->cudart, "cudaGetErrorString");
  if (!m->cuda_malloc || !m->cuda_free || !m->cuda_memcpy || !m->cuda_synchronize || !m->cuda_error_string) {
    fprintf(stderr, "libcudart lacks cudaMalloc/cudaFree/cudaMemcpy/cudaDeviceSynchronize\n");
    return -1;
  }
  m->device_type = FP8MOE_DEVICE_CUDA;
  return 0;
}

/* A copy of host bytes where the backend reads them (256-byte aligned). NULL on failure. */
static void* memory_place(memory* m, const void* host, size_t bytes) {
  size_t padded = (bytes + 255) / 256 * 256;
  if (padded == 0) padded = 256;
  if (m->device_type == FP8MOE_DEVICE_CPU) {
    void* p = aligned_alloc(256, padded);
    if (p && host) memcpy(p, host, bytes);
    return p;
  }
  void* d = NULL;
  int err = m->cuda_malloc(&d, padded);
  if (err == 0 && host) err = m->cuda_memcpy(d, host, bytes, CUDA_MEMCPY_HOST_TO_DEVICE);
  if (err != 0) {
    fprintf(stderr, "CUDA: %s\n", m->cuda_error_string(err));
    return NULL;
  }
  return d;
}

static int memory_fetch(memory* m, void* host, const void* placed, size_t bytes) {
  if (m->device_type == FP8MOE_DEVICE_CPU) {
    memcpy(host, placed, bytes);
    return 0;
  }
  int err = m->cuda_memcpy(host, placed, bytes, CUDA_MEMCPY_DEVICE_TO_HOST);
  if (err != 0) fprintf(stderr, "CUDA: %s\n", m->cuda_error_string(err));
  return err;
}

static int memory_sync(memory* m) {
  if (m->device_type == FP8MOE_DEVICE_CPU) return 0;
  int err = m->cuda_synchronize();
  if (err != 0) fprintf(stderr, "CUDA: %s\n", m->cuda_error_string(err));
  return err;
}

static void memory_release(memory* m, void* placed) {
  if (!placed) return;
  if (m->device_type == FP8MOE_DEVICE_CPU) free(placed);
  else m->cuda_free(placed);
}

/* ---- data ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 32);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(rng() >> 8) / 16777216.0f; }

static uint16_t to_bf16(float f) { /* round to nearest even; the inputs here are finite */
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* A random e4m3fn code with |x| < 2 (exponent field <= 7): never NaN, never saturated. */
static uint8_t random_e4m3(void) { return (uint8_t)((rng() & 0x3Fu) | (rng() & 0x80u)); }

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the host ---- */

typedef struct tensor {
  fp8moe_tensor t;
  int64_t shape[3];
} tensor;

static fp8moe_tensor* describe(tensor* x, void* data, const memory* m, fp8moe_dtype dt, int32_t ndim, int64_t d0,
                               int64_t d1, int64_t d2) {
  memset(x, 0, sizeof *x);
  x->shape[0] = d0;
  x->shape[1] = d1;
  x->shape[2] = d2;
  x->t.data = data;
  x->t.device.device_type = m->device_type;
  x->t.device.device_id = 0;
  x->t.ndim = ndim;
  x->t.dtype = dt;
  x->t.shape = x->shape;
  x->t.strides = NULL; /* compact row-major */
  return &x->t;
}

static int offers_deepseek_block128(const fp8moe_capabilities* caps) {
  int method = 0, format = 0;
  for (uint32_t i = 0; i < caps->routing_method_count; ++i)
    method |= caps->routing_methods[i].id == FP8MOE_ROUTING_DEEPSEEK_V3 &&
              (caps->routing_methods[i].backends & (1u << caps->backend));
  for (uint32_t i = 0; i < caps->quant_format_count; ++i)
    format |= caps->quant_formats[i].id == FP8MOE_QUANT_FP8_BLOCK128 &&
              (caps->quant_formats[i].backends & (1u << caps->backend));
  return method && format;
}

static int usage(FILE* to, const char* argv0, int code) {
  fprintf(to,
          "usage: %s [--backend auto|cpu|cuda] [LIBRARY]\n"
          "Runs one DeepSeek-V3-shaped MoE layer through the fp8moe plugin and checks the routing.\n"
          "  --backend  auto (default): CUDA when a GPU is usable, else the CPU; cpu or cuda: that one\n"
          "  LIBRARY    the plugin to dlopen (default: the SONAME libfp8moe.so.%d)\n",
          argv0, FP8MOE_ABI_VERSION_MAJOR);
  return code;
}

/* Why the CUDA backend is not the one running: the plugin's own reason. */
static void explain_cuda(const fp8moe_api* api) {
  fp8moe_backend_info bi;
  memset(&bi, 0, sizeof bi);
  bi.struct_size = sizeof bi;
  bi.backend = FP8MOE_BACKEND_CUDA;
  if (api->backend_info(&bi) != FP8MOE_STATUS_OK) return;
  if (!bi.compiled_in) printf("         cuda not used: not compiled into this library\n");
  else if (!bi.available) printf("         cuda not used: %s\n", bi.reason);
}

int main(int argc, char** argv) {
  char soname[32];
  snprintf(soname, sizeof soname, "libfp8moe.so.%d", FP8MOE_ABI_VERSION_MAJOR);
  const char* library = soname;
  int32_t backend = FP8MOE_BACKEND_AUTO;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      return usage(stdout, argv[0], 0);
    } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      ++i;
      if (strcmp(argv[i], "cpu") == 0) backend = FP8MOE_BACKEND_CPU;
      else if (strcmp(argv[i], "cuda") == 0) backend = FP8MOE_BACKEND_CUDA;
      else if (strcmp(argv[i], "auto") == 0) backend = FP8MOE_BACKEND_AUTO;
      else {
        fprintf(stderr, "unknown backend '%s' (auto, cpu or cuda)\n", argv[i]);
        return 2;
      }
    } else if (argv[i][0] == '-') {
      return usage(stderr, argv[0], 2);
    } else {
      library = argv[i];
    }
  }

  /* 1. load and negotiate */
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    fprintf(stderr, "dlopen(%s): %s\n", library, dlerror());
    return 1;
  }
  fp8moe_get_api_fn get_api = (fp8moe_get_api_fn)(uintptr_t)dlsym(handle, "fp8moe_get_api");
  if (!get_api) {
    fprintf(stderr, "%s does not export fp8moe_get_api\n", library);
    return 1;
  }
  fp8moe_negotiation n;
  memset(&n, 0, sizeof n);
  n.struct_size = sizeof n;
  n.host_abi_major = FP8MOE_ABI_VERSION_MAJOR;
  n.host_min_minor = 0;
  n.host_max_minor = FP8MOE_ABI_VERSION_MINOR;
  const fp8moe_api* api = NULL;
  int32_t st = get_api(&n, &api);
  if (st != FP8MOE_STATUS_OK || !api || api->struct_size < sizeof(fp8moe_api)) {
    fprintf(stderr, "negotiation refused (status %d, refusal %d): %s\n", st, n.refusal, n.message);
    return 1;
  }
  uint32_t vmaj, vmin, vpat;
  api->get_version(&vmaj, &vmin, &vpat);
  printf("library: fp8moe %u.%u.%u (%s), ABI %u.%u, agreed minor %u\n", vmaj, vmin, vpat, library,
         n.plugin_abi_major, n.plugin_abi_minor, n.agreed_minor);

  /* 2. a context */
  char message[512] = "";
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.error_message = message;
  ca.error_message_size = sizeof message;
  ca.backend = backend;
  fp8moe_context* ctx = NULL;
  st = api->context_create(&ca, &ctx);
  if (st != FP8MOE_STATUS_OK) {
    fprintf(stderr, "context_create: %s: %s\n", api->status_string(st), message);
    return 1;
  }
  fp8moe_context_info ci;
  memset(&ci, 0, sizeof ci);
  ci.struct_size = sizeof ci;
  if (api->context_info(ctx, &ci) != FP8MOE_STATUS_OK) {
    fprintf(stderr, "context_info failed\n");
    return 1;
  }
  static const char* const requested[] = {"auto", "cpu", "cuda"};
  printf("backend: %s (%s), requested %s\n", ci.backend == FP8MOE_BACKEND_CUDA ? "cuda" : "cpu", ci.device_name,
         backend >= 0 && backend <= 2 ? requested[backend] : "?");
  if (ci.backend != FP8MOE_BACKEND_CUDA) explain_cuda(api);

  memory mem;
  memset(&mem, 0, sizeof mem);
  mem.device_type = FP8MOE_DEVICE_CPU;
  if (ci.backend == FP8MOE_BACKEND_CUDA && memory_init_cuda(&mem) != 0) return 1;

  /* 3. does it do DeepSeek-V3 routing with 128x128 block weights? */
  fp8moe_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  st = api->query_capabilities(ctx, &caps);
  if (st != FP8MOE_STATUS_OK || !offers_deepseek_block128(&caps)) {
    fprintf(stderr, "this backend does not offer DEEPSEEK_V3 with FP8_BLOCK128 (status %d)\n", st);
    return 1;
  }
  if (E > caps.limits.max_experts || K > caps.limits.max_top_k || N_GROUP > caps.limits.max_groups) {
    fprintf(stderr, "the plugin's limits are below this layer (E %d, K %d, n_group %d)\n", E, K, N_GROUP);
    return 1;
  }

  /* 4. the layer's data, in host memory first */
  const size_t n_hidden = (size_t)T * H, n_logits = (size_t)T * E;
  const size_t n_w13 = (size_t)E * 2 * I * H, n_w2 = (size_t)E * H * I;
  const size_t n_w13s = (size_t)E * (2 * I / 128) * (H / 128), n_w2s = (size_t)E * (H / 128) * (I / 128);
  uint16_t* hidden = malloc(n_hidden * 2);
  float* logits = malloc(n_logits * 4);
  float* bias = malloc((size_t)E * 4);
  uint8_t* w13 = malloc(n_w13);
  uint8_t* w2 = malloc(n_w2);
  float* w13s = malloc(n_w13s * 4);
  float* w2s = malloc(n_w2s * 4);
  uint16_t* out = malloc(n_hidden * 2);
  int32_t* ids = malloc((size_t)T * K * 4);
  float* weights = malloc((size_t)T * K * 4);
  if (!hidden || !logits || !bias || !w13 || !w2 || !w13s || !w2s || !out || !ids || !weights) {
    fprintf(stderr, "out of host memory\n");
    return 1;
  }
  for (size_t i = 0; i < n_hidden; ++i) hidden[i] = to_bf16(uniform(-1.0f, 1.0f));
  for (size_t i = 0; i < n_logits; ++i) logits[i] = uniform(-4.0f, 4.0f);
  for (size_t i = 0; i < (size_t)E; ++i) bias[i] = uniform(-0.1f, 0.1f);
  for (size_t i = 0; i < n_w13; ++i) w13[i] = random_e4m3();
  for (size_t i = 0; i < n_w2; ++i) w2[i] = random_e4m3();
  for (size_t i = 0; i < n_w13s; ++i) w13s[i] = uniform(0.5f, 1.5f) / 32.0f;
  for (size_t i = 0; i < n_w2s; ++i) w2s[i] = uniform(0.5f, 1.5f) / 16.0f;

  void* d_hidden = memory_place(&mem, hidden, n_hidden * 2);
  void* d_logits = memory_place(&mem, logits, n_logits * 4);
  void* d_bias = memory_place(&mem, bias, (size_t)E * 4);
  void* d_w13 = memory_place(&mem, w13, n_w13);
  void* d_w2 = memory_place(&mem, w2, n_w2);
  void* d_w13s = memory_place(&mem, w13s, n_w13s * 4);
  void* d_w2s = memory_place(&mem, w2s, n_w2s * 4);
  void* d_out = memory_place(&mem, NULL, n_hidden * 2);
  void* d_ids = memory_place(&mem, NULL, (size_t)T * K * 4);
  void* d_weights = memory_place(&mem, NULL, (size_t)T * K * 4);
  if (!d_hidden || !d_logits || !d_bias || !d_w13 || !d_w2 || !d_w13s || !d_w2s || !d_out || !d_ids || !d_weights)
    return 1;

  const fp8moe_dtype bf16 = {FP8MOE_DTYPE_BFLOAT, 16, 1}, f32 = {FP8MOE_DTYPE_FLOAT, 32, 1};
  const fp8moe_dtype e4m3 = {FP8MOE_DTYPE_FLOAT8_E4M3FN, 8, 1}, i32 = {FP8MOE_DTYPE_INT, 32, 1};
  tensor t_hidden, t_logits, t_bias, t_w13, t_w13s, t_w2, t_w2s, t_out, t_ids, t_weights;
  fp8moe_moe_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.error_message = message;
  args.error_message_size = sizeof message;
  args.routing_method = FP8MOE_ROUTING_DEEPSEEK_V3;
  args.quant_format = FP8MOE_QUANT_FP8_BLOCK128;
  args.activation = FP8MOE_ACTIVATION_SWIGLU;
  args.gate_up_order = FP8MOE_GATE_UP_GATE_FIRST;
  args.num_experts = E;
  args.top_k = K;
  args.n_group = N_GROUP;
  args.topk_group = TOPK_GROUP;
  args.routed_scaling_factor = ROUTED_SCALING_FACTOR;
  args.hidden_states = describe(&t_hidden, d_hidden, &mem, bf16, 2, T, H, 0);
  args.router_logits = describe(&t_logits, d_logits, &mem, f32, 2, T, E, 0);
  args.routing_bias = describe(&t_bias, d_bias, &mem, f32, 1, E, 0, 0);
  args.w13 = describe(&t_w13, d_w13, &mem, e4m3, 3, E, 2 * I, H);
  args.w13_scale = describe(&t_w13s, d_w13s, &mem, f32, 3, E, 2 * I / 128, H / 128);
  args.w2 = describe(&t_w2, d_w2, &mem, e4m3, 3, E, H, I);
  args.w2_scale = describe(&t_w2s, d_w2s, &mem, f32, 3, E, H / 128, I / 128);
  args.output = describe(&t_out, d_out, &mem, bf16, 2, T, H, 0);
  args.routing_ids_out = describe(&t_ids, d_ids, &mem, i32, 2, T, K, 0);
  args.routing_weights_out = describe(&t_weights, d_weights, &mem, f32, 2, T, K, 0);

  /* 5. support and workspace, then run */
  st = api->query_support(ctx, &args);
  if (st != FP8MOE_STATUS_OK) {
    fprintf(stderr, "query_support: %s: %s\n", api->status_string(st), message);
    return 1;
  }
  size_t ws_bytes = 0;
  st = api->query_workspace(ctx, &args, &ws_bytes);
  if (st != FP8MOE_STATUS_OK) {
    fprintf(stderr, "query_workspace: %s: %s\n", api->status_string(st), message);
    return 1;
  }
  void* ws = memory_place(&mem, NULL, ws_bytes);
  if (!ws) return 1;
  args.workspace = ws;
  args.workspace_size = ws_bytes;
  printf("layer: T=%d H=%d I=%d E=%d K=%d n_group=%d topk_group=%d scale=%.2f\n", T, H, I, E, K, N_GROUP, TOPK_GROUP,
         (double)ROUTED_SCALING_FACTOR);

  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = seconds();
    st = api->run(ctx, &args);
    if (st == FP8MOE_STATUS_OK && memory_sync(&mem) != 0) st = FP8MOE_STATUS_DEVICE_ERROR;
    double dt = seconds() - t0;
    if (st != FP8MOE_STATUS_OK) {
      fprintf(stderr, "run: %s: %s\n", api->status_string(st), message);
      return 1;
    }
    if (dt < best) best = dt;
  }
  if (memory_fetch(&mem, out, d_out, n_hidden * 2) || memory_fetch(&mem, ids, d_ids, (size_t)T * K * 4) ||
      memory_fetch(&mem, weights, d_weights, (size_t)T * K * 4))
    return 1;

  /* 6. what came out: the routing of the first tokens, checks a host can make cheaply, a checksum */
  int errors = 0, checks = 0;
  for (int t = 0; t < T; ++t) {
    float sum = 0.0f;
    uint32_t groups = 0;
    for (int k = 0; k < K; ++k) {
      int32_t e = ids[t * K + k];
      ++checks;
      if (e < 0 || e >= E) {
        fprintf(stderr, "token %d slot %d: expert id %d outside [0,%d)\n", t, k, e, E);
        ++errors;
        continue;
      }
      groups |= 1u << (e / (E / N_GROUP));
      sum += weights[t * K + k];
    }
    int n_groups = 0;
    for (uint32_t g = groups; g; g &= g - 1) ++n_groups;
    checks += 2;
    if (n_groups > TOPK_GROUP) {
      fprintf(stderr, "token %d: experts from %d groups, at most %d allowed\n", t, n_groups, TOPK_GROUP);
      ++errors;
    }
    /* every expert is local, so the weights (sigma / sum sigma x scale) add up to the scale */
    if (fabsf(sum - ROUTED_SCALING_FACTOR) > 1e-4f * ROUTED_SCALING_FACTOR) {
      fprintf(stderr, "token %d: weights sum to %.6f, expected %.6f\n", t, (double)sum, (double)ROUTED_SCALING_FACTOR);
      ++errors;
    }
    if (t < 3) { /* 80 columns: the experts, then their weights below them */
      printf("token %d  experts", t);
      for (int k = 0; k < K; ++k) printf(" %5d", ids[t * K + k]);
      printf("  (%d groups)\n         weights", n_groups);
      for (int k = 0; k < K; ++k) printf(" %5.3f", (double)weights[t * K + k]);
      printf("  (sum %.3f)\n", (double)sum);
    }
  }
  double checksum = 0.0, abs_sum = 0.0;
  int non_finite = 0;
  for (size_t i = 0; i < n_hidden; ++i) {
    float v = from_bf16(out[i]);
    if (!isfinite(v)) ++non_finite;
    else {
      checksum += v;
      abs_sum += fabs(v);
    }
  }
  ++checks;
  if (non_finite || abs_sum == 0.0) {
    fprintf(stderr, "output has %d non-finite values, sum|x| = %g\n", non_finite, abs_sum);
    ++errors;
  }
  printf("output checksum: sum %.6f, sum|x| %.6f over %zu values\n", checksum, abs_sum, n_hidden);
  printf("run: %.3f ms (best of 3), workspace %zu bytes\n", best * 1e3, ws_bytes);
  printf("deepseek_host sanity checks: %d passed, %d failed\n", checks - errors, errors);

  memory_release(&mem, ws);
  void* placed[] = {d_hidden, d_logits, d_bias, d_w13, d_w2, d_w13s, d_w2s, d_out, d_ids, d_weights};
  for (size_t i = 0; i < sizeof placed / sizeof placed[0]; ++i) memory_release(&mem, placed[i]);
  free(hidden);
  free(logits);
  free(bias);
  free(w13);
  free(w2);
  free(w13s);
  free(w2s);
  free(out);
  free(ids);
  free(weights);
  api->context_destroy(ctx);
  if (mem.cudart) dlclose(mem.cudart);
  dlclose(handle);
  return errors ? 1 : 0;
}
