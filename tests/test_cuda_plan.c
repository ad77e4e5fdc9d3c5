/* test_cuda_plan.c — the CUDA backend's kernel plan (src/cuda/cuda_plan.c) as data, on the host (no GPU):
 * every (device, regime) has a row for each GEMM that needs nothing, every row of one (device, regime)
 * has the layout's tile_m (so query_workspace and run agree whichever row the addresses pick), the wgmma
 * rows are taken on compute capability 9.0 only and only when the problem and context offer what they need
 * (TMA-able weights, H % 256 for GEMM2, the driver's encoder, not switched off by
 * FP8MOE_CUDA_GEMM_FALLBACK), and the decode rows pair up at ≤ ½ routed row per expert when their grids fit
 * and the weights are 16-byte aligned, on cc 9.0 the stream pair ahead of the register-path pair (and in the
 * SMALL regime unless "j" switches it off), the stream workspace where a stream row can match; the stream-K split
 * covers every iteration once with consistent segments, slots and counters; the chunked
 * permutation's threshold and chunk sizes; the sm90 GEMMs' A/B variants follow the switch letters, the
 * grouped order's group size follows its rule, and every item order is a bijection. Compiles
 * cuda_plan.c in; links no CUDA library. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_internal.h"
#include "cuda_internal.h" /* fp8moe_cuda_layout_make */
#include "cuda_plan.h"
#include "gemm/sm90_items.h"
#include "gemm/stream_split.h"
#include "kernels_internal.h"
#include "plugin_host.h"
#include "stream_split_rules.h"

/* A problem with natural-layout weights at an aligned (or misaligned) fake address; only sizes and views
 * matter to the plan. */
static fp8moe_problem problem(int64_t T, int64_t H, int64_t I, int32_t E, int32_t K, uintptr_t w_addr) {
  fp8moe_problem p;
  memset(&p, 0, sizeof p);
  p.T = T;
  p.H = H;
  p.I = I;
  p.E = E;
  p.E_local = E;
  p.K = K;
  p.quant_format = FP8MOE_QUANT_FP8_PER_TENSOR;
  p.geom = *fp8moe_contract_quant_geometry(FP8MOE_QUANT_FP8_PER_TENSOR);
  p.requant = FP8MOE_REQUANT_STATIC; /* per-tensor with the caller's a2_scale (the size rule reads it) */
  fp8moe_view* w[2] = {&p.w13, &p.w2};
  const int64_t n[2] = {2 * I, H}, k[2] = {H, I};
  for (int i = 0; i < 2; ++i) {
    w[i]->data = (void*)w_addr;
    w[i]->dt = FP8MOE_DT_E4M3;
    w[i]->ndim = 3;
    w[i]->shape[0] = E;
    w[i]->shape[1] = n[i];
    w[i]->shape[2] = k[i];
    w[i]->strides[0] = n[i] * k[i];
    w[i]->strides[1] = k[i];
    w[i]->strides[2] = 1;
  }
  return p;
}

static int32_t kernel_of(int32_t gemm, int32_t cc, const fp8moe_problem* p, uint32_t ctx) {
  const fp8moe_plan_row* r = fp8moe_cuda_plan_pick(gemm, cc, p, fp8moe_cuda_plan_offers(p, ctx, 132));
  return r ? r->kernel : -1;
}

static void rows_are_consistent(void) {
  int32_t n = 0;
  const fp8moe_plan_row* rows = fp8moe_cuda_plan_rows(&n);
  EXPECT(n > 0, "the plan has no rows");
  const int64_t tokens[] = {1, 64, 512, 2048};
  for (int32_t cc = 89; cc <= 120; ++cc)
    for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; ++t) {
      const fp8moe_problem p = problem(tokens[t], 7168, 2048, 256, 8, 0x10000);
      const int32_t tile_m = fp8moe_cuda_plan_tile_m(cc, &p), regime = fp8moe_cuda_plan_regime(&p);
      for (int32_t i = 0; i < n; ++i)
        if (cc >= rows[i].cc_min && cc <= rows[i].cc_max && rows[i].regime == regime)
          EXPECT(rows[i].tile_m == tile_m, "row %d (%s): tile_m %d, the layout's is %d at cc %d", (int)i,
                 rows[i].why, (int)rows[i].tile_m, (int)tile_m, (int)cc);
      for (int32_t gemm = FP8MOE_GEMM1; gemm <= FP8MOE_GEMM2; ++gemm) {
        const fp8moe_plan_row* r = fp8moe_cuda_plan_pick(gemm, cc, &p, 0u); /* offers nothing */
        EXPECT(r != NULL && r->kernel == FP8MOE_GEMM_MMA_SYNC && r->needs == 0,
               "cc %d T %lld GEMM%d: no row that needs nothing", (int)cc, (long long)tokens[t], (int)gemm);
      }
    }
}

static void picks(void) {
  const uint32_t all = FP8MOE_PLAN_NEEDS_TMA_ENC | FP8MOE_PLAN_NEEDS_SM90_GEMM1 | FP8MOE_PLAN_NEEDS_SM90_GEMM2;
  const fp8moe_problem big = problem(2048, 7168, 2048, 256, 8, 0x10000);
  EXPECT(fp8moe_cuda_plan_regime(&big) == FP8MOE_M_LARGE, "T=2048 deepseek-v3 is LARGE");
  EXPECT(fp8moe_cuda_plan_tile_m(90, &big) == 64, "LARGE tile_m %d", (int)fp8moe_cuda_plan_tile_m(90, &big));
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &big, all) == FP8MOE_GEMM_WGMMA_SM90, "Hopper LARGE GEMM1 → wgmma");
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &big, all) == FP8MOE_GEMM_WGMMA_SM90, "Hopper LARGE GEMM2 → wgmma");
  /* The sm_90a SASS is the only code of the wgmma kernels: never on other devices. */
  EXPECT(kernel_of(FP8MOE_GEMM1, 100, &big, all) == FP8MOE_GEMM_MMA_SYNC, "cc 10.0 GEMM1 → mma.sync");
  EXPECT(kernel_of(FP8MOE_GEMM2, 89, &big, all) == FP8MOE_GEMM_MMA_SYNC, "cc 8.9 GEMM2 → mma.sync");
  /* Needs not offered. */
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &big, all & ~FP8MOE_PLAN_NEEDS_TMA_ENC) == FP8MOE_GEMM_MMA_SYNC,
         "no tensor-map encoder → mma.sync");
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &big, all & ~FP8MOE_PLAN_NEEDS_SM90_GEMM2) == FP8MOE_GEMM_MMA_SYNC &&
             kernel_of(FP8MOE_GEMM1, 90, &big, all & ~FP8MOE_PLAN_NEEDS_SM90_GEMM2) == FP8MOE_GEMM_WGMMA_SM90,
         "GEMM2 switched off → GEMM2 mma.sync, GEMM1 wgmma");
  const fp8moe_problem h384 = problem(2048, 384, 2048, 16, 4, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &h384, all) == FP8MOE_GEMM_MMA_SYNC &&
             kernel_of(FP8MOE_GEMM1, 90, &h384, all) == FP8MOE_GEMM_WGMMA_SM90,
         "H = 384: GEMM2 mma.sync (2×128-column tiles), GEMM1 wgmma");
  const fp8moe_problem odd = problem(2048, 7168, 2048, 256, 8, 0x10008);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &odd, all) == FP8MOE_GEMM_MMA_SYNC &&
             kernel_of(FP8MOE_GEMM2, 90, &odd, all) == FP8MOE_GEMM_MMA_SYNC,
         "weights 8-byte aligned → mma.sync");
  fp8moe_problem padded = big;
  padded.w2.strides[1] = 2048 + 8; /* rows 8 bytes apart from 16-byte multiples */
  padded.w2.strides[0] = 7168 * padded.w2.strides[1];
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &padded, all) == FP8MOE_GEMM_MMA_SYNC &&
             kernel_of(FP8MOE_GEMM1, 90, &padded, all) == FP8MOE_GEMM_WGMMA_SM90,
         "w2 row stride not a multiple of 16 → GEMM2 mma.sync");
  /* Decode regimes: TINY (≤ ½ row per expert) takes the decode pair where the grids fit, SMALL the 16-row
   * mma.sync tiles; both have the same tile height. */
  const uint32_t dec = all | FP8MOE_PLAN_NEEDS_DECODE_GRIDS;
  const fp8moe_problem one = problem(1, 7168, 2048, 256, 8, 0x10000);
  EXPECT(fp8moe_cuda_plan_regime(&one) == FP8MOE_M_TINY && fp8moe_cuda_plan_tile_m(90, &one) == 16,
         "T=1 deepseek-v3: TINY, 16-row tiles");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &one, dec) == FP8MOE_GEMM_DECODE &&
             kernel_of(FP8MOE_GEMM2, 90, &one, dec) == FP8MOE_GEMM_DECODE,
         "T=1: the decode pair");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &one, all) == FP8MOE_GEMM_MMA_SYNC &&
             kernel_of(FP8MOE_GEMM2, 90, &one, all) == FP8MOE_GEMM_MMA_SYNC,
         "decode grids do not fit: mma.sync pair");
  EXPECT(kernel_of(FP8MOE_GEMM1, 89, &one, dec) == FP8MOE_GEMM_MMA_SYNC, "cc 8.9: no clusters, mma.sync");
  const fp8moe_problem eight = problem(8, 7168, 2048, 256, 8, 0x10000), t32 = problem(32, 7168, 2048, 256, 8, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &eight, dec) == FP8MOE_GEMM_DECODE, "T=8 (2·T·K = E/2): decode");
  EXPECT(fp8moe_cuda_plan_regime(&t32) == FP8MOE_M_SMALL && fp8moe_cuda_plan_tile_m(90, &t32) == 16 &&
             kernel_of(FP8MOE_GEMM1, 90, &t32, dec) == FP8MOE_GEMM_MMA_SYNC,
         "T=32 (one row per expert): SMALL, mma.sync");
  /* MEDIUM (16 to 32 rows per expert): 64-row wgmma tiles on Hopper, whose fallback keeps 64-row tiles;
   * 16-row mma.sync tiles on devices without the wgmma kernels. 15.9 rows per expert is still SMALL. */
  const fp8moe_problem t512 = problem(512, 7168, 2048, 256, 8, 0x10000), t508 = problem(508, 7168, 2048, 256, 8, 0x10000);
  EXPECT(fp8moe_cuda_plan_regime(&t512) == FP8MOE_M_MEDIUM && fp8moe_cuda_plan_tile_m(90, &t512) == 64 &&
             kernel_of(FP8MOE_GEMM1, 90, &t512, dec) == FP8MOE_GEMM_WGMMA_SM90 &&
             kernel_of(FP8MOE_GEMM2, 90, &t512, dec) == FP8MOE_GEMM_WGMMA_SM90,
         "T=512 deepseek-v3 (16 rows per expert): MEDIUM, wgmma at 64-row tiles on Hopper");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &t512, dec & ~FP8MOE_PLAN_NEEDS_SM90_GEMM1) == FP8MOE_GEMM_MMA_SYNC,
         "T=512 GEMM1 switched off: mma.sync");
  EXPECT(fp8moe_cuda_plan_tile_m(89, &t512) == 16 && fp8moe_cuda_plan_tile_m(100, &t512) == 16 &&
             kernel_of(FP8MOE_GEMM2, 100, &t512, dec) == FP8MOE_GEMM_MMA_SYNC,
         "T=512 without the wgmma kernels: 16-row mma.sync tiles");
  EXPECT(fp8moe_cuda_plan_regime(&t508) == FP8MOE_M_SMALL && fp8moe_cuda_plan_tile_m(90, &t508) == 16,
         "T=508 (15.9 rows per expert): SMALL");
  const fp8moe_problem mis = problem(1, 7168, 2048, 256, 8, 0x10008);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &mis, dec) == FP8MOE_GEMM_MMA_SYNC &&
             kernel_of(FP8MOE_GEMM2, 90, &mis, dec) == FP8MOE_GEMM_MMA_SYNC,
         "8-byte aligned weights: mma.sync pair");
  fp8moe_problem wide = problem(1, 128 * 129, 2048, 256, 8, 0x10000);
  wide.quant_format = FP8MOE_QUANT_FP8_BLOCK128;
  wide.geom = *fp8moe_contract_quant_geometry(FP8MOE_QUANT_FP8_BLOCK128);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &wide, dec) == FP8MOE_GEMM_MMA_SYNC,
         "block scales with 129 K blocks: beyond the decode kernels' scale staging");
  wide.quant_format = FP8MOE_QUANT_FP8_PER_TENSOR;
  wide.geom = *fp8moe_contract_quant_geometry(FP8MOE_QUANT_FP8_PER_TENSOR);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &wide, dec) == FP8MOE_GEMM_DECODE, "per-tensor: no scale staging limit");
  EXPECT(kernel_of(FP8MOE_GEMM2, 100, &eight, dec) == FP8MOE_GEMM_DECODE,
         "T=8: the decode pair also after 9.0 (sm_90 code, no sm_90a)");
  /* The stream pair: ahead of the register pair on cc 9.0 at TINY where its grid fits, the weights are
   * TMA-able and the encoder exists; at SMALL only with the opt-in; never after 9.0 (sm_90a only). */
  const uint32_t str = dec | FP8MOE_PLAN_NEEDS_STREAM;
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &one, str) == FP8MOE_GEMM_STREAM_SM90 &&
             kernel_of(FP8MOE_GEMM2, 90, &one, str) == FP8MOE_GEMM_STREAM_SM90,
         "T=1 Hopper: the stream pair");
  EXPECT(kernel_of(FP8MOE_GEMM1, 100, &one, str) == FP8MOE_GEMM_DECODE &&
             kernel_of(FP8MOE_GEMM2, 100, &one, str) == FP8MOE_GEMM_DECODE,
         "T=1 after 9.0: the register pair (no sm_90a)");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &one, str & ~FP8MOE_PLAN_NEEDS_TMA_ENC) == FP8MOE_GEMM_DECODE &&
             kernel_of(FP8MOE_GEMM2, 90, &one, str & ~FP8MOE_PLAN_NEEDS_TMA_ENC) == FP8MOE_GEMM_DECODE,
         "no tensor-map encoder: the register pair");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &mis, str) == FP8MOE_GEMM_MMA_SYNC &&
             kernel_of(FP8MOE_GEMM2, 90, &mis, str) == FP8MOE_GEMM_MMA_SYNC,
         "8-byte aligned weights: neither streaming pair");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &t32, str) == FP8MOE_GEMM_MMA_SYNC &&
             kernel_of(FP8MOE_GEMM1, 90, &t32, str | FP8MOE_PLAN_NEEDS_STREAM_SMALL) == FP8MOE_GEMM_STREAM_SM90 &&
             kernel_of(FP8MOE_GEMM2, 90, &t32, str | FP8MOE_PLAN_NEEDS_STREAM_SMALL) == FP8MOE_GEMM_STREAM_SM90,
         "T=32 (SMALL): the stream pair where the context offers it (not \"j\"), else mma.sync");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &t32, FP8MOE_PLAN_NEEDS_STREAM_SMALL | dec) == FP8MOE_GEMM_MMA_SYNC,
         "SMALL offered without the stream grid: mma.sync");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &t512, str | FP8MOE_PLAN_NEEDS_STREAM_SMALL) == FP8MOE_GEMM_WGMMA_SM90,
         "T=512 (MEDIUM): the wgmma tiles, SMALL offered or not");
  const fp8moe_problem h384s = problem(1, 384, 256, 64, 2, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &h384s, str | FP8MOE_PLAN_NEEDS_STREAM_PAYS) == FP8MOE_GEMM_STREAM_SM90,
         "H = 384: the stream GEMM2 (its last unit has one box)");
  /* from T = 1 up, whatever T's own regime: a workspace sized for a larger T serves the smaller ones */
  EXPECT(fp8moe_cuda_plan_stream_workspace(90, &one) && fp8moe_cuda_plan_stream_workspace(90, &t32) &&
             fp8moe_cuda_plan_stream_workspace(90, &t512) && fp8moe_cuda_plan_stream_workspace(90, &big) &&
             !fp8moe_cuda_plan_stream_workspace(100, &one) && !fp8moe_cuda_plan_stream_workspace(89, &t32),
         "the stream workspace wherever a stream row can match this T or a smaller one");
  /* The shapes of test_gpu_sweep's decode rows (T, H, I, E, K), in every format: experts far below the size
   * rule's, so the register pair by default; the stream pair where the context offers it everywhere ("l",
   * test_gpu_sweep_sizes_l), so that sweep runs the stream kernels there. */
  const int64_t sweep[6][5] = {{12, 384, 256, 64, 2}, {16, 256, 384, 128, 4}, {2, 2304, 640, 8, 2},
                               {25, 256, 256, 128, 2}, {1, 512, 384, 64, 4},  {8, 256, 384, 16, 1}};
  const int32_t formats[3] = {FP8MOE_QUANT_FP8_PER_TENSOR, FP8MOE_QUANT_FP8_BLOCK128, FP8MOE_QUANT_FP8_PER_CHANNEL};
  for (int i = 0; i < 6; ++i)
    for (int f = 0; f < 3; ++f) {
      fp8moe_problem d = problem(sweep[i][0], sweep[i][1], sweep[i][2], (int32_t)sweep[i][3], (int32_t)sweep[i][4],
                                 0x10000);
      d.quant_format = formats[f];
      d.geom = *fp8moe_contract_quant_geometry(formats[f]);
      EXPECT(kernel_of(FP8MOE_GEMM1, 90, &d, dec) == FP8MOE_GEMM_DECODE &&
                 kernel_of(FP8MOE_GEMM2, 90, &d, dec) == FP8MOE_GEMM_DECODE &&
                 kernel_of(FP8MOE_GEMM1, 90, &d, str) == FP8MOE_GEMM_DECODE &&
                 kernel_of(FP8MOE_GEMM2, 90, &d, str) == FP8MOE_GEMM_DECODE &&
                 kernel_of(FP8MOE_GEMM1, 90, &d, str | FP8MOE_PLAN_NEEDS_STREAM_PAYS) == FP8MOE_GEMM_STREAM_SM90 &&
                 kernel_of(FP8MOE_GEMM2, 90, &d, str | FP8MOE_PLAN_NEEDS_STREAM_PAYS) == FP8MOE_GEMM_STREAM_SM90,
             "sweep decode row T=%lld H=%lld I=%lld E=%lld K=%lld format %d: the register pair, the stream pair under l",
             (long long)sweep[i][0], (long long)sweep[i][1], (long long)sweep[i][2], (long long)sweep[i][3],
             (long long)sweep[i][4], (int)formats[f]);
    }
}

static void environment_switch(void) {
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  const uint32_t sm90 = FP8MOE_PLAN_NEEDS_SM90_GEMM1 | FP8MOE_PLAN_NEEDS_SM90_GEMM2;
  const uint32_t decs = FP8MOE_PLAN_NEEDS_DECODE_GRIDS;
  const uint32_t strm = FP8MOE_PLAN_NEEDS_STREAM, small = FP8MOE_PLAN_NEEDS_STREAM_SMALL;
  const uint32_t pairs = FP8MOE_PLAN_NEEDS_GEMM1_PAIRS;
  uint32_t o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(o == (FP8MOE_PLAN_NEEDS_TMA_ENC | sm90 | decs | strm | small | pairs), "default context offers 0x%x",
         (unsigned)o);
  EXPECT(fp8moe_cuda_plan_context_offers(0, 1, 0) == (sm90 | decs | pairs), "no encoder: no TMA_ENC");
  EXPECT(fp8moe_cuda_plan_context_offers(1, 0, 1) == (FP8MOE_PLAN_NEEDS_TMA_ENC | sm90 | strm | small | pairs),
         "no decode grids");
  EXPECT(fp8moe_cuda_plan_context_offers(1, 1, 0) == (FP8MOE_PLAN_NEEDS_TMA_ENC | sm90 | decs | pairs),
         "no stream grid: neither stream bit");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "k", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT((o & ~pairs) == (FP8MOE_PLAN_NEEDS_TMA_ENC | sm90 | decs | small),
         "FALLBACK=k: no stream pair (SMALL's bit alone picks no stream row): 0x%x", (unsigned)o);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "j", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(o == (FP8MOE_PLAN_NEEDS_TMA_ENC | sm90 | decs | strm | pairs), "FALLBACK=j: not at SMALL: 0x%x", (unsigned)o);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "jk", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT((o & (strm | small)) == 0, "FALLBACK=jk: no stream bit: 0x%x", (unsigned)o);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "2", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT((o & FP8MOE_PLAN_NEEDS_SM90_GEMM1) && !(o & FP8MOE_PLAN_NEEDS_SM90_GEMM2) && (o & decs) == decs,
         "FALLBACK=2: 0x%x", (unsigned)o);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "d", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT((o & sm90) == sm90 && (o & decs) == 0 && (o & strm), "FALLBACK=d: no register decode pair: 0x%x",
         (unsigned)o);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12dk", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(!(o & (sm90 | decs | strm)), "FALLBACK=12dk: 0x%x", (unsigned)o);
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
}

/* The sm90 GEMMs' A/B variants (main loop, each GEMM's item order): the default unless
 * FP8MOE_CUDA_GEMM_FALLBACK names "q", "r", "u" or "o"; the other letters leave them, and these letters leave
 * the GEMM offers. */
static int variant_is(int32_t loop, int32_t order1, int32_t order2) {
  const fp8moe_sm90_variant v = fp8moe_cuda_plan_context_sm90_variant();
  return v.loop == loop && v.gemm1_order == order1 && v.gemm2_order == order2;
}

static int clusters_are(int32_t on) {
  const fp8moe_sm90_variant v = fp8moe_cuda_plan_context_sm90_variant();
  return v.gemm1_cluster == on && v.gemm2_cluster == on;
}

/* The stream GEMMs' switches ("h", "b"/"l", "3"), the rounds' mode ("R"/"B") at its default 2, balanced by the rule
 * and by entries an expert ("W", "V" off). */
static int stream_is(int32_t handoff, int32_t pairs, int32_t align) {
  const fp8moe_sm90_variant v = fp8moe_cuda_plan_context_sm90_variant();
  return v.stream_handoff == handoff && v.stream_pairs == pairs && v.stream_align == align && v.stream_rounds == 2 &&
         v.stream_balanced == 2;
}

/* The grouped order's rule switches (sessions 46–48; docs/GPU.md "GEMM2's group size", "Expert-aligned groups",
 * "GEMM1's groups below a tile per expert"): each letter turns its own field to 0 and leaves the others at 1. */
static int32_t v_gemm2_group(fp8moe_sm90_variant v) { return v.gemm2_group; }
static int32_t v_gemm2_aligned(fp8moe_sm90_variant v) { return v.gemm2_aligned; }
static int32_t v_gemm1_aligned(fp8moe_sm90_variant v) { return v.gemm1_aligned; }
static int32_t v_gemm1_sparse_group(fp8moe_sm90_variant v) { return v.gemm1_sparse_group; }
static int32_t v_gemm2_sparse_group(fp8moe_sm90_variant v) { return v.gemm2_sparse_group; }
static int32_t v_gemm1_pair_aligned(fp8moe_sm90_variant v) { return v.gemm1_pair_aligned; }
static const struct {
  const char* letter;
  int32_t (*field)(fp8moe_sm90_variant);
  const char* what;
} k_group_switches[] = {{"5", v_gemm2_group, "the 64-row GEMM2's groups by GEMM1's rule"},
                        {"6", v_gemm2_aligned, "the 64-row GEMM2's plain group edges"},
                        {"9", v_gemm1_aligned, "GEMM1's alternating items' plain group edges"},
                        {"4", v_gemm1_sparse_group, "GEMM1's alternating items' groups by GEMM1's rule at every size"},
                        {"0", v_gemm2_sparse_group, "the 64-row GEMM2's own rule below a tile per expert too"},
                        {"A", v_gemm1_pair_aligned, "the 128-row GEMM1's pair items' plain group edges"}};
enum { kGroupSwitches = (int)(sizeof k_group_switches / sizeof k_group_switches[0]) };

/* Every group switch at 1, except switch `off` (−1: none) at 0. */
static int group_switches_are(fp8moe_sm90_variant v, int off) {
  for (int j = 0; j < kGroupSwitches; ++j)
    if (k_group_switches[j].field(v) != (j == off ? 0 : 1)) return 0;
  return 1;
}

static void sm90_variants(void) {
  const int32_t overlap = FP8MOE_SM90_LOOP_OVERLAP, serial = FP8MOE_SM90_LOOP_SERIAL;
  const int32_t early = FP8MOE_SM90_LOOP_EARLY_RELEASE, grouped = FP8MOE_SM90_ORDER_GROUPED;
  const int32_t tile = FP8MOE_SM90_ORDER_TILE_MAJOR, column = FP8MOE_SM90_ORDER_COLUMN_MAJOR;
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_alternate == 1 &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_claim == 1 &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_pair_cluster == 0,
         "default: two-accumulator loop, both GEMMs grouped, one-CTA GEMMs, the alternating 64-row GEMM1, claimed "
         "pair-kernel items");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "m", 1);
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(1),
         "FALLBACK=m: both GEMMs in 2-CTA clusters, nothing else changed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "mn", 1);
  EXPECT(clusters_are(0), "FALLBACK=mn: n wins, one-CTA GEMMs");
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().gemm1_partitioned == 0, "default: the pair kernel's claims from one "
         "counter");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "P", 1);
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().gemm1_partitioned == 1 &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_claim == 1 && clusters_are(0),
         "FALLBACK=P: the pair kernel's claims split by L2 partition, nothing else changed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "e", 1);
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_pair_cluster == 1 &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_claim == 1,
         "FALLBACK=e: the 128-row GEMM1 in 2-CTA clusters (claimed units), nothing else changed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "en", 1);
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().gemm1_pair_cluster == 0, "FALLBACK=en: n wins, one CTA per item");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12dpcstqruo", 1);
  EXPECT(clusters_are(0), "FALLBACK=12dpcstqruo: no clusters");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12dkjpcst", 1);
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0), "FALLBACK=12dkjpcst: the sm90 variant is untouched");
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().gemm1_alternate == 1, "FALLBACK=12dkjpcst: the alternating GEMM1");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "g", 1);
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_alternate == 0,
         "FALLBACK=g: the 64-row GEMM1 kernel instead of the alternating pair kernel, nothing else changed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "y", 1);
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_alternate == 1 &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_claim == 0,
         "FALLBACK=y: the pair kernel's static item walk, nothing else changed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12dkjpcstgqruomn", 1);
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().gemm1_claim == 1, "FALLBACK without y: claimed items");
  EXPECT(group_switches_are(fp8moe_cuda_plan_context_sm90_variant(), -1),
         "FALLBACK without 5, 6, 9, 4 or 0: the grouped order's rules all on");
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().gemm1_pair_cluster == 0, "FALLBACK without e: one CTA per pair item");
  EXPECT(stream_is(1, 1, 1), "FALLBACK without h, b or 3: the stream handoff, units of two tiles, the aligned split");
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().gemm1_sorted_x == 1, "FALLBACK without 7 or 8: the sorted-x rule");
  for (int i = 0; i < kGroupSwitches; ++i) {
    setenv("FP8MOE_CUDA_GEMM_FALLBACK", k_group_switches[i].letter, 1);
    const fp8moe_sm90_variant v = fp8moe_cuda_plan_context_sm90_variant();
    EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) && v.gemm1_claim == 1 && group_switches_are(v, i),
           "FALLBACK=%s: %s, nothing else changed", k_group_switches[i].letter, k_group_switches[i].what);
  }
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "3", 1);
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) && stream_is(1, 1, 0),
         "FALLBACK=3: the stream GEMMs without the expert-aligned split, nothing else changed");
  for (int i = 0; i < 6; ++i) {
    static const char* const letters[6] = {"R", "B", "RB", "W", "V", "VW"};
    static const int32_t modes[6] = {0, 1, 0, 2, 2, 2}, balanced[6] = {2, 2, 2, 0, 1, 0};
    setenv("FP8MOE_CUDA_GEMM_FALLBACK", letters[i], 1);
    const fp8moe_sm90_variant v = fp8moe_cuda_plan_context_sm90_variant();
    EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) && v.stream_rounds == modes[i] &&
               v.stream_balanced == balanced[i] &&
               v.stream_align == 1 && v.stream_pairs == 1 && v.stream_handoff == 1 && group_switches_are(v, -1),
           "FALLBACK=%s: the rounds' mode %d (R never, B by bandwidth, R wins), balanced %d (W whole, V by the rounds' "
           "rule only, W wins), nothing else changed", letters[i], (int)modes[i], (int)balanced[i]);
  }
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "7", 1);
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) && stream_is(1, 1, 1) &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_sorted_x == 2 &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_alternate == 1 &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_pair_cluster == 0,
         "FALLBACK=7: the pair items' A from expert-sorted rows wherever they can, nothing else changed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "78", 1);
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().gemm1_sorted_x == 0, "FALLBACK=78: 8 wins, the pair items gather A");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "h", 1);
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) &&
             fp8moe_cuda_plan_context_sm90_variant().gemm1_claim == 1 && stream_is(0, 1, 1),
         "FALLBACK=h: the stream GEMMs without their epilogue warpgroup, nothing else changed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "l", 1);
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().stream_pairs == 2,
         "FALLBACK=l: the stream pairs without their size rule");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "lb", 1);
  EXPECT(fp8moe_cuda_plan_context_sm90_variant().stream_pairs == 0, "FALLBACK=lb: b wins, one tile per unit");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "b", 1);
  EXPECT(variant_is(overlap, grouped, grouped) && clusters_are(0) && stream_is(1, 0, 1),
         "FALLBACK=b: the stream GEMMs with one tile per unit, nothing else changed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "o", 1);
  EXPECT(variant_is(overlap, grouped, column), "FALLBACK=o: GEMM2 column-block major, GEMM1 grouped");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "u", 1);
  EXPECT(variant_is(overlap, column, tile), "FALLBACK=u: the ungrouped orders (GEMM1 column, GEMM2 tile major)");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "uo", 1);
  EXPECT(variant_is(overlap, column, column), "FALLBACK=uo: o wins for GEMM2");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "quo", 1);
  EXPECT(variant_is(serial, column, column), "FALLBACK=quo: the 6a0a67b kernels' loop and orders");
  const uint32_t sm90 = FP8MOE_PLAN_NEEDS_SM90_GEMM1 | FP8MOE_PLAN_NEEDS_SM90_GEMM2;
  const uint32_t all_prologues = FP8MOE_PROLOGUE_CLUSTER | FP8MOE_PROLOGUE_BLOCK | FP8MOE_PROLOGUE_TEAM;
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "qroumn", 1);
  EXPECT((fp8moe_cuda_plan_context_offers(1, 1, 1) & (sm90 | FP8MOE_PLAN_NEEDS_STREAM)) ==
                 (sm90 | FP8MOE_PLAN_NEEDS_STREAM) &&
             (fp8moe_cuda_plan_context_offers(1, 1, 1) & FP8MOE_PLAN_NEEDS_STREAM_SMALL) &&
             (fp8moe_cuda_plan_context_offers(1, 1, 1) & FP8MOE_PLAN_NEEDS_GEMM1_PAIRS) &&
             fp8moe_cuda_plan_context_prologue() == all_prologues && fp8moe_cuda_plan_context_permute_chunks(),
         "FALLBACK=qroumn: both sm90 GEMMs, the SMALL stream rows, the 128-row GEMM1, both prologues and the "
         "chunked permutation still offered");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "q", 1);
  EXPECT(variant_is(serial, grouped, grouped), "FALLBACK=q: serial loop");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "r", 1);
  EXPECT(variant_is(early, grouped, grouped), "FALLBACK=r: early-release loop");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "rq", 1);
  EXPECT(variant_is(serial, grouped, grouped), "FALLBACK=rq: q wins");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "or", 1);
  EXPECT(variant_is(early, grouped, column), "FALLBACK=or: early release, GEMM2 column-block major");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "qo", 1);
  EXPECT(variant_is(serial, grouped, column), "FALLBACK=qo: serial loop, GEMM2 column-block major");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
}

/* The grouped order's group size (cuda_plan.c rule): a group's A rows within the rule's bytes, clamped; the
 * shapes' values the docs quote (docs/GPU.md "Item order"); even, for GEMM2's item pairs. */
static void sm90_group(void) {
  const fp8moe_sm90_group_rule* r = fp8moe_cuda_plan_sm90_group_rule();
  EXPECT(r->min_group >= 2 && r->min_group % 2 == 0 && r->max_group % 2 == 0 && r->min_group <= r->max_group &&
             r->a_bytes > 0 && r->why != NULL,
         "group rule: 1 <= min %d <= max %d, bytes %lld", (int)r->min_group, (int)r->max_group,
         (long long)r->a_bytes);
  static const struct {
    int64_t k;
    int32_t g;
  } cases[] = {{7168, 18}, {2048, 64}, {4096, 32}, {14336, 8}, {256, 64}, {1 << 20, 8}, {0, 64}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int32_t g = fp8moe_cuda_plan_sm90_group(cases[i].k);
    EXPECT(g == cases[i].g, "group for K = %lld bytes: got %d, expected %d", (long long)cases[i].k, (int)g,
           (int)cases[i].g);
  }
  for (int64_t k = 128; k <= (1 << 20); k += 128) {
    const int32_t g = fp8moe_cuda_plan_sm90_group(k);
    if (g < r->min_group || g > r->max_group || g % 2 != 0 ||
        (g > r->min_group && (int64_t)g * FP8MOE_GEMM_TILE_M_LARGE * k > r->a_bytes)) {
      EXPECT(0, "group for K = %lld bytes: %d outside the rule", (long long)k, (int)g);
      break;
    }
  }
  /* The 64-row GEMM2's own rule (docs/GPU.md "GEMM2's group size") up to its rows per expert, GEMM1's past them
   * and under "5" */
  const fp8moe_sm90_group_rule* r2 = fp8moe_cuda_plan_sm90_gemm2_group_rule();
  EXPECT(r2->a_bytes < r->a_bytes && r2->min_group == r->min_group && r2->max_group == r->max_group &&
             r2->max_rows == 128 && r->max_rows == 0 && r2->why,
         "GEMM2 group rule: a smaller budget than GEMM1's up to 128 rows per expert, the same clamps");
  /* GEMM1's alternating items below one tile per expert (docs/GPU.md "GEMM1's groups below a tile per expert"):
   * half GEMM1's budget up to 63 rows per expert, GEMM1's rule from 64 and under "4" */
  const fp8moe_sm90_group_rule* r1 = fp8moe_cuda_plan_sm90_gemm1_sparse_group_rule();
  EXPECT(r1->a_bytes == r->a_bytes / 2 && r1->min_group == r->min_group && r1->max_group == r->max_group &&
             r1->max_rows == 63 && r1->why,
         "GEMM1 sparse group rule: half GEMM1's budget up to 63 rows per expert, the same clamps");
  const fp8moe_sm90_group_rule* r2s = fp8moe_cuda_plan_sm90_gemm2_sparse_group_rule();
  EXPECT(r2s->a_bytes == r2->a_bytes / 4 && r2s->min_group == 4 && r2s->max_group == r->max_group &&
             r2s->max_rows == 63 && r2s->why,
         "GEMM2 sparse group rule: a quarter of GEMM2's budget up to 63 rows per expert, groups of at least 4");
  /* GEMM2's sparse rule up to 63 rows per expert and its own up to 128; GEMM1's alternating items' up to 63; GEMM1's
   * rule past them and with the rule switched off ("5", "4") */
  static const struct {
    int gemm; /* 2: GEMM2's own rule (its sparse rule off), 3: GEMM2's rules, 1: GEMM1's alternating items' */
    int64_t k, T, K, E;
    int32_t g;
  } by_rows[] = {
      {2, 2048, 2048, 8, 256, 16}, /* deepseek-v3 T = 2048: 64 rows per expert */
      {2, 2048, 4096, 8, 256, 16}, /* 128 rows: the edge */
      {2, 2048, 4097, 8, 256, 64}, /* past it: GEMM1's rule */
      {2, 2048, 8192, 8, 256, 64}, /* deepseek-v3 T = 8192 */
      {2, 2048, 512, 8, 384, 16}, /* kimi-k2 T = 512 */
      {2, 768, 2048, 8, 128, 42}, /* qwen3-30b-a3b T = 2048 */
      {2, 1408, 512, 8, 128, 22}, /* glm-4.5-air T = 512 */
      {2, 1536, 2048, 8, 128, 20}, /* qwen3-235b-a22b T = 2048 */
      {2, 14336, 512, 2, 8, 8}, /* mixtral-8x7b T = 512: the floor either way */
      {2, 8192, 2048, 1, 16, 8}, /* llama4-scout T = 2048 */
      {2, 8192, 8192, 1, 16, 16}, /* llama4-scout T = 8192: GEMM1's rule */
      {2, 256, 1, 8, 256, 64}, /* the cap */
      {3, 2048, 512, 8, 256, 4},     /* deepseek-v3 T = 512: 16 rows per expert, a quarter of GEMM2's budget */
      {3, 2048, 2016, 8, 256, 4},    /* 63 rows: the edge */
      {3, 2048, 2048, 8, 256, 16},   /* 64 rows: GEMM2's own rule */
      {3, 768, 512, 8, 128, 10},     /* qwen3-30b-a3b T = 512 (own rule: 42) */
      {3, 14336, 512, 1, 16, 4},     /* the floor of 4 */
      {1, 7168, 512, 8, 256, 8}, /* deepseek-v3 T = 512: 16 rows per expert (GEMM1's rule: 18) */
      {1, 7168, 2016, 8, 256, 8}, /* 63 rows: the edge */
      {1, 7168, 2048, 8, 256, 18}, /* 64 rows (deepseek-v3 T = 2048): GEMM1's rule */
      {1, 7168, 2048, 8, 384, 8}, /* kimi-k2 T = 2048: 42.7 rows */
      {1, 4096, 512, 8, 128, 16}, /* qwen3-235b-a22b, glm-4.5-air T = 512 (32 by GEMM1's rule) */
      {1, 4096, 2048, 8, 128, 32}, /* their T = 2048: 128 rows */
      {1, 2048, 512, 8, 128, 32}, /* qwen3-30b-a3b T = 512 (64 by GEMM1's rule) */
      {1, 5120, 512, 1, 16, 12}, /* llama4-scout T = 512: 32 rows (24 by GEMM1's rule) */
      {1, 4096, 4096, 2, 8, 32}}; /* mixtral-8x7b: 1,024 rows, GEMM1's rule */
  for (size_t i = 0; i < sizeof by_rows / sizeof by_rows[0]; ++i) {
    const int64_t k = by_rows[i].k, rows = by_rows[i].T * by_rows[i].K, e = by_rows[i].E;
    const int kind = by_rows[i].gemm;
    const int32_t g = kind == 1 ? fp8moe_cuda_plan_sm90_gemm1_alt_group(k, rows, e, 1)
                                : fp8moe_cuda_plan_sm90_gemm2_group(k, rows, e, 1, kind == 3);
    const int32_t off = kind == 1 ? fp8moe_cuda_plan_sm90_gemm1_alt_group(k, rows, e, 0)
                                  : fp8moe_cuda_plan_sm90_gemm2_group(k, rows, e, 0, kind == 3);
    EXPECT(g == by_rows[i].g && off == fp8moe_cuda_plan_sm90_group(by_rows[i].k),
           "GEMM%d group for K = %lld bytes, T = %lld, K = %lld, E = %lld: got %d (switched off: %d), expected %d (%d)",
           by_rows[i].gemm, (long long)by_rows[i].k, (long long)by_rows[i].T, (long long)by_rows[i].K,
           (long long)by_rows[i].E, (int)g, (int)off, (int)by_rows[i].g,
           (int)fp8moe_cuda_plan_sm90_group(by_rows[i].k));
  }
}

/* Every item order visits each (tile, column block) exactly once, in range, for many shapes and groups
 * (the mapping both sm90 GEMMs' producers and consumers use, kernels/gemm/sm90_items.h); the grouped order
 * keeps the items of a group together and column-block major inside it. */
/* The expert-aligned groups (kernels/gemm/sm90_items.h; docs/GPU.md "Expert-aligned groups"): for random experts of
 * 1–9 tiles, every group edge lies in [g·group, g·group + group/2], at an expert's first tile wherever one starts in
 * that window, the edges grow strictly (an edge that reaches the last tile leaves empty groups after it, never
 * selected), and the mapping is a bijection, column-block major within each group. */
static void sm90_aligned_groups(void) {
  enum { kMaxTiles = 420, kMaxCb = 29 };
  static int32_t tile_expert[kMaxTiles], edges[kMaxTiles + 2];
  static uint32_t bits[kMaxTiles / 32 + 2];
  static unsigned char seen[kMaxTiles * kMaxCb];
  const int32_t groups[] = {1, 2, 3, 4, 8, 9, 16, 18, 22, 42, 64};
  const int32_t cbs[] = {1, 3, 28};
  uint32_t rng = 12345u;
  int bad = 0, cut_free = 0;
  for (int rep = 0; rep < 60 && !bad; ++rep) {
    int32_t tiles = 0, e = 0;
    const int32_t max_run = 1 + rep % 9;
    const int32_t want = 1 + (int32_t)((rng = rng * 1664525u + 1013904223u) >> 8) % (kMaxTiles - 10);
    while (tiles < want) {
      int32_t run = 1 + (int32_t)((rng = rng * 1664525u + 1013904223u) >> 8) % max_run;
      for (; run > 0 && tiles < want; --run) tile_expert[tiles++] = e;
      e += 1 + (int32_t)((rng >> 4) & 1u); /* some experts without tiles */
    }
    memset(bits, 0, sizeof bits);
    for (int32_t t = 0; t <= tiles; ++t)
      if (t == 0 || t == tiles || tile_expert[t] != tile_expert[t - 1]) bits[t >> 5] |= 1u << (t & 31);
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0] && !bad; ++gi) {
      const int32_t group = groups[gi], ng = (tiles + group - 1) / group;
      for (int32_t g = 0; g <= ng; ++g) edges[g] = fp8moe_sm90_group_edge(bits, tiles, group, g);
      for (int32_t g = 1; g <= ng && !bad; ++g) {
        const int32_t n = g * group, last = n + group / 2;
        int32_t first = -1; /* the first expert start (or the end) in the window */
        for (int32_t t = n; t <= last && t <= tiles && first < 0; ++t)
          if (t == tiles || tile_expert[t] != tile_expert[t - 1]) first = t;
        const int32_t want_edge = g == ng ? tiles : first >= 0 ? first : n;
        if (edges[g] != want_edge || edges[g] < edges[g - 1] || (edges[g] == edges[g - 1] && edges[g] != tiles)) {
          EXPECT(0, "aligned groups: tiles %d group %d edge %d = %d, expected %d (previous %d)", (int)tiles,
                 (int)group, (int)g, (int)edges[g], (int)want_edge, (int)edges[g - 1]);
          bad = 1;
        }
        cut_free += first >= 0;
      }
      for (size_t ci = 0; ci < sizeof cbs / sizeof cbs[0] && !bad; ++ci) {
        const int32_t cb = cbs[ci];
        memset(seen, 0, (size_t)tiles * (size_t)cb);
        fp8moe_sm90_item prev = {0, 0};
        int32_t prev_g = 0;
        for (int32_t w = 0; w < tiles * cb && !bad; ++w) {
          const fp8moe_sm90_item it = fp8moe_sm90_item_aligned(w, cb, group, edges);
          int32_t g = 0;
          while (g + 1 <= ng && edges[g + 1] <= it.tile) ++g;
          if (it.tile < 0 || it.tile >= tiles || it.col_block < 0 || it.col_block >= cb ||
              seen[it.tile * cb + it.col_block]++ || g < prev_g || (g == prev_g && it.col_block < prev.col_block)) {
            EXPECT(0, "aligned groups: tiles %d cb %d group %d: item %d -> (%d, %d) after (%d, %d)", (int)tiles,
                   (int)cb, (int)group, (int)w, (int)it.tile, (int)it.col_block, (int)prev.tile, (int)prev.col_block);
            bad = 1;
          }
          prev = it;
          prev_g = g;
        }
      }
    }
  }
  EXPECT(!bad && cut_free > 0, "expert-aligned groups: edges in their windows, at experts' starts, a bijection");
  EXPECT(fp8moe_sm90_aligned_fits(1023 * 8, 8) && !fp8moe_sm90_aligned_fits(1023 * 8 + 1, 8) &&
             fp8moe_sm90_aligned_fits(1, 64) && !fp8moe_sm90_aligned_fits(1, 0),
         "aligned groups fit the edge table up to FP8MOE_SM90_MAX_GROUP_EDGES edges, never with an empty group");
  EXPECT(fp8moe_sm90_aligned_ok(FP8MOE_SM90_ORDER_GROUPED, 0, 1023 * 8, 8) &&
             !fp8moe_sm90_aligned_ok(FP8MOE_SM90_ORDER_GROUPED, 0, 1023 * 8 + 1, 8) &&
             !fp8moe_sm90_aligned_ok(FP8MOE_SM90_ORDER_GROUPED, 1, 64, 8) &&
             !fp8moe_sm90_aligned_ok(FP8MOE_SM90_ORDER_TILE_MAJOR, 0, 64, 8) &&
             !fp8moe_sm90_aligned_ok(FP8MOE_SM90_ORDER_COLUMN_MAJOR, 0, 64, 8),
         "aligned groups only for the grouped order on one CTA per item, with the edges fitting the table");
}

static void sm90_item_orders(void) {
  static unsigned char seen[97 * 29];
  const int32_t orders[3] = {FP8MOE_SM90_ORDER_TILE_MAJOR, FP8MOE_SM90_ORDER_COLUMN_MAJOR, FP8MOE_SM90_ORDER_GROUPED};
  int bad = 0;
  for (int32_t tiles = 1; tiles <= 97 && !bad; tiles += 6)
    for (int32_t cb = 1; cb <= 29 && !bad; cb += 7)
      for (int o = 0; o < 3 && !bad; ++o)
        for (int32_t group = 1; group <= (o == 2 ? 100 : 1) && !bad; group += (group < 10 ? 1 : 13)) {
          memset(seen, 0, sizeof seen);
          fp8moe_sm90_item prev = {0, 0};
          for (int32_t w = 0; w < tiles * cb && !bad; ++w) {
            const fp8moe_sm90_item it = fp8moe_sm90_item_of(w, tiles, cb, orders[o], group);
            if (it.tile < 0 || it.tile >= tiles || it.col_block < 0 || it.col_block >= cb ||
                seen[it.tile * cb + it.col_block]++) {
              EXPECT(0, "order %d tiles %d cb %d group %d: item %lld -> (%d, %d) out of range or repeated",
                     (int)orders[o], (int)tiles, (int)cb, (int)group, (long long)w, (int)it.tile,
                     (int)it.col_block);
              bad = 1;
            }
            /* Grouped: a tile's group never goes back, and within a group the column block never does. */
            if (!bad && o == 2 && w > 0 &&
                (it.tile / group < prev.tile / group ||
                 (it.tile / group == prev.tile / group && it.col_block < prev.col_block))) {
              EXPECT(0, "grouped tiles %d cb %d group %d: item %lld (%d, %d) after (%d, %d)", (int)tiles, (int)cb,
                     (int)group, (long long)w, (int)it.tile, (int)it.col_block, (int)prev.tile,
                     (int)prev.col_block);
              bad = 1;
            }
            prev = it;
          }
        }
  EXPECT(!bad, "every item order is a bijection");
  /* The cluster kernels' units: with 1 or 2 peers every item is stored exactly once, a shadow (store 0) only
   * for rank 1 of the last unit of an odd count, and then it is rank 0's item. */
  for (int32_t items = 1; items <= 41 && !bad; ++items)
    for (int32_t peers = 1; peers <= 2 && !bad; ++peers) {
      memset(seen, 0, sizeof seen);
      const int32_t units = (items + peers - 1) / peers;
      for (int32_t u = 0; u < units && !bad; ++u)
        for (uint32_t r = 0; r < (uint32_t)peers && !bad; ++r) {
          const fp8moe_sm90_unit un = fp8moe_sm90_unit_item(u, items, peers, r);
          const int shadow_ok = peers == 2 && r == 1 && items % 2 == 1 && u == units - 1 && un.item == 2 * u;
          if (un.item < 0 || un.item >= items || (un.store ? seen[un.item]++ != 0 : !shadow_ok)) {
            EXPECT(0, "units: items %d peers %d unit %d rank %u -> item %d store %d", (int)items, (int)peers, (int)u,
                   (unsigned)r, (int)un.item, (int)un.store);
            bad = 1;
          }
        }
      for (int32_t w = 0; w < items && !bad; ++w)
        if (seen[w] != 1) {
          EXPECT(0, "units: items %d peers %d: item %d stored %d times", (int)items, (int)peers, (int)w, (int)seen[w]);
          bad = 1;
        }
    }
  EXPECT(!bad, "cluster units store every item once");
  const fp8moe_sm90_item g = fp8moe_sm90_item_of(9, 10, 3, FP8MOE_SM90_ORDER_GROUPED, 4);
  EXPECT(g.tile == 1 && g.col_block == 2, "grouped 10 tiles x 3, group 4: item 9 is (1, 2), got (%d, %d)",
         (int)g.tile, (int)g.col_block);
  const fp8moe_sm90_item l = fp8moe_sm90_item_of(25, 10, 3, FP8MOE_SM90_ORDER_GROUPED, 4);
  EXPECT(l.tile == 9 && l.col_block == 0, "grouped 10 x 3, group 4: item 25 is (9, 0) (last group of 2), got (%d, %d)",
         (int)l.tile, (int)l.col_block);
  EXPECT(fp8moe_sm90_order_ok(FP8MOE_SM90_ORDER_GROUPED, 1, 1000, 28) &&
             !fp8moe_sm90_order_ok(FP8MOE_SM90_ORDER_GROUPED, 0, 1000, 28) &&
             fp8moe_sm90_order_ok(FP8MOE_SM90_ORDER_TILE_MAJOR, 0, 1000, 28) && !fp8moe_sm90_order_ok(3, 8, 1000, 28) &&
             !fp8moe_sm90_order_ok(FP8MOE_SM90_ORDER_TILE_MAJOR, 8, 1 << 26, 64) &&
             !fp8moe_sm90_order_ok(FP8MOE_SM90_ORDER_GROUPED, 1 << 26, 1000, 64),
         "launchers accept the three orders, a grouped order only with group >= 1, 32-bit item numbers only");
}

/* The fused small-T prologue's rule (kernels/prologue.cu): T ≥ 1 within the rule's T, T·K and E; the one-block
 * variant at T ≤ block_max_tokens and T·K ≤ block_max_rows where the context offers it, else the cluster where
 * offered, else separate launches; never past the kernels' own limits (kernels_internal.h); the context's offer
 * from FP8MOE_CUDA_GEMM_FALLBACK ("p": none, "c": the cluster only). */
static void prologue_rule(void) {
  const uint32_t both = FP8MOE_PROLOGUE_CLUSTER | FP8MOE_PROLOGUE_BLOCK;
  const fp8moe_prologue_rule* r = fp8moe_cuda_plan_prologue_rule();
  EXPECT(r->max_tokens <= FP8MOE_PROLOGUE_MAX_TOKENS && r->max_rows <= FP8MOE_PROLOGUE_MAX_ROWS &&
             r->max_experts <= FP8MOE_PROLOGUE_MAX_EXPERTS && r->max_tokens >= 1 && r->why && r->why[0],
         "rule %d/%d/%d inside the kernel's limits", (int)r->max_tokens, (int)r->max_rows, (int)r->max_experts);
  EXPECT(r->block_max_tokens >= 1 && r->block_max_tokens <= FP8MOE_PROLOGUE_BLOCK_MAX_TOKENS &&
             r->block_max_tokens <= r->max_tokens && r->block_max_rows <= r->max_rows,
         "one-block bounds %d/%d inside the kernel's limit %d and the rule's", (int)r->block_max_tokens,
         (int)r->block_max_rows, FP8MOE_PROLOGUE_BLOCK_MAX_TOKENS);
  fp8moe_problem p = problem(1, 7168, 2048, 256, 8, 0x10000);
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_BLOCK, "deepseek-v3 T=1: one block");
  EXPECT(fp8moe_cuda_plan_prologue(&p, FP8MOE_PROLOGUE_CLUSTER) == FP8MOE_PROLOGUE_CLUSTER,
         "deepseek-v3 T=1, cluster only offered: cluster");
  EXPECT(fp8moe_cuda_plan_prologue(&p, FP8MOE_PROLOGUE_BLOCK) == FP8MOE_PROLOGUE_BLOCK,
         "deepseek-v3 T=1, the cluster does not fit: one block");
  EXPECT(fp8moe_cuda_plan_prologue(&p, FP8MOE_PROLOGUE_SEPARATE) == FP8MOE_PROLOGUE_SEPARATE,
         "context without the prologue: separate launches");
  p.T = r->block_max_tokens;
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_BLOCK, "T = %d (the one-block edge): one block",
         (int)p.T);
  p.T = r->block_max_tokens + 1;
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_CLUSTER, "T = %d: cluster", (int)p.T);
  EXPECT(fp8moe_cuda_plan_prologue(&p, FP8MOE_PROLOGUE_BLOCK) == FP8MOE_PROLOGUE_SEPARATE,
         "T = %d without the cluster: separate", (int)p.T);
  p = problem(r->block_max_tokens, 4096, 1024, 128, 16, 0x10000); /* T in bounds, T·K past them */
  EXPECT(p.T * p.K > r->block_max_rows && fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_CLUSTER,
         "T*K = %d past %d one-block rows: cluster", (int)(p.T * p.K), (int)r->block_max_rows);
  p = problem(1, 7168, 2048, 256, 8, 0x10000);
  p.T = 0;
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_SEPARATE, "T=0: nothing to launch");
  p.T = r->max_tokens;
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_CLUSTER, "T at the rule's edge (%d): cluster",
         (int)p.T);
  p.T = r->max_tokens + 1;
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_SEPARATE, "T past the rule: separate");
  p = problem(r->max_tokens, 4096, 1024, 64, 16, 0x10000);
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_SEPARATE, "T*K = %d past %d rows: separate",
         (int)(p.T * p.K), (int)r->max_rows);
  EXPECT(r->block_max_experts >= r->max_experts && r->block_max_experts <= FP8MOE_PROLOGUE_BLOCK_MAX_EXPERTS,
         "one-block experts %d inside the kernel's %d", (int)r->block_max_experts, FP8MOE_PROLOGUE_BLOCK_MAX_EXPERTS);
  p = problem(r->block_max_tokens, 7168, 2048, 384, 8, 0x10000);
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_BLOCK,
         "E = 384 past %d experts at T = %d: one block (16 experts per lane)", (int)r->max_experts, (int)p.T);
  EXPECT(fp8moe_cuda_plan_prologue(&p, FP8MOE_PROLOGUE_CLUSTER) == FP8MOE_PROLOGUE_SEPARATE,
         "E = 384, the cluster only: separate");
  p.routing_method = FP8MOE_ROUTING_PRECOMPUTED;
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_SEPARATE, "E = 384 PRECOMPUTED: separate");
  p.routing_method = FP8MOE_ROUTING_DEFAULT;
  p.T = r->block_max_tokens + 1;
  EXPECT(fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_SEPARATE, "E = 384 at T = %d: separate", (int)p.T);
  p = problem(1, 7168, 2048, r->block_max_experts + 1, 8, 0x10000);
  EXPECT(fp8moe_cuda_plan_prologue(&p, both | FP8MOE_PROLOGUE_TEAM) == FP8MOE_PROLOGUE_SEPARATE,
         "E = %d past the one-block variant's experts: separate", (int)p.E);
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  const uint32_t all = both | FP8MOE_PROLOGUE_TEAM;
  EXPECT(fp8moe_cuda_plan_context_prologue() == all, "default: both variants and the team offered");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12", 1);
  EXPECT(fp8moe_cuda_plan_context_prologue() == all, "FALLBACK=12: both variants and the team still offered");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "t", 1);
  EXPECT(fp8moe_cuda_plan_context_prologue() == both, "FALLBACK=t: both variants, no team");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "w", 1);
  EXPECT(fp8moe_cuda_plan_context_prologue() == both, "FALLBACK=w: both variants, no team (the previous sequences)");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "dc", 1);
  EXPECT(fp8moe_cuda_plan_context_prologue() == FP8MOE_PROLOGUE_CLUSTER, "FALLBACK=dc: the cluster only");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "dp", 1);
  EXPECT(fp8moe_cuda_plan_context_prologue() == FP8MOE_PROLOGUE_SEPARATE, "FALLBACK=dp: separate launches");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "cp", 1);
  EXPECT(fp8moe_cuda_plan_context_prologue() == FP8MOE_PROLOGUE_SEPARATE, "FALLBACK=cp: p wins, separate");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
}

/* The prologue's team rule (kernels/routing_team.cuh): T = 1 in the one-block variant with the team offered, E
 * within the team's bounds (by default only past route_token's max_experts; with FALLBACK 'a' from
 * team_any_min_experts), K ≤ 32, a logit-reading method, limited DeepSeek-V3 groups of exactly 32 experts; past
 * max_experts the one-block variant routes with route_token's 16 experts per lane where no team does. */
static void prologue_team_rule(void) {
  const uint32_t both = FP8MOE_PROLOGUE_CLUSTER | FP8MOE_PROLOGUE_BLOCK, all = both | FP8MOE_PROLOGUE_TEAM,
                 any = all | FP8MOE_PROLOGUE_TEAM_ANY;
  const fp8moe_prologue_rule* r = fp8moe_cuda_plan_prologue_rule();
  EXPECT(r->team_any_min_experts > 32 && r->team_any_min_experts <= r->team_min_experts &&
             r->team_min_experts > r->max_experts && r->team_max_experts >= r->team_min_experts &&
             r->team_max_experts <= FP8MOE_PROLOGUE_TEAM_MAX_EXPERTS,
         "team bounds %d (any: %d)..%d: more than one warp, past route_token's %d by default, inside the kernel's %d",
         (int)r->team_min_experts, (int)r->team_any_min_experts, (int)r->team_max_experts, (int)r->max_experts,
         FP8MOE_PROLOGUE_TEAM_MAX_EXPERTS);
  fp8moe_problem p = problem(1, 7168, 2048, 256, 8, 0x10000);
  p.routing_method = FP8MOE_ROUTING_DEEPSEEK_V3;
  p.n_group = 8;
  p.topk_group = 4;
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, all) == 0 && fp8moe_cuda_plan_prologue(&p, all) == FP8MOE_PROLOGUE_BLOCK,
         "deepseek-v3 T=1: one block, route_token");
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 1 && fp8moe_cuda_plan_prologue(&p, any) == FP8MOE_PROLOGUE_BLOCK,
         "deepseek-v3 T=1 with FALLBACK=a: one block, a team");
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, both | FP8MOE_PROLOGUE_TEAM_ANY) == 0 &&
             fp8moe_cuda_plan_prologue_team(&p, FP8MOE_PROLOGUE_TEAM | FP8MOE_PROLOGUE_TEAM_ANY) == 0,
         "no team where the team or the one-block variant is not offered");
  p.n_group = 16;
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 0 && fp8moe_cuda_plan_prologue(&p, any) == FP8MOE_PROLOGUE_BLOCK,
         "groups of 16 experts: one block, route_token");
  p.topk_group = 16;
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 1, "groups that do not limit (topk_group = n_group): a team");
  p.T = 2;
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 0, "T = 2: no team");
  p = problem(1, 7168, 2048, 384, 8, 0x10000); /* kimi-k2 */
  p.routing_method = FP8MOE_ROUTING_DEEPSEEK_V3;
  p.n_group = p.topk_group = 1;
  EXPECT(fp8moe_cuda_plan_prologue(&p, all) == FP8MOE_PROLOGUE_BLOCK, "kimi-k2 T=1 (E = 384): one block, a team");
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, both) == 0 && fp8moe_cuda_plan_prologue(&p, both) == FP8MOE_PROLOGUE_BLOCK,
         "E = 384 without the team: one block, route_token");
  p.weight_on_input = 1;
  EXPECT(fp8moe_cuda_plan_prologue(&p, any) == FP8MOE_PROLOGUE_BLOCK && fp8moe_cuda_plan_prologue_team(&p, any) == 1,
         "E = 384, weight on the input: one block, a team");
  p.weight_on_input = 0;
  p.n_group = 8;
  p.topk_group = 4;
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 0 && fp8moe_cuda_plan_prologue(&p, any) == FP8MOE_PROLOGUE_BLOCK,
         "E = 384 in groups of 48: one block, route_token");
  p.n_group = 12;
  EXPECT(fp8moe_cuda_plan_prologue(&p, all) == FP8MOE_PROLOGUE_BLOCK, "E = 384 in groups of 32: a team");
  p.T = 2;
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 0 && fp8moe_cuda_plan_prologue(&p, any) == FP8MOE_PROLOGUE_BLOCK,
         "E = 384 at T = 2: one block, route_token");
  p = problem(1, 4096, 1024, r->team_max_experts + 1, 8, 0x10000);
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 0 && fp8moe_cuda_plan_prologue(&p, any) == FP8MOE_PROLOGUE_SEPARATE,
         "E past the team: separate");
  p = problem(1, 4096, 1024, r->team_max_experts, 8, 0x10000);
  EXPECT(fp8moe_cuda_plan_prologue(&p, all) == FP8MOE_PROLOGUE_BLOCK, "E = %d (softmax over all): a team",
         (int)p.E);
  p.routing_method = FP8MOE_ROUTING_PRECOMPUTED;
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 0 && fp8moe_cuda_plan_prologue(&p, any) == FP8MOE_PROLOGUE_SEPARATE,
         "PRECOMPUTED: no team");
  p = problem(1, 4096, 14336, r->team_any_min_experts - 1, 2, 0x10000);
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 0 && fp8moe_cuda_plan_prologue(&p, any) == FP8MOE_PROLOGUE_BLOCK,
         "one warp of experts: one block, route_token");
  p = problem(1, 4096, 1024, 128, 33, 0x10000);
  EXPECT(fp8moe_cuda_plan_prologue_team(&p, any) == 0, "K = 33: no team");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "a", 1);
  EXPECT(fp8moe_cuda_plan_context_prologue() == any, "FALLBACK=a: the team at every E it routes");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "at", 1);
  EXPECT(fp8moe_cuda_plan_context_prologue() == both, "FALLBACK=at: t wins, no team");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
}

/* The chunked permutation's rule (kernels/permute_chunks.cu): the one-block kernel below the threshold, chunks
 * of whole 256-slot steps from it on, about target_chunks of them, fewer where the counters would pass the
 * cap; a pure function of T·K and E_local; "s" in FP8MOE_CUDA_GEMM_FALLBACK keeps the one block. */
static void permute_rule(void) {
  const fp8moe_permute_rule* r = fp8moe_cuda_plan_permute_rule();
  EXPECT(r->min_rows > FP8MOE_PROLOGUE_MAX_ROWS && r->target_chunks >= 1 && r->max_counters >= FP8MOE_PERMUTE_MAX_EXPERTS &&
             r->why && r->why[0],
         "rule %d/%d/%d", (int)r->min_rows, (int)r->target_chunks, (int)r->max_counters);
  fp8moe_problem p = problem(1, 7168, 2048, 256, 8, 0x10000);
  const int64_t below = (r->min_rows - 1) / 8;
  p.T = below;
  EXPECT(fp8moe_cuda_plan_permute_chunk(&p) == 0, "T·K %lld below %d: one block", (long long)(p.T * 8),
         (int)r->min_rows);
  p.T = 2048; /* deepseek-v3 T = 2048: T·K = 16,384 */
  int32_t ch = fp8moe_cuda_plan_permute_chunk(&p);
  EXPECT(ch == 256, "T·K 16,384 E 256: chunk %d, expected 256 (64 chunks)", (int)ch);
  p.T = 8192; /* T·K = 65,536 */
  ch = fp8moe_cuda_plan_permute_chunk(&p);
  EXPECT(ch == 512, "T·K 65,536 E 256: chunk %d, expected 512 (128 chunks)", (int)ch);
  p.E_local = 2048; /* the counters' cap binds: 65,536 × 2048 / 65,536 */
  ch = fp8moe_cuda_plan_permute_chunk(&p);
  EXPECT(ch == 2048, "T·K 65,536 E_local 2048: chunk %d, expected 2048 (32 chunks)", (int)ch);
  p.E_local = 256;
  /* Every T·K from the threshold: whole steps, below T·K, at most ~target_chunks chunks, counters near the cap. */
  const int32_t experts[] = {8, 160, 256, 384, 1024, 2048};
  for (size_t i = 0; i < sizeof experts / sizeof experts[0]; ++i)
    for (int64_t tk = r->min_rows; tk <= 2000000; tk = tk * 3 / 2 + 7) {
      fp8moe_problem q = problem(tk, 7168, 2048, experts[i], 1, 0x10000);
      const int32_t c = fp8moe_cuda_plan_permute_chunk(&q);
      const int64_t chunks = c > 0 ? (tk + c - 1) / c : 0;
      EXPECT(c > 0 && c % FP8MOE_PERMUTE_CHUNK_ALIGN == 0 && c < tk && chunks <= r->target_chunks &&
                 (chunks - 1) * experts[i] <= r->max_counters,
             "T·K %lld E_local %d: chunk %d (%lld chunks)", (long long)tk, (int)experts[i], (int)c, (long long)chunks);
    }
  p.T = 0;
  EXPECT(fp8moe_cuda_plan_permute_chunk(&p) == 0, "T = 0: one block");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  EXPECT(fp8moe_cuda_plan_context_permute_chunks() == 1, "default: chunked permutation allowed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12dp", 1);
  EXPECT(fp8moe_cuda_plan_context_permute_chunks() == 1, "FALLBACK=12dp: chunked permutation still allowed");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "s", 1);
  EXPECT(fp8moe_cuda_plan_context_permute_chunks() == 0, "FALLBACK=s: one block");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
}

/* The stream GEMMs' stream-K split (kernels/gemm/stream_split.h) for many (units, kblocks, grid): the CTA count
 * is within the grid and the split keeps stream_split_rules.h's rules (cover, inverse, segments, slots,
 * counters). */
static void stream_split(void) {
  const int64_t units[] = {1, 2, 7, 128, 224, 1000};
  const int64_t kblocks[] = {1, 2, 3, 16, 56};
  const int64_t grids[] = {1, 2, 3, 10, 132, 160};
  int bad = 0;
  for (size_t a = 0; a < sizeof units / sizeof units[0]; ++a)
    for (size_t b = 0; b < sizeof kblocks / sizeof kblocks[0]; ++b)
      for (size_t c = 0; c < sizeof grids / sizeof grids[0]; ++c) {
        const int64_t U = units[a], KB = kblocks[b], G = fp8moe_split_ctas(grids[c], U * KB);
        if (G < 1 || G > grids[c]) ++bad;
        bad += stream_split_rules_bad(U, KB, G);
      }
  EXPECT(bad == 0, "stream-K split: %d inconsistencies", bad);
  /* deepseek-v3 T = 1 GEMM1 on 132 CTAs: 8 tiles × 16 groups × 56 blocks, 54 or 55 blocks per CTA. */
  const int64_t W = 8 * 16 * 56;
  EXPECT(fp8moe_split_begin(1, W, 132) == 54 && fp8moe_split_begin(132, W, 132) == W &&
             fp8moe_split_cta_of(W - 1, W, 132) == 131,
         "deepseek-v3 T=1 GEMM1 split");
  /* Shown able to fail: a wrong inverse is caught. */
  EXPECT(fp8moe_split_cta_of(54, W, 132) == 1 && fp8moe_split_cta_of(53, W, 132) == 0, "cta_of at a boundary");
}

/* FALLBACK 'w' (read at context creation) restores the routing's previous instruction sequence and 'x' turns the
 * prologue's code warming off; no other letter does either (the A/B switches of docs/GPU.md "Routing's critical
 * path"). */
static void route_v1_switch(void) {
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  EXPECT(fp8moe_cuda_plan_context_route_v1() == 0 && fp8moe_cuda_plan_context_route_warm() == 1,
         "FALLBACK unset: the current routing sequence, code warming on");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "w", 1);
  EXPECT(fp8moe_cuda_plan_context_route_v1() == 1, "FALLBACK=w: the previous routing sequence");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12dpcsqruomnbfhtkjxy", 1);
  EXPECT(fp8moe_cuda_plan_context_route_v1() == 0, "FALLBACK=12dpcsqruomnbfhtkjxy: the current routing sequence");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "x", 1);
  EXPECT(fp8moe_cuda_plan_context_route_v1() == 0 && fp8moe_cuda_plan_context_route_warm() == 0,
         "FALLBACK=x: the current routing sequence without the prologue's code warming");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "w", 1);
  EXPECT(fp8moe_cuda_plan_context_route_warm() == 0, "FALLBACK=w: no code warming (the previous sequences had none)");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12dpcsqruomnbfhtkjy", 1);
  EXPECT(fp8moe_cuda_plan_context_route_warm() == 1, "FALLBACK=12dpcsqruomnbfhtkjy: code warming on");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "pw", 1);
  EXPECT(fp8moe_cuda_plan_context_route_v1() == 1 && fp8moe_cuda_plan_context_prologue() == FP8MOE_PROLOGUE_SEPARATE,
         "FALLBACK=pw: the previous routing sequence in the separate launches");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
}

typedef struct {
  int64_t T, H, I;
  int32_t E, K, kernel; /* the kernel each GEMM (the stream or register pair) / GEMM1 should take */
  const char* what;
} shape_case;

/* One TINY point of the size rule with the given requantization: the rule's pick for both GEMMs, and the stream
 * pair wherever the context offers it everywhere ("l") or the register pair's grids do not fit. */
static void tiny_case(const shape_case* c, int32_t requant, uint32_t ctx) {
  fp8moe_problem p = problem(c->T, c->H, c->I, c->E, c->K, 0x10000);
  p.requant = requant;
  EXPECT(fp8moe_cuda_plan_regime(&p) == FP8MOE_M_TINY, "%s: TINY (the rule's regime)", c->what);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &p, ctx) == c->kernel && kernel_of(FP8MOE_GEMM2, 90, &p, ctx) == c->kernel,
         "%s: kernel %d expected, got %d / %d", c->what, (int)c->kernel, (int)kernel_of(FP8MOE_GEMM1, 90, &p, ctx),
         (int)kernel_of(FP8MOE_GEMM2, 90, &p, ctx));
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &p, ctx | FP8MOE_PLAN_NEEDS_STREAM_PAYS) == FP8MOE_GEMM_STREAM_SM90,
         "%s: the stream pair where the context offers it everywhere (l)", c->what);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &p, ctx & ~FP8MOE_PLAN_NEEDS_DECODE_GRIDS) == FP8MOE_GEMM_STREAM_SM90,
         "%s: the stream pair where the register pair's grids do not fit", c->what);
}

/* The size rule (src/cuda/cuda_plan.c k_size_rule) on the bench's model shapes (T, H, I, E, K) and 132 SMs: the
 * rule's pick at the points measured on an H200 (docs/GPU.md "Size rules": each the faster kernel there or
 * within ~2 %), and each threshold's edge, read from the rule. */
static void size_rule(void) {
  const uint32_t ctx = FP8MOE_PLAN_NEEDS_TMA_ENC | FP8MOE_PLAN_NEEDS_SM90_GEMM1 | FP8MOE_PLAN_NEEDS_SM90_GEMM2 |
                       FP8MOE_PLAN_NEEDS_DECODE_GRIDS | FP8MOE_PLAN_NEEDS_STREAM | FP8MOE_PLAN_NEEDS_GEMM1_PAIRS;
  static const shape_case k[] = {
      {1, 7168, 2048, 256, 8, FP8MOE_GEMM_STREAM_SM90, "deepseek-v3 T=1"},
      {16, 7168, 2048, 256, 8, FP8MOE_GEMM_STREAM_SM90, "deepseek-v3 T=16"},
      {1, 7168, 2048, 384, 8, FP8MOE_GEMM_STREAM_SM90, "kimi-k2 T=1"},
      {1, 4096, 1536, 128, 8, FP8MOE_GEMM_STREAM_SM90, "qwen3-235b-a22b T=1 (128 units)"},
      {1, 4096, 1408, 128, 8, FP8MOE_GEMM_STREAM_SM90, "glm-4.5-air T=1"},
      {1, 2048, 768, 128, 8, FP8MOE_GEMM_DECODE, "qwen3-30b-a3b per-tensor T=1 (I = 768)"},
      {8, 2048, 768, 128, 8, FP8MOE_GEMM_DECODE, "qwen3-30b-a3b per-tensor T=8"},
      {1, 5120, 8192, 16, 1, FP8MOE_GEMM_DECODE, "llama4-scout T=1 (20 units)"},
      {4, 5120, 8192, 16, 1, FP8MOE_GEMM_DECODE, "llama4-scout T=4 (80 units < 99)"},
      {5, 5120, 8192, 16, 1, FP8MOE_GEMM_STREAM_SM90, "llama4-scout T=5 (100 units >= 99)"},
      {1, 4096, 14336, 8, 2, FP8MOE_GEMM_DECODE, "mixtral-8x7b T=1 (32 units)"},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) tiny_case(&k[i], FP8MOE_REQUANT_STATIC, ctx);
  /* 1×128 group requantization (FP8_BLOCK128): qwen3-30b-a3b (I = 768) takes the stream pair from 1.5× the SMs in
   * GEMM2 units (T = 4: 256 units; T = 2's 128 lose under skewed routing) */
  static const shape_case grouped[] = {
      {1, 2048, 768, 128, 8, FP8MOE_GEMM_DECODE, "qwen3-30b-a3b block T=1 (64 units)"},
      {2, 2048, 768, 128, 8, FP8MOE_GEMM_DECODE, "qwen3-30b-a3b block T=2 (128 units < 198)"},
      {4, 2048, 768, 128, 8, FP8MOE_GEMM_STREAM_SM90, "qwen3-30b-a3b block T=4 (256 units)"},
      {8, 2048, 768, 128, 8, FP8MOE_GEMM_STREAM_SM90, "qwen3-30b-a3b block T=8"},
      {1, 7168, 2048, 256, 8, FP8MOE_GEMM_STREAM_SM90, "deepseek-v3 block T=1"},
  };
  for (size_t i = 0; i < sizeof grouped / sizeof grouped[0]; ++i) tiny_case(&grouped[i], FP8MOE_REQUANT_GROUP, ctx);
  /* the I thresholds' edges, at 128 GEMM2 units: per-tensor (static) and grouped requantization */
  const fp8moe_size_rule* rule = fp8moe_cuda_plan_size_rule();
  const fp8moe_problem at_i = problem(1, 4096, rule->stream_min_I, 128, 8, 0x10000),
                       below_i = problem(1, 4096, rule->stream_min_I - 16, 128, 8, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &at_i, ctx) == FP8MOE_GEMM_STREAM_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &below_i, ctx) == FP8MOE_GEMM_DECODE,
         "I = %lld: the stream pair, I = %lld: the register pair", (long long)rule->stream_min_I,
         (long long)rule->stream_min_I - 16);
  /* grouped: T = 2 at H = 4096 gives 16 experts × 16 = 256 units (≥ 198 on 132 SMs) */
  fp8moe_problem at_ig = problem(2, 4096, rule->stream_min_I_group, 128, 8, 0x10000),
                 below_ig = problem(2, 4096, rule->stream_min_I_group - 16, 128, 8, 0x10000);
  at_ig.requant = below_ig.requant = FP8MOE_REQUANT_GROUP;
  EXPECT(rule->stream_min_I_group < rule->stream_min_I &&
             kernel_of(FP8MOE_GEMM1, 90, &at_ig, ctx) == FP8MOE_GEMM_STREAM_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &below_ig, ctx) == FP8MOE_GEMM_DECODE,
         "grouped requantization: I = %lld the stream pair, I = %lld the register pair",
         (long long)rule->stream_min_I_group, (long long)rule->stream_min_I_group - 16);
  /* grouped, below stream_min_I: the units' threshold is stream_units_per_4_sms_group quarters of the SMs
   * (qwen3-30b-a3b T = 4: 256 units pay on 170 SMs, not on 171) */
  fp8moe_problem q4 = problem(4, 2048, 768, 128, 8, 0x10000);
  q4.requant = FP8MOE_REQUANT_GROUP;
  const uint32_t pays = FP8MOE_PLAN_NEEDS_STREAM_PAYS;
  EXPECT(rule->stream_units_per_4_sms_group == 6 && (fp8moe_cuda_plan_offers(&q4, ctx, 170) & pays) &&
             !(fp8moe_cuda_plan_offers(&q4, ctx, 171) & pays),
         "qwen3-30b-a3b block T=4: 256 GEMM2 units pay on 170 SMs, not on 171");
  /* an expert-parallel shard counts its expected share of the routed rows: deepseek-v3 over 8 GPUs (E_local =
   * 32) at T = 1 has ~1 active local expert (28 units), at T = 8 ~8 (224 units) */
  fp8moe_problem shard1 = problem(1, 7168, 2048, 256, 8, 0x10000), shard8 = problem(8, 7168, 2048, 256, 8, 0x10000);
  shard1.E_local = shard8.E_local = 32;
  shard1.w13.shape[0] = shard1.w2.shape[0] = shard8.w13.shape[0] = shard8.w2.shape[0] = 32;
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &shard1, ctx) == FP8MOE_GEMM_DECODE &&
             kernel_of(FP8MOE_GEMM1, 90, &shard8, ctx) == FP8MOE_GEMM_STREAM_SM90,
         "deepseek-v3 shard of 32 experts: T=1 the register pair, T=8 the stream pair");
  /* the units' threshold scales with the SM count: 20 units are ≥ ¾ of 26 SMs, not of 27 */
  const fp8moe_problem scout = problem(1, 5120, 8192, 16, 1, 0x10000);
  const uint32_t o = FP8MOE_PLAN_NEEDS_STREAM_PAYS;
  EXPECT((fp8moe_cuda_plan_offers(&scout, ctx, 26) & o) && !(fp8moe_cuda_plan_offers(&scout, ctx, 27) & o),
         "llama4-scout T=1: 20 GEMM2 units pay on 26 SMs, not on 27");
  /* the 128-row GEMM1: from 256 rows per expert, or from 128 at H ≥ 7168 or I ≥ 8192 (the edges read from the rule);
   * below, the 64-row items (the alternating pair kernel by default) */
  static const shape_case g[] = {
      {1024, 7168, 2048, 256, 8, FP8MOE_GEMM_WGMMA_SM90, "deepseek-v3 T=1024 (32 rows per expert)"},
      {2048, 7168, 2048, 256, 8, FP8MOE_GEMM_WGMMA_SM90, "deepseek-v3 T=2048 (64)"},
      {4096, 7168, 2048, 256, 8, FP8MOE_GEMM_WGMMA128_SM90, "deepseek-v3 T=4096 (128)"},
      {512, 2048, 768, 128, 8, FP8MOE_GEMM_WGMMA_SM90, "qwen3-30b-a3b T=512 (32)"},
      {2048, 2048, 768, 128, 8, FP8MOE_GEMM_WGMMA_SM90, "qwen3-30b-a3b T=2048 (128)"},
      {4096, 2048, 768, 128, 8, FP8MOE_GEMM_WGMMA128_SM90, "qwen3-30b-a3b T=4096 (256)"},
      {1024, 4096, 1536, 128, 8, FP8MOE_GEMM_WGMMA_SM90, "qwen3-235b-a22b T=1024 (64)"},
      {256, 4096, 14336, 8, 2, FP8MOE_GEMM_WGMMA_SM90, "mixtral-8x7b T=256 (64)"},
      {512, 4096, 14336, 8, 2, FP8MOE_GEMM_WGMMA128_SM90, "mixtral-8x7b T=512 (128, I ≥ 8192)"},
      {512, 5120, 8192, 16, 1, FP8MOE_GEMM_WGMMA_SM90, "llama4-scout T=512 (32)"},
      {2048, 5120, 8192, 16, 1, FP8MOE_GEMM_WGMMA128_SM90, "llama4-scout T=2048 (128, I ≥ 8192)"},
      {2048, 4096, 1408, 128, 8, FP8MOE_GEMM_WGMMA_SM90, "glm-4.5-air T=2048 (128)"},
      {1024, 4096, 14336, 8, 2, FP8MOE_GEMM_WGMMA128_SM90, "mixtral-8x7b T=1024 (256)"},
      {768, 6144, 2048, 256, 8, FP8MOE_GEMM_WGMMA_SM90, "H = 6144, T=768 (24 rows per expert: MEDIUM, no 128-row row)"},
  };
  for (size_t i = 0; i < sizeof g / sizeof g[0]; ++i) {
    const fp8moe_problem p = problem(g[i].T, g[i].H, g[i].I, g[i].E, g[i].K, 0x10000);
    EXPECT(kernel_of(FP8MOE_GEMM1, 90, &p, ctx) == g[i].kernel, "%s: GEMM1 kernel %d expected, got %d", g[i].what,
           (int)g[i].kernel, (int)kernel_of(FP8MOE_GEMM1, 90, &p, ctx));
    EXPECT(fp8moe_cuda_plan_regime(&p) != FP8MOE_M_LARGE ||
               kernel_of(FP8MOE_GEMM1, 90, &p, ctx | FP8MOE_PLAN_NEEDS_PAIRS_PAY) == FP8MOE_GEMM_WGMMA128_SM90,
           "%s: the 128-row GEMM1 where the context offers it everywhere (l)", g[i].what);
  }
  const int64_t rows_edge = rule->pairs_min_rows * 128 / 8; /* T of pairs_min_rows rows per expert at E = 128, K = 8 */
  const int64_t wide_edge = rule->pairs_min_rows_wide * 256 / 8; /* the same for pairs_min_rows_wide at E = 256 */
  const fp8moe_problem at_rows = problem(rows_edge, 4096, 1536, 128, 8, 0x10000),
                       below_rows = problem(rows_edge - 1, 4096, 1536, 128, 8, 0x10000),
                       at_h = problem(wide_edge, rule->pairs_min_H, 2048, 256, 8, 0x10000),
                       below_h = problem(wide_edge, rule->pairs_min_H - 128, 2048, 256, 8, 0x10000),
                       below_wide = problem(wide_edge - 1, rule->pairs_min_H, 2048, 256, 8, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &at_rows, ctx) == FP8MOE_GEMM_WGMMA128_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &below_rows, ctx) == FP8MOE_GEMM_WGMMA_SM90,
         "%lld rows per expert: the 128-row GEMM1, just below: the 64-row one", (long long)rule->pairs_min_rows);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &at_h, ctx) == FP8MOE_GEMM_WGMMA128_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &below_h, ctx) == FP8MOE_GEMM_WGMMA_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &below_wide, ctx) == FP8MOE_GEMM_WGMMA_SM90,
         "%lld rows per expert: H = %lld the 128-row GEMM1, H = %lld the 64-row one, one row fewer too",
         (long long)rule->pairs_min_rows_wide, (long long)rule->pairs_min_H, (long long)rule->pairs_min_H - 128);
  /* the same edge by I (E = 16, K = 1: T = 128·16 rows), at H = 4096 < pairs_min_H */
  const int64_t i_edge = rule->pairs_min_rows_wide * 16;
  const fp8moe_problem at_iw = problem(i_edge, 4096, rule->pairs_min_I, 16, 1, 0x10000),
                       below_iw = problem(i_edge, 4096, rule->pairs_min_I - 128, 16, 1, 0x10000),
                       below_iw_rows = problem(i_edge - 1, 4096, rule->pairs_min_I, 16, 1, 0x10000);
  EXPECT(rule->pairs_min_H > 4096 && kernel_of(FP8MOE_GEMM1, 90, &at_iw, ctx) == FP8MOE_GEMM_WGMMA128_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &below_iw, ctx) == FP8MOE_GEMM_WGMMA_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &below_iw_rows, ctx) == FP8MOE_GEMM_WGMMA_SM90,
         "%lld rows per expert: I = %lld the 128-row GEMM1, I = %lld the 64-row one, one row fewer too",
         (long long)rule->pairs_min_rows_wide, (long long)rule->pairs_min_I, (long long)rule->pairs_min_I - 128);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "l", 1);
  const uint32_t l = fp8moe_cuda_plan_context_offers(1, 1, 1);
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  const uint32_t none = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(l == (none | FP8MOE_PLAN_NEEDS_STREAM_PAYS | FP8MOE_PLAN_NEEDS_PAIRS_PAY) && !(none & o) &&
             !(none & FP8MOE_PLAN_NEEDS_PAIRS_PAY),
         "FALLBACK=l: both size rules off (0x%x vs 0x%x)", (unsigned)l, (unsigned)none);
}

/* The pair list's bounds, the same for both 128-row GEMMs (offers includes their pair bit): max_tiles =
 * ceil(T·K/64) + E_local ≤ FP8MOE_GEMM1_PAIR_MAX_TILES takes the 128-row kernel, one tile past it and
 * E_local past FP8MOE_GEMM1_PAIR_MAX_EXPERTS (at LARGE, max_tiles within the cap) the 64-row wgmma kernel. */
static void pair_list_bounds(int32_t gemm, uint32_t offers) {
  const char* name = gemm == FP8MOE_GEMM1 ? "GEMM1" : "GEMM2";
  const int64_t fit_tk = (int64_t)(FP8MOE_GEMM1_PAIR_MAX_TILES - 256) * 64;
  const fp8moe_problem at = problem(fit_tk / 8, 7168, 2048, 256, 8, 0x10000);
  const fp8moe_problem past = problem(fit_tk / 8 + 8, 7168, 2048, 256, 8, 0x10000);
  EXPECT(kernel_of(gemm, 90, &at, offers) == FP8MOE_GEMM_WGMMA128_SM90, "max_tiles = the cap: 128-row %s", name);
  EXPECT(kernel_of(gemm, 90, &past, offers) == FP8MOE_GEMM_WGMMA_SM90, "max_tiles past the cap: the 64-row wgmma %s",
         name);
  fp8moe_problem many = problem(1, 1024, 512, 1, 1, 0x10000);
  many.E = many.E_local = FP8MOE_GEMM1_PAIR_MAX_EXPERTS + 1;
  many.T = 32 * (int64_t)many.E; /* LARGE, max_tiles ≤ the cap */
  many.w13.shape[0] = many.w2.shape[0] = many.E;
  EXPECT(fp8moe_cuda_plan_regime(&many) == FP8MOE_M_LARGE && kernel_of(gemm, 90, &many, offers) == FP8MOE_GEMM_WGMMA_SM90,
         "E_local = %d: the 64-row wgmma %s", (int)many.E_local, name);
}

/* The 128-row GEMM1 (the default at LARGE where the size rule says pairs pay; FALLBACK "v" switches it off): ahead of the
 * 64-row wgmma GEMM1 only where the context offers it (not "v") and the problem's pair list fits the kernel's shared memory, on LARGE only (MEDIUM
 * and the fallbacks keep their rows; GEMM2 unchanged); "1" still switches it off with the other sm90 GEMM1. */
static void gemm1_pairs(void) {
  const uint32_t all = FP8MOE_PLAN_NEEDS_TMA_ENC | FP8MOE_PLAN_NEEDS_SM90_GEMM1 | FP8MOE_PLAN_NEEDS_SM90_GEMM2;
  const uint32_t v = all | FP8MOE_PLAN_NEEDS_GEMM1_PAIRS;
  const fp8moe_problem big = problem(4096, 7168, 2048, 256, 8, 0x10000); /* 128 rows per expert: pairs pay */
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &big, all) == FP8MOE_GEMM_WGMMA_SM90, "no v: the 64-row wgmma GEMM1");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &big, v) == FP8MOE_GEMM_WGMMA128_SM90 &&
             kernel_of(FP8MOE_GEMM2, 90, &big, v) == FP8MOE_GEMM_WGMMA_SM90,
         "v: the 128-row GEMM1, GEMM2 unchanged");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &big, v & ~FP8MOE_PLAN_NEEDS_SM90_GEMM1) == FP8MOE_GEMM_MMA_SYNC,
         "v with GEMM1 switched off (1): mma.sync");
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &big, v & ~FP8MOE_PLAN_NEEDS_TMA_ENC) == FP8MOE_GEMM_MMA_SYNC,
         "v without the encoder: mma.sync");
  EXPECT(kernel_of(FP8MOE_GEMM1, 100, &big, v) == FP8MOE_GEMM_MMA_SYNC, "v on cc 10.0: mma.sync");
  const fp8moe_problem t512 = problem(512, 7168, 2048, 256, 8, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &t512, v) == FP8MOE_GEMM_WGMMA_SM90, "v at MEDIUM: the 64-row wgmma GEMM1");
  const fp8moe_problem mixtral = problem(8192, 4096, 14336, 8, 2, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &mixtral, v) == FP8MOE_GEMM_WGMMA128_SM90, "v mixtral-8x7b T=8192");
  pair_list_bounds(FP8MOE_GEMM1, v);
  fp8moe_problem wide_rows = big;
  wide_rows.hidden_is_fp8 = 1;
  wide_rows.hidden_states.strides[0] = (int64_t)1 << 32;
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &wide_rows, v) == FP8MOE_GEMM_WGMMA_SM90,
         "e4m3 hidden rows 2^32 bytes apart: the 64-row wgmma GEMM1 (32-bit row strides)");
  wide_rows.hidden_states.strides[0] = 7168;
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &wide_rows, v) == FP8MOE_GEMM_WGMMA128_SM90, "e4m3 hidden rows of H bytes");
  /* The switch letter. */
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  uint32_t o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT((o & FP8MOE_PLAN_NEEDS_GEMM1_PAIRS) && kernel_of(FP8MOE_GEMM1, 90, &big, o) == FP8MOE_GEMM_WGMMA128_SM90,
         "default: the 128-row GEMM1 at deepseek-v3 T=4096 (0x%x)", (unsigned)o);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "v", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(!(o & FP8MOE_PLAN_NEEDS_GEMM1_PAIRS) && (o & FP8MOE_PLAN_NEEDS_SM90_GEMM1) && (o & FP8MOE_PLAN_NEEDS_SM90_GEMM2),
         "FALLBACK=v: 0x%x", (unsigned)o);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &big, o) == FP8MOE_GEMM_WGMMA_SM90, "FALLBACK=v: the 64-row GEMM1 at T=4096");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "1", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(kernel_of(FP8MOE_GEMM1, 90, &big, o) == FP8MOE_GEMM_MMA_SYNC, "FALLBACK=1: mma.sync");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12dpcsqruomnkjwxyl", 1);
  EXPECT(fp8moe_cuda_plan_context_offers(1, 1, 1) & FP8MOE_PLAN_NEEDS_GEMM1_PAIRS, "the other letters: still offered");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  /* The grouped order over pairs keeps a group's A rows: half the tiles. */
  EXPECT(fp8moe_cuda_plan_sm90_pair_group(7168) == 9 && fp8moe_cuda_plan_sm90_pair_group(4096) == 16 &&
             fp8moe_cuda_plan_sm90_pair_group(1 << 20) == 4,
         "pair groups: deepseek-v3 %d, mixtral-8x7b %d", (int)fp8moe_cuda_plan_sm90_pair_group(7168),
         (int)fp8moe_cuda_plan_sm90_pair_group(4096));
  /* In 2-CTA clusters even (a unit is two consecutive pairs). */
  EXPECT(fp8moe_cuda_plan_sm90_cluster_pair_group(7168) == 8 && fp8moe_cuda_plan_sm90_cluster_pair_group(4096) == 16 &&
             fp8moe_cuda_plan_sm90_cluster_pair_group(1 << 20) == 4,
         "cluster pair groups: deepseek-v3 %d, mixtral-8x7b %d", (int)fp8moe_cuda_plan_sm90_cluster_pair_group(7168),
         (int)fp8moe_cuda_plan_sm90_cluster_pair_group(4096));
}

/* The 128-row GEMM2 (opt-in: FP8MOE_CUDA_GEMM_FALLBACK "i"; docs/GPU.md "128-row GEMM2 items"): taken ahead
 * of the 64-row wgmma GEMM2 only where the context offers it ("i") and the problem's pair list fits (the same
 * PAIR_TILES bound as the 128-row GEMM1), on LARGE and cc 9.0 only, with the 64-row GEMM2's own needs (W2
 * TMA-able, H % 256 = 0, the encoder); "2" still switches every sm90 GEMM2 off; GEMM1 is unaffected. */
static void gemm2_pairs(void) {
  const uint32_t all = FP8MOE_PLAN_NEEDS_TMA_ENC | FP8MOE_PLAN_NEEDS_SM90_GEMM1 | FP8MOE_PLAN_NEEDS_SM90_GEMM2 |
                       FP8MOE_PLAN_NEEDS_GEMM1_PAIRS;
  const uint32_t i = all | FP8MOE_PLAN_NEEDS_GEMM2_PAIRS;
  EXPECT(FP8MOE_PLAN_NEEDS_GEMM2_PAIRS == 4096u && FP8MOE_PLAN_NEEDS_GEMM2_PAIRS == 2 * FP8MOE_PLAN_NEEDS_PAIR_TILES,
         "GEMM2_PAIRS is the next bit after PAIR_TILES");
  int32_t n = 0, at = -1, at64 = -1;
  const fp8moe_plan_row* rows = fp8moe_cuda_plan_rows(&n);
  for (int32_t r = 0; r < n; ++r) {
    if (rows[r].gemm == FP8MOE_GEMM2 && rows[r].kernel == FP8MOE_GEMM_WGMMA128_SM90) {
      EXPECT(at < 0, "one 128-row GEMM2 row");
      at = r;
      EXPECT(rows[r].cc_min == 90 && rows[r].cc_max == 90 && rows[r].regime == FP8MOE_M_LARGE && rows[r].tile_m == 64,
             "the 128-row GEMM2 row: cc 9.0, LARGE, the layout's 64-row tiles");
      const uint32_t want = FP8MOE_PLAN_NEEDS_TMA_W2 | FP8MOE_PLAN_NEEDS_H256 | FP8MOE_PLAN_NEEDS_TMA_ENC |
                            FP8MOE_PLAN_NEEDS_SM90_GEMM2 | FP8MOE_PLAN_NEEDS_GEMM2_PAIRS | FP8MOE_PLAN_NEEDS_PAIR_TILES;
      EXPECT(rows[r].needs == want, "the 128-row GEMM2 row's needs 0x%x, expected 0x%x", (unsigned)rows[r].needs,
             (unsigned)want);
    }
    if (rows[r].gemm == FP8MOE_GEMM2 && rows[r].kernel == FP8MOE_GEMM_WGMMA_SM90 && rows[r].regime == FP8MOE_M_LARGE)
      at64 = r;
  }
  EXPECT(at >= 0 && at64 > at, "the 128-row GEMM2 row (%d) comes before the 64-row one (%d)", (int)at, (int)at64);
  const fp8moe_problem big = problem(4096, 7168, 2048, 256, 8, 0x10000); /* 128 rows per expert: pairs pay */
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &big, all) == FP8MOE_GEMM_WGMMA_SM90, "no i: the 64-row wgmma GEMM2");
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &big, i) == FP8MOE_GEMM_WGMMA128_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &big, i) == FP8MOE_GEMM_WGMMA128_SM90,
         "i: the 128-row GEMM2, GEMM1 unchanged");
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &big, i & ~FP8MOE_PLAN_NEEDS_SM90_GEMM2) == FP8MOE_GEMM_MMA_SYNC,
         "i with GEMM2 switched off (2): mma.sync");
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &big, i & ~FP8MOE_PLAN_NEEDS_TMA_ENC) == FP8MOE_GEMM_MMA_SYNC,
         "i without the encoder: mma.sync");
  EXPECT(kernel_of(FP8MOE_GEMM2, 100, &big, i) == FP8MOE_GEMM_MMA_SYNC &&
             kernel_of(FP8MOE_GEMM2, 89, &big, i) == FP8MOE_GEMM_MMA_SYNC,
         "i on cc 10.0 and 8.9: mma.sync");
  const fp8moe_problem t512 = problem(512, 7168, 2048, 256, 8, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &t512, i) == FP8MOE_GEMM_WGMMA_SM90, "i at MEDIUM: the 64-row wgmma GEMM2");
  const fp8moe_problem mixtral = problem(8192, 4096, 14336, 8, 2, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &mixtral, i) == FP8MOE_GEMM_WGMMA128_SM90, "i mixtral-8x7b T=8192");
  const fp8moe_problem h384 = problem(2048, 384, 2048, 16, 4, 0x10000);
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &h384, i) == FP8MOE_GEMM_MMA_SYNC, "i, H = 384: mma.sync (256-column items)");
  fp8moe_problem padded = big;
  padded.w2.strides[1] = 2048 + 8;
  padded.w2.strides[0] = 7168 * padded.w2.strides[1];
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &padded, i) == FP8MOE_GEMM_MMA_SYNC, "i, W2 not TMA-able: mma.sync");
  pair_list_bounds(FP8MOE_GEMM2, i); /* as the 128-row GEMM1's */
  /* The letter: offered only where FALLBACK names "i", and "i" changes nothing else. */
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  const uint32_t base = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(!(base & FP8MOE_PLAN_NEEDS_GEMM2_PAIRS) && kernel_of(FP8MOE_GEMM2, 90, &big, base) == FP8MOE_GEMM_WGMMA_SM90,
         "default: not offered, the 64-row GEMM2 (0x%x)", (unsigned)base);
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "i", 1);
  uint32_t o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(o == (base | FP8MOE_PLAN_NEEDS_GEMM2_PAIRS), "FALLBACK=i: only GEMM2_PAIRS added (0x%x)", (unsigned)o);
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &big, o) == FP8MOE_GEMM_WGMMA128_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &big, o) == FP8MOE_GEMM_WGMMA128_SM90,
         "FALLBACK=i: the 128-row GEMM2 (and the default 128-row GEMM1) at deepseek-v3 T=4096");
  EXPECT(variant_is(FP8MOE_SM90_LOOP_OVERLAP, FP8MOE_SM90_ORDER_GROUPED, FP8MOE_SM90_ORDER_GROUPED) &&
             clusters_are(0) && fp8moe_cuda_plan_context_permute_chunks() &&
             fp8moe_cuda_plan_context_route_v1() == 0 && fp8moe_cuda_plan_context_route_warm() == 1,
         "FALLBACK=i: the other switches untouched");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "i2", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &big, o) == FP8MOE_GEMM_MMA_SYNC, "FALLBACK=i2: 2 wins, mma.sync");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "iv", 1);
  o = fp8moe_cuda_plan_context_offers(1, 1, 1);
  EXPECT(kernel_of(FP8MOE_GEMM2, 90, &big, o) == FP8MOE_GEMM_WGMMA128_SM90 &&
             kernel_of(FP8MOE_GEMM1, 90, &big, o) == FP8MOE_GEMM_WGMMA_SM90,
         "FALLBACK=iv: the 128-row GEMM2 with the 64-row GEMM1");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "12dpcsqruomnkjwxyvl", 1);
  EXPECT(!(fp8moe_cuda_plan_context_offers(1, 1, 1) & FP8MOE_PLAN_NEEDS_GEMM2_PAIRS), "the other letters: not offered");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
}

/* The pair list of the 128-row GEMM1 (fp8moe_sm90_pair_start, as the kernel builds it): for tile lists of
 * experts with 0..5 tiles each, the pairs cover every tile exactly once, a pair's tiles belong to one expert,
 * an expert of n tiles gives ceil(n/2) pairs, only its last may be single (n odd), and the list stays within
 * fp8moe_sm90_max_pairs. */
static void pair_lists(void) {
  static int32_t te[512], first[64], covered[512];
  static uint32_t list[512];
  uint32_t seed = 12345u;
  for (int round = 0; round < 200; ++round) {
    const int32_t E = 1 + round % 64;
    int32_t tiles = 0, want_pairs = 0;
    for (int32_t e = 0; e < E; ++e) {
      seed = seed * 1664525u + 1013904223u;
      const int32_t n = round == 0 ? 1 : (int32_t)((seed >> 24) % 6); /* round 0: single-tile experts only */
      first[e] = tiles;
      for (int32_t j = 0; j < n; ++j) te[tiles++] = e;
      want_pairs += (n + 1) / 2;
    }
    int32_t pairs = 0;
    for (int32_t t = 0; t < tiles; ++t) {
      uint32_t entry = 0;
      if (fp8moe_sm90_pair_start(te, tiles, t, first[te[t]], &entry)) list[pairs++] = entry;
    }
    int ok = pairs == want_pairs;
    memset(covered, 0, sizeof covered);
    for (int32_t i = 0; i < pairs && ok; ++i) {
      const int32_t t0 = (int32_t)(list[i] & (FP8MOE_SM90_PAIR_TWO - 1u));
      const int two = (list[i] & FP8MOE_SM90_PAIR_TWO) != 0;
      ok = t0 < tiles && (i == 0 || t0 > (int32_t)(list[i - 1] & (FP8MOE_SM90_PAIR_TWO - 1u)));
      if (!ok) break;
      ++covered[t0];
      if (two) {
        ok = t0 + 1 < tiles && te[t0 + 1] == te[t0];
        if (ok) ++covered[t0 + 1];
      } else {
        /* single: the expert's last tile, with an odd tile count */
        ok = (t0 + 1 == tiles || te[t0 + 1] != te[t0]) && ((t0 - first[te[t0]]) % 2 == 0);
      }
    }
    for (int32_t t = 0; t < tiles && ok; ++t) ok = covered[t] == 1;
    /* the grids and the pair items' edge bound (fp8moe_sm90_aligned_ok) take this bound for the list's length */
    ok = ok && pairs <= fp8moe_sm90_max_pairs(tiles, E);
    EXPECT(ok, "round %d (E = %d, %d tiles): %d pairs, expected %d (at most fp8moe_sm90_max_pairs), or a tile covered "
           "other than once", round, (int)E, (int)tiles, (int)pairs, (int)want_pairs);
    if (!ok) break;
  }
}

/* The stream GEMMs' epilogue-warpgroup variant (fp8moe_cuda_plan_stream_handoff, docs/GPU.md "The epilogue
 * warpgroup") at the points measured on the H200 (132 SMs; GEMM1 units per tile I / 128, GEMM2 ⌈H / 256⌉) and
 * at its two edges. */
static void stream_handoff_rule(void) {
  static const struct {
    int64_t T, H, I;
    int32_t E, K;
    int32_t gemm1, gemm2;
    const char* what;
  } k[] = {
      {1, 7168, 2048, 256, 8, 0, 0, "deepseek-v3 T=1 (128 and 224 units: one segment per CTA)"},
      {2, 7168, 2048, 256, 8, 0, 1, "deepseek-v3 T=2 (256 GEMM1 units < 2 per CTA; 448 GEMM2 units)"},
      {8, 7168, 2048, 256, 8, 1, 1, "deepseek-v3 T=8"},
      {32, 7168, 2048, 256, 8, 1, 1, "deepseek-v3 T=32 (1 row per expert)"},
      {128, 7168, 2048, 256, 8, 0, 0, "deepseek-v3 T=128 (4 rows per expert)"},
      {8, 2048, 768, 128, 8, 1, 1, "qwen3-30b-a3b T=8"},
      {32, 2048, 768, 128, 8, 1, 1, "qwen3-30b-a3b T=32"},
      {128, 2048, 768, 128, 8, 0, 0, "qwen3-30b-a3b T=128 (8 rows per expert)"},
      {1, 4096, 1408, 128, 8, 0, 0, "glm-4.5-air T=1"},
      {32, 4096, 1408, 128, 8, 1, 1, "glm-4.5-air T=32"},
      {128, 4096, 1408, 128, 8, 0, 0, "glm-4.5-air T=128"},
      {8, 4096, 14336, 8, 2, 1, 0, "mixtral-8x7b T=8 (GEMM2: 128 units, one segment per CTA)"},
      {32, 4096, 14336, 8, 2, 0, 0, "mixtral-8x7b T=32 (8 rows per expert)"},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) {
    const fp8moe_problem p = problem(k[i].T, k[i].H, k[i].I, k[i].E, k[i].K, 0x10000);
    const int32_t h1 = fp8moe_cuda_plan_stream_handoff(&p, FP8MOE_GEMM1, 132);
    const int32_t h2 = fp8moe_cuda_plan_stream_handoff(&p, FP8MOE_GEMM2, 132);
    EXPECT(h1 == k[i].gemm1 && h2 == k[i].gemm2, "%s: handoff GEMM1 %d GEMM2 %d, expected %d %d", k[i].what, (int)h1,
           (int)h2, (int)k[i].gemm1, (int)k[i].gemm2);
  }
  /* the edges: rows per expert just below FP8MOE_STREAM_HANDOFF_ROWS, and FP8MOE_STREAM_HANDOFF_UNITS units per CTA */
  const int64_t rows_T = (int64_t)FP8MOE_STREAM_HANDOFF_ROWS * 128 / 8; /* T·K = ROWS·E at E = 128, K = 8 */
  const fp8moe_problem at_rows = problem(rows_T, 2048, 768, 128, 8, 0x10000),
                       below_rows = problem(rows_T - 1, 2048, 768, 128, 8, 0x10000);
  EXPECT(!fp8moe_cuda_plan_stream_handoff(&at_rows, FP8MOE_GEMM1, 132) &&
             fp8moe_cuda_plan_stream_handoff(&below_rows, FP8MOE_GEMM1, 132),
         "%d rows per expert: no handoff; one token fewer: the handoff", FP8MOE_STREAM_HANDOFF_ROWS);
  const fp8moe_problem q = problem(32, 2048, 256, 128, 8, 0x10000); /* 128 active experts, I = 256 */
  const int32_t edge = 256 / FP8MOE_STREAM_HANDOFF_UNITS; /* 2 GEMM1 units per tile × 128 tiles */
  EXPECT(fp8moe_cuda_plan_stream_handoff(&q, FP8MOE_GEMM1, edge) &&
             !fp8moe_cuda_plan_stream_handoff(&q, FP8MOE_GEMM1, edge + 1) &&
             !fp8moe_cuda_plan_stream_handoff(&q, FP8MOE_GEMM1, 0),
         "256 units: the handoff on %d CTAs, not on one more (nor on none)", (int)edge);
}

/* Units of two tiles (fp8moe_cuda_plan_stream_pairs): only where one expert can be routed more than a tile's
 * 16 rows, i.e. T > 16 (a token routes to an expert at most once), and on the shapes measured to gain. */
static void stream_pairs_rule(void) {
  static const struct {
    int64_t T, H, I;
    int32_t E, K;
    int32_t pairs;
    const char* what;
  } k[] = {
      {16, 7168, 2048, 256, 8, 0, "deepseek-v3 T=16 (no expert can hold more than one tile)"},
      {17, 7168, 2048, 256, 8, 1, "deepseek-v3 T=17"},
      {256, 7168, 2048, 256, 8, 1, "deepseek-v3 T=256 (measured -16 %)"},
      {512, 7168, 2048, 384, 8, 1, "kimi-k2 T=512 (measured -21 %)"},
      {128, 4096, 1408, 128, 8, 0, "glm-4.5-air T=128 (H = 4096: measured -5 %, but T=64 +16 %)"},
      {128, 4096, 1536, 128, 8, 0, "qwen3-235b-a22b T=128 (H = 4096: measured +2 %)"},
      {128, 2048, 768, 128, 8, 0, "qwen3-30b-a3b T=128 (H = 2048: measured +4 %, skewed +11-23 %)"},
      {32, 4096, 14336, 8, 2, 0, "mixtral-8x7b T=32 (8 experts: measured +2 %)"},
      {256, 5120, 8192, 16, 1, 0, "llama4-scout T=256 (16 experts: flat)"},
      {1, 7168, 2048, 256, 8, 0, "deepseek-v3 T=1"},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) {
    const fp8moe_problem p = problem(k[i].T, k[i].H, k[i].I, k[i].E, k[i].K, 0x10000);
    EXPECT(fp8moe_cuda_plan_stream_pairs(&p, 1) == k[i].pairs, "%s: units of two tiles %d, expected %d", k[i].what,
           (int)fp8moe_cuda_plan_stream_pairs(&p, 1), (int)k[i].pairs);
  }
  const fp8moe_problem h_below = problem(128, FP8MOE_STREAM_PAIRS_MIN_H - 128, 1408, 128, 8, 0x10000),
                       e_below = problem(128, FP8MOE_STREAM_PAIRS_MIN_H, 1408, FP8MOE_STREAM_PAIRS_MIN_EXPERTS - 1, 8,
                                         0x10000),
                       edge = problem(128, FP8MOE_STREAM_PAIRS_MIN_H, 1408, FP8MOE_STREAM_PAIRS_MIN_EXPERTS, 8,
                                      0x10000);
  EXPECT(!fp8moe_cuda_plan_stream_pairs(&h_below, 1) && !fp8moe_cuda_plan_stream_pairs(&e_below, 1) &&
             fp8moe_cuda_plan_stream_pairs(&edge, 1),
         "the edges: H %d and %d experts take the pairs, one block of H or one expert fewer do not",
         FP8MOE_STREAM_PAIRS_MIN_H, FP8MOE_STREAM_PAIRS_MIN_EXPERTS);
  const fp8moe_problem small = problem(37, 256, 256, 16, 4, 0x10000), at = problem(16, 256, 256, 16, 4, 0x10000);
  EXPECT(fp8moe_cuda_plan_stream_pairs(&small, 2) && !fp8moe_cuda_plan_stream_pairs(&at, 2) &&
             !fp8moe_cuda_plan_stream_pairs(&small, 0) && !fp8moe_cuda_plan_stream_pairs(&small, 1),
         "mode 2 (\"l\"): the pairs from T = 17 on any shape; mode 0 (\"b\"): never");
}

/* The expert-aligned split (fp8moe_cuda_plan_stream_align): only where an expert can hold more than one tile. */
static void stream_align_rule(void) {
  const fp8moe_problem at = problem(16, 5120, 8192, 16, 1, 0x10000), past = problem(17, 5120, 8192, 16, 1, 0x10000),
                       skewed = problem(128, 5120, 8192, 16, 1, 0x10000);
  EXPECT(!fp8moe_cuda_plan_stream_align(&at, 1) && fp8moe_cuda_plan_stream_align(&past, 1) &&
             fp8moe_cuda_plan_stream_align(&skewed, 1) && !fp8moe_cuda_plan_stream_align(&skewed, 0),
         "the expert-aligned split from T = 17 (an expert holds at most T rows), never in mode 0");
}

/* The split in rounds by the device's DRAM bandwidth per SM (fp8moe_cuda_plan_stream_rounds): an H100 SXM's
 * (2,619 MHz × 5,120 bits, 132 SMs: 25 GB/s per SM) keeps them, an H200's (3,201 MHz × 6,144 bits: 37 GB/s) not;
 * unknown bandwidth or SM count keeps them; modes 0 and 2 whatever the device. */
static void stream_rounds_rule(void) {
  const double h100 = 2.0 * 2619e6 * 5120 / 8, h200 = 2.0 * 3201e6 * 6144 / 8;
  EXPECT(fp8moe_cuda_plan_stream_rounds(1, 0, h100, 132) == 1 && fp8moe_cuda_plan_stream_rounds(1, 0, h200, 132) == 0 &&
             fp8moe_cuda_plan_stream_rounds(1, 0, 0.0, 132) == 1 && fp8moe_cuda_plan_stream_rounds(1, 0, h200, 0) == 1,
         "mode 1 (\"B\"): rounds up to 30 GB/s per SM (H100 SXM yes, H200 no), and where either figure is unknown");
  EXPECT(fp8moe_cuda_plan_stream_rounds(1, 0, 30e9 * 132, 132) == 1 &&
             fp8moe_cuda_plan_stream_rounds(1, 0, 30e9 * 132 + 1, 132) == 0,
         "mode 1: the bound itself keeps them");
  EXPECT(fp8moe_cuda_plan_stream_rounds(0, 0, h100, 132) == 0 && fp8moe_cuda_plan_stream_rounds(2, 0, h200, 132) == 1,
         "mode 0 (\"R\") never, mode 2 (the default) on every device");
  EXPECT(fp8moe_cuda_plan_stream_rounds(2, 1, h200, 132) == 2 && fp8moe_cuda_plan_stream_rounds(1, 1, h100, 132) == 2 &&
             fp8moe_cuda_plan_stream_rounds(1, 1, h200, 132) == 0 &&
             fp8moe_cuda_plan_stream_rounds(0, 1, h100, 132) == 0,
         "balanced by the rounds' rule (\"V\"): 2 wherever the mode allows rounds, 0 where it does not");
  EXPECT(fp8moe_cuda_plan_stream_rounds(2, 2, h200, 132) == 3 && fp8moe_cuda_plan_stream_rounds(0, 2, h200, 132) == 0,
         "balanced also by entries an expert (the default): 3, 0 where the mode allows no rounds");
}

/* The register GEMM1's dense variant (fp8moe_cuda_plan_decode_dense): where the expected items (active experts × I/128)
 * take fewer rounds on the dense variant's resident clusters and at most two. 45 and 60 clusters: an H100's. */
static void decode_dense_rule(void) {
  const fp8moe_problem q1 = problem(1, 2048, 768, 128, 8, 0x10000), q2 = problem(2, 2048, 768, 128, 8, 0x10000),
                       q4 = problem(4, 2048, 768, 128, 8, 0x10000), s1 = problem(1, 5120, 8192, 16, 1, 0x10000),
                       s2 = problem(2, 5120, 8192, 16, 1, 0x10000), s4 = problem(4, 5120, 8192, 16, 1, 0x10000);
  EXPECT(fp8moe_cuda_plan_decode_dense(&q1, 45, 60, 1) && fp8moe_cuda_plan_decode_dense(&q2, 45, 60, 1),
         "qwen3-30b-a3b T = 1 (48 items: 2 rounds → 1) and T = 2 (96: 3 → 2)");
  EXPECT(!fp8moe_cuda_plan_decode_dense(&q4, 45, 60, 1), "qwen3-30b-a3b T = 4 (192 items: 5 → 4 rounds, more than 2)");
  EXPECT(!fp8moe_cuda_plan_decode_dense(&s1, 45, 60, 1) && !fp8moe_cuda_plan_decode_dense(&s2, 45, 60, 1) &&
             !fp8moe_cuda_plan_decode_dense(&s4, 45, 60, 1),
         "llama4-scout T = 1, 2, 4 (64, 128, 256 items: 2, 3, 6 rounds → 2, 3, 5): the measured losses stay sparse");
  EXPECT(!fp8moe_cuda_plan_decode_dense(&q1, 48, 60, 1) && fp8moe_cuda_plan_decode_dense(&q1, 47, 48, 1),
         "the edge: 48 items on 48 clusters are one round already; on 47 → 48 they save one");
  EXPECT(fp8moe_cuda_plan_decode_dense(&s4, 45, 60, 2) && !fp8moe_cuda_plan_decode_dense(&q1, 45, 60, 0) &&
             !fp8moe_cuda_plan_decode_dense(&q1, 45, 0, 2) && !fp8moe_cuda_plan_decode_dense(&q1, 0, 60, 1),
         "mode 2 (\"D\") wherever the dense grid fits, mode 0 (\"E\") never, no dense grid or none at all: never");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
  EXPECT(fp8moe_cuda_plan_context_decode_dense() == 1, "FALLBACK unset: the rule");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "0123456789abcdefghijklmnopqrstuvwxyz", 1);
  EXPECT(fp8moe_cuda_plan_context_decode_dense() == 1, "no lowercase letter or digit moves it");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "kD", 1);
  EXPECT(fp8moe_cuda_plan_context_decode_dense() == 2, "FALLBACK=kD: everywhere");
  setenv("FP8MOE_CUDA_GEMM_FALLBACK", "DE", 1);
  EXPECT(fp8moe_cuda_plan_context_decode_dense() == 0, "FALLBACK=DE: never (\"E\" wins)");
  unsetenv("FP8MOE_CUDA_GEMM_FALLBACK");
}

/* The expert-sorted activations' rule (fp8moe_cuda_plan_sorted_x): K ≤ 2 and ≥ 256 rows per expert on average. */
static void sorted_x_rule(void) {
  const fp8moe_problem mixtral_512 = problem(512, 4096, 14336, 8, 2, 0x10000),
                       mixtral_1023 = problem(1023, 4096, 14336, 8, 2, 0x10000),
                       mixtral_1024 = problem(1024, 4096, 14336, 8, 2, 0x10000),
                       mixtral_2048 = problem(2048, 4096, 14336, 8, 2, 0x10000),
                       scout_2048 = problem(2048, 5120, 8192, 16, 1, 0x10000),
                       scout_4096 = problem(4096, 5120, 8192, 16, 1, 0x10000),
                       deepseek_8192 = problem(8192, 7168, 2048, 256, 8, 0x10000),
                       k4 = problem(8192, 4096, 4096, 64, 4, 0x10000);
  EXPECT(!fp8moe_cuda_plan_sorted_x(&mixtral_512, 1) && fp8moe_cuda_plan_sorted_x(&mixtral_1024, 1) &&
             fp8moe_cuda_plan_sorted_x(&mixtral_2048, 1) && !fp8moe_cuda_plan_sorted_x(&scout_2048, 1) &&
             fp8moe_cuda_plan_sorted_x(&scout_4096, 1),
         "the measured points: mixtral-8x7b from T = 1024 (256 rows per expert), llama4-scout from T = 4096, not below");
  EXPECT(!fp8moe_cuda_plan_sorted_x(&mixtral_1023, 1), "T·K = 2,046 < 256·E = 2,048: the threshold is the average's");
  EXPECT(!fp8moe_cuda_plan_sorted_x(&deepseek_8192, 1) && !fp8moe_cuda_plan_sorted_x(&k4, 1),
         "K > 2: never by the rule (K copies of every row)");
  EXPECT(fp8moe_cuda_plan_sorted_x(&deepseek_8192, 2) && fp8moe_cuda_plan_sorted_x(&mixtral_512, 2) &&
             !fp8moe_cuda_plan_sorted_x(&mixtral_2048, 0),
         "mode 2 (\"7\") everywhere, mode 0 (\"8\") never");
}

/* A workspace sized by query_workspace at a host's largest T serves every smaller T of the same layer (docs/DESIGN.md
 * "Workspace"): the layout's total never shrinks as T grows. Model shapes and the tests' small ones (H = I = 128, one
 * local expert: there the stream GEMMs' fixed partials outweigh everything else at large T), each format's
 * requantization, fp8 and bf16 hidden states, every T to 600 and then steps of ~7 % to 20,000. */
static void workspace_grows_with_T(void) {
  static const int64_t models[][5] = {
      {7168, 2048, 256, 8, 256}, {7168, 2048, 384, 8, 384}, {2048, 768, 128, 8, 128}, {4096, 14336, 8, 2, 8},
      {5120, 8192, 16, 1, 16},   {4096, 1408, 128, 8, 128}, {4096, 1536, 128, 8, 128}, {7168, 2048, 256, 8, 32},
  };
  static const int32_t small_E[] = {16, 32, 64, 128, 256, 384}, small_K[] = {1, 2, 4, 6, 8};
  int64_t shapes[8 + 6 * 5 * 2][5];
  size_t n = 0;
  for (size_t i = 0; i < 8; ++i) memcpy(shapes[n++], models[i], sizeof models[i]);
  for (size_t e = 0; e < 6; ++e)
    for (size_t k = 0; k < 5; ++k)
      for (int local = 0; local < 2; ++local) {
        const int64_t row[5] = {128, 128, small_E[e], small_K[k], local ? small_E[e] : 1};
        memcpy(shapes[n++], row, sizeof row);
      }
  static const int32_t formats[] = {FP8MOE_QUANT_FP8_PER_TENSOR, FP8MOE_QUANT_FP8_PER_TENSOR,
                                    FP8MOE_QUANT_FP8_BLOCK128};
  static const int32_t requants[] = {FP8MOE_REQUANT_STATIC, FP8MOE_REQUANT_TENSOR, FP8MOE_REQUANT_GROUP};
  long bad = 0, sorted_bad = 0, sorted_seen = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t f = 0; f < 3; ++f)
      for (int fp8_in = 0; fp8_in < 2; ++fp8_in) {
        size_t most = 0;
        int64_t most_at = 0;
        for (int64_t T = 1; T <= 20000; T = T < 600 ? T + 1 : T + T / 14) {
          fp8moe_problem p =
              problem(T, shapes[i][0], shapes[i][1], (int32_t)shapes[i][2], (int32_t)shapes[i][3], 0x10000);
          p.E_local = (int32_t)shapes[i][4];
          p.quant_format = formats[f];
          p.geom = *fp8moe_contract_quant_geometry(formats[f]);
          p.requant = requants[f];
          p.hidden_is_fp8 = fp8_in;
          fp8moe_cuda_layout l;
          fp8moe_cuda_layout_make(&p, 90, &l);
          /* the expert-sorted activations ("7") live in y's bytes, only where all rows fit them */
          const size_t y_bytes = (size_t)(T * shapes[i][3]) * (size_t)shapes[i][0] * 2;
          const int sorted_fits = !fp8_in && (size_t)l.rows * (size_t)shapes[i][0] <= y_bytes;
          if ((sorted_fits ? l.xq_sorted != l.y : l.xq_sorted != 0) && sorted_bad++ < 5)
            fprintf(stderr, "H %lld I %lld E %lld K %lld T %lld fp8 in %d: xq_sorted at %zu, y at %zu, rows %lld\n",
                    (long long)shapes[i][0], (long long)shapes[i][1], (long long)shapes[i][2], (long long)shapes[i][3],
                    (long long)T, fp8_in, l.xq_sorted, l.y, (long long)l.rows);
          sorted_seen += sorted_fits;
          if (l.total < most && bad++ < 5)
            fprintf(stderr, "H %lld I %lld E %lld K %lld E_local %lld format %d fp8 in %d: T = %lld needs %zu bytes, "
                    "T = %lld needed %zu\n", (long long)shapes[i][0], (long long)shapes[i][1], (long long)shapes[i][2],
                    (long long)shapes[i][3], (long long)shapes[i][4], (int)f, fp8_in, (long long)T, l.total,
                    (long long)most_at, most);
          if (l.total > most) {
            most = l.total;
            most_at = T;
          }
        }
      }
  EXPECT(bad == 0, "%ld (shape, T) points need less workspace than a smaller T of the same shape", bad);
  EXPECT(sorted_bad == 0 && sorted_seen > 1000,
         "expert-sorted activations in y's bytes exactly where rows·H fits them (%ld wrong, %ld points with room)",
         sorted_bad, sorted_seen);
}

int main(void) {
  workspace_grows_with_T();
  gemm1_pairs();
  stream_handoff_rule();
  stream_pairs_rule();
  stream_align_rule();
  stream_rounds_rule();
  decode_dense_rule();
  sorted_x_rule();
  size_rule();
  gemm2_pairs();
  pair_lists();
  route_v1_switch();
  permute_rule();
  stream_split();
  rows_are_consistent();
  picks();
  environment_switch();
  sm90_variants();
  sm90_group();
  sm90_item_orders();
  sm90_aligned_groups();
  prologue_rule();
  prologue_team_rule();
  return test_finish("test_cuda_plan", test_checks_run);
}
