/* gemm_decode.cu — the grouped GEMMs for few rows per expert (16-row tiles, decode): weight streaming at
 * the HBM limit. At decode a tile holds 1–16 tokens, so the cost is reading the experts' weights once;
 * the kernels therefore
 *  - swap A and B: weight rows are the m16n8k32 MMA's M (16 rows per fragment), the tile's tokens its N
 *    (one n8 half, or two when the tile holds more than 8 real rows);
 *  - load the weights straight from global memory into A fragments, 16 bytes per thread per row
 *    (ld.global.nc.L1::no_allocate.v4), no shared-memory staging. The dot product is invariant under a
 *    permutation of K applied to both operands, so thread (g, tq) of a warp loads bytes [16·tq, 16·tq+16)
 *    of each 64-K chunk of weight rows g and g+8 and of token row g: bytes 8j..8j+7 feed MMA j of the chunk
 *    (a0/a2 = row g's words 2j/2j+1, a1/a3 = row g+8's, b0/b1 = the token's), which is exactly the
 *    fragment layout with K renumbered inside the chunk;
 *  - split K over the 4 warps of a 128-thread CTA (contiguous ranges of 128-K blocks, so block scales are
 *    promoted per block exactly as gemm_tile.cuh does: acc += (partial·s_act)·s_w), reduce the warps'
 *    partial sums in shared memory in warp order (deterministic), and run 3 CTAs per SM (GEMM1's dense
 *    variant 4) with up to 256 bytes of weight loads in flight per thread;
 *  - GEMM1: one CTA per 16 intermediate columns (16 gate + 16 up weight rows); 8 CTAs form a cluster that
 *    owns one 128-column group, so the fused 1×128 requantization takes the group's amax across the
 *    cluster through distributed shared memory. Other requantization modes are as gemm1.cu.
 *  - GEMM2: one CTA per 32 output columns of H.
 * Persistent grids walk (tile, column block) items, tile fastest (CTAs running together share the
 * weights of an expert that has several tiles in L2). Semantics per docs/DESIGN.md and gemm1.cu/gemm2.cu;
 * rows 8..15 of a tile with at most 8 real rows are padding and are skipped by both kernels. */
#include <cooperative_groups.h>

#include "common.cuh"
#include "gemm_decode.h"
#include "pdl.cuh"

namespace cg = cooperative_groups;

namespace fp8moe {
namespace {

constexpr int kDecThreads = 128;
constexpr int kDecWarps = kDecThreads / 32;
constexpr int kRows = FP8MOE_GEMM_TILE_M_SMALL; /* tokens per tile */
constexpr int kBlockK = FP8MOE_GEMM_TILE_K;     /* one scale block */
constexpr int kCluster = FP8MOE_DECODE_CLUSTER;
constexpr int kCols1 = FP8MOE_GEMM_TILE_N / kCluster; /* GEMM1 intermediate columns per CTA */
constexpr int kCols2 = 32;                            /* GEMM2 output columns per CTA */
constexpr int kMaxKb = FP8MOE_DECODE_MAX_KBLOCKS;
static_assert(kRows == 16, "two n8 halves per tile");
static_assert(kCols1 == 16, "one m16 fragment each of gate and up rows per CTA");

/* 16 bytes of weights, read once: not kept in L1 (L2 still serves an expert's other tiles). */
__device__ __forceinline__ uint4 ld_weights(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

/* 16 bytes of an activation row (written by an earlier kernel, read-only here), zeros for padding. */
__device__ __forceinline__ uint4 ld_act(const uint8_t* row, int64_t k) {
  return row ? __ldg(reinterpret_cast<const uint4*>(row + k)) : make_uint4(0u, 0u, 0u, 0u);
}

__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

template <int I>
__device__ __forceinline__ uint32_t word(const uint4& v) {
  return I == 0 ? v.x : I == 1 ? v.y : I == 2 ? v.z : v.w;
}

/* NBLK 128-K blocks from block kb: all loads first (NA·2·2·NBLK 16-byte weight loads per thread), then the
 * MMAs, block by block; BLOCK promotes each block's partial sum with its scales. wp[t][r] points at byte
 * 16·tq of weight row 16t + g + 8r; xp[h] at byte 16·tq of token row 8h + g (NULL: padding). */
template <int NA, int NH, int NBLK, bool BLOCK, class WScale, class XScale>
__device__ __forceinline__ void stream_step(const uint8_t* const (&wp)[NA][2], const uint8_t* const (&xp)[NH],
                                            int kb, WScale wscale, XScale xscale, float (&acc)[NA][NH][4]) {
  uint4 w[NBLK][2][NA][2];
  uint4 x[NBLK][2][NH];
#pragma unroll
  for (int b = 0; b < NBLK; ++b)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int64_t k = static_cast<int64_t>(kb + b) * kBlockK + c * 64;
#pragma unroll
      for (int t = 0; t < NA; ++t)
#pragma unroll
        for (int r = 0; r < 2; ++r) w[b][c][t][r] = ld_weights(wp[t][r] + k);
#pragma unroll
      for (int h = 0; h < NH; ++h) x[b][c][h] = ld_act(xp[h], k);
    }
  float sw[NBLK][NA], sx[NBLK][NH][2];
  if (BLOCK) {
#pragma unroll
    for (int b = 0; b < NBLK; ++b) {
#pragma unroll
      for (int t = 0; t < NA; ++t) sw[b][t] = wscale(t, kb + b);
#pragma unroll
      for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int j = 0; j < 2; ++j) sx[b][h][j] = xscale(h, j, kb + b);
    }
  }
#pragma unroll
  for (int b = 0; b < NBLK; ++b) {
    float part[NA][NH][4];
#pragma unroll
    for (int t = 0; t < NA; ++t)
#pragma unroll
      for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int q = 0; q < 4; ++q) part[t][h][q] = BLOCK ? 0.0f : acc[t][h][q];
#pragma unroll
    for (int c = 0; c < 2; ++c) {
#pragma unroll
      for (int t = 0; t < NA; ++t) {
        const uint32_t a0[4] = {word<0>(w[b][c][t][0]), word<0>(w[b][c][t][1]), word<1>(w[b][c][t][0]),
                                word<1>(w[b][c][t][1])};
        const uint32_t a1[4] = {word<2>(w[b][c][t][0]), word<2>(w[b][c][t][1]), word<3>(w[b][c][t][0]),
                                word<3>(w[b][c][t][1])};
#pragma unroll
        for (int h = 0; h < NH; ++h) {
          const uint32_t b0[2] = {word<0>(x[b][c][h]), word<1>(x[b][c][h])};
          const uint32_t b1[2] = {word<2>(x[b][c][h]), word<3>(x[b][c][h])};
          mma_e4m3_16832(part[t][h], a0, b0);
          mma_e4m3_16832(part[t][h], a1, b1);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < NA; ++t)
#pragma unroll
      for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (BLOCK)
            acc[t][h][q] += part[t][h][q] * sx[b][h][q & 1] * sw[b][t];
          else
            acc[t][h][q] = part[t][h][q];
        }
  }
}

/* This warp's share of K: 128-K blocks [kb0, kb1), two blocks per step when one n8 half is live (256 bytes
 * in flight per thread), one when two are (register budget). */
template <int NA, int NH, bool BLOCK, class WScale, class XScale>
__device__ __forceinline__ void stream_range(const uint8_t* const (&wp)[NA][2], const uint8_t* const (&xp)[NH],
                                             int kb0, int kb1, WScale wscale, XScale xscale,
                                             float (&acc)[NA][NH][4]) {
#pragma unroll
  for (int t = 0; t < NA; ++t)
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[t][h][q] = 0.0f;
  constexpr int NB = NH == 1 ? 2 : 1;
  int kb = kb0;
#pragma unroll 1
  for (; kb + NB <= kb1; kb += NB) stream_step<NA, NH, NB, BLOCK>(wp, xp, kb, wscale, xscale, acc);
  if (NB == 2 && kb < kb1) stream_step<NA, NH, 1, BLOCK>(wp, xp, kb, wscale, xscale, acc);
}

/* The warps' partial sums: red[warp][fragment][row of the fragment][token]. */
template <int NA>
struct Reduce {
  float v[kDecWarps][NA][16][kRows + 1];
};

template <int NA, int NH>
__device__ __forceinline__ void stash(Reduce<NA>& red, const float (&acc)[NA][NH][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
  for (int t = 0; t < NA; ++t)
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) red.v[warp][t][g + 8 * (q >> 1)][8 * h + 2 * tq + (q & 1)] = acc[t][h][q];
}

/* Σ over warps in warp order. */
template <int NA>
__device__ __forceinline__ float reduced(const Reduce<NA>& red, int t, int row, int token) {
  float s = red.v[0][t][row][token];
#pragma unroll
  for (int w = 1; w < kDecWarps; ++w) s += red.v[w][t][row][token];
  return s;
}

__device__ __forceinline__ int warp_kb0(int kblocks) { return (threadIdx.x / 32) * kblocks / kDecWarps; }
__device__ __forceinline__ int warp_kb1(int kblocks) { return (threadIdx.x / 32 + 1) * kblocks / kDecWarps; }

/* ------------------------------------------------------------------------------------------------ GEMM1 */
/* Block scales of the current item, staged once per item so the K loop reads them from shared memory
 * (a strided read of any dtype costs registers the weight loads need): act[token][kb], w[fragment][kb]. */
struct BlockScales {
  float act[kRows][kMaxKb + 1];
  float w[2][kMaxKb];
};

/* Stages the item's block scales; act(token, kb) and w(t, kb) read the tensors. stage_w false: the weight
 * scales are staged already (GEMM2's first item, before its wait) and only the tokens' are read. */
template <class ActScale, class WScale>
__device__ __forceinline__ void stage_scales(BlockScales& bs, int kblocks, ActScale act, WScale w,
                                             bool stage_w = true) {
  for (int i = threadIdx.x; i < (kRows + (stage_w ? 2 : 0)) * kblocks; i += kDecThreads) {
    const int row = i / kblocks, kb = i % kblocks;
    if (row < kRows) bs.act[row][kb] = act(row, kb);
    else bs.w[row - kRows][kb] = w(row - kRows, kb);
  }
}

struct Smem1 {
  Reduce<2> red;
  BlockScales bs;
  float amax[2][kRows]; /* this CTA's 16-column amax per token, double-buffered by item parity */
  int32_t tok[kRows];
  float tw[kRows];
};

template <int SCALE, int NH>
__device__ __forceinline__ void gemm1_item(const fp8moe_gemm1_args& a, Smem1& sm, cg::cluster_group& cl, int32_t e,
                                           int64_t row0, int32_t n0, int parity) {
  const int tid = threadIdx.x, lane = tid % 32, g = lane / 4, tq = lane % 4;
  const int32_t gate_row = (a.gate_first ? 0 : a.I) + n0, up_row = (a.gate_first ? a.I : 0) + n0;
  const int32_t nrow[2] = {gate_row, up_row};
  const uint8_t* we = a.w + static_cast<int64_t>(e) * a.w_stride_e;
  const uint8_t* wp[2][2];
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r) wp[t][r] = we + static_cast<int64_t>(nrow[t] + g + 8 * r) * a.w_stride_n + 16 * tq;
  const uint8_t* xp[NH];
#pragma unroll
  for (int h = 0; h < NH; ++h) {
    const int32_t t = sm.tok[8 * h + g];
    xp[h] = t >= 0 ? a.x + static_cast<int64_t>(t) * a.x_stride + 16 * tq : nullptr;
  }
  const int kblocks = a.H / kBlockK;
  if (SCALE == FP8MOE_SCALE_BLOCK) {
    stage_scales(
        sm.bs, kblocks,
        [&](int row, int kb) { return sm.tok[row] >= 0 ? kref_at(a.x_scale, sm.tok[row], kb) : 0.0f; },
        [&](int t, int kb) { return kref_at(a.w_scale, e, nrow[t] / kBlockK, kb); });
    __syncthreads();
  }
  auto wscale = [&](int t, int kb) { return sm.bs.w[t][kb]; };
  auto xscale = [&](int h, int j, int kb) { return sm.bs.act[8 * h + 2 * tq + j][kb]; };
  float acc[2][NH][4];
  stream_range<2, NH, SCALE == FP8MOE_SCALE_BLOCK>(wp, xp, warp_kb0(kblocks), warp_kb1(kblocks), wscale, xscale,
                                                   acc);
  stash<2, NH>(sm.red, acc);
  __syncthreads();

  /* Thread → token r, columns c, c+1 of this CTA's 16: dequantize, weight, activate. */
  const int r = tid / 8, c = (tid % 8) * 2;
  const bool live = r < 8 * NH;
  const int32_t t = sm.tok[r];
  float act[2] = {0.0f, 0.0f};
  if (live) {
    float sxw = 0.0f, sx = 0.0f;
    if (SCALE == FP8MOE_SCALE_TENSOR) sxw = kref_at(a.x_scale, 0) * kref_at(a.w_scale, e);
    if (SCALE == FP8MOE_SCALE_ROW) sx = t >= 0 ? kref_at(a.x_scale, t) : 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float h[2];
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        float v = reduced<2>(sm.red, b, c + j, r);
        if (SCALE == FP8MOE_SCALE_TENSOR) v = v * sxw;
        else if (SCALE == FP8MOE_SCALE_ROW) v = v * sx * kref_at(a.w_scale, e, nrow[b] + c + j);
        h[b] = a.token_weight ? v * sm.tw[r] : v;
      }
      act[j] = gated_activation(a.activation, h[0], h[1]);
    }
  }
  /* Amax of the token's 16 columns here: its 8 threads are consecutive lanes. */
  float m = fmaxf(finite_abs(act[0]), finite_abs(act[1]));
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const int64_t grow = row0 + r;
  if (a.requant == FP8MOE_REQ_FUSED_GROUP) {
    if (tid % 8 == 0) sm.amax[parity][r] = m;
    cl.sync(); /* every CTA of the group has its partial amax in shared memory */
    float gm = 0.0f;
#pragma unroll
    for (int q = 0; q < kCluster; ++q) gm = fmaxf(gm, cl.map_shared_rank(&sm.amax[parity][0], q)[r]);
    if (live) {
      const float s = dynamic_scale(gm);
      *reinterpret_cast<uint16_t*>(a.a2q + grow * a.I + n0 + c) = e4m3x2(act[0] / s, act[1] / s);
      if (cl.block_rank() == 0 && tid % 8 == 0) a.a2s[grow * (a.I / kBlockK) + n0 / kBlockK] = s;
    }
  } else if (a.requant == FP8MOE_REQ_FUSED_STATIC) {
    if (live) {
      const float s = kref_at(a.a2_static, 0);
      *reinterpret_cast<uint16_t*>(a.a2q + grow * a.I + n0 + c) = e4m3x2(act[0] / s, act[1] / s);
    }
  } else {
    if (live) *reinterpret_cast<float2*>(a.inter + grow * a.I + n0 + c) = make_float2(act[0], act[1]);
    if (a.requant == FP8MOE_REQ_DEFERRED_ROW) {
      if (live && tid % 8 == 0) atomic_amax(a.amax + grow, m);
    } else {
      m = warp_max(m);
      if (lane == 0) atomic_amax(a.amax, m);
    }
  }
}

/* CTAS: FP8MOE_DECODE_GEMM1_CTAS_PER_SM, or the dense variant FP8MOE_DECODE_GEMM1_DENSE_CTAS_PER_SM (128 registers,
 * more clusters resident: the plan's fp8moe_cuda_plan_decode_dense), which also balances its rounds: the fewest the
 * resident clusters allow, spread over just enough clusters that each runs that many items or one fewer (docs/GPU.md
 * "Denser decode GEMM1"). */
template <int SCALE, int CTAS>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kDecThreads, CTAS)
    gemm1_decode_kernel(fp8moe_gemm1_args a) {
  __shared__ Smem1 sm;
  cg::cluster_group cl = cg::this_cluster();
  wait_prior(); /* x, its scales and the expert-sorted rows come from the kernels before */
  allow_next(); /* GEMM2 may start prefetching its weights as CTAs here retire */
  const int32_t tiles = *a.num_tiles;
  int32_t items = tiles * (a.I / FP8MOE_GEMM_TILE_N); /* TINY rows: a few thousand at most */
  int32_t clusters = gridDim.x / kCluster;
  const int32_t first = blockIdx.x / kCluster;
  if (CTAS == FP8MOE_DECODE_GEMM1_DENSE_CTAS_PER_SM) {
    const int32_t rounds = (items + clusters - 1) / clusters;
    clusters = rounds > 0 ? (items + rounds - 1) / rounds : 1;
    if (first >= clusters) items = 0; /* an idle cluster: only the final cluster barrier */
  }
  const int rank = static_cast<int>(cl.block_rank());
  int parity = 0;
  for (int32_t w = first; w < items; w += clusters, parity ^= 1) {
    const int tile = static_cast<int>(w % tiles);
    const int32_t n0 = static_cast<int32_t>(w / tiles) * FP8MOE_GEMM_TILE_N + rank * kCols1;
    const int64_t row0 = static_cast<int64_t>(tile) * kRows;
    __syncthreads(); /* the previous item is done with tok, tw and red */
    int32_t slot = -1;
    const int32_t e = a.tile_expert[tile]; /* loaded beside the slots: one round trip, not two */
    if (threadIdx.x < kRows) {
      slot = a.sorted_slots[row0 + threadIdx.x];
      const int32_t t = slot >= 0 ? slot / a.K : -1;
      sm.tok[threadIdx.x] = t;
      sm.tw[threadIdx.x] = (a.token_weight && slot >= 0) ? a.token_weight[slot] : 1.0f;
    }
    const int real = __syncthreads_count(slot >= 0);
    if (real > 8)
      gemm1_item<SCALE, 2>(a, sm, cl, e, row0, n0, parity);
    else
      gemm1_item<SCALE, 1>(a, sm, cl, e, row0, n0, parity);
  }
  cl.sync(); /* no CTA leaves while another may still read its amax */
}

/* ------------------------------------------------------------------------------------------------ GEMM2 */
struct Smem2 {
  Reduce<2> red;
  BlockScales bs;
  int32_t slot[kRows]; /* the item's sorted slots: its output rows (−1: padding) */
};

/* GEMM2's item w: its tile, first output column and first expert-sorted row. */
struct Item2 {
  int tile;
  int32_t n0;
  int64_t row0;
};
__device__ __forceinline__ Item2 item2_at(int32_t w, int32_t tiles) {
  Item2 it;
  it.tile = static_cast<int>(w % tiles);
  it.n0 = static_cast<int32_t>(w / tiles) * kCols2;
  it.row0 = static_cast<int64_t>(it.tile) * kRows;
  return it;
}

/* The item's slots into shared memory and its expert, loaded together (one round trip, not two); returns the
 * expert and sets *real to the tile's real rows. LD reads an int32. */
template <class Ld>
__device__ __forceinline__ int32_t look_up2(Smem2& sm, const int32_t* tile_expert, const int32_t* sorted_slots,
                                            const Item2& it, Ld ld, int* real) {
  int32_t slot = -1;
  if (threadIdx.x < kRows) slot = ld(sorted_slots + it.row0 + threadIdx.x);
  const int32_t e = ld(tile_expert + it.tile);
  if (threadIdx.x < kRows) sm.slot[threadIdx.x] = slot;
  *real = __syncthreads_count(slot >= 0);
  return e;
}

/* Into L2: each warp's first K step of the item's weight rows (as gemm2_item will load them) and, with block
 * scales, the line of the item's weight-block scales. */
template <int SCALE>
__device__ __forceinline__ void prefetch_item2(const fp8moe_gemm2_args& a, int32_t e, int32_t n0) {
  const uint8_t* we = a.w + static_cast<int64_t>(e) * a.w_stride_e;
  const int kb0 = warp_kb0(a.I / kBlockK), kb1 = warp_kb1(a.I / kBlockK);
  const int lines = (kb1 - kb0 < 2 ? kb1 - kb0 : 2) * (kBlockK / 128); /* 128-byte lines per weight row */
#pragma unroll 1
  for (int i = threadIdx.x % 32; i < kCols2 * lines; i += 32)
    prefetch_l2(we + (n0 + i / lines) * a.w_stride_n + static_cast<int64_t>(kb0) * kBlockK + (i % lines) * 128);
  if (SCALE == FP8MOE_SCALE_BLOCK && threadIdx.x % 32 == 0) prefetch_l2(kref_addr(a.w_scale, e, n0 / kBlockK, kb0));
}

/* GEMM2's weight-block scale of output rows n0 + 16·t.. of expert e at 128-K block kb. */
__device__ __forceinline__ float w2_block_scale(const fp8moe_gemm2_args& a, int32_t e, int32_t n0, int t, int kb) {
  return kref_at(a.w_scale, e, (n0 + 16 * t) / kBlockK, kb);
}

/* stage_w false: the item's weight-block scales are in sm.bs.w already. */
template <int SCALE, int NH>
__device__ __forceinline__ void gemm2_item(const fp8moe_gemm2_args& a, Smem2& sm, int32_t e, int64_t row0,
                                           int32_t n0, bool stage_w) {
  const int tid = threadIdx.x, lane = tid % 32, g = lane / 4, tq = lane % 4;
  const uint8_t* we = a.w + static_cast<int64_t>(e) * a.w_stride_e;
  const uint8_t* wp[2][2];
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r) wp[t][r] = we + static_cast<int64_t>(n0 + 16 * t + g + 8 * r) * a.w_stride_n + 16 * tq;
  const uint8_t* xp[NH];
#pragma unroll
  for (int h = 0; h < NH; ++h) xp[h] = a.a2q + (row0 + 8 * h + g) * a.I + 16 * tq;
  const int kblocks = a.I / kBlockK;
  if (SCALE == FP8MOE_SCALE_BLOCK) {
    stage_scales(
        sm.bs, kblocks, [&](int row, int kb) { return row < 8 * NH ? kref_at(a.a2_scale, row0 + row, kb) : 0.0f; },
        [&](int t, int kb) { return w2_block_scale(a, e, n0, t, kb); }, stage_w);
    __syncthreads();
  }
  auto wscale = [&](int t, int kb) { return sm.bs.w[t][kb]; };
  auto xscale = [&](int h, int j, int kb) { return sm.bs.act[8 * h + 2 * tq + j][kb]; };
  float acc[2][NH][4];
  stream_range<2, NH, SCALE == FP8MOE_SCALE_BLOCK>(wp, xp, warp_kb0(kblocks), warp_kb1(kblocks), wscale, xscale,
                                                   acc);
  stash<2, NH>(sm.red, acc);
  __syncthreads();

  /* Thread → token r, 4 consecutive output columns. */
  const int r = tid / 8, c = (tid % 8) * 4;
  if (r >= 8 * NH) return;
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = reduced<2>(sm.red, (c + j) / 16, (c + j) % 16, r);
  if (SCALE == FP8MOE_SCALE_TENSOR) {
    const float st = kref_at(a.a2_scale, 0) * kref_at(a.w_scale, e);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] *= st;
  } else if (SCALE == FP8MOE_SCALE_ROW) {
    const float sr = kref_at(a.a2_scale, row0 + r);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = v[j] * sr * kref_at(a.w_scale, e, n0 + c + j);
  }
  const int32_t slot = sm.slot[r]; /* y is by slot; padding rows are not stored */
  if (slot >= 0)
    *reinterpret_cast<uint2*>(a.y + static_cast<int64_t>(slot) * a.H + n0 + c) =
        make_uint2(y_bf16x2(v[0], v[1]), y_bf16x2(v[2], v[3]));
}

template <int SCALE>
__global__ void __launch_bounds__(kDecThreads, FP8MOE_DECODE_GEMM2_CTAS_PER_SM)
    gemm2_decode_kernel(fp8moe_gemm2_args a, const int32_t* sorted_slots) {
  __shared__ Smem2 sm;
  /* The combine may launch as soon as every CTA here has started, not only after their lookups below: its
   * early reads (the routing's and the permutation's outputs) completed before any GEMM1 CTA passed its wait,
   * and this grid started only after every GEMM1 CTA had (the exception kernels/pdl.cuh names). */
  allow_next();
  /* Before its wait (overlapping GEMM1's tail) the CTA does all of its first item that reads no GEMM1 output:
   * the item's slots and expert, its weight-block scales into shared memory, and an L2 prefetch of its
   * weights' first K step, then the same prefetch for its second item. The permutation's outputs it reads are
   * final by then: permute.cu completed before any GEMM1 CTA passed its wait, and this grid starts only after
   * every GEMM1 CTA let it (GEMM1's allow_next follows its wait_prior, kernels/pdl.cuh); they are read
   * through L2 (ld.relaxed.gpu), never from a stale L1 line (docs/GPU.md "GEMM2's first item before its wait"). */
  const int32_t tiles = ld_relaxed(a.num_tiles);
  const int32_t items = tiles * (a.H / kCols2); /* TINY rows: a few thousand at most */
  const int32_t cta = static_cast<int32_t>(blockIdx.x), ctas = static_cast<int32_t>(gridDim.x);
  int32_t first_e = 0;
  int first_real = 0;
  if (cta < items) {
    const Item2 it = item2_at(cta, tiles);
    first_e = look_up2(sm, a.tile_expert, sorted_slots, it, ld_relaxed, &first_real);
    prefetch_item2<SCALE>(a, first_e, it.n0);
    if (cta + ctas < items) {
      const Item2 next = item2_at(cta + ctas, tiles);
      prefetch_item2<SCALE>(a, ld_relaxed(a.tile_expert + next.tile), next.n0);
    }
    if (SCALE == FP8MOE_SCALE_BLOCK) {
      const int kblocks = a.I / kBlockK;
#pragma unroll 1
      for (int i = threadIdx.x; i < 2 * kblocks; i += kDecThreads)
        sm.bs.w[i / kblocks][i % kblocks] = w2_block_scale(a, first_e, it.n0, i / kblocks, i % kblocks);
    }
  }
  wait_prior(); /* a2q and its scales come from GEMM1 (or the row quantization) */
  auto ld = [](const int32_t* p) { return *p; };
  bool looked_up = true; /* the first item was, before the wait */
  int32_t e = first_e;
  int real = first_real;
  for (int32_t w = cta; w < items; w += ctas, looked_up = false) {
    const Item2 it = item2_at(w, tiles);
    if (!looked_up) {
      __syncthreads(); /* the previous item is done with red and slot */
      e = look_up2(sm, a.tile_expert, sorted_slots, it, ld, &real);
    }
    if (real > 8)
      gemm2_item<SCALE, 2>(a, sm, e, it.row0, it.n0, !looked_up);
    else
      gemm2_item<SCALE, 1>(a, sm, e, it.row0, it.n0, !looked_up);
  }
}

/* GEMM1's instance for a scale mode at CTAS CTAs per SM: the one list the launcher and the grid sizing share. */
using Gemm1Kernel = void (*)(fp8moe_gemm1_args);
template <int CTAS>
Gemm1Kernel gemm1_kernel(int32_t scale_mode) {
  if (scale_mode == FP8MOE_SCALE_BLOCK) return gemm1_decode_kernel<FP8MOE_SCALE_BLOCK, CTAS>;
  if (scale_mode == FP8MOE_SCALE_ROW) return gemm1_decode_kernel<FP8MOE_SCALE_ROW, CTAS>;
  return gemm1_decode_kernel<FP8MOE_SCALE_TENSOR, CTAS>;
}

/* GEMM2's instance for a scale mode: likewise shared by its launcher and the grid sizing. */
using Gemm2Kernel = void (*)(fp8moe_gemm2_args, const int32_t*);
Gemm2Kernel gemm2_kernel(int32_t scale_mode) {
  if (scale_mode == FP8MOE_SCALE_BLOCK) return gemm2_decode_kernel<FP8MOE_SCALE_BLOCK>;
  if (scale_mode == FP8MOE_SCALE_ROW) return gemm2_decode_kernel<FP8MOE_SCALE_ROW>;
  return gemm2_decode_kernel<FP8MOE_SCALE_TENSOR>;
}

/* The scale modes the grid sizing queries (each instance's resources differ). */
constexpr int32_t kScaleModes[] = {FP8MOE_SCALE_TENSOR, FP8MOE_SCALE_BLOCK, FP8MOE_SCALE_ROW};

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_gemm1_decode(const fp8moe_gemm1_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->max_tiles == 0) return cudaSuccess;
  const int64_t most = static_cast<int64_t>(a->max_tiles) * (a->I / FP8MOE_GEMM_TILE_N) * kCluster;
  int64_t ctas = a->max_ctas / kCluster * kCluster;
  if (ctas < kCluster) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(most < ctas ? most : ctas));
  const Gemm1Kernel kernel = a->decode_dense ? gemm1_kernel<FP8MOE_DECODE_GEMM1_DENSE_CTAS_PER_SM>(a->scale_mode)
                                              : gemm1_kernel<FP8MOE_DECODE_GEMM1_CTAS_PER_SM>(a->scale_mode);
  const cudaError_t e = launch_pdl(kernel, grid, dim3(kDecThreads), 0, stream, *a);
  return static_cast<int>(e);
}

extern "C" int fp8moe_launch_gemm2_decode(const fp8moe_gemm2_args* a, const int32_t* sorted_slots,
                                          cudaStream_t stream) {
  using namespace fp8moe;
  if (a->max_tiles == 0) return cudaSuccess;
  const int64_t most = static_cast<int64_t>(a->max_tiles) * (a->H / kCols2);
  const int64_t ctas = a->max_ctas > 0 ? a->max_ctas : 1;
  const dim3 grid(static_cast<unsigned>(most < ctas ? most : ctas));
  const Gemm2Kernel kernel = gemm2_kernel(a->scale_mode);
  const cudaError_t e = launch_pdl(kernel, grid, dim3(kDecThreads), 0, stream, *a, sorted_slots);
  return static_cast<int>(e);
}

namespace fp8moe {
namespace {

/* The most clusters of 8 of one GEMM1 variant that can be co-resident on the current device (the least over the
 * scale modes); -1 when a query fails. */
template <int CTAS>
int resident_gemm1_clusters(int32_t sm_count) {
  int clusters = -1;
  for (const int32_t mode : kScaleModes) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(kCluster * sm_count));
    cfg.blockDim = dim3(kDecThreads);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, gemm1_kernel<CTAS>(mode), &cfg) != cudaSuccess) {
      (void)cudaGetLastError(); /* not an error of the context: the decode kernels just stay unused */
      return -1;
    }
    if (clusters < 0 || n < clusters) clusters = n;
  }
  return clusters;
}

}  // namespace
}  // namespace fp8moe

/* The decode kernels' grids on the current device: every CTA resident at once (they are persistent; a
 * cluster that could not start until others finish would run its items after them, as a tail). GEMM1 (both
 * variants): the most clusters of 8 that can be co-resident, × 8; GEMM2: SMs × resident CTAs per SM. 0 when a
 * query fails or nothing fits (the host then keeps the tile GEMMs; a failed query does not fail the context). */
extern "C" int fp8moe_prepare_gemm_decode(int32_t sm_count, int32_t* ctas1, int32_t* ctas1_dense, int32_t* ctas2) {
  using namespace fp8moe;
  *ctas1 = 0;
  *ctas1_dense = 0;
  *ctas2 = 0;
  const int clusters = resident_gemm1_clusters<FP8MOE_DECODE_GEMM1_CTAS_PER_SM>(sm_count);
  const int dense = resident_gemm1_clusters<FP8MOE_DECODE_GEMM1_DENSE_CTAS_PER_SM>(sm_count);
  if (clusters < 0 || dense < 0) return cudaSuccess;
  int per_sm = -1;
  for (const int32_t mode : kScaleModes) {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemm2_kernel(mode), kDecThreads, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      return cudaSuccess;
    }
    if (per_sm < 0 || n < per_sm) per_sm = n;
  }
  *ctas1 = clusters > 0 ? clusters * kCluster : 0;
  *ctas1_dense = dense > 0 ? dense * kCluster : 0;
  *ctas2 = per_sm > 0 ? per_sm * sm_count : 0;
  return cudaSuccess;
}
