/* gemm_tile_mma_sm89.cuh — the main loop shared by the grouped GEMMs (gemm1_mma_sm89.cu, gemm2_mma_sm89.cu): one CTA computes a
 * TM-row × 128-column tile (NB such column tiles at once: 2 for W13's gate and up rows) of A·Bᵀ where
 * A rows are e4m3 activations (gathered through row pointers) and B rows are e4m3 weight rows in their
 * natural layout (K contiguous). K advances 128 at a time (one scale block); with block scaling the fp32
 * partial sum of each 128-K step is promoted into the accumulator × (row scale · weight block scale).
 * TM is 64 (8 warps as 2 (M) × 4 (N), 32×32 per warp per column tile) or 16 for few rows per expert
 * (decode: 8 warps side by side, 16×16 each), chosen per call by the host (fp8moe_cuda_tile_m).
 * NOTES: m16n8k32 e4m3 MMA; shared rows padded to 144 bytes so the fragment loads of 8 rows × 4 threads
 * hit 32 distinct banks. */
#ifndef FP8MOE_KERNELS_GEMM_TILE_MMA_SM89_CUH
#define FP8MOE_KERNELS_GEMM_TILE_MMA_SM89_CUH

#include "common.cuh"

namespace fp8moe {

constexpr int kTileN = FP8MOE_GEMM_TILE_N;
constexpr int kTileK = FP8MOE_GEMM_TILE_K;
constexpr int kGemmThreads = 256;
constexpr int kRowPitch = kTileK + 16;
constexpr int kEpiPitch = kTileN + 4;

static_assert(kTileK == 128, "one K step is one 128-wide scale block");
static_assert(kTileN == 128, "warp layouts below assume 128-column tiles");

/* Warp layout of a TM-row tile: WARPS_M × WARPS_N warps, each MT m16 tiles × NT n8 tiles. */
template <int TM>
struct Layout {
  static_assert(TM == 16 || TM == 64, "tile heights: 16 (decode) or 64");
  static constexpr int MT = TM == 64 ? 2 : 1;
  static constexpr int WARPS_M = TM / (16 * MT);
  static constexpr int WARPS_N = (kGemmThreads / 32) / WARPS_M;
  static constexpr int NT = kTileN / (WARPS_N * 8);
};

/* NS stages of operand tiles in flight (cp.async groups); dynamic shared memory, so the launcher raises
 * the kernel's limit once (fp8moe_prepare_gemm*). */
template <int NB, int NS, int TM>
struct GemmSmem {
  union {
    struct {
      uint8_t a[NS][TM][kRowPitch];
      uint8_t b[NS][NB][kTileN][kRowPitch];
    } op;
    float epi[TM][kEpiPitch]; /* epilogue staging, reused after the main loop */
  } u;
  const uint8_t* arow[TM]; /* A row pointers, NULL for padding rows */
  float sa[NS][TM];        /* each stage's row scales (block scaling) */
  float sb[NS][NB];        /* each stage's weight block scales */
};

/* Per-thread accumulator of NB column tiles: [b][m16 tile][n8 tile][4]. */
template <int NB, int TM>
struct Acc {
  float v[NB][Layout<TM>::MT][Layout<TM>::NT][4];
};

/* Position of accumulator element c of (i, j) inside the TM×128 tile. */
template <int TM>
__device__ __forceinline__ int acc_row(int i, int c) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  return (warp / Layout<TM>::WARPS_N) * (16 * Layout<TM>::MT) + i * 16 + lane / 4 + (c >> 1) * 8;
}
template <int TM>
__device__ __forceinline__ int acc_col(int j, int c) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  return (warp % Layout<TM>::WARPS_N) * (8 * Layout<TM>::NT) + j * 8 + (lane % 4) * 2 + (c & 1);
}

/* Runs the K loop with NS − 1 K steps of operands in flight. brow[b] points at weight row n0 of column
 * tile b (row pitch w_stride_n bytes). row_scale(r, kb) and block_scale(b, kb) are read only when BLOCK. */
template <int NB, int NS, int TM, bool BLOCK, class RowScale, class BlockScale>
__device__ __forceinline__ void gemm_mainloop(GemmSmem<NB, NS, TM>& sm, const uint8_t* const (&brow)[NB],
                                              int64_t w_stride_n, int32_t kdim, RowScale row_scale,
                                              BlockScale block_scale, Acc<NB, TM>& acc) {
  static_assert(NS >= 2, "at least double buffering");
  using L = Layout<TM>;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / L::WARPS_N, wn = warp % L::WARPS_N, g = lane / 4, tq = lane % 4;
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int i = 0; i < L::MT; ++i)
#pragma unroll
      for (int j = 0; j < L::NT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc.v[b][i][j][c] = 0.0f;

  const int ksteps = kdim / kTileK;
  /* Issues the copies of K step kb into stage st (one cp.async group per call, empty past the end). */
  auto load_stage = [&](int kb, int st) {
    if (kb < ksteps) {
      const int64_t k0 = static_cast<int64_t>(kb) * kTileK;
#pragma unroll
      for (int q = 0; q < (TM * kTileK / 16 + kGemmThreads - 1) / kGemmThreads; ++q) {
        const int c = tid + q * kGemmThreads, r = c / 8, col = (c % 8) * 16;
        if (c >= TM * kTileK / 16) break;
        const uint8_t* src = sm.arow[r];
        cp_async_16(&sm.u.op.a[st][r][col], src ? src + k0 + col : brow[0], src ? 16 : 0);
      }
#pragma unroll
      for (int b = 0; b < NB; ++b)
#pragma unroll
        for (int q = 0; q < (kTileN * kTileK / 16) / kGemmThreads; ++q) {
          const int c = tid + q * kGemmThreads, r = c / 8, col = (c % 8) * 16;
          cp_async_16(&sm.u.op.b[st][b][r][col], brow[b] + r * w_stride_n + k0 + col, 16);
        }
    }
    cp_async_commit();
  };
  /* Block scales (any dtype and strides, so plain loads) of K step kb, as thread tid holds them. */
  auto scale_of = [&](int kb) -> float {
    if (tid < TM) return row_scale(tid, kb);
    return block_scale(tid - TM, kb);
  };
  const bool scale_thread = BLOCK && tid < TM + NB;
#pragma unroll
  for (int st = 0; st < NS - 1; ++st) {
    load_stage(st, st);
    if (scale_thread && st < ksteps) {
      const float v = scale_of(st);
      if (tid < TM) sm.sa[st][tid] = v; else sm.sb[st][tid - TM] = v;
    }
  }
  /* A scale is loaded into a register one iteration before it is stored to shared memory, so its load
   * latency hides behind a K step's MMAs instead of stalling the barrier (needs NS ≥ 3: one barrier sits
   * between the store and the first read). */
  static_assert(!BLOCK || NS >= 3, "scale prefetch distance");
  float held = 0.0f;
  int held_st = -1;

  for (int kb = 0; kb < ksteps; ++kb) {
    const int st = kb % NS;
    cp_async_wait_group<NS - 2>(); /* this thread's copies of step kb have landed */
    __syncthreads();               /* everyone's have, and step kb−1's stage is free again */
    load_stage(kb + NS - 1, (kb + NS - 1) % NS);
    if (scale_thread) {
      if (held_st >= 0) {
        if (tid < TM) sm.sa[held_st][tid] = held; else sm.sb[held_st][tid - TM] = held;
      }
      held_st = -1;
      if (kb + NS - 1 < ksteps) {
        held = scale_of(kb + NS - 1);
        held_st = (kb + NS - 1) % NS;
      }
    }

    float part[NB][L::MT][L::NT][4];
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int i = 0; i < L::MT; ++i)
#pragma unroll
        for (int j = 0; j < L::NT; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) part[b][i][j][c] = BLOCK ? 0.0f : acc.v[b][i][j][c];

#pragma unroll
    for (int ks = 0; ks < kTileK / 32; ++ks) {
      const int kk = ks * 32 + tq * 4;
      uint32_t af[L::MT][4];
#pragma unroll
      for (int i = 0; i < L::MT; ++i) {
        const int r = wm * (16 * L::MT) + i * 16 + g;
        af[i][0] = *reinterpret_cast<const uint32_t*>(&sm.u.op.a[st][r][kk]);
        af[i][1] = *reinterpret_cast<const uint32_t*>(&sm.u.op.a[st][r + 8][kk]);
        af[i][2] = *reinterpret_cast<const uint32_t*>(&sm.u.op.a[st][r][kk + 16]);
        af[i][3] = *reinterpret_cast<const uint32_t*>(&sm.u.op.a[st][r + 8][kk + 16]);
      }
#pragma unroll
      for (int b = 0; b < NB; ++b)
#pragma unroll
        for (int j = 0; j < L::NT; ++j) {
          const int n = wn * (8 * L::NT) + j * 8 + g;
          uint32_t bf[2];
          bf[0] = *reinterpret_cast<const uint32_t*>(&sm.u.op.b[st][b][n][kk]);
          bf[1] = *reinterpret_cast<const uint32_t*>(&sm.u.op.b[st][b][n][kk + 16]);
#pragma unroll
          for (int i = 0; i < L::MT; ++i) mma_e4m3_16832(part[b][i][j], af[i], bf);
        }
    }

#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int i = 0; i < L::MT; ++i)
#pragma unroll
        for (int j = 0; j < L::NT; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            if (BLOCK)
              acc.v[b][i][j][c] += part[b][i][j][c] * sm.sa[st][acc_row<TM>(i, c)] * sm.sb[st][b];
            else
              acc.v[b][i][j][c] = part[b][i][j][c];
          }
  }
  cp_async_wait_group<0>();
  __syncthreads(); /* the epilogue reuses the operand buffers */
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_GEMM_TILE_MMA_SM89_CUH */
