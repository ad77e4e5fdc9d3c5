/* test_bad_inputs.c — every refusal of run on a CPU context with real buffers (SPEC §4, DESIGN "Arguments and
 * defaults"): the right status, a message that names the argument and says what was received and what is
 * accepted, the same message from last_error and from query_support, and the outputs (poisoned with a byte
 * pattern) left byte-for-byte untouched. Plus the refusals of context_create and the other entries, and
 * T = 0, which is valid and writes nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_problem.h"
#include "fp8moe.h"
#include "plugin_host.h"

#define POISON 0xA5
#define SLOT_BYTES ((size_t)1 << 20) /* every tensor of this test fits in 1 MiB */

static const fp8moe_api* api;
static fp8moe_context* ctx;
static unsigned char* slots[FP8MOE_ARG_COUNT_V1_0]; /* one 256-aligned buffer per argument */
static unsigned char* workspace;
static size_t workspace_bytes; /* what the baseline problem needs */
static size_t workspace_alloc; /* enough for every configuration used here */

/* ---- a valid problem over real buffers; each case breaks one thing ---- */

typedef baseline_config config;
typedef baseline_problem problem;

static uint32_t rng_state = 12345u;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(rng() >> 8) / 16777216.0f; }

static uint16_t bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* Fills slot `arg` with n elements of dt: moderate finite values, ids within [0, E). */
static void fill(int32_t arg, fp8moe_dtype dt, int64_t n, int32_t E) {
  unsigned char* b = slots[arg];
  const int is_scale = arg == FP8MOE_ARG_W13_SCALE || arg == FP8MOE_ARG_W2_SCALE ||
                       arg == FP8MOE_ARG_HIDDEN_SCALE || arg == FP8MOE_ARG_A1_SCALE || arg == FP8MOE_ARG_A2_SCALE;
  for (int64_t i = 0; i < n; ++i) {
    float v = is_scale ? uniform(0.002f, 0.02f) : uniform(-1.0f, 1.0f);
    if (dt.code == FP8MOE_DTYPE_FLOAT && dt.bits == 32) {
      memcpy(b + 4 * i, &v, 4);
    } else if (dt.code == FP8MOE_DTYPE_BFLOAT && dt.bits == 16) {
      uint16_t h = bf16_bits(v);
      memcpy(b + 2 * i, &h, 2);
    } else if (dt.code == FP8MOE_DTYPE_FLOAT && dt.bits == 16) {
      uint16_t h = (uint16_t)(0x3800u | (rng() & 0x3FFu) | (is_scale ? 0 : (rng() & 0x8000u))); /* ±[0.5,1) */
      if (is_scale) h = (uint16_t)(0x1C00u | (rng() & 0x3FFu));                                   /* ~0.004 */
      memcpy(b + 2 * i, &h, 2);
    } else if (dt.code == FP8MOE_DTYPE_FLOAT8_E4M3FN) {
      b[i] = (unsigned char)((rng() & 0x3Fu) | (rng() & 0x80u)); /* |x| < 2, never NaN */
    } else if (dt.code == FP8MOE_DTYPE_INT && dt.bits == 32) {
      int32_t id = (int32_t)((uint32_t)i % (uint32_t)E);
      memcpy(b + 4 * i, &id, 4);
    } else if (dt.code == FP8MOE_DTYPE_INT && dt.bits == 64) {
      int64_t id = (int64_t)((uint64_t)i % (uint64_t)E);
      memcpy(b + 8 * i, &id, 8);
    }
  }
}

/* Every argument lives in its own slot; inputs get fresh values, outputs are poisoned before each call. */
static void* slot_data(const problem* p, int32_t arg, fp8moe_dtype dt, int64_t n) {
  if (arg < FP8MOE_ARG_OUTPUT) fill(arg, dt, n, p->c.E);
  return slots[arg];
}

static void set(problem* p, int32_t arg, fp8moe_dtype dt, int32_t ndim, const int64_t* shape) {
  baseline_set(p, arg, dt, ndim, shape, slot_data);
}

static void build(problem* p, const config* c) {
  baseline_build(p, c, slot_data);
  p->args.workspace = workspace;
  p->args.workspace_size = workspace_alloc;
}

static config deepseek_config(void) {
  config c = baseline_config_default();
  c.method = FP8MOE_ROUTING_DEEPSEEK_V3;
  c.n_group = 4;
  c.topk_group = 2;
  c.K = 2;
  c.with_bias = 1;
  return c;
}

/* ---- the checks every refusal gets ---- */

static const int32_t output_args[] = {FP8MOE_ARG_OUTPUT, FP8MOE_ARG_ROUTING_IDS_OUT, FP8MOE_ARG_ROUTING_WEIGHTS_OUT,
                                      FP8MOE_ARG_DEVICE_STATUS};

static void poison_outputs(void) {
  for (size_t i = 0; i < sizeof output_args / sizeof output_args[0]; ++i) memset(slots[output_args[i]], POISON, SLOT_BYTES);
}

static int outputs_untouched(void) {
  for (size_t i = 0; i < sizeof output_args / sizeof output_args[0]; ++i)
    for (size_t b = 0; b < SLOT_BYTES; ++b)
      if (slots[output_args[i]][b] != POISON) return 0;
  return 1;
}

/* Does msg contain one of the '|'-separated names? */
static int names_one_of(const char* msg, const char* names) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", names);
  for (char* tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|"))
    if (strstr(msg, tok)) return 1;
  return 0;
}

enum { SUPPORT_SAME = 0, RUN_ONLY = 1 }; /* RUN_ONLY: data/workspace refusals query_support cannot see */

static void expect_refusal(const char* what, problem* p, int32_t status, const char* names, int mode) {
  char support_msg[512] = "";
  int32_t support_st = FP8MOE_STATUS_OK;
  p->message[0] = '\0';
  support_st = api->query_support(ctx, &p->args);
  snprintf(support_msg, sizeof support_msg, "%s", p->message);

  poison_outputs();
  memset(p->message, 0, sizeof p->message);
  int32_t st = api->run(ctx, &p->args);
  EXPECT(st == status, "%s: run status %d, expected %d (%s)", what, st, status, p->message);
  EXPECT(names_one_of(p->message, names), "%s: message does not name %s: '%s'", what, names, p->message);
  EXPECT(strstr(p->message, "got") && (strstr(p->message, "expected") || strstr(p->message, "accepted")),
         "%s: message does not say what was received and what is accepted: '%s'", what, p->message);
  EXPECT(outputs_untouched(), "%s: an output was written on refusal", what);
  char last[512];
  memset(last, 0, sizeof last);
  int32_t last_st = api->last_error(ctx, last, sizeof last);
  EXPECT(last_st == st && strcmp(last, p->message) == 0, "%s: last_error (%d, '%s') differs from run (%d, '%s')", what,
         last_st, last, st, p->message);
  if (mode == SUPPORT_SAME) {
    EXPECT(support_st == st && strcmp(support_msg, p->message) == 0,
           "%s: query_support (%d, '%s') differs from run (%d, '%s')", what, support_st, support_msg, st, p->message);
  } else {
    EXPECT(support_st == FP8MOE_STATUS_OK, "%s: query_support refused (%d, '%s') though it reads no data", what,
           support_st, support_msg);
  }
}

static void expect_ok(const char* what, problem* p) {
  poison_outputs();
  int32_t st = api->run(ctx, &p->args);
  EXPECT(st == FP8MOE_STATUS_OK, "%s: run refused (%d): %s", what, st, p->message);
  int64_t out_bytes = p->c.T * p->c.H * 2;
  int written = 0;
  for (int64_t b = 0; b < out_bytes; ++b) written |= slots[FP8MOE_ARG_OUTPUT][b] != POISON;
  EXPECT(st != FP8MOE_STATUS_OK || out_bytes == 0 || written, "%s: output not written", what);
}

/* ---- the cases ---- */

#define CASE(what, cfg, mutation, status, names, mode) \
  do {                                                 \
    config cc_ = (cfg);                                \
    build(&p, &cc_);                                   \
    mutation;                                          \
    expect_refusal(what, &p, status, names, mode);     \
  } while (0)

#define T_(arg) (p.t[FP8MOE_ARG_##arg].t)
/* Reshape / restride one tensor; expressions, so a case may chain several with commas. */
static void reshape(test_tensor* tt, int32_t ndim, const int64_t* shape) {
  tt->t.ndim = ndim;
  for (int32_t d = 0; d < ndim && d < 4; ++d) tt->shape[d] = shape[d];
}
static void restride(test_tensor* tt, int32_t ndim, const int64_t* strides) {
  for (int32_t d = 0; d < ndim && d < 4; ++d) tt->strides[d] = strides[d];
  tt->t.strides = tt->strides;
}
#define N_ARGS(...) ((int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define SHAPE(arg, ...) reshape(&p.t[FP8MOE_ARG_##arg], N_ARGS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define STRIDES(arg, ...) restride(&p.t[FP8MOE_ARG_##arg], N_ARGS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

static void check_run_refusals(void) {
  problem p;
  const config B = baseline_config_default();
  const int64_t T = B.T, H = B.H, I = B.I, E = B.E, K = B.K;
  const int32_t INV = FP8MOE_STATUS_INVALID_ARGUMENT, DT = FP8MOE_STATUS_UNSUPPORTED_DTYPE;

  /* the baseline runs, so every refusal below is caused by its one change */
  build(&p, &B);
  expect_ok("baseline", &p);

  /* NULL args and NULL context */
  {
    poison_outputs();
    int32_t st = api->run(ctx, NULL);
    EXPECT(st == INV, "run(ctx, NULL): %d", st);
    char last[512] = "";
    EXPECT(api->last_error(ctx, last, sizeof last) == INV && strstr(last, "args"), "run(ctx, NULL): last_error '%s'",
           last);
    build(&p, &B);
    poison_outputs();
    st = api->run(NULL, &p.args);
    EXPECT(st == INV && strstr(p.message, "context"), "run(NULL, args): %d '%s'", st, p.message);
    EXPECT(outputs_untouched(), "run(NULL, args) wrote an output");
    EXPECT(api->query_support(NULL, &p.args) == INV, "query_support(NULL, args)");
    EXPECT(api->query_support(ctx, NULL) == INV, "query_support(ctx, NULL)");
    EXPECT(api->query_workspace(ctx, &p.args, NULL) == INV, "query_workspace(ctx, args, NULL)");
    size_t bytes = 77;
    EXPECT(api->query_workspace(NULL, &p.args, &bytes) == INV, "query_workspace(NULL, args)");
    EXPECT(api->last_error(NULL, last, sizeof last) == INV, "last_error(NULL)");
  }

  /* required tensors missing, and tensors the call must not have */
  CASE("hidden_states NULL", B, p.args.hidden_states = NULL, INV, "hidden_states", SUPPORT_SAME);
  CASE("router_logits NULL", B, p.args.router_logits = NULL, INV, "router_logits", SUPPORT_SAME);
  CASE("w13 NULL", B, p.args.w13 = NULL, INV, "w13", SUPPORT_SAME);
  CASE("w13_scale NULL", B, p.args.w13_scale = NULL, INV, "w13_scale", SUPPORT_SAME);
  CASE("w2 NULL", B, p.args.w2 = NULL, INV, "w2", SUPPORT_SAME);
  CASE("w2_scale NULL", B, p.args.w2_scale = NULL, INV, "w2_scale", SUPPORT_SAME);
  CASE("output NULL", B, p.args.output = NULL, INV, "output", SUPPORT_SAME);
  config pre = B;
  pre.method = FP8MOE_ROUTING_PRECOMPUTED;
  CASE("topk_ids NULL", pre, p.args.topk_ids = NULL, INV, "topk_ids", SUPPORT_SAME);
  CASE("topk_weights NULL", pre, p.args.topk_weights = NULL, INV, "topk_weights", SUPPORT_SAME);
  CASE("router_logits with PRECOMPUTED", pre, (set(&p, FP8MOE_ARG_ROUTER_LOGITS, TEST_F32, 2, (int64_t[]){T, E}),
                                               p.args.router_logits = &T_(ROUTER_LOGITS)),
       INV, "router_logits", SUPPORT_SAME);
  CASE("topk_ids with RENORMALIZE", B, (set(&p, FP8MOE_ARG_TOPK_IDS, TEST_I32, 2, (int64_t[]){T, K}),
                                         p.args.topk_ids = &T_(TOPK_IDS)),
       INV, "topk_ids", SUPPORT_SAME);
  config e4 = B;
  e4.hidden_dt = TEST_E4M3;
  CASE("hidden_scale NULL with e4m3 hidden", e4, p.args.hidden_scale = NULL, INV, "hidden_scale", SUPPORT_SAME);
  CASE("hidden_scale with bf16 hidden", B, p.args.hidden_scale = &T_(HIDDEN_SCALE), INV, "hidden_scale",
       SUPPORT_SAME);
  CASE("hidden_states data NULL", B, T_(HIDDEN_STATES).data = NULL, INV, "hidden_states", SUPPORT_SAME);
  CASE("w13 shape NULL", B, T_(W13).shape = NULL, INV, "w13", SUPPORT_SAME);

  /* wrong dtypes */
  CASE("hidden_states fp32", B, T_(HIDDEN_STATES).dtype = TEST_F32, DT, "hidden_states", SUPPORT_SAME);
  CASE("router_logits int32", B, T_(ROUTER_LOGITS).dtype = TEST_I32, DT, "router_logits", SUPPORT_SAME);
  CASE("w13 bf16", B, T_(W13).dtype = TEST_BF16, DT, "w13", SUPPORT_SAME);
  CASE("w2 e5m2", B, T_(W2).dtype = TEST_E5M2, DT, "w2", SUPPORT_SAME);
  CASE("w13_scale int32", B, T_(W13_SCALE).dtype = TEST_I32, DT, "w13_scale", SUPPORT_SAME);
  CASE("output int8", B, T_(OUTPUT).dtype = TEST_I8, DT, "output", SUPPORT_SAME);
  CASE("routing_ids_out fp32", B, T_(ROUTING_IDS_OUT).dtype = TEST_F32, DT, "routing_ids_out", SUPPORT_SAME);
  CASE("routing_weights_out bf16", B, T_(ROUTING_WEIGHTS_OUT).dtype = TEST_BF16, DT, "routing_weights_out",
       SUPPORT_SAME);
  CASE("topk_ids fp32", pre, T_(TOPK_IDS).dtype = TEST_F32, DT, "topk_ids", SUPPORT_SAME);
  CASE("hidden_states bf16 x2 lanes", B, T_(HIDDEN_STATES).dtype.lanes = 2, DT, "hidden_states", SUPPORT_SAME);

  /* wrong ranks */
  CASE("hidden_states rank 3", B, SHAPE(HIDDEN_STATES, 1, T, H), INV, "hidden_states", SUPPORT_SAME);
  CASE("router_logits rank 1", B, SHAPE(ROUTER_LOGITS, T * E), INV, "router_logits", SUPPORT_SAME);
  CASE("w13 rank 2", B, SHAPE(W13, E * 2 * I, H), INV, "w13", SUPPORT_SAME);
  CASE("w2 rank 4", B, SHAPE(W2, E, H, I, 1), INV, "w2", SUPPORT_SAME);
  CASE("w13_scale rank 2", B, SHAPE(W13_SCALE, E, 2 * I / 128 * H / 128), INV, "w13_scale", SUPPORT_SAME);
  CASE("output rank 1", B, SHAPE(OUTPUT, T * H), INV, "output", SUPPORT_SAME);
  CASE("routing_ids_out rank 1", B, SHAPE(ROUTING_IDS_OUT, T * K), INV, "routing_ids_out", SUPPORT_SAME);
  int64_t rank5[5] = {1, 1, 1, T, H};
  CASE("hidden_states rank 5", B, (T_(HIDDEN_STATES).ndim = 5, T_(HIDDEN_STATES).shape = rank5), INV,
       "hidden_states", SUPPORT_SAME);

  /* wrong extents, one dimension at a time */
  CASE("router_logits dim 0", B, SHAPE(ROUTER_LOGITS, T + 1, E), INV, "router_logits", SUPPORT_SAME);
  CASE("router_logits dim 1", B, SHAPE(ROUTER_LOGITS, T, E + 1), INV, "router_logits", SUPPORT_SAME);
  CASE("w13 dim 0 != E_local", B, SHAPE(W13, E - 1, 2 * I, H), INV, "w13", SUPPORT_SAME);
  CASE("w13 dim 1 odd", B, SHAPE(W13, E, 2 * I + 1, H), INV, "w13", SUPPORT_SAME);
  CASE("w13 dim 2 != H", B, SHAPE(W13, E, 2 * I, H + 128), INV, "w13", SUPPORT_SAME);
  CASE("w2 dim 0 != E_local", B, SHAPE(W2, E + 1, H, I), INV, "w2", SUPPORT_SAME);
  CASE("w2 dim 1 != H", B, SHAPE(W2, E, H + 128, I), INV, "w2", SUPPORT_SAME);
  CASE("w2 dim 2 != I (w2 vs w13)", B, SHAPE(W2, E, H, I + 128), INV, "w2", SUPPORT_SAME);
  CASE("w13_scale dim 0", B, SHAPE(W13_SCALE, E + 1, 2 * I / 128, H / 128), INV, "w13_scale", SUPPORT_SAME);
  CASE("w13_scale dim 1", B, SHAPE(W13_SCALE, E, 2 * I / 128 + 1, H / 128), INV, "w13_scale", SUPPORT_SAME);
  CASE("w13_scale dim 2", B, SHAPE(W13_SCALE, E, 2 * I / 128, H / 128 + 1), INV, "w13_scale", SUPPORT_SAME);
  CASE("w2_scale dim 1", B, SHAPE(W2_SCALE, E, H / 128 + 1, I / 128), INV, "w2_scale", SUPPORT_SAME);
  CASE("w2_scale dim 2", B, SHAPE(W2_SCALE, E, H / 128, I / 128 + 1), INV, "w2_scale", SUPPORT_SAME);
  CASE("output dim 0", B, SHAPE(OUTPUT, T + 1, H), INV, "output", SUPPORT_SAME);
  CASE("output dim 1", B, SHAPE(OUTPUT, T, H + 128), INV, "output", SUPPORT_SAME);
  CASE("routing_ids_out dim 1", B, SHAPE(ROUTING_IDS_OUT, T, K + 1), INV, "routing_ids_out", SUPPORT_SAME);
  CASE("routing_weights_out dim 0", B, SHAPE(ROUTING_WEIGHTS_OUT, T + 1, K), INV, "routing_weights_out",
       SUPPORT_SAME);
  CASE("device_status [2]", B, SHAPE(DEVICE_STATUS, 2), INV, "device_status", SUPPORT_SAME);
  CASE("topk_ids dim 1", pre, SHAPE(TOPK_IDS, T, K + 1), INV, "topk_ids", SUPPORT_SAME);
  CASE("topk_weights dim 0", pre, SHAPE(TOPK_WEIGHTS, T + 1, K), INV, "topk_weights", SUPPORT_SAME);
  CASE("hidden_scale dim 1 (BLOCK128)", e4, SHAPE(HIDDEN_SCALE, T, H / 128 + 1), INV, "hidden_scale", SUPPORT_SAME);
  CASE("hidden_states dim 1 vs w13", B, SHAPE(HIDDEN_STATES, T, H + 128), INV, "hidden_states|w13", SUPPORT_SAME);
  CASE("hidden_states dim 0 vs router_logits", B, SHAPE(HIDDEN_STATES, T + 1, H), INV,
       "hidden_states|router_logits|output", SUPPORT_SAME);
  CASE("negative extent", B, SHAPE(ROUTER_LOGITS, -T, E), INV, "router_logits", SUPPORT_SAME);
  config ds = deepseek_config();
  CASE("routing_bias [E+1]", ds, SHAPE(ROUTING_BIAS, E + 1), INV, "routing_bias", SUPPORT_SAME);

  /* strides */
  CASE("router_logits negative stride", B, STRIDES(ROUTER_LOGITS, -E, 1), INV, "router_logits", SUPPORT_SAME);
  CASE("hidden_states negative stride", B, STRIDES(HIDDEN_STATES, -H, 1), INV, "hidden_states", SUPPORT_SAME);
  CASE("output negative stride", B, STRIDES(OUTPUT, H, -1), INV, "output", SUPPORT_SAME);
  /* Llama 4 checkpoints store [E,H,2I]; seen as [E,2I,H] that is a transposed view: refused, saying why */
  CASE("w13 transposed view", B, STRIDES(W13, 2 * I * H, 1, 2 * I), INV, "w13", SUPPORT_SAME);
  EXPECT(strstr(p.message, "contiguous") != NULL, "w13 transposed view: message does not say 'contiguous': %s",
         p.message);
  CASE("w2 transposed view", B, STRIDES(W2, H * I, 1, H), INV, "w2", SUPPORT_SAME);
  EXPECT(strstr(p.message, "contiguous") != NULL, "w2 transposed view: message does not say 'contiguous': %s",
         p.message);
  CASE("output inner stride 2", B, STRIDES(OUTPUT, 2 * H, 2), INV, "output", SUPPORT_SAME);
  CASE("output broadcast (stride 0)", B, STRIDES(OUTPUT, 0, 1), INV, "output", SUPPORT_SAME);
  CASE("output row stride not 16-byte aligned", B, STRIDES(OUTPUT, H + 1, 1), INV, "output", SUPPORT_SAME);

  /* misaligned pointers (directly and through byte_offset) */
  CASE("hidden_states misaligned", B, T_(HIDDEN_STATES).data = slots[FP8MOE_ARG_HIDDEN_STATES] + 2, INV,
       "hidden_states", SUPPORT_SAME);
  CASE("w13 misaligned", B, T_(W13).data = slots[FP8MOE_ARG_W13] + 1, INV, "w13", SUPPORT_SAME);
  CASE("router_logits fp32 at 2 bytes", B, T_(ROUTER_LOGITS).data = slots[FP8MOE_ARG_ROUTER_LOGITS] + 2, INV,
       "router_logits", SUPPORT_SAME);
  CASE("output byte_offset 1", B, T_(OUTPUT).byte_offset = 1, INV, "output", SUPPORT_SAME);

  /* wrong device */
  CASE("output on CUDA", B, T_(OUTPUT).device.device_type = FP8MOE_DEVICE_CUDA, FP8MOE_STATUS_WRONG_DEVICE, "output",
       SUPPORT_SAME);
  CASE("hidden_states on CUDA", B, T_(HIDDEN_STATES).device.device_type = FP8MOE_DEVICE_CUDA,
       FP8MOE_STATUS_WRONG_DEVICE, "hidden_states", SUPPORT_SAME);
  CASE("w2_scale on CUDA device 1", B,
       (T_(W2_SCALE).device.device_type = FP8MOE_DEVICE_CUDA, T_(W2_SCALE).device.device_id = 1),
       FP8MOE_STATUS_WRONG_DEVICE, "w2_scale", SUPPORT_SAME);

  /* expert counts and local experts */
  CASE("local_num_experts 4 with 8-expert weights", B, p.args.local_num_experts = 4, INV, "w13", SUPPORT_SAME);
  CASE("local_num_experts > E", B, p.args.local_num_experts = (int32_t)E + 1, INV, "local_num_experts",
       SUPPORT_SAME);
  CASE("local_num_experts < 0", B, p.args.local_num_experts = -1, INV, "local_num_experts", SUPPORT_SAME);
  config half = B;
  half.E_local = 4;
  CASE("local_expert_offset past E", half, p.args.local_expert_offset = 5, INV, "local_expert_offset", SUPPORT_SAME);
  CASE("local_expert_offset < 0", half, p.args.local_expert_offset = -1, INV, "local_expert_offset", SUPPORT_SAME);
  CASE("num_experts 0", B, p.args.num_experts = 0, INV, "num_experts", SUPPORT_SAME);
  CASE("top_k 0", B, p.args.top_k = 0, INV, "top_k", SUPPORT_SAME);
  CASE("top_k > E", B, p.args.top_k = (int32_t)E + 1, INV, "top_k", SUPPORT_SAME);

  /* scale shapes per format */
  config pt = B;
  pt.format = FP8MOE_QUANT_FP8_PER_TENSOR;
  CASE("PER_TENSOR w13_scale [E+1]", pt, SHAPE(W13_SCALE, E + 1), INV, "w13_scale", SUPPORT_SAME);
  CASE("PER_TENSOR w2_scale [E,1]", pt, SHAPE(W2_SCALE, E, 1), INV, "w2_scale", SUPPORT_SAME);
  config pte4 = pt;
  pte4.hidden_dt = TEST_E4M3;
  CASE("PER_TENSOR hidden_scale [2]", pte4, SHAPE(HIDDEN_SCALE, 2), INV, "hidden_scale", SUPPORT_SAME);
  config pts = pt;
  pts.with_static_scales = 1;
  CASE("PER_TENSOR a1_scale [2]", pts, SHAPE(A1_SCALE, 2), INV, "a1_scale", SUPPORT_SAME);
  CASE("PER_TENSOR a2_scale int32", pts, T_(A2_SCALE).dtype = TEST_I32, DT, "a2_scale", SUPPORT_SAME);
  config pc = B;
  pc.format = FP8MOE_QUANT_FP8_PER_CHANNEL;
  CASE("PER_CHANNEL w13_scale [E,2I+1]", pc, SHAPE(W13_SCALE, E, 2 * I + 1), INV, "w13_scale", SUPPORT_SAME);
  CASE("PER_CHANNEL w2_scale [E,H+1]", pc, SHAPE(W2_SCALE, E, H + 1), INV, "w2_scale", SUPPORT_SAME);
  CASE("PER_CHANNEL w13_scale BLOCK128 shape", pc, SHAPE(W13_SCALE, E, 2 * I / 128, H / 128), INV, "w13_scale",
       SUPPORT_SAME);
  config pce4 = pc;
  pce4.hidden_dt = TEST_E4M3;
  CASE("PER_CHANNEL hidden_scale [T+1]", pce4, SHAPE(HIDDEN_SCALE, T + 1), INV, "hidden_scale", SUPPORT_SAME);
  CASE("PER_CHANNEL hidden_scale [T,2]", pce4, SHAPE(HIDDEN_SCALE, T, 2), INV, "hidden_scale", SUPPORT_SAME);
  CASE("BLOCK128 w13_scale PER_TENSOR shape", B, SHAPE(W13_SCALE, E), INV, "w13_scale", SUPPORT_SAME);
  CASE("H not a multiple of 128", B,
       (SHAPE(HIDDEN_STATES, T, H + 64), SHAPE(W13, E, 2 * I, H + 64), SHAPE(W2, E, H + 64, I),
        SHAPE(OUTPUT, T, H + 64)),
       FP8MOE_STATUS_UNSUPPORTED, "hidden_states", SUPPORT_SAME);

  /* DeepSeek-V3 group rules (TESTING regression 7) */
  CASE("DEEPSEEK_V3 n_group 0", ds, p.args.n_group = 0, INV, "n_group", SUPPORT_SAME);
  CASE("DEEPSEEK_V3 n_group does not divide E", ds, (p.args.n_group = 3, p.args.topk_group = 1), INV, "n_group",
       SUPPORT_SAME);
  CASE("DEEPSEEK_V3 topk_group > n_group", ds, p.args.topk_group = 5, INV, "topk_group", SUPPORT_SAME);
  CASE("DEEPSEEK_V3 topk_group 0", ds, p.args.topk_group = 0, INV, "topk_group", SUPPORT_SAME);
  CASE("DEEPSEEK_V3 K > E", ds, p.args.top_k = (int32_t)E + 1, INV, "top_k", SUPPORT_SAME);
  CASE("DEEPSEEK_V3 K > topk_group*E/n_group", ds, (p.args.topk_group = 1, p.args.top_k = 3), INV, "top_k",
       SUPPORT_SAME);
  CASE("DEEPSEEK_V3 groups of one expert", ds, (p.args.n_group = 8, p.args.topk_group = 2), FP8MOE_STATUS_UNSUPPORTED,
       "n_group", SUPPORT_SAME);

  /* method/flag rules */
  config l4 = B;
  l4.method = FP8MOE_ROUTING_LLAMA4;
  CASE("LLAMA4 K=2", l4, (void)0, INV, "top_k", SUPPORT_SAME);
  CASE("WEIGHT_ON_INPUT with K=2", B, p.args.flags = FP8MOE_FLAG_WEIGHT_ON_INPUT, INV, "top_k|flags", SUPPORT_SAME);
  CASE("unknown flag bit", B, p.args.flags = 1u << 7, INV, "flags", SUPPORT_SAME);
  CASE("gate_up_order 2", B, p.args.gate_up_order = 2, INV, "gate_up_order", SUPPORT_SAME);
  CASE("routed_scaling_factor negative", B, p.args.routed_scaling_factor = -1.0f, INV, "routed_scaling_factor",
       SUPPORT_SAME);
  CASE("routing_method 77", B, p.args.routing_method = 77, INV, "routing_method", SUPPORT_SAME);
  CASE("routing_bias with RENORMALIZE", B,
       (set(&p, FP8MOE_ARG_ROUTING_BIAS, TEST_F32, 1, (int64_t[]){E}), p.args.routing_bias = &T_(ROUTING_BIAS)), INV,
       "routing_bias", SUPPORT_SAME);
  CASE("a1_scale with BLOCK128", B,
       (set(&p, FP8MOE_ARG_A1_SCALE, TEST_F32, 1, (int64_t[]){1}), p.args.a1_scale = &T_(A1_SCALE)), INV, "a1_scale",
       SUPPORT_SAME);
  CASE("a2_scale with PER_CHANNEL", pc,
       (set(&p, FP8MOE_ARG_A2_SCALE, TEST_F32, 0, NULL), p.args.a2_scale = &T_(A2_SCALE)), INV, "a2_scale",
       SUPPORT_SAME);

  /* workspace (run only: query_support does not look at it) */
  if (workspace_bytes > 0) {
    CASE("workspace one byte short", B, p.args.workspace_size = workspace_bytes - 1, FP8MOE_STATUS_WORKSPACE_TOO_SMALL,
         "workspace", RUN_ONLY);
    CASE("workspace size 0", B, (p.args.workspace = NULL, p.args.workspace_size = 0),
         FP8MOE_STATUS_WORKSPACE_TOO_SMALL, "workspace", RUN_ONLY);
    CASE("workspace NULL with a size", B, p.args.workspace = NULL, INV, "workspace", RUN_ONLY);
    CASE("workspace misaligned", B, p.args.workspace = workspace + 16, INV, "workspace", RUN_ONLY);
  } else {
    printf("note: the CPU backend reported a zero workspace; workspace refusals not reachable\n");
  }

  /* PRECOMPUTED ids out of range: DATA_ERROR on the CPU backend, naming topk_ids */
  CASE("topk_ids == E", pre, ((int32_t*)slots[FP8MOE_ARG_TOPK_IDS])[5] = (int32_t)E, FP8MOE_STATUS_DATA_ERROR,
       "topk_ids", RUN_ONLY);
  CASE("topk_ids == -1", pre, ((int32_t*)slots[FP8MOE_ARG_TOPK_IDS])[T * K - 1] = -1, FP8MOE_STATUS_DATA_ERROR,
       "topk_ids", RUN_ONLY);
  config pre64 = pre;
  CASE("topk_ids int64 2^40", pre64,
       (T_(TOPK_IDS).dtype = TEST_I64, fill(FP8MOE_ARG_TOPK_IDS, TEST_I64, T * K, (int32_t)E),
        ((int64_t*)slots[FP8MOE_ARG_TOPK_IDS])[0] = (int64_t)1 << 40),
       FP8MOE_STATUS_DATA_ERROR, "topk_ids", RUN_ONLY);
}

static void check_accepted_variants(void) {
  problem p;
  const config B = baseline_config_default();
  const int64_t T = B.T, H = B.H;
  /* pinned host memory is host memory: the CPU backend reads it */
  build(&p, &B);
  T_(HIDDEN_STATES).device.device_type = FP8MOE_DEVICE_CUDA_HOST;
  expect_ok("hidden_states in CUDA_HOST memory", &p);
  /* block activation scales as the transposed [H/128,T] layout seen through strides */
  config e4 = B;
  e4.hidden_dt = TEST_E4M3;
  build(&p, &e4);
  STRIDES(HIDDEN_SCALE, 1, T);
  expect_ok("hidden_scale transposed view", &p);
  /* logits with arbitrary (column-major) strides */
  build(&p, &B);
  STRIDES(ROUTER_LOGITS, 1, T);
  expect_ok("router_logits column-major", &p);
  /* a padded output row (stride a multiple of 16 bytes) */
  build(&p, &B);
  STRIDES(OUTPUT, H + 8, 1);
  expect_ok("output with padded rows", &p);
  /* all defaults from a zeroed struct: routed_scaling_factor 0, local experts 0, SWIGLU, GATE_FIRST */
  build(&p, &B);
  p.args.routed_scaling_factor = 0.0f;
  expect_ok("zeroed defaults", &p);
}

/* T = 0 is a valid call that writes nothing, with or without a workspace. */
static void check_zero_tokens(void) {
  problem p;
  config c = baseline_config_default();
  c.T = 0;
  build(&p, &c);
  p.args.workspace = NULL;
  p.args.workspace_size = 0;
  poison_outputs();
  int32_t st = api->run(ctx, &p.args);
  EXPECT(st == FP8MOE_STATUS_OK, "T = 0: run refused (%d): %s", st, p.message);
  EXPECT(outputs_untouched(), "T = 0: an output (or device_status) was written");
  size_t bytes = 1;
  EXPECT(api->query_workspace(ctx, &p.args, &bytes) == FP8MOE_STATUS_OK, "T = 0: query_workspace refused");
  config pre = c;
  pre.method = FP8MOE_ROUTING_PRECOMPUTED;
  build(&p, &pre);
  poison_outputs();
  st = api->run(ctx, &p.args);
  EXPECT(st == FP8MOE_STATUS_OK && outputs_untouched(), "T = 0 PRECOMPUTED: %d, outputs untouched %d", st,
         outputs_untouched());
}

static void check_other_entries(void) {
  char msg[256];
  fp8moe_context_args a;
  fp8moe_context* c = (fp8moe_context*)(uintptr_t)0x1;
  const int32_t INV = FP8MOE_STATUS_INVALID_ARGUMENT;

  EXPECT(api->context_create(NULL, &c) == INV && c == NULL, "context_create(NULL, &c): context not NULL");
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.backend = FP8MOE_BACKEND_CPU;
  a.error_message = msg;
  a.error_message_size = sizeof msg;
  EXPECT(api->context_create(&a, NULL) == INV, "context_create(args, NULL)");

  const struct {
    const char* what;
    int32_t backend, threads, ordinal;
    uint32_t flags;
    const char* name;
  } bad[] = {
      {"unknown backend 7", 7, 0, 0, 0, "backend"},
      {"backend -1", -1, 0, 0, 0, "backend"},
      {"reserved flags", FP8MOE_BACKEND_CPU, 0, 0, 1, "flags"},
      {"num_threads -1", FP8MOE_BACKEND_CPU, -1, 0, 0, "num_threads"},
      {"device_ordinal -1", FP8MOE_BACKEND_CUDA, 0, -1, 0, "device_ordinal"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    a.backend = bad[i].backend;
    a.num_threads = bad[i].threads;
    a.device_ordinal = bad[i].ordinal;
    a.flags = bad[i].flags;
    msg[0] = '\0';
    c = (fp8moe_context*)(uintptr_t)0x1;
    int32_t st = api->context_create(&a, &c);
    EXPECT(st == INV && c == NULL, "context_create %s: status %d", bad[i].what, st);
    EXPECT(strstr(msg, bad[i].name) != NULL, "context_create %s: message '%s' does not name %s", bad[i].what, msg,
           bad[i].name);
  }

  fp8moe_backend_info bi;
  memset(&bi, 0, sizeof bi);
  bi.struct_size = sizeof bi;
  bi.backend = FP8MOE_BACKEND_CUDA;
  EXPECT(api->backend_info(&bi) == FP8MOE_STATUS_OK, "backend_info(CUDA)");
  if (!bi.available) {
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.backend = FP8MOE_BACKEND_CUDA;
    a.error_message = msg;
    a.error_message_size = sizeof msg;
    msg[0] = '\0';
    c = (fp8moe_context*)(uintptr_t)0x1;
    int32_t st = api->context_create(&a, &c);
    EXPECT(st == FP8MOE_STATUS_BACKEND_UNAVAILABLE && c == NULL && msg[0] != '\0',
           "context_create(CUDA) without a usable GPU: status %d '%s'", st, msg);
    EXPECT(bi.reason[0] != '\0', "backend_info(CUDA) unavailable without a reason");
  }
  EXPECT(api->backend_info(NULL) == INV, "backend_info(NULL)");
  bi.backend = 7;
  EXPECT(api->backend_info(&bi) == INV, "backend_info(backend 7)");

  fp8moe_context_info ci;
  memset(&ci, 0, sizeof ci);
  ci.struct_size = sizeof ci;
  EXPECT(api->context_info(NULL, &ci) == INV, "context_info(NULL, info)");
  EXPECT(api->context_info(ctx, NULL) == INV, "context_info(ctx, NULL)");
  EXPECT(api->context_destroy(NULL) == FP8MOE_STATUS_OK, "context_destroy(NULL) is a no-op");

  /* last_error truncates to the caller's size and terminates */
  char small[8];
  memset(small, 'z', sizeof small);
  (void)api->last_error(ctx, small, sizeof small);
  EXPECT(memchr(small, '\0', sizeof small) != NULL, "last_error with an 8-byte buffer: not terminated");
}

int main(void) {
  test_plugin plugin;
  if (test_plugin_open(NULL, &plugin) != 0) return 1;
  api = plugin.api;
  for (int i = 0; i < FP8MOE_ARG_COUNT_V1_0; ++i) {
    slots[i] = baseline_alloc256(SLOT_BYTES);
    if (!slots[i]) return 1;
    memset(slots[i], 0, SLOT_BYTES);
  }
  int32_t st = baseline_cpu_context(api, 2, &ctx);
  EXPECT(st == FP8MOE_STATUS_OK && ctx, "CPU context_create: %d", st);
  if (ctx) {
    /* the baseline's exact need, and room for every configuration the cases use */
    static problem p;
    config cfgs[6];
    cfgs[0] = baseline_config_default();
    for (int i = 1; i < 6; ++i) cfgs[i] = cfgs[0];
    cfgs[1].method = FP8MOE_ROUTING_PRECOMPUTED;
    cfgs[2].hidden_dt = TEST_E4M3;
    cfgs[3].format = FP8MOE_QUANT_FP8_PER_CHANNEL;
    cfgs[4].format = FP8MOE_QUANT_FP8_PER_TENSOR;
    cfgs[5] = deepseek_config();
    for (int i = 0; i < 6; ++i) {
      size_t need = 0;
      build(&p, &cfgs[i]);
      st = api->query_workspace(ctx, &p.args, &need);
      EXPECT(st == FP8MOE_STATUS_OK, "query_workspace (config %d): %d %s", i, st, p.message);
      if (i == 0) workspace_bytes = need;
      if (need > workspace_alloc) workspace_alloc = need;
    }
    workspace = baseline_workspace(workspace_alloc, &workspace_alloc);
    if (!workspace) return 1;
    check_run_refusals();
    check_accepted_variants();
    check_zero_tokens();
    check_other_entries();
    api->context_destroy(ctx);
  }
  for (int i = 0; i < FP8MOE_ARG_COUNT_V1_0; ++i) free(slots[i]);
  free(workspace);
  test_plugin_close(&plugin);
  return test_finish("test_bad_inputs", test_checks_run);
}
