/* test_routing_emu.cpp — the CUDA routing code itself (kernels/routing_token.cuh: route_token, its filtered
 * selection and its exact path; kernels/routing_team.cuh: the T = 1 prologue's team of warps) compiled for the host and
 * run on an emulated warp or block (routing_emu/warp_emu.h: coroutine threads, each warp in lockstep at every
 * collective, the team's warps scheduled first to last and last to first; routing_emu/common_host.h: the few device
 * helpers it uses, the SFU stand-ins moved by up to their documented error), against the CPU backend through the
 * public API, ids and weight bits per slot. No GPU: it checks the kernel's logic — warp collectives, barriers, the
 * candidate list, ties, the fallbacks — in every CI run, before any device time; the GPU's own arithmetic is
 * test_gpu_routing_bits' to check. Each method of test_gpu_routing_bits runs with the default sequence, without the
 * filtered selection ("f"), with the previous sequence ("w") and, where the host's rule lets a team route, with the
 * team, on rows of every kind (random at three scales, ties, ±Inf and NaN, fewer selectable experts than K, huge
 * magnitudes, exp's thresholds, near-equal values, sigmoid keys on a grid near the filter's error bound), in three
 * layouts of the logits and the bias: fp32 compact, bf16 compact, fp16 with padded rows and a strided bias (NaN in the
 * gaps). It also counts the tokens the filtered selection declines on the bench's rows (a performance guard: see
 * decline_rate). Usage: test_routing_emu [rows per method, layout and sequence] (default 100). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "baseline_problem.h"
}
#include "common_host.h" /* before routing_token.cuh: takes the place of kernels/common.cuh */
#include "routing_rows.h"
#include "routing_team.cuh" /* and routing_token.cuh */

int fp8moe::sfu_error_ulps = 1;


namespace {

uint32_t next_u32() { return routing_rows_u32(); }
float uniform() { return routing_rows_uniform(); }

unsigned char* g_arena;
size_t g_arena_used, g_arena_bytes;

void* data_fn(const baseline_problem*, int32_t, fp8moe_dtype dt, int64_t n) {
  const size_t bytes = static_cast<size_t>(n > 0 ? n : 1) * (dt.bits / 8u);
  void* d = g_arena + g_arena_used;
  g_arena_used += (bytes + 255) / 256 * 256;
  if (g_arena_used > g_arena_bytes) return nullptr;
  for (int64_t i = 0; i < n; ++i) {
    if (dt.code == FP8MOE_DTYPE_FLOAT8_E4M3FN) static_cast<unsigned char*>(d)[i] = static_cast<unsigned char>(next_u32() & 0xB7);
    else if (dt.code == FP8MOE_DTYPE_FLOAT && dt.bits == 32) static_cast<float*>(d)[i] = 0.005f + 0.01f * uniform();
    else memset(static_cast<char*>(d) + i * (dt.bits / 8), 0, dt.bits / 8);
  }
  return d;
}

struct Run {
  const fp8moe_routing_args* a;
  float* gkey;
  int32_t* ids;
  float* w;
  bool v1;
  int warm; /* > 0: run the code-warming phases 1 … 4 once each instead of routing the rows (results discarded) */
};

template <int PL, bool kV1>
void route_all(unsigned lane, Run* r) {
  if (r->warm) { /* the prologue's idle warps (docs/GPU.md "Routing's critical path", code warming) */
    for (int from = fp8moe::kPhaseKeys; from <= fp8moe::kPhaseWeights; ++from) {
      int32_t e = 0;
      float w = 0.0f;
      fp8moe::route_token<PL, kV1>(*r->a, 0, r->gkey, &e, &w, from);
    }
    return;
  }
  for (int64_t t = 0; t < r->a->T; ++t) {
    int32_t e = 0;
    float w = 0.0f;
    if (fp8moe::route_token<PL, kV1>(*r->a, t, r->gkey, &e, &w)) {
      r->ids[t * r->a->K + lane] = e;
      r->w[t * r->a->K + lane] = w;
    }
  }
}

template <int PL>
void body_pl(unsigned lane, Run* r) {
  if (r->v1) route_all<PL, true>(lane, r);
  else route_all<PL, false>(lane, r);
}

void body(unsigned lane, void* p) {
  Run* r = static_cast<Run*>(p);
  switch (fp8moe::lane_experts(r->a->E)) {
    case 1: body_pl<1>(lane, r); break;
    case 2: body_pl<2>(lane, r); break;
    case 4: body_pl<4>(lane, r); break;
    case 8: body_pl<8>(lane, r); break;
    default: body_pl<16>(lane, r); break;
  }
}

/* The T = 1 prologue's team (kernels/routing_team.cuh): warps 0 … ⌈E/32⌉ − 1 of a block route each row together; a
 * block barrier between rows stands for the launches between tokens. */
struct TeamRun {
  const fp8moe_routing_args* a;
  fp8moe::team_shared* sh;
  int32_t* ids;
  float* w;
};

void team_body(unsigned tid, void* p) {
  TeamRun* r = static_cast<TeamRun*>(p);
  const int lane = static_cast<int>(tid % 32);
  for (int64_t t = 0; t < r->a->T; ++t) {
    int32_t e = 0;
    float w = 0.0f;
    if (fp8moe::route_token_team(*r->a, t, *r->sh, &e, &w)) {
      r->ids[t * r->a->K + lane] = e;
      r->w[t * r->a->K + lane] = w;
    }
    __syncthreads();
  }
}

/* Where the host's rule lets a team route (src/cuda/cuda_plan.c fp8moe_cuda_plan_prologue_team, less its minimum E):
 * E ≤ 512, K ≤ 32, and DeepSeek-V3's limited groups of 32 experts (one warp each). */
bool team_routes(const fp8moe_routing_args& a) {
  return a.E <= FP8MOE_PROLOGUE_TEAM_MAX_EXPERTS && a.K <= 32 && (!fp8moe::limits_groups(a) || a.E == 32 * a.n_group);
}

struct MethodCase {
  int32_t method, E, K, n_group, topk_group, with_bias;
};

/* The kernel's arguments over host rows, as cuda_run.c's routing_args_of fills them: logits [rows, E] `ls` elements
 * apart and the bias (or null) every `bs`, both of dtype kdt (FP8MOE_DT_*). */
fp8moe_routing_args routing_args(const MethodCase& m, int64_t rows, int32_t kdt, const void* logits, int64_t ls,
                                 const void* bias, int64_t bs, float scale) {
  fp8moe_routing_args a;
  memset(&a, 0, sizeof a);
  a.logits.data = logits;
  a.logits.dt = kdt;
  a.logits.s[0] = ls;
  a.logits.s[1] = 1;
  if (bias) {
    a.bias.data = bias;
    a.bias.dt = kdt;
    a.bias.s[0] = bs;
  }
  a.T = static_cast<int32_t>(rows);
  a.E = m.E;
  a.K = m.K;
  a.method = m.method;
  a.n_group = m.n_group;
  a.topk_group = m.topk_group;
  a.scale = scale;
  return a;
}

/* How many tokens the filtered selection declines to the exact path (route_filtered's −1) on the bench's rows:
 * fp8moe-bench's uniform routing, normal logits and a bias uniform in ±0.2 (bench/bench_problem.c). A performance
 * guard, not a correctness check: in a one-wave routing grid a declined token, which then runs the whole exact path,
 * is the last warp to finish (docs/GPU.md "Routing's critical path", item 6: 0.077 % of DeepSeek-V3 tokens declined
 * on close group scores, deepseek-v3 T = 2048 route+perm +5 µs). */
struct DeclineRun {
  const fp8moe_routing_args* a;
  float* gkey;
  long declined;
};

template <int PL>
void count_declines(unsigned lane, void* p) {
  DeclineRun* r = static_cast<DeclineRun*>(p);
  for (int64_t t = 0; t < r->a->T; ++t) {
    int32_t e = 0;
    float w = 0.0f;
    const int got = fp8moe::route_filtered<PL>(*r->a, t, r->gkey, &e, &w, fp8moe::kPhaseLoad);
    if (lane == 0 && got < 0) ++r->declined;
  }
}

void decline_rate() {
  struct Shape {
    int32_t E, n_group, topk_group;
    int64_t rows;
    long most; /* declines allowed in `rows` tokens */
  };
  /* deepseek-v3 (8 groups of 32, top-4 groups; before close groups were ranked exactly, ~7.7 of 10,000 declined) and
   * kimi-k2 (384 experts, one group); K = 8 for both */
  const Shape shapes[2] = {{256, 8, 4, 10000, 1}, {384, 1, 1, 2000, 1}};
  for (const Shape& sh : shapes) {
    const int64_t rows = sh.rows;
    float* logits = static_cast<float*>(malloc(sizeof(float) * static_cast<size_t>(rows * sh.E)));
    float* bias = static_cast<float*>(malloc(sizeof(float) * static_cast<size_t>(sh.E)));
    float* gkey = static_cast<float*>(malloc(sizeof(float) * static_cast<size_t>(sh.E)));
    if (!logits || !bias || !gkey) {
      CHECK(0, "host memory");
    } else {
      for (int32_t e = 0; e < sh.E; ++e) bias[e] = -0.2f + 0.4f * uniform();
      for (int64_t i = 0; i < rows * sh.E; ++i) { /* Box–Muller */
        const double u = (static_cast<double>(next_u32()) + 1.0) / 4294967296.0, v = uniform();
        logits[i] = static_cast<float>(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
      }
      const MethodCase m = {FP8MOE_ROUTING_DEEPSEEK_V3, sh.E, 8, sh.n_group, sh.topk_group, 1};
      fp8moe_routing_args a = routing_args(m, rows, FP8MOE_DT_F32, logits, sh.E, bias, 1, 1.0f);
      a.filtered = 1;
      DeclineRun r = {&a, gkey, 0};
      const char* err = emu::run(sh.E <= 256 ? count_declines<8> : count_declines<16>, &r);
      EXPECT(err == nullptr, "declines, E %d: %s", sh.E, err);
      printf("filtered selection, E %d groups %d/%d, the bench's rows: %ld of %ld tokens declined\n", sh.E, sh.n_group,
             sh.topk_group, r.declined, static_cast<long>(rows));
      EXPECT(r.declined <= sh.most, "E %d groups %d/%d: %ld of %ld tokens declined to the exact path (at most %ld)",
             sh.E, sh.n_group, sh.topk_group, r.declined, static_cast<long>(rows), sh.most);
    }
    free(logits);
    free(bias);
    free(gkey);
  }
}

long g_collectives;

/* The element of a converted logit or bias: fp32 rounded to bf16 (layout 1) or fp16 (layout 2). */
uint16_t narrow(float v, int layout) {
  uint16_t b;
  if (layout == 1) {
    const __nv_bfloat16 h = __float2bfloat16(v);
    memcpy(&b, &h, 2);
  } else {
    const __half h = __float2half(v);
    memcpy(&b, &h, 2);
  }
  return b;
}

/* One method's rows in one layout — 0: fp32 logits and bias, compact; 1: bf16, compact; 2: fp16 logits with rows
 * E + 5 elements apart and the bias every other element (the gaps hold NaN, so a read at a wrong stride shows) —
 * through the CPU backend and the emulated kernel, both sequences, and the code warming. */
void check_layout(const test_plugin& tp, fp8moe_context* cpu, baseline_problem& p, const MethodCase& m, long rows,
                  int layout, const float* logits32, const float* bias32) {
  static const char* const kLayout[3] = {"fp32", "bf16", "fp16 strided"};
  const int64_t ls = layout == 2 ? m.E + 5 : m.E, bs = layout == 2 ? 2 : 1;
  uint16_t* lg = nullptr;
  uint16_t* bg = nullptr;
  if (layout > 0) { /* the converted copies, described in place of the fp32 tensors */
    lg = static_cast<uint16_t*>(malloc(sizeof(uint16_t) * static_cast<size_t>(rows * ls)));
    bg = static_cast<uint16_t*>(malloc(sizeof(uint16_t) * static_cast<size_t>(m.E * bs)));
    if (!lg || !bg) {
      free(lg);
      free(bg);
      CHECK(0, "host memory");
      return;
    }
    for (int64_t i = 0; i < rows * ls; ++i) lg[i] = narrow(NAN, layout);
    for (int64_t i = 0; i < m.E * bs; ++i) bg[i] = narrow(NAN, layout);
    for (int64_t t = 0; t < rows; ++t)
      for (int32_t e = 0; e < m.E; ++e) lg[t * ls + e] = narrow(logits32[t * m.E + e], layout);
    if (bias32)
      for (int32_t e = 0; e < m.E; ++e) bg[e * bs] = narrow(bias32[e], layout);
    const fp8moe_dtype dt = layout == 1 ? TEST_BF16 : TEST_F16;
    const int64_t lshape[2] = {rows, m.E}, lstride[2] = {ls, 1}, bshape[1] = {m.E}, bstride[1] = {bs};
    p.args.router_logits = test_tensor_init(&p.t[FP8MOE_ARG_ROUTER_LOGITS], lg, dt, 2, lshape, lstride);
    if (bias32) p.args.routing_bias = test_tensor_init(&p.t[FP8MOE_ARG_ROUTING_BIAS], bg, dt, 1, bshape, bstride);
  }
  void* ws = nullptr;
  const int32_t st = baseline_run_with_workspace(tp.api, cpu, &p, &ws);
  EXPECT(st == FP8MOE_STATUS_OK, "method %d (%s): CPU query_workspace/run %d: %s", m.method, kLayout[layout], st,
         p.message);
  const int32_t* cpu_ids = static_cast<const int32_t*>(p.t[FP8MOE_ARG_ROUTING_IDS_OUT].t.data);
  const float* cpu_w = static_cast<const float*>(p.t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].t.data);

  /* The kernel's arguments over the same host rows. */
  const int32_t kdt = layout == 0 ? FP8MOE_DT_F32 : layout == 1 ? FP8MOE_DT_BF16 : FP8MOE_DT_F16;
  const void* bias = !bias32 ? nullptr : layout == 0 ? static_cast<const void*>(bias32) : bg;
  fp8moe_routing_args a =
      routing_args(m, rows, kdt, layout == 0 ? static_cast<const void*>(logits32) : lg, ls, bias, bs,
                   p.args.routed_scaling_factor == 0.0f ? 1.0f : p.args.routed_scaling_factor);
  const size_t n = static_cast<size_t>(rows * m.K);
  int32_t* ids = static_cast<int32_t*>(malloc(n * sizeof(int32_t)));
  float* w = static_cast<float*>(malloc(n * sizeof(float)));
  float* gkey = static_cast<float*>(malloc(sizeof(float) * static_cast<size_t>(m.E)));
  static const char* const kSequence[5] = {"default", "f (no filtered selection)", "w (previous sequence)", "team",
                                           "team, warps in reverse"};
  static fp8moe::team_shared sh;
  for (int seq = 0; seq < 5 && ids && w && gkey; ++seq) {
    if (seq >= 3 && !team_routes(a)) break;
    a.v1 = seq == 2;
    a.filtered = seq == 0;
    for (size_t i = 0; i < n; ++i) {
      ids[i] = -7;
      w[i] = NAN;
    }
    Run r = {&a, gkey, ids, w, seq == 2, 0};
    TeamRun tr = {&a, &sh, ids, w};
    const long before = emu::block ? emu::block->collectives : 0;
    emu::reverse_warps = seq == 4;
    const char* err = seq < 3 ? emu::run(body, &r) : emu::run_block(32 * ((m.E + 31) / 32), team_body, &tr);
    emu::reverse_warps = false;
    EXPECT(err == nullptr, "method %d (%s, %s): %s", m.method, kLayout[layout], kSequence[seq], err);
    g_collectives += emu::block->collectives - before;
    long ids_bad = 0, w_bad = 0;
    for (size_t i = 0; i < n; ++i) {
      ids_bad += ids[i] != cpu_ids[i];
      if (memcmp(&w[i], &cpu_w[i], sizeof(float)) != 0 && ++w_bad <= 3)
        fprintf(stderr, "method %d (%s, %s) row %zu slot %zu: id %d/%d weight cpu %a emulated %a\n", m.method,
                kLayout[layout], kSequence[seq], i / static_cast<size_t>(m.K), i % static_cast<size_t>(m.K),
                cpu_ids[i], ids[i], static_cast<double>(cpu_w[i]), static_cast<double>(w[i]));
    }
    printf("method %d E %d K %d groups %d/%d, %s, %s: %ld rows, ids differing %ld, weights differing (bits) %ld\n",
           m.method, m.E, m.K, m.n_group, m.topk_group, kLayout[layout], kSequence[seq], rows, ids_bad, w_bad);
    EXPECT(ids_bad == 0 && w_bad == 0, "method %d (%s, %s): %ld ids and %ld weights differ from the CPU backend",
           m.method, kLayout[layout], kSequence[seq], ids_bad, w_bad);
  }
  /* Code warming reads no memory but the arguments and the warp's scratch: with the logits and the bias pointing
   * nowhere (an unmapped page; the bias stays non-null, so the bias path runs), a read would crash the test. */
  if (gkey) {
    fp8moe_routing_args aw = a;
    aw.v1 = 0; /* the previous sequence has no warming */
    aw.logits.data = reinterpret_cast<const void*>(static_cast<uintptr_t>(0x10));
    if (aw.bias.data) aw.bias.data = reinterpret_cast<const void*>(static_cast<uintptr_t>(0x10));
    for (int filtered = 0; filtered < 2; ++filtered) { /* the filtered selection's phases and the exact path's */
      aw.filtered = filtered;
      Run r = {&aw, gkey, ids, w, false, 1};
      const char* err = emu::run(body, &r);
      EXPECT(err == nullptr, "method %d (%s), code warming (filtered %d): %s", m.method, kLayout[layout], filtered,
             err);
    }
  }
  free(ids);
  free(w);
  free(gkey);
  free(ws);
  free(lg);
  free(bg);
}

}  // namespace

int main(int argc, char** argv) {
  const long rows = argc > 1 ? strtol(argv[1], nullptr, 10) : 100;
  test_plugin tp;
  if (test_plugin_open(nullptr, &tp) != 0) return 1;
  fp8moe_context* cpu = nullptr;
  CHECK(baseline_cpu_context(tp.api, 1, &cpu) == FP8MOE_STATUS_OK && cpu, "CPU context");
  if (!cpu) return test_finish("test_routing_emu", test_checks_run + 1);
  const MethodCase cases[] = {
      {FP8MOE_ROUTING_DEEPSEEK_V3, 256, 8, 8, 4, 1}, {FP8MOE_ROUTING_DEEPSEEK_V3, 384, 8, 1, 1, 1},
      {FP8MOE_ROUTING_DEEPSEEK_V3, 128, 8, 1, 1, 1}, {FP8MOE_ROUTING_DEEPSEEK_V3, 128, 8, 8, 4, 1},
      {FP8MOE_ROUTING_SIGMOID, 64, 4, 1, 1, 0},      {FP8MOE_ROUTING_SIGMOID_RENORM, 128, 8, 1, 1, 0},
      {FP8MOE_ROUTING_DEFAULT, 64, 4, 1, 1, 0},      {FP8MOE_ROUTING_RENORMALIZE, 128, 8, 1, 1, 0},
      {FP8MOE_ROUTING_LLAMA4, 16, 1, 1, 1, 0},       {FP8MOE_ROUTING_RENORMALIZE_NAIVE, 384, 6, 1, 1, 0},
      {FP8MOE_ROUTING_TOPK, 32, 2, 1, 1, 0},         {FP8MOE_ROUTING_TOPK_SIGMOID, 64, 4, 1, 1, 0},
  };
  g_arena_bytes = static_cast<size_t>(64) << 20;
  g_arena = static_cast<unsigned char*>(baseline_alloc256(g_arena_bytes));
  static baseline_problem p;
  for (const MethodCase& m : cases) {
    g_arena_used = 0;
    baseline_config cfg = baseline_config_default();
    cfg.method = m.method;
    cfg.format = FP8MOE_QUANT_FP8_PER_TENSOR;
    cfg.T = rows;
    cfg.H = 128;
    cfg.I = 128;
    cfg.E = m.E;
    cfg.K = m.K;
    cfg.n_group = m.n_group;
    cfg.topk_group = m.topk_group;
    cfg.with_bias = m.with_bias;
    cfg.E_local = 1; /* only routing matters here */
    baseline_build(&p, &cfg, data_fn);
    float* logits = static_cast<float*>(p.t[FP8MOE_ARG_ROUTER_LOGITS].t.data);
    const float* bias = m.with_bias ? static_cast<const float*>(p.t[FP8MOE_ARG_ROUTING_BIAS].t.data) : nullptr;
    for (int64_t t = 0; t < rows; ++t)
      routing_rows_fill(logits + t * m.E, m.E, m.K, static_cast<uint32_t>(t % ROUTING_ROW_KINDS), bias);
    for (int layout = 0; layout < 3; ++layout) check_layout(tp, cpu, p, m, rows, layout, logits, bias);
  }
  decline_rate();
  printf("%ld collectives and barriers emulated\n", g_collectives);
  tp.api->context_destroy(cpu);
  free(g_arena);
  test_plugin_close(&tp);
  return test_finish("test_routing_emu", test_checks_run);
}
