/* test_struct_size.c — the struct_size rules of the ABI (fp8moe.h, "Evolution rules"): the plugin reads only
 * the bytes the caller's struct_size covers, uses the documented default for every field past it, writes
 * out-structs only as far as they reach, and refuses a struct too small for its required fields. A host
 * built against an older, shorter struct is simulated by a full struct whose struct_size stops early and
 * whose fields past that point hold values that would change the result (or crash) if the plugin read them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_problem.h"
#include "fp8moe.h"
#include "plugin_host.h"

#define POISON 0xA5
#define END_OF(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

static const fp8moe_api* api;
static fp8moe_context* ctx;

/* ---- one DeepSeek-style problem over real buffers ---- */

enum { T = 5, H = 256, I = 128, E = 16, K = 4, N_GROUP = 4, TOPK_GROUP = 2 };

typedef struct buffers {
  uint16_t hidden[T * H];
  float logits[T * E];
  float bias[E];
  unsigned char w13[E * 2 * I * H];
  float w13_scale[E * 2 * (H / 128)];
  unsigned char w2[E * H * I];
  float w2_scale[E * (H / 128) * (I / 128)];
  uint16_t out[T * H];
  int32_t ids[T * K];
  float weights[T * K];
} buffers;

typedef struct problem {
  fp8moe_moe_args args;
  char message[512];
  test_tensor hidden, logits, bias, w13, w13s, w2, w2s, out, ids, weights;
} problem;

static buffers* buf;
static void* workspace;
static size_t workspace_size;

static uint32_t rng_state = 777u;
static float uniform(float lo, float hi) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return lo + (hi - lo) * (float)(rng_state >> 8) / 16777216.0f;
}

static void fill_buffers(void) {
  for (int i = 0; i < T * H; ++i) {
    float v = uniform(-2.0f, 2.0f);
    uint32_t u;
    memcpy(&u, &v, 4);
    buf->hidden[i] = (uint16_t)(u >> 16);
  }
  for (int i = 0; i < T * E; ++i) buf->logits[i] = uniform(-3.0f, 3.0f);
  for (int i = 0; i < E; ++i) buf->bias[i] = uniform(-0.5f, 0.5f);
  for (size_t i = 0; i < sizeof buf->w13; ++i) buf->w13[i] = (unsigned char)(((unsigned)(uniform(0, 64)) & 0x3F) | (uniform(0, 1) < 0.5f ? 0x80 : 0));
  for (size_t i = 0; i < sizeof buf->w2; ++i) buf->w2[i] = (unsigned char)(((unsigned)(uniform(0, 64)) & 0x3F) | (uniform(0, 1) < 0.5f ? 0x80 : 0));
  for (size_t i = 0; i < sizeof buf->w13_scale / 4; ++i) buf->w13_scale[i] = uniform(0.005f, 0.02f);
  for (size_t i = 0; i < sizeof buf->w2_scale / 4; ++i) buf->w2_scale[i] = uniform(0.005f, 0.02f);
}

static void build(problem* p) {
  memset(p, 0, sizeof *p);
  fp8moe_moe_args* a = &p->args;
  a->struct_size = sizeof *a;
  a->error_message = p->message;
  a->error_message_size = sizeof p->message;
  a->routing_method = FP8MOE_ROUTING_DEEPSEEK_V3;
  a->quant_format = FP8MOE_QUANT_FP8_BLOCK128;
  a->activation = FP8MOE_ACTIVATION_SWIGLU;
  a->gate_up_order = FP8MOE_GATE_UP_GATE_FIRST;
  a->num_experts = E;
  a->top_k = K;
  a->n_group = N_GROUP;
  a->topk_group = TOPK_GROUP;
  a->routed_scaling_factor = 1.0f;
  a->hidden_states = test_tensor_init(&p->hidden, buf->hidden, TEST_BF16, 2, (int64_t[]){T, H}, NULL);
  a->router_logits = test_tensor_init(&p->logits, buf->logits, TEST_F32, 2, (int64_t[]){T, E}, NULL);
  a->routing_bias = test_tensor_init(&p->bias, buf->bias, TEST_F32, 1, (int64_t[]){E}, NULL);
  a->w13 = test_tensor_init(&p->w13, buf->w13, TEST_E4M3, 3, (int64_t[]){E, 2 * I, H}, NULL);
  a->w13_scale = test_tensor_init(&p->w13s, buf->w13_scale, TEST_F32, 3, (int64_t[]){E, 2 * I / 128, H / 128}, NULL);
  a->w2 = test_tensor_init(&p->w2, buf->w2, TEST_E4M3, 3, (int64_t[]){E, H, I}, NULL);
  a->w2_scale = test_tensor_init(&p->w2s, buf->w2_scale, TEST_F32, 3, (int64_t[]){E, H / 128, I / 128}, NULL);
  a->output = test_tensor_init(&p->out, buf->out, TEST_BF16, 2, (int64_t[]){T, H}, NULL);
  a->routing_ids_out = test_tensor_init(&p->ids, buf->ids, TEST_I32, 2, (int64_t[]){T, K}, NULL);
  a->routing_weights_out = test_tensor_init(&p->weights, buf->weights, TEST_F32, 2, (int64_t[]){T, K}, NULL);
  a->workspace = workspace;
  a->workspace_size = workspace_size;
}

static void poison_outputs(void) {
  memset(buf->out, POISON, sizeof buf->out);
  memset(buf->ids, POISON, sizeof buf->ids);
  memset(buf->weights, POISON, sizeof buf->weights);
}

static int all_poison(const void* p, size_t n) {
  const unsigned char* b = p;
  for (size_t i = 0; i < n; ++i)
    if (b[i] != POISON) return 0;
  return 1;
}

typedef struct result {
  int32_t status;
  uint16_t out[T * H];
  int32_t ids[T * K];
  float weights[T * K];
} result;

static void run_into(problem* p, result* r) {
  poison_outputs();
  r->status = api->run(ctx, &p->args);
  memcpy(r->out, buf->out, sizeof r->out);
  memcpy(r->ids, buf->ids, sizeof r->ids);
  memcpy(r->weights, buf->weights, sizeof r->weights);
}

/* ---- moe_args ---- */

static void check_moe_args(void) {
  static problem p;
  static result full, r;
  build(&p);
  run_into(&p, &full);
  EXPECT(full.status == FP8MOE_STATUS_OK, "full-size call refused (%d): %s", full.status, p.message);
  if (full.status != FP8MOE_STATUS_OK) return;

  /* a host without `stream` (struct ends at workspace_size): stream defaults to NULL, same result */
  build(&p);
  p.args.struct_size = END_OF(fp8moe_moe_args, workspace_size);
  p.args.stream = (void*)(uintptr_t)0xdead0000u;
  run_into(&p, &r);
  EXPECT(r.status == FP8MOE_STATUS_OK, "struct up to workspace_size refused (%d): %s", r.status, p.message);
  EXPECT(memcmp(r.out, full.out, sizeof r.out) == 0, "struct up to workspace_size: output differs from full size");

  /* a host whose struct ends at `output`: routing outputs, device_status, workspace default to NULL/0. The
   * fields past struct_size point at real buffers and a real workspace, so reading them would show. */
  build(&p);
  p.args.struct_size = END_OF(fp8moe_moe_args, output);
  EXPECT(api->query_support(ctx, &p.args) == FP8MOE_STATUS_OK, "struct up to output: query_support refused: %s",
         p.message);
  size_t bytes = 0;
  EXPECT(api->query_workspace(ctx, &p.args, &bytes) == FP8MOE_STATUS_OK && bytes == workspace_size,
         "struct up to output: query_workspace %zu, full size %zu", bytes, workspace_size);
  run_into(&p, &r);
  EXPECT(all_poison(r.ids, sizeof r.ids) && all_poison(r.weights, sizeof r.weights),
         "struct up to output: routing outputs past struct_size were written");
  if (workspace_size > 0) {
    /* the workspace default (NULL, 0) is too small for a problem that needs scratch */
    EXPECT(r.status == FP8MOE_STATUS_WORKSPACE_TOO_SMALL, "struct up to output: status %d, expected "
           "WORKSPACE_TOO_SMALL (workspace past struct_size defaults to none): %s", r.status, p.message);
    EXPECT(all_poison(r.out, sizeof r.out), "struct up to output: output written on refusal");
  } else {
    EXPECT(r.status == FP8MOE_STATUS_OK && memcmp(r.out, full.out, sizeof r.out) == 0,
           "struct up to output: status %d or output differs from full size", r.status);
  }

  /* defaults inside the struct: routed_scaling_factor 0 means 1.0; local_num_experts 0 means E */
  build(&p);
  p.args.routed_scaling_factor = 0.0f;
  run_into(&p, &r);
  EXPECT(r.status == FP8MOE_STATUS_OK && memcmp(r.out, full.out, sizeof r.out) == 0 &&
             memcmp(r.weights, full.weights, sizeof r.weights) == 0,
         "routed_scaling_factor 0 differs from 1.0 (%d)", r.status);
  build(&p);
  p.args.local_num_experts = E;
  p.args.local_expert_offset = 0;
  run_into(&p, &r);
  EXPECT(r.status == FP8MOE_STATUS_OK && memcmp(r.out, full.out, sizeof r.out) == 0,
         "local_num_experts E differs from the default 0 (%d)", r.status);
  /* ... and the scale is applied, exactly once, to the weights */
  build(&p);
  p.args.routed_scaling_factor = 2.5f;
  run_into(&p, &r);
  EXPECT(r.status == FP8MOE_STATUS_OK, "routed_scaling_factor 2.5 refused: %s", p.message);
  EXPECT(memcmp(r.ids, full.ids, sizeof r.ids) == 0, "routed_scaling_factor changed the selection");
  int scaled = 1;
  for (int i = 0; i < T * K; ++i)
    scaled &= fabsf(r.weights[i] - 2.5f * full.weights[i]) <= 1e-6f * fabsf(2.5f * full.weights[i]) + 1e-30f;
  EXPECT(scaled, "routed_scaling_factor 2.5: weights are not 2.5 x the default ones");
  EXPECT(memcmp(r.out, full.out, sizeof r.out) != 0, "routed_scaling_factor 2.5: output unchanged");
  /* activation and gate_up_order 0 are the documented defaults SWIGLU and GATE_FIRST: a zeroed field is them */
  EXPECT(FP8MOE_ACTIVATION_SWIGLU == 0 && FP8MOE_GATE_UP_GATE_FIRST == 0, "defaults are not the zero values");

  /* too small for the required fields (everything up to `output`): refused, nothing written, and the
   * message goes only where the struct covers the buffer fields */
  const size_t small[] = {0, sizeof(size_t), END_OF(fp8moe_moe_args, error_message_size),
                          offsetof(fp8moe_moe_args, hidden_states), offsetof(fp8moe_moe_args, output),
                          END_OF(fp8moe_moe_args, output) - 1};
  for (size_t i = 0; i < sizeof small / sizeof small[0]; ++i) {
    build(&p);
    memset(p.message, POISON, sizeof p.message);
    p.args.struct_size = small[i];
    run_into(&p, &r);
    EXPECT(r.status == FP8MOE_STATUS_INVALID_ARGUMENT, "struct_size %zu: status %d, expected INVALID_ARGUMENT",
           small[i], r.status);
    EXPECT(all_poison(r.out, sizeof r.out) && all_poison(r.ids, sizeof r.ids), "struct_size %zu: outputs written",
           small[i]);
    char last[512] = "";
    int32_t last_st = api->last_error(ctx, last, sizeof last);
    EXPECT(last_st == FP8MOE_STATUS_INVALID_ARGUMENT && strstr(last, "struct_size"),
           "struct_size %zu: last_error %d '%s' does not name struct_size", small[i], last_st, last);
    if (small[i] >= END_OF(fp8moe_moe_args, error_message_size)) {
      EXPECT(strcmp(p.message, last) == 0, "struct_size %zu: caller's message '%.80s' differs from last_error",
             small[i], p.message);
    } else {
      EXPECT(all_poison(p.message, sizeof p.message),
             "struct_size %zu: the message buffer (past struct_size) was written", small[i]);
    }
    EXPECT(api->query_support(ctx, &p.args) == FP8MOE_STATUS_INVALID_ARGUMENT, "struct_size %zu: query_support",
           small[i]);
  }
}

/* ---- the smaller in/out structs ---- */

static void check_context_args(void) {
  fp8moe_backend_info cuda;
  memset(&cuda, 0, sizeof cuda);
  cuda.struct_size = sizeof cuda;
  cuda.backend = FP8MOE_BACKEND_CUDA;
  EXPECT(api->backend_info(&cuda) == FP8MOE_STATUS_OK, "backend_info(CUDA)");
  const int32_t auto_backend = cuda.compiled_in && cuda.available ? FP8MOE_BACKEND_CUDA : FP8MOE_BACKEND_CPU;

  /* past struct_size: an invalid backend and reserved flags, which must not be read (defaults AUTO, 0) */
  const size_t sizes[] = {sizeof(size_t), END_OF(fp8moe_context_args, error_message_size)};
  for (size_t i = 0; i < 2; ++i) {
    fp8moe_context_args a;
    char msg[128] = "";
    memset(&a, 0, sizeof a);
    a.struct_size = sizes[i];
    a.error_message = msg;
    a.error_message_size = sizeof msg;
    a.backend = 99;
    a.num_threads = -5;
    a.flags = 0xffu;
    fp8moe_context* c = NULL;
    int32_t st = api->context_create(&a, &c);
    EXPECT(st == FP8MOE_STATUS_OK && c, "context_args struct_size %zu: status %d '%s'", sizes[i], st, msg);
    if (c) {
      fp8moe_context_info ci;
      memset(&ci, 0, sizeof ci);
      ci.struct_size = sizeof ci;
      EXPECT(api->context_info(c, &ci) == FP8MOE_STATUS_OK && ci.backend == auto_backend,
             "context_args struct_size %zu: backend %d, expected AUTO to give %d", sizes[i], ci.backend, auto_backend);
      api->context_destroy(c);
    }
  }
  fp8moe_context_args a;
  memset(&a, 0, sizeof a);
  fp8moe_context* c = (fp8moe_context*)(uintptr_t)0x1;
  EXPECT(api->context_create(&a, &c) == FP8MOE_STATUS_INVALID_ARGUMENT && c == NULL,
         "context_args struct_size 0 accepted");
}

static void check_out_structs(void) {
  /* context_info filled only up to struct_size */
  fp8moe_context_info ci;
  memset(&ci, POISON, sizeof ci);
  ci.struct_size = END_OF(fp8moe_context_info, backend);
  EXPECT(api->context_info(ctx, &ci) == FP8MOE_STATUS_OK, "context_info (short)");
  EXPECT(ci.backend == FP8MOE_BACKEND_CPU, "context_info (short): backend %d", ci.backend);
  EXPECT(all_poison((char*)&ci + END_OF(fp8moe_context_info, backend), sizeof ci - END_OF(fp8moe_context_info, backend)),
         "context_info wrote past struct_size");
  EXPECT(ci.struct_size == END_OF(fp8moe_context_info, backend), "context_info changed struct_size");
  /* a struct with room for nothing: OK or refused (the header says neither), but nothing written */
  memset(&ci, POISON, sizeof ci);
  ci.struct_size = sizeof(size_t);
  int32_t st = api->context_info(ctx, &ci);
  EXPECT(st == FP8MOE_STATUS_OK || st == FP8MOE_STATUS_INVALID_ARGUMENT, "context_info (8): status %d", st);
  EXPECT(all_poison((char*)&ci + sizeof(size_t), sizeof ci - sizeof(size_t)), "context_info (8) wrote");
  memset(&ci, 0, sizeof ci);
  ci.struct_size = sizeof ci;
  EXPECT(api->context_info(ctx, &ci) == FP8MOE_STATUS_OK && ci.device_ordinal == -1 &&
             memchr(ci.device_name, '\0', sizeof ci.device_name) && ci.device_name[0] != '\0',
         "context_info (full): ordinal %d", ci.device_ordinal);

  /* backend_info up to name: device_name and reason untouched */
  fp8moe_backend_info bi;
  memset(&bi, POISON, sizeof bi);
  bi.struct_size = END_OF(fp8moe_backend_info, name);
  bi.backend = FP8MOE_BACKEND_CPU;
  EXPECT(api->backend_info(&bi) == FP8MOE_STATUS_OK, "backend_info (short)");
  EXPECT(bi.available == 1 && bi.compiled_in == 1 && strcmp(bi.name, "cpu") == 0,
         "backend_info (short): available %d compiled_in %d", bi.available, bi.compiled_in);
  EXPECT(bi.backend == FP8MOE_BACKEND_CPU, "backend_info overwrote its input backend");
  EXPECT(all_poison((char*)&bi + END_OF(fp8moe_backend_info, name), sizeof bi - END_OF(fp8moe_backend_info, name)),
         "backend_info wrote past struct_size");

  /* capabilities up to the arrays: limits untouched; up to flags: counts untouched */
  fp8moe_capabilities caps;
  memset(&caps, POISON, sizeof caps);
  caps.struct_size = offsetof(fp8moe_capabilities, limits);
  EXPECT(api->query_capabilities(ctx, &caps) == FP8MOE_STATUS_OK, "query_capabilities (no limits)");
  EXPECT(caps.routing_methods != NULL && caps.routing_method_count > 0, "query_capabilities (no limits): arrays");
  EXPECT(all_poison(&caps.limits, sizeof caps.limits), "query_capabilities wrote limits past struct_size");
  memset(&caps, POISON, sizeof caps);
  caps.struct_size = END_OF(fp8moe_capabilities, flags);
  EXPECT(api->query_capabilities(ctx, &caps) == FP8MOE_STATUS_OK && caps.backend == FP8MOE_BACKEND_CPU,
         "query_capabilities (up to flags)");
  EXPECT(all_poison((char*)&caps + END_OF(fp8moe_capabilities, flags), sizeof caps - END_OF(fp8moe_capabilities, flags)),
         "query_capabilities wrote past flags");
  memset(&caps, POISON, sizeof caps);
  caps.struct_size = sizeof(size_t);
  st = api->query_capabilities(ctx, &caps);
  EXPECT(st == FP8MOE_STATUS_OK || st == FP8MOE_STATUS_INVALID_ARGUMENT, "query_capabilities (8): status %d", st);
  EXPECT(all_poison((char*)&caps + sizeof(size_t), sizeof caps - sizeof(size_t)), "query_capabilities (8) wrote");
}

int main(void) {
  test_plugin plugin;
  if (test_plugin_open(NULL, &plugin) != 0) return 1;
  api = plugin.api;
  buf = baseline_alloc256(sizeof(buffers));
  if (!buf) return 1;
  fill_buffers();

  int32_t st = baseline_cpu_context(api, 2, &ctx);
  EXPECT(st == FP8MOE_STATUS_OK && ctx, "CPU context_create: %d", st);
  if (ctx) {
    static problem p;
    build(&p);
    st = api->query_workspace(ctx, &p.args, &workspace_size);
    EXPECT(st == FP8MOE_STATUS_OK, "query_workspace: %d %s", st, p.message);
    workspace = baseline_workspace(workspace_size, NULL);
    if (!workspace) return 1;
    check_moe_args();
    check_context_args();
    check_out_structs();
    api->context_destroy(ctx);
  }
  free(workspace);
  free(buf);
  test_plugin_close(&plugin);
  return test_finish("test_struct_size", test_checks_run);
}
