/* host.c — a minimal third-party host, built by the packaging tests against an *installed* fp8moe (header
 * from the package, flags from pkg-config or find_package). It dlopens the library by SONAME, negotiates,
 * and runs one small FP8_PER_TENSOR MoE layer on the CPU backend.
 *
 * Build-time inputs (from the package's metadata, which is what this test checks):
 *   FP8MOE_SONAME          the name to dlopen (pkg-config --variable=soname / ${fp8moe_SONAME})
 *   FP8MOE_EXPECT_VERSION  the package version (pkg-config --modversion / ${fp8moe_VERSION})
 * Output: "loaded <path>" (the file the dynamic loader picked) and "ok" on success; exit 1 on failure. */
#define _GNU_SOURCE /* dlinfo */
#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8moe.h"

#if !defined(FP8MOE_SONAME) || !defined(FP8MOE_EXPECT_VERSION)
#error "build with -DFP8MOE_SONAME=\"...\" -DFP8MOE_EXPECT_VERSION=\"...\" from the package metadata"
#endif

enum { T = 4, H = 128, I = 128, E = 4, K = 2 };

static int fail(const char* what, const char* detail) {
  fprintf(stderr, "host: %s: %s\n", what, detail ? detail : "");
  return 1;
}

/* A deterministic generator, so a failure reproduces. */
static uint32_t next_random(uint32_t* state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

/* fp8 e4m3fn codes with magnitudes in [0.25, 2) and a random sign: never NaN, never zero. */
static uint8_t random_e4m3(uint32_t* state) {
  uint32_t r = next_random(state);
  return (uint8_t)((0x28u + r % 0x18u) | ((r >> 12) & 1u) << 7);
}

static uint16_t float_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16); /* truncation is fine for test data */
}

static fp8moe_tensor describe(void* data, uint8_t code, uint8_t bits, int32_t ndim, int64_t* shape) {
  fp8moe_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = FP8MOE_DEVICE_CPU;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

static int run_layer(const fp8moe_api* api) {
  static uint16_t hidden[T * H];
  static float logits[T * E];
  static uint8_t w13[E * 2 * I * H];
  static uint8_t w2[E * H * I];
  static float w13_scale[E], w2_scale[E];
  static float out[T * H];
  uint32_t state = 12345u;
  for (int i = 0; i < T * H; ++i) hidden[i] = float_to_bf16((float)(next_random(&state) % 2001u) / 1000.0f - 1.0f);
  for (int i = 0; i < T * E; ++i) logits[i] = (float)(next_random(&state) % 1000u) / 250.0f;
  for (int i = 0; i < E * 2 * I * H; ++i) w13[i] = random_e4m3(&state);
  for (int i = 0; i < E * H * I; ++i) w2[i] = random_e4m3(&state);
  for (int e = 0; e < E; ++e) {
    w13_scale[e] = 0.01f * (float)(e + 1);
    w2_scale[e] = 0.02f;
  }
  for (int i = 0; i < T * H; ++i) out[i] = NAN; /* poisoned: run must write every element */

  int64_t s_hidden[2] = {T, H}, s_logits[2] = {T, E}, s_w13[3] = {E, 2 * I, H}, s_w2[3] = {E, H, I};
  int64_t s_scale[1] = {E}, s_out[2] = {T, H};
  fp8moe_tensor t_hidden = describe(hidden, FP8MOE_DTYPE_BFLOAT, 16, 2, s_hidden);
  fp8moe_tensor t_logits = describe(logits, FP8MOE_DTYPE_FLOAT, 32, 2, s_logits);
  fp8moe_tensor t_w13 = describe(w13, FP8MOE_DTYPE_FLOAT8_E4M3FN, 8, 3, s_w13);
  fp8moe_tensor t_w2 = describe(w2, FP8MOE_DTYPE_FLOAT8_E4M3FN, 8, 3, s_w2);
  fp8moe_tensor t_w13_scale = describe(w13_scale, FP8MOE_DTYPE_FLOAT, 32, 1, s_scale);
  fp8moe_tensor t_w2_scale = describe(w2_scale, FP8MOE_DTYPE_FLOAT, 32, 1, s_scale);
  fp8moe_tensor t_out = describe(out, FP8MOE_DTYPE_FLOAT, 32, 2, s_out);

  char message[512] = "";
  fp8moe_context_args cargs;
  memset(&cargs, 0, sizeof cargs);
  cargs.struct_size = sizeof cargs;
  cargs.error_message = message;
  cargs.error_message_size = sizeof message;
  cargs.backend = FP8MOE_BACKEND_CPU;
  cargs.num_threads = 1;
  fp8moe_context* ctx = NULL;
  if (api->context_create(&cargs, &ctx) != FP8MOE_STATUS_OK) return fail("context_create", message);

  fp8moe_moe_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.error_message = message;
  args.error_message_size = sizeof message;
  args.routing_method = FP8MOE_ROUTING_RENORMALIZE;
  args.quant_format = FP8MOE_QUANT_FP8_PER_TENSOR;
  args.activation = FP8MOE_ACTIVATION_SWIGLU;
  args.num_experts = E;
  args.top_k = K;
  args.hidden_states = &t_hidden;
  args.router_logits = &t_logits;
  args.w13 = &t_w13;
  args.w13_scale = &t_w13_scale;
  args.w2 = &t_w2;
  args.w2_scale = &t_w2_scale;
  args.output = &t_out;

  int rc = 1;
  void* workspace = NULL;
  size_t bytes = 0;
  if (api->query_workspace(ctx, &args, &bytes) != FP8MOE_STATUS_OK) {
    fail("query_workspace", message);
    goto done;
  }
  workspace = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (!workspace) {
    fail("aligned_alloc", "out of memory");
    goto done;
  }
  args.workspace = workspace;
  args.workspace_size = bytes;
  if (api->run(ctx, &args) != FP8MOE_STATUS_OK) {
    fail("run", message);
    goto done;
  }
  int nonfinite = 0, zero = 0;
  double sum_abs = 0.0;
  for (int i = 0; i < T * H; ++i) {
    if (!isfinite(out[i])) ++nonfinite;
    else if (out[i] == 0.0f) ++zero;
    else sum_abs += fabs((double)out[i]);
  }
  printf("output: %d elements, %d non-finite, %d zero, mean |out| %.4g\n", T * H, nonfinite, zero,
         sum_abs / (T * H));
  /* Every token has two local experts with non-zero weights, so an all-zero or sparse result is a bug. */
  if (nonfinite == 0 && zero < T * H / 8 && sum_abs > 0.0) rc = 0;
  else fail("output", "non-finite or (mostly) zero");
done:
  free(workspace);
  api->context_destroy(ctx);
  return rc;
}

int main(void) {
  void* handle = dlopen(FP8MOE_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!handle) return fail("dlopen(" FP8MOE_SONAME ")", dlerror());
  struct link_map* map = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map) printf("loaded %s\n", map->l_name);

  fp8moe_get_api_fn get_api = NULL;
  void* symbol = dlsym(handle, "fp8moe_get_api");
  if (!symbol) return fail("dlsym(fp8moe_get_api)", dlerror());
  memcpy(&get_api, &symbol, sizeof get_api);

  fp8moe_negotiation negotiation;
  memset(&negotiation, 0, sizeof negotiation);
  negotiation.struct_size = sizeof negotiation;
  negotiation.host_abi_major = FP8MOE_ABI_VERSION_MAJOR;
  negotiation.host_min_minor = 0;
  negotiation.host_max_minor = FP8MOE_ABI_VERSION_MINOR;
  const fp8moe_api* api = NULL;
  if (get_api(&negotiation, &api) != FP8MOE_STATUS_OK || !api) return fail("negotiation", negotiation.message);
  printf("negotiated ABI %u.%u\n", negotiation.plugin_abi_major, negotiation.agreed_minor);

  uint32_t major = 0, minor = 0, patch = 0;
  api->get_version(&major, &minor, &patch);
  char version[64];
  snprintf(version, sizeof version, "%u.%u.%u", major, minor, patch);
  if (strcmp(version, FP8MOE_EXPECT_VERSION) != 0 || strcmp(version, FP8MOE_VERSION_STRING) != 0) {
    fprintf(stderr, "host: library %s, package metadata %s, header %s\n", version, FP8MOE_EXPECT_VERSION,
            FP8MOE_VERSION_STRING);
    return 1;
  }
  int rc = run_layer(api);
  dlclose(handle);
  if (rc == 0) printf("ok\n");
  return rc;
}
