/* test_hostile_tensors.c — tensor descriptors a careless or hostile host can pass (issue 11): address
 * arithmetic that overflows (byte_offset >= 2^63, extents past the top of the address space), outputs whose
 * elements overlap or whose bytes alias an input, another output or the workspace, and empty tensors with
 * arbitrary strides. Every refusal is INVALID_ARGUMENT with a message naming the argument(s), the outputs
 * untouched; every acceptance gives the same bits as the plain call. Run in the ASan + UBSan build too, where
 * pointer-overflow UB aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_problem.h"
#include "fp8moe.h"
#include "plugin_host.h"

#define POISON 0xA5

static const fp8moe_api* api;
static fp8moe_context* ctx;
static unsigned char* arena;
static size_t arena_used;
#define ARENA_BYTES (8u << 20)

static void* arena_take(size_t bytes) {
  void* d = arena + arena_used;
  arena_used += (bytes + 255) / 256 * 256;
  return arena_used <= ARENA_BYTES ? d : NULL;
}

static void* data_fn(const baseline_problem* p, int32_t arg, fp8moe_dtype dt, int64_t n) {
  (void)p;
  size_t bytes = (size_t)(n > 0 ? n : 1) * (dt.bits / 8u);
  void* d = arena_take(bytes + 1024); /* slack: strided outputs below use up to twice the rows */
  uint32_t x = 999u + (uint32_t)arg * 7919u;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    float f = (float)(x >> 8) / 16777216.0f;
    if (dt.code == FP8MOE_DTYPE_FLOAT8_E4M3FN) ((unsigned char*)d)[i] = (unsigned char)((x >> 24) & 0xB7);
    else if (dt.code == FP8MOE_DTYPE_FLOAT && dt.bits == 32)
      ((float*)d)[i] = arg == FP8MOE_ARG_ROUTER_LOGITS ? 4 * f - 2 : 0.01f + 0.01f * f;
    else if (dt.code == FP8MOE_DTYPE_BFLOAT) {
      float v = 2 * f - 1;
      uint32_t u;
      memcpy(&u, &v, 4);
      ((uint16_t*)d)[i] = (uint16_t)(u >> 16);
    }
  }
  return d;
}

static baseline_problem base;
static void* workspace;
static size_t workspace_bytes;
static uint16_t reference[4 * 256];

static void fresh(baseline_problem* p) {
  *p = base;
  p->args.error_message = p->message;
  p->args.error_message_size = sizeof p->message;
  p->message[0] = '\0';
  /* the descriptors point into p's own test_tensors */
  const fp8moe_tensor** in[] = {&p->args.hidden_states, &p->args.hidden_scale, &p->args.router_logits,
                                &p->args.routing_bias, &p->args.topk_ids, &p->args.topk_weights,
                                &p->args.w13, &p->args.w13_scale, &p->args.w2, &p->args.w2_scale,
                                &p->args.a1_scale, &p->args.a2_scale};
  const int32_t in_ids[] = {FP8MOE_ARG_HIDDEN_STATES, FP8MOE_ARG_HIDDEN_SCALE, FP8MOE_ARG_ROUTER_LOGITS,
                            FP8MOE_ARG_ROUTING_BIAS, FP8MOE_ARG_TOPK_IDS, FP8MOE_ARG_TOPK_WEIGHTS, FP8MOE_ARG_W13,
                            FP8MOE_ARG_W13_SCALE, FP8MOE_ARG_W2, FP8MOE_ARG_W2_SCALE, FP8MOE_ARG_A1_SCALE,
                            FP8MOE_ARG_A2_SCALE};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; ++i) {
    if (*in[i]) {
      *in[i] = &p->t[in_ids[i]].t;
      p->t[in_ids[i]].t.shape = p->t[in_ids[i]].shape;
      if (p->t[in_ids[i]].t.strides) p->t[in_ids[i]].t.strides = p->t[in_ids[i]].strides;
    }
  }
  fp8moe_tensor** out[] = {&p->args.output, &p->args.routing_ids_out, &p->args.routing_weights_out,
                           &p->args.device_status};
  const int32_t out_ids[] = {FP8MOE_ARG_OUTPUT, FP8MOE_ARG_ROUTING_IDS_OUT, FP8MOE_ARG_ROUTING_WEIGHTS_OUT,
                             FP8MOE_ARG_DEVICE_STATUS};
  for (size_t i = 0; i < 4; ++i) {
    if (*out[i]) {
      *out[i] = &p->t[out_ids[i]].t;
      p->t[out_ids[i]].t.shape = p->t[out_ids[i]].shape;
      if (p->t[out_ids[i]].t.strides) p->t[out_ids[i]].t.strides = p->t[out_ids[i]].strides;
    }
  }
  p->args.workspace = workspace;
  p->args.workspace_size = workspace_bytes;
}

static void set_strides(test_tensor* tt, int64_t s0, int64_t s1) {
  tt->strides[0] = s0;
  tt->strides[1] = s1;
  tt->t.strides = tt->strides;
}

/* Runs p and expects INVALID_ARGUMENT with every `names` in the message and the output untouched. */
static void expect_refused(const char* what, baseline_problem* p, const char* name1, const char* name2) {
  memset(base.t[FP8MOE_ARG_OUTPUT].t.data, POISON, sizeof reference);
  int32_t st = api->run(ctx, &p->args);
  char message[sizeof p->message];
  memcpy(message, p->message, sizeof message);
  EXPECT(st == FP8MOE_STATUS_INVALID_ARGUMENT, "%s: status %d, expected INVALID_ARGUMENT: %s", what, st, p->message);
  EXPECT(strstr(p->message, name1) != NULL, "%s: message does not name %s: %s", what, name1, p->message);
  if (name2) EXPECT(strstr(p->message, name2) != NULL, "%s: message does not name %s: %s", what, name2, p->message);
  const unsigned char* o = (const unsigned char*)base.t[FP8MOE_ARG_OUTPUT].t.data;
  int untouched = 1;
  for (size_t i = 0; i < sizeof reference; ++i) untouched &= o[i] == POISON;
  EXPECT(untouched, "%s: output written on refusal", what);
  /* query_support gives run's answer, except about the workspace, which it does not check */
  int32_t qs = api->query_support(ctx, &p->args);
  EXPECT(qs == st || strncmp(message, "workspace", 9) == 0, "%s: query_support %d, run %d", what, qs, st);
}

/* ---- address arithmetic ---- */

static void check_address_overflow(void) {
  static baseline_problem p;
  const uint64_t offsets[] = {(uint64_t)1 << 63, UINT64_MAX, UINT64_MAX - 255, ((uint64_t)1 << 63) + 256};
  for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; ++i) {
    char what[96];
    fresh(&p);
    p.t[FP8MOE_ARG_HIDDEN_STATES].t.byte_offset = offsets[i];
    snprintf(what, sizeof what, "hidden_states byte_offset %#llx", (unsigned long long)offsets[i]);
    expect_refused(what, &p, "hidden_states", "byte_offset");
    /* T = 0: nothing is read, but data + byte_offset is still never formed when it wraps */
    fresh(&p);
    p.t[FP8MOE_ARG_HIDDEN_STATES].shape[0] = 0;
    p.t[FP8MOE_ARG_ROUTER_LOGITS].shape[0] = 0;
    p.t[FP8MOE_ARG_OUTPUT].shape[0] = 0;
    p.t[FP8MOE_ARG_ROUTING_IDS_OUT].shape[0] = 0;
    p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].shape[0] = 0;
    p.t[FP8MOE_ARG_OUTPUT].t.byte_offset = offsets[i];
    snprintf(what, sizeof what, "T = 0, output byte_offset %#llx", (unsigned long long)offsets[i]);
    expect_refused(what, &p, "output", "byte_offset");
    fresh(&p);
    p.t[FP8MOE_ARG_W2].t.byte_offset = offsets[i];
    snprintf(what, sizeof what, "w2 byte_offset %#llx", (unsigned long long)offsets[i]);
    expect_refused(what, &p, "w2", "byte_offset");
  }
  /* a base near the top of the address space: data + extent wraps even with byte_offset 0 */
  fresh(&p);
  p.t[FP8MOE_ARG_W13].t.data = (void*)(uintptr_t)(UINTPTR_MAX - 4095);
  expect_refused("w13 at the top of the address space", &p, "w13", "address space");
  fresh(&p);
  p.t[FP8MOE_ARG_W13].t.data = (void*)(uintptr_t)(((uint64_t)1 << 63) - 4096);
  expect_refused("w13 extent past 2^63", &p, "w13", "extent");
  /* strides whose extent overflows 64 bits: the largest accepted strides in every dim of a huge shape */
  fresh(&p);
  p.t[FP8MOE_ARG_ROUTER_LOGITS].shape[0] = (int64_t)1 << 62; /* refused for the extent before the shape */
  set_strides(&p.t[FP8MOE_ARG_ROUTER_LOGITS], (int64_t)1 << 40, 1);
  expect_refused("router_logits extent beyond 2^64", &p, "router_logits", "extent");
}

/* ---- outputs that overlap ---- */

static void check_output_overlap(void) {
  static baseline_problem p;
  const int64_t T = base.c.T, H = base.c.H, K = base.c.K;
  /* rows of output overlapping (row stride 8 with H = 256): the CPU workers would race on them */
  fresh(&p);
  set_strides(&p.t[FP8MOE_ARG_OUTPUT], 8, 1);
  expect_refused("output row stride 8 < H", &p, "output", "overlap");
  fresh(&p);
  set_strides(&p.t[FP8MOE_ARG_OUTPUT], H - 8, 1); /* 16-byte aligned rows, still overlapping */
  expect_refused("output row stride H - 8", &p, "output", "overlap");
  fresh(&p);
  set_strides(&p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT], 1, 1);
  expect_refused("routing_weights_out strides (1, 1)", &p, "routing_weights_out", "overlap");
  fresh(&p);
  set_strides(&p.t[FP8MOE_ARG_ROUTING_IDS_OUT], 1, 2); /* [T,K] column-major-ish but K=2 rows of 1 overlap */
  expect_refused("routing_ids_out strides (1, 2)", &p, "routing_ids_out", "overlap");
  /* an output inside an input, inside another output, or an input used as the output (in place) */
  fresh(&p);
  p.t[FP8MOE_ARG_OUTPUT].t.data = (char*)p.t[FP8MOE_ARG_W13].t.data + 4096;
  expect_refused("output inside w13", &p, "output", "w13");
  fresh(&p);
  p.t[FP8MOE_ARG_OUTPUT].t.data = p.t[FP8MOE_ARG_W2].t.data;
  expect_refused("output at w2", &p, "output", "w2");
  fresh(&p);
  p.t[FP8MOE_ARG_OUTPUT].t.data = p.t[FP8MOE_ARG_HIDDEN_STATES].t.data;
  expect_refused("output in place of hidden_states", &p, "output", "hidden_states");
  fresh(&p);
  p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].t.data = p.t[FP8MOE_ARG_ROUTING_IDS_OUT].t.data;
  expect_refused("routing_weights_out on routing_ids_out", &p, "routing_weights_out", "routing_ids_out");
  fresh(&p);
  p.t[FP8MOE_ARG_DEVICE_STATUS].t.data = (char*)p.t[FP8MOE_ARG_OUTPUT].t.data + 64;
  expect_refused("device_status inside output", &p, "output", "device_status");
  fresh(&p);
  p.t[FP8MOE_ARG_ROUTING_IDS_OUT].t.data = p.t[FP8MOE_ARG_ROUTER_LOGITS].t.data;
  expect_refused("routing_ids_out on router_logits", &p, "routing_ids_out", "router_logits");
  /* the last byte of one against the first of the other: still an overlap; one byte apart: fine */
  fresh(&p);
  p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].t.data =
      (char*)p.t[FP8MOE_ARG_ROUTING_IDS_OUT].t.data + (size_t)(T * K) * sizeof(int32_t) - sizeof(float);
  expect_refused("routing_weights_out sharing one element with routing_ids_out", &p, "routing_weights_out",
                 "routing_ids_out");
  /* the workspace run uses may not hold a tensor either */
  if (workspace_bytes > 0) {
    fresh(&p);
    p.t[FP8MOE_ARG_OUTPUT].t.data = (char*)workspace + 256;
    expect_refused("output inside the workspace", &p, "workspace", "output");
  }

  /* accepted: padded rows (stride 2H), transposed-but-disjoint routing outputs; same bits as the plain call */
  static uint16_t padded[4 * 2 * 256];
  fresh(&p);
  p.t[FP8MOE_ARG_OUTPUT].t.data = padded;
  set_strides(&p.t[FP8MOE_ARG_OUTPUT], 2 * H, 1);
  memset(padded, POISON, sizeof padded);
  int32_t st = api->run(ctx, &p.args);
  EXPECT(st == FP8MOE_STATUS_OK, "output row stride 2H refused: %s", p.message);
  int64_t differ = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) differ += padded[t * 2 * H + h] != reference[t * H + h];
  EXPECT(differ == 0, "output row stride 2H: %lld values differ from the compact call", (long long)differ);
  fresh(&p);
  set_strides(&p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT], 1, T); /* [T,K] stored K-major: disjoint */
  st = api->run(ctx, &p.args);
  EXPECT(st == FP8MOE_STATUS_OK, "routing_weights_out strides (1, T) refused: %s", p.message);
}

/* ---- empty tensors ---- */

static void check_empty(void) {
  static baseline_problem p;
  const int32_t zero_rows[] = {FP8MOE_ARG_HIDDEN_STATES, FP8MOE_ARG_ROUTER_LOGITS, FP8MOE_ARG_OUTPUT,
                               FP8MOE_ARG_ROUTING_IDS_OUT, FP8MOE_ARG_ROUTING_WEIGHTS_OUT};
  const int64_t strides[][2] = {{0, 0}, {-5, -1}, {0, 7}, {INT64_MAX, INT64_MIN}, {1, 1}};
  for (size_t s = 0; s < sizeof strides / sizeof strides[0]; ++s) {
    fresh(&p);
    for (size_t i = 0; i < sizeof zero_rows / sizeof zero_rows[0]; ++i) {
      p.t[zero_rows[i]].shape[0] = 0;
      set_strides(&p.t[zero_rows[i]], strides[s][0], strides[s][1]);
    }
    p.t[FP8MOE_ARG_OUTPUT].t.data = NULL; /* what an empty torch tensor may carry */
    int32_t st = api->run(ctx, &p.args);
    EXPECT(st == FP8MOE_STATUS_OK, "T = 0 with strides (%lld, %lld): status %d: %s", (long long)strides[s][0],
           (long long)strides[s][1], st, p.message);
    size_t bytes = 1;
    EXPECT(api->query_workspace(ctx, &p.args, &bytes) == FP8MOE_STATUS_OK && bytes == 0,
           "T = 0 with strides (%lld, %lld): query_workspace %zu", (long long)strides[s][0],
           (long long)strides[s][1], bytes);
  }
  /* empty, but the shape, dtype and rank are still checked */
  fresh(&p);
  p.t[FP8MOE_ARG_HIDDEN_STATES].shape[0] = 0;
  p.t[FP8MOE_ARG_OUTPUT].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTER_LOGITS].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTING_IDS_OUT].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].shape[0] = 0;
  p.t[FP8MOE_ARG_OUTPUT].shape[1] = base.c.H + 128;
  set_strides(&p.t[FP8MOE_ARG_OUTPUT], 0, 0);
  expect_refused("T = 0, output [0, H + 128]", &p, "output", "dim 1");
  fresh(&p);
  p.t[FP8MOE_ARG_HIDDEN_STATES].shape[0] = 0;
  p.t[FP8MOE_ARG_OUTPUT].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTER_LOGITS].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTING_IDS_OUT].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTER_LOGITS].t.dtype = TEST_I8;
  set_strides(&p.t[FP8MOE_ARG_ROUTER_LOGITS], 0, 0);
  memset(p.t[FP8MOE_ARG_OUTPUT].t.data, POISON, sizeof reference);
  EXPECT(api->run(ctx, &p.args) == FP8MOE_STATUS_UNSUPPORTED_DTYPE && strstr(p.message, "router_logits"),
         "T = 0, int8 router_logits: %s", p.message);
  /* a zero-element shape whose other extents overflow a 64-bit product is still empty, not an error */
  fresh(&p);
  p.t[FP8MOE_ARG_HIDDEN_STATES].shape[0] = 0;
  p.t[FP8MOE_ARG_OUTPUT].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTER_LOGITS].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTING_IDS_OUT].shape[0] = 0;
  p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].shape[0] = 0;
  set_strides(&p.t[FP8MOE_ARG_OUTPUT], INT64_MAX, INT64_MAX);
  EXPECT(api->run(ctx, &p.args) == FP8MOE_STATUS_OK, "T = 0, output strides INT64_MAX: %s", p.message);
}

int main(void) {
  test_plugin plugin;
  if (test_plugin_open(NULL, &plugin) != 0) return 1;
  api = plugin.api;
  arena = baseline_alloc256(ARENA_BYTES);
  if (!arena) return 1;
  EXPECT(baseline_cpu_context(api, 2, &ctx) == FP8MOE_STATUS_OK, "CPU context");
  baseline_config cfg = baseline_config_default();
  baseline_build(&base, &cfg, data_fn);
  EXPECT(api->query_workspace(ctx, &base.args, &workspace_bytes) == FP8MOE_STATUS_OK, "query_workspace: %s",
         base.message);
  workspace = baseline_workspace(workspace_bytes, &workspace_bytes);
  static baseline_problem p;
  fresh(&p);
  EXPECT(api->run(ctx, &p.args) == FP8MOE_STATUS_OK, "baseline run: %s", p.message);
  memcpy(reference, base.t[FP8MOE_ARG_OUTPUT].t.data, sizeof reference);
  check_address_overflow();
  check_output_overlap();
  check_empty();
  api->context_destroy(ctx);
  free(workspace);
  free(arena);
  test_plugin_close(&plugin);
  return test_finish("test_hostile_tensors", test_checks_run);
}
