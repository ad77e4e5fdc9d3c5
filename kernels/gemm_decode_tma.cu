/* gemm_decode_tma.cu — the decode GEMMs (few rows per expert, 16-row tiles) with the weight stream driven by
 * bulk copies: per byte of weights almost no instruction is spent on loading, and up to kStages × 16 KB per
 * CTA (two CTAs per SM) stay in flight across the CTA's work items. Arithmetic and outputs are those of
 * gemm_decode.cu (docs/GPU.md "Decode GEMMs"); what changes is how the bytes arrive. A CTA has three roles:
 *  - warp 4, the producer: for every stage of every item of the CTA, waits until the ring slot is free
 *    (mbarrier `empty`), announces the stage's bytes on `full` (arrive.expect_tx) and has each of its 32
 *    lanes copy one weight row's K chunk (cp.async.bulk, ≤ 512 bytes) into the slot. It runs ahead of the
 *    consumers by up to kStages stages, into the next items, so item prologues and epilogues do not drain
 *    the stream;
 *  - warp 5, the staging warp: for each item, one item ahead, writes the item's slots, tokens, token weights
 *    and all its scales into one of two `Meta` buffers (loads batched per dtype), published on `meta_full`,
 *    given back on `meta_empty`;
 *  - warps 0–3, the consumers: stage q of an item holds 128-K blocks 4q..4q+3 of its 32 weight rows; warp w
 *    multiplies block 4q+w (m16n8k32 e4m3 MMAs, swap-AB: weight rows are M, the tile's tokens N), with the
 *    token rows' bytes loaded from global memory one stage ahead, promotes the block's partial sum with the
 *    block scales exactly as gemm_decode.cu (acc += (partial·s_act)·s_w), and releases the slot. The warps'
 *    sums are added in warp order through shared memory (deterministic), then the epilogue of gemm_decode.cu.
 * Shared-memory rows are 576 bytes apart (512 + 64): thread (g, tq) reads bytes [16·tq, 16·tq + 16) of a 64-K
 * chunk of rows g and g + 8 (the K renumbering of gemm_decode.cu), so the 8 threads of a 128-bit access phase
 * read two rows whose chunks fall 64 bytes apart modulo 128: every bank once, no conflict.
 * GEMM1: 16 gate + 16 up rows per CTA; 8 CTAs form a cluster that owns one 128-column group, and the fused
 * 1×128 requantization's amax crosses the cluster by pushes into the peers' shared memory, each CTA's eight
 * values announced with a remote release-arrive on the peer's mbarrier (the producer and staging warps are
 * busy elsewhere, so a whole-cluster barrier per item is not possible). GEMM2: 32 output columns per CTA; its
 * producer starts streaming the first weights before griddepcontrol.wait (only the tile list, complete since
 * the permutation, and the weights are read before it). Everything here is sm_90 (not sm_90a): the compute_90
 * PTX build keeps it. */
#include <cooperative_groups.h>

#include "common.cuh"
#include "gemm_decode.h"
#include "gemm_decode_tma.h"
#include "mbarrier.cuh"
#include "pdl.cuh"

namespace cg = cooperative_groups;

namespace fp8moe {
namespace {

using namespace async;

constexpr int kConsumerWarps = 4;
constexpr int kConsumers = 32 * kConsumerWarps;
constexpr int kProducerWarp = kConsumerWarps;
constexpr int kStagingWarp = kConsumerWarps + 1;
constexpr int kThreads = 32 * (kConsumerWarps + 2);
constexpr int kRows = FP8MOE_GEMM_TILE_M_SMALL;       /* tokens per tile */
constexpr int kBlockK = FP8MOE_GEMM_TILE_K;           /* one scale block */
constexpr int kCluster = FP8MOE_DECODE_CLUSTER;
constexpr int kCols1 = FP8MOE_GEMM_TILE_N / kCluster; /* GEMM1 intermediate columns per CTA */
constexpr int kCols2 = 32;                            /* GEMM2 output columns per CTA */
constexpr int kWRows = 32;                            /* weight rows per CTA item: one per producer lane */
constexpr int kMaxKb = FP8MOE_DECODE_MAX_KBLOCKS;
constexpr int kStageBlocks = kConsumerWarps; /* one 128-K block per consumer warp per stage */
constexpr int kStageK = kStageBlocks * kBlockK;
constexpr int kPitch = kStageK + 64; /* bank-conflict-free fragment reads (header comment) */
constexpr int kStages = FP8MOE_DECODE_TMA_STAGES;
static_assert(kRows == 16, "two n8 halves per tile");
static_assert(kCols1 == 16 && 2 * kCols1 == kWRows && kCols2 == kWRows, "32 weight rows per CTA item");
static_assert(kPitch % 128 == 64, "rows g and g+1 of an access phase fall in different bank halves");
static_assert(kStages >= 2, "a ring");

__device__ __forceinline__ float activate(int32_t act, float g, float u) {
  if (act == FP8MOE_ACTIVATION_GEGLU) return 0.5f * g * (1.0f + erff(g / 1.41421356237309505f)) * u;
  return g / (1.0f + expf(-g)) * u;
}

template <int I>
__device__ __forceinline__ uint32_t word(const uint4& v) {
  return I == 0 ? v.x : I == 1 ? v.y : I == 2 ? v.z : v.w;
}

/* ------------------------------------------------------------------------------- shared memory layout */
/* Everything one item needs besides the weights, written by the staging warp. */
struct Meta {
  float act[kRows][kMaxKb + 1]; /* BLOCK: token (GEMM1) or row (GEMM2) scale per K block; 0 for padding */
  float w[2][kMaxKb];           /* BLOCK: the two 16-row fragments' weight scale per K block */
  float rs_act[kRows];          /* ROW: the token's / row's scale (0 for padding tokens) */
  float rs_w[kWRows];           /* ROW: each weight row's scale */
  float tensor_scale;           /* TENSOR: activation scale · the expert's weight scale */
  int32_t slot[kRows];          /* sorted slot of each tile row, −1 padding */
  int32_t tok[kRows];           /* GEMM1: token of each row, −1 padding */
  float tw[kRows];              /* GEMM1: token weight (1 without one) */
  int32_t halves;               /* live n8 halves: 2 when the tile holds more than 8 real rows */
};

struct Smem {
  uint8_t ring[kStages][kWRows * kPitch]; /* first: 128-byte aligned, every row 16-byte aligned */
  Meta meta[2];
  float red[kConsumerWarps][2][16][kRows + 1]; /* the warps' partial sums: [warp][fragment][row][token] */
  alignas(16) float amax_local[kRows];           /* GEMM1 fused group: this CTA's 16-column amax per token */
  alignas(16) float amax_in[2][kCluster][kRows]; /* ... and every cluster CTA's, by item parity */
  uint64_t full[kStages], empty[kStages], meta_full[2], meta_empty[2], amax_full[2];
};
static_assert(FP8MOE_DECODE_TMA_CTAS_PER_SM * (sizeof(Smem) + 1024) <= 228 * 1024,
              "two CTAs per SM on a 228 KB Hopper SM (1 KB reserved per CTA)");

__device__ __forceinline__ Smem& smem() {
  extern __shared__ __align__(128) uint8_t raw[];
  return *reinterpret_cast<Smem*>(raw);
}

/* Barrier 1 among the four consumer warps (0 is __syncthreads, which the roles never use after setup). */
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory"); }

/* Position in the ring, advanced identically by the producer and the consumers. */
struct Ring {
  uint32_t s = 0, phase = 0;
  __device__ __forceinline__ void next() {
    if (++s == kStages) {
      s = 0;
      phase ^= 1u;
    }
  }
};

/* 16 bytes of a token row (written by an earlier kernel, read-only here), zeros for padding. */
__device__ __forceinline__ uint4 ld_act(const uint8_t* row, int64_t k) {
  return row ? __ldg(reinterpret_cast<const uint4*>(row + k)) : make_uint4(0u, 0u, 0u, 0u);
}

/* ------------------------------------------------------------------------------- the staging warp */
template <class T>
__device__ __forceinline__ float to_f32(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) {
  return __half2float(v);
}

/* dst(i, value) for i < n, value = element off(i) of the tensor (0 where off(i) < 0): the lanes issue eight
 * loads each before the first store, so a staging pass costs a few memory latencies, not one per element. */
template <class T, class Off, class Dst>
__device__ __forceinline__ void gather_t(const void* base, int n, Off off, Dst dst) {
  const T* p = static_cast<const T*>(base);
  const int lane = threadIdx.x % 32;
  for (int i0 = lane; i0 < n; i0 += 32 * 8) {
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int i = i0 + 32 * u;
      const int64_t o = i < n ? off(i) : -1;
      v[u] = o >= 0 ? to_f32(p[o]) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < 8; ++u)
      if (i0 + 32 * u < n) dst(i0 + 32 * u, v[u]);
  }
}

/* The dtype dispatch once per pass (load_f32's dtypes). */
template <class Off, class Dst>
__device__ __forceinline__ void gather(const fp8moe_kref& r, int n, Off off, Dst dst) {
  switch (r.dt) {
    case FP8MOE_DT_F32: gather_t<float>(r.data, n, off, dst); break;
    case FP8MOE_DT_BF16: gather_t<__nv_bfloat16>(r.data, n, off, dst); break;
    case FP8MOE_DT_F16: gather_t<__half>(r.data, n, off, dst); break;
    case FP8MOE_DT_I32: gather_t<int32_t>(r.data, n, off, dst); break;
    case FP8MOE_DT_I64: gather_t<int64_t>(r.data, n, off, dst); break;
    default: gather_t<float>(r.data, n, [](int) { return static_cast<int64_t>(-1); }, dst); break;
  }
}

__device__ __forceinline__ int64_t kref_off(const fp8moe_kref& r, int64_t i0, int64_t i1 = 0, int64_t i2 = 0) {
  return i0 * r.s[0] + i1 * r.s[1] + i2 * r.s[2];
}

/* Stages a tile's slot list (lane r < 16 holds row r's slot), tokens, token weights and live halves; the
 * warp's writes are visible to the whole warp afterwards. */
__device__ __forceinline__ void stage_slots(Meta& mt, int32_t slot, int32_t K, const float* token_weight) {
  const int lane = threadIdx.x % 32;
  const unsigned live = __ballot_sync(0xffffffffu, lane < kRows && slot >= 0);
  if (lane < kRows) {
    mt.slot[lane] = slot;
    mt.tok[lane] = slot >= 0 ? slot / K : -1;
    mt.tw[lane] = (token_weight && slot >= 0) ? token_weight[slot] : 1.0f;
  }
  if (lane == 0) mt.halves = __popc(live) > 8 ? 2 : 1;
  __syncwarp();
}

/* Publishes a Meta buffer: every lane arrives (count 32), releasing its own writes. */
__device__ __forceinline__ void publish(uint64_t* bar) { mbar_arrive(bar); }

/* --------------------------------------------------------------------------------- the consumers */
/* The token rows' 16-byte pieces of K block kb (both 64-K chunks, each live half); zeros past kblocks. */
template <int NH>
__device__ __forceinline__ void load_x(const uint8_t* const (&xp)[NH], int kb, int kblocks, uint4 (&x)[2][NH]) {
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int h = 0; h < NH; ++h)
      x[c][h] = kb < kblocks ? ld_act(xp[h], static_cast<int64_t>(kb) * kBlockK + 64 * c) : make_uint4(0u, 0u, 0u, 0u);
}

/* One item's K loop for this consumer warp: stage q brings blocks 4q..4q+3, the warp takes block 4q + warp.
 * xp[h] points at byte 16·tq of token row 8h + g (NULL: padding). acc: [fragment][half][mma register]. */
template <int NH, bool BLOCK>
__device__ __forceinline__ void stream_item(Smem& sm, Ring& ring, const Meta& mt, int kblocks,
                                            const uint8_t* const (&xp)[NH], float (&acc)[2][NH][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[t][h][q] = 0.0f;
  const int stages = (kblocks + kStageBlocks - 1) / kStageBlocks;
  uint4 xn[2][NH];
  load_x<NH>(xp, warp, kblocks, xn);
#pragma unroll 1
  for (int q = 0; q < stages; ++q, ring.next()) {
    const int kb = q * kStageBlocks + warp;
    uint4 x[2][NH];
#pragma unroll
    for (int c = 0; c < 2; ++c)
#pragma unroll
      for (int h = 0; h < NH; ++h) x[c][h] = xn[c][h];
    if (q + 1 < stages) load_x<NH>(xp, kb + kStageBlocks, kblocks, xn); /* one stage ahead */
    mbar_wait(&sm.full[ring.s], ring.phase);
    if (kb < kblocks) {
      const uint8_t* st = sm.ring[ring.s] + warp * kBlockK + 16 * tq;
      uint4 w[2][2][2]; /* [64-K chunk][fragment][row g / g + 8] */
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
          for (int r = 0; r < 2; ++r)
            w[c][t][r] = *reinterpret_cast<const uint4*>(st + (16 * t + g + 8 * r) * kPitch + 64 * c);
      float part[2][NH][4];
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int h = 0; h < NH; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i) part[t][h][i] = BLOCK ? 0.0f : acc[t][h][i];
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const uint32_t a0[4] = {word<0>(w[c][t][0]), word<0>(w[c][t][1]), word<1>(w[c][t][0]), word<1>(w[c][t][1])};
          const uint32_t a1[4] = {word<2>(w[c][t][0]), word<2>(w[c][t][1]), word<3>(w[c][t][0]), word<3>(w[c][t][1])};
#pragma unroll
          for (int h = 0; h < NH; ++h) {
            const uint32_t b0[2] = {word<0>(x[c][h]), word<1>(x[c][h])};
            const uint32_t b1[2] = {word<2>(x[c][h]), word<3>(x[c][h])};
            mma_e4m3_16832(part[t][h], a0, b0);
            mma_e4m3_16832(part[t][h], a1, b1);
          }
        }
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int h = 0; h < NH; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            if (BLOCK)
              acc[t][h][i] += part[t][h][i] * mt.act[8 * h + 2 * tq + (i & 1)][kb] * mt.w[t][kb];
            else
              acc[t][h][i] = part[t][h][i];
          }
    }
    __syncwarp(); /* every lane's MMAs have consumed its shared-memory reads */
    if (lane == 0) mbar_arrive(&sm.empty[ring.s]);
  }
}

/* The warps' sums into shared memory, in the layout `reduced` reads. */
template <int NH>
__device__ __forceinline__ void stash(Smem& sm, const float (&acc)[2][NH][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) sm.red[warp][t][g + 8 * (q >> 1)][8 * h + 2 * tq + (q & 1)] = acc[t][h][q];
}

/* Σ over warps in warp order. */
__device__ __forceinline__ float reduced(const Smem& sm, int t, int row, int token) {
  float s = sm.red[0][t][row][token];
#pragma unroll
  for (int w = 1; w < kConsumerWarps; ++w) s += sm.red[w][t][row][token];
  return s;
}

/* The item's K loop and the warp-order reduction: afterwards sm.red holds the sums for every consumer. */
template <int NH, bool BLOCK>
__device__ __forceinline__ void item_sums(Smem& sm, Ring& ring, const Meta& mt, int kblocks,
                                          const uint8_t* const (&xp)[NH]) {
  float acc[2][NH][4];
  stream_item<NH, BLOCK>(sm, ring, mt, kblocks, xp, acc);
  consumer_sync(); /* every consumer is done reading the previous item's sums */
  stash<NH>(sm, acc);
  consumer_sync();
}

/* Releases a Meta buffer: one arrival per consumer warp (count 4) after its last read. */
__device__ __forceinline__ void release_meta(uint64_t* bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbar_arrive(bar);
}

/* Barrier setup, before any role starts: full (the producer's expect_tx arrival), empty (one per consumer
 * warp), meta_full (the staging warp's 32 lanes), meta_empty (one per consumer warp), amax_full (one push per
 * cluster CTA). */
__device__ __forceinline__ void init_barriers(Smem& sm) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&sm.full[s], 1);
      mbar_init(&sm.empty[s], kConsumerWarps);
    }
    for (int m = 0; m < 2; ++m) {
      mbar_init(&sm.meta_full[m], 32);
      mbar_init(&sm.meta_empty[m], kConsumerWarps);
      mbar_init(&sm.amax_full[m], kCluster);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
}

/* The producer's part of one item: the stages of kblocks 128-K blocks of the 32 rows at row[lane]. */
__device__ __forceinline__ void produce_item(Smem& sm, Ring& ring, const uint8_t* row, int kblocks) {
  const int lane = threadIdx.x % 32;
  const int stages = (kblocks + kStageBlocks - 1) / kStageBlocks;
  const uint64_t policy = evict_first_policy();
#pragma unroll 1
  for (int q = 0; q < stages; ++q, ring.next()) {
    const int nb = kblocks - q * kStageBlocks < kStageBlocks ? kblocks - q * kStageBlocks : kStageBlocks;
    const uint32_t bytes = static_cast<uint32_t>(nb * kBlockK);
    mbar_wait(&sm.empty[ring.s], ring.phase ^ 1u);
    if (lane == 0) mbar_arrive_expect_tx(&sm.full[ring.s], bytes * kWRows);
    __syncwarp(); /* the bytes are announced before any copy can complete */
    bulk_copy(sm.ring[ring.s] + lane * kPitch, row + static_cast<int64_t>(q) * kStageK, bytes, &sm.full[ring.s],
              policy);
  }
}

/* ------------------------------------------------------------------------------------------------ GEMM1 */
__device__ __forceinline__ int32_t gemm1_row(const fp8moe_gemm1_args& a, int32_t n0, int lane) {
  /* lane → weight row: lanes 0..15 gate rows n0.., lanes 16..31 up rows n0.. (fragment t = lane / 16) */
  return ((lane < 16) == (a.gate_first != 0) ? 0 : a.I) + n0 + lane % 16;
}

template <int SCALE>
__device__ __forceinline__ void gemm1_stage_meta(const fp8moe_gemm1_args& a, Meta& mt, int32_t slot, int32_t e,
                                                 int32_t n0) {
  const int lane = threadIdx.x % 32;
  stage_slots(mt, slot, a.K, a.token_weight);
  const int kblocks = a.H / kBlockK;
  if (SCALE == FP8MOE_SCALE_BLOCK) {
    gather(
        a.x_scale, kRows * kblocks,
        [&](int i) {
          const int32_t t = mt.tok[i / kblocks];
          return t >= 0 ? kref_off(a.x_scale, t, i % kblocks) : static_cast<int64_t>(-1);
        },
        [&](int i, float v) { mt.act[i / kblocks][i % kblocks] = v; });
    gather(
        a.w_scale, 2 * kblocks,
        [&](int i) { return kref_off(a.w_scale, e, gemm1_row(a, n0, 16 * (i / kblocks)) / kBlockK, i % kblocks); },
        [&](int i, float v) { mt.w[i / kblocks][i % kblocks] = v; });
  } else if (SCALE == FP8MOE_SCALE_ROW) {
    gather(
        a.x_scale, kRows,
        [&](int i) { return mt.tok[i] >= 0 ? kref_off(a.x_scale, mt.tok[i]) : static_cast<int64_t>(-1); },
        [&](int i, float v) { mt.rs_act[i] = v; });
    gather(
        a.w_scale, kWRows, [&](int i) { return kref_off(a.w_scale, e, gemm1_row(a, n0, i)); },
        [&](int i, float v) { mt.rs_w[i] = v; });
  } else if (lane == 0) {
    mt.tensor_scale = kref_at(a.x_scale, 0) * kref_at(a.w_scale, e);
  }
}

/* The epilogue of gemm_decode.cu's gemm1_item on the reduced sums, with the scales from Meta. */
template <int SCALE, int NH>
__device__ __forceinline__ void gemm1_epilogue(const fp8moe_gemm1_args& a, Smem& sm, const Meta& mt, int64_t row0,
                                               int32_t n0, int parity, uint32_t amax_phase, uint32_t rank) {
  const int tid = threadIdx.x;
  /* Thread → token r, columns c, c+1 of this CTA's 16: dequantize, weight, activate. */
  const int r = tid / 8, c = (tid % 8) * 2;
  const bool live = r < 8 * NH;
  float act[2] = {0.0f, 0.0f};
  if (live) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float h[2];
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        float v = reduced(sm, b, c + j, r);
        if (SCALE == FP8MOE_SCALE_TENSOR) v = v * mt.tensor_scale;
        else if (SCALE == FP8MOE_SCALE_ROW) v = v * mt.rs_act[r] * mt.rs_w[16 * b + c + j];
        h[b] = a.token_weight ? v * mt.tw[r] : v;
      }
      act[j] = activate(a.activation, h[0], h[1]);
    }
  }
  /* Amax of the token's 16 columns here: its 8 threads are consecutive lanes. */
  float m = fmaxf(finite_abs(act[0]), finite_abs(act[1]));
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const int64_t grow = row0 + r;
  if (a.requant == FP8MOE_REQ_FUSED_GROUP) {
    if (tid % 8 == 0) sm.amax_local[r] = m;
    consumer_sync();
    if (tid < kCluster) { /* thread q pushes this CTA's 16 values into CTA q, then arrives there */
      const float4* v = reinterpret_cast<const float4*>(sm.amax_local);
      const uint32_t dst = peer_addr(&sm.amax_in[parity][rank][0], static_cast<uint32_t>(tid));
#pragma unroll
      for (int i = 0; i < kRows / 4; ++i) st_peer_v4(dst + 16u * i, v[i]);
      mbar_arrive_peer(peer_addr(&sm.amax_full[parity], static_cast<uint32_t>(tid)));
    }
    mbar_wait_cluster(&sm.amax_full[parity], amax_phase);
    float gm = 0.0f;
#pragma unroll
    for (int q = 0; q < kCluster; ++q) gm = fmaxf(gm, sm.amax_in[parity][q][r]);
    if (live) {
      const float s = dynamic_scale(gm);
      *reinterpret_cast<uint16_t*>(a.a2q + grow * a.I + n0 + c) = e4m3x2(act[0] / s, act[1] / s);
      if (rank == 0 && tid % 8 == 0) a.a2s[grow * (a.I / kBlockK) + n0 / kBlockK] = s;
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
      if (tid % 32 == 0) atomic_amax(a.amax, m);
    }
  }
}

template <int SCALE, int NH>
__device__ __forceinline__ void gemm1_consume(const fp8moe_gemm1_args& a, Smem& sm, Ring& ring, const Meta& mt,
                                              int64_t row0, int32_t n0, int parity, uint32_t amax_phase,
                                              uint32_t rank) {
  const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  const uint8_t* xp[NH];
#pragma unroll
  for (int h = 0; h < NH; ++h) {
    const int32_t t = mt.tok[8 * h + g];
    xp[h] = t >= 0 ? a.x + static_cast<int64_t>(t) * a.x_stride + 16 * tq : nullptr;
  }
  item_sums<NH, SCALE == FP8MOE_SCALE_BLOCK>(sm, ring, mt, a.H / kBlockK, xp);
  gemm1_epilogue<SCALE, NH>(a, sm, mt, row0, n0, parity, amax_phase, rank);
}

template <int SCALE>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads, FP8MOE_DECODE_TMA_CTAS_PER_SM)
    gemm1_decode_tma_kernel(fp8moe_gemm1_args a) {
  Smem& sm = smem();
  cg::cluster_group cl = cg::this_cluster();
  init_barriers(sm);
  cl.sync(); /* barriers initialized everywhere before any CTA of the cluster arrives on them */
  wait_prior(); /* x, its scales and the expert-sorted rows come from the kernels before */
  allow_next(); /* GEMM2 may start streaming its weights as CTAs here retire */
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t tiles = *a.num_tiles;
  const int64_t items = static_cast<int64_t>(tiles) * (a.I / FP8MOE_GEMM_TILE_N);
  const int64_t first = blockIdx.x / kCluster, stride = gridDim.x / kCluster;
  const uint32_t rank = cl.block_rank();
  const int kblocks = a.H / kBlockK;
  /* Item w: tile w % tiles, 128-column group w / tiles (tile fastest: CTAs running together share the weights
   * of an expert that has several tiles in L2); this CTA's 16 columns start at n0. */
  auto tile_of = [&](int64_t w) { return static_cast<int>(w % tiles); };
  auto n0_of = [&](int64_t w) {
    return static_cast<int32_t>(w / tiles) * FP8MOE_GEMM_TILE_N + static_cast<int32_t>(rank) * kCols1;
  };
  Ring ring;
  if (warp == kProducerWarp) {
    int32_t e_next = first < items ? a.tile_expert[tile_of(first)] : 0;
    for (int64_t w = first; w < items; w += stride) {
      const int32_t e = e_next;
      if (w + stride < items) e_next = a.tile_expert[tile_of(w + stride)]; /* used one item later */
      const uint8_t* row = a.w + static_cast<int64_t>(e) * a.w_stride_e +
                           static_cast<int64_t>(gemm1_row(a, n0_of(w), lane)) * a.w_stride_n;
      produce_item(sm, ring, row, kblocks);
    }
  } else if (warp == kStagingWarp) {
    int32_t slot_next = -1, e_next = 0;
    auto head = [&](int64_t w) {
      const int tile = tile_of(w);
      slot_next = lane < kRows ? a.sorted_slots[static_cast<int64_t>(tile) * kRows + lane] : -1;
      e_next = a.tile_expert[tile];
    };
    if (first < items) head(first);
    int j = 0;
    for (int64_t w = first; w < items; w += stride, ++j) {
      const int32_t slot = slot_next, e = e_next;
      if (w + stride < items) head(w + stride); /* used one item later */
      const int m = j & 1;
      mbar_wait(&sm.meta_empty[m], ((j >> 1) & 1) ^ 1);
      gemm1_stage_meta<SCALE>(a, sm.meta[m], slot, e, n0_of(w));
      publish(&sm.meta_full[m]);
    }
  } else {
    int j = 0;
    for (int64_t w = first; w < items; w += stride, ++j) {
      const int m = j & 1;
      const uint32_t phase = (j >> 1) & 1;
      mbar_wait(&sm.meta_full[m], phase);
      const Meta& mt = sm.meta[m];
      const int64_t row0 = static_cast<int64_t>(tile_of(w)) * kRows;
      if (mt.halves == 2)
        gemm1_consume<SCALE, 2>(a, sm, ring, mt, row0, n0_of(w), m, phase, rank);
      else
        gemm1_consume<SCALE, 1>(a, sm, ring, mt, row0, n0_of(w), m, phase, rank);
      release_meta(&sm.meta_empty[m]);
    }
  }
  cl.sync(); /* no CTA leaves while a peer may still push into its shared memory */
}

/* ------------------------------------------------------------------------------------------------ GEMM2 */
template <int SCALE>
__device__ __forceinline__ void gemm2_stage_meta(const fp8moe_gemm2_args& a, Meta& mt, int32_t slot, int32_t e,
                                                 int64_t row0, int32_t n0) {
  const int lane = threadIdx.x % 32;
  stage_slots(mt, slot, 1, nullptr);
  const int kblocks = a.I / kBlockK;
  const int rows = 8 * mt.halves; /* the padding half of a tile with ≤ 8 real rows was not written by GEMM1 */
  if (SCALE == FP8MOE_SCALE_BLOCK) {
    gather(
        a.a2_scale, kRows * kblocks,
        [&](int i) {
          const int row = i / kblocks;
          return row < rows ? kref_off(a.a2_scale, row0 + row, i % kblocks) : static_cast<int64_t>(-1);
        },
        [&](int i, float v) { mt.act[i / kblocks][i % kblocks] = v; });
    gather(
        a.w_scale, 2 * kblocks,
        [&](int i) { return kref_off(a.w_scale, e, (n0 + 16 * (i / kblocks)) / kBlockK, i % kblocks); },
        [&](int i, float v) { mt.w[i / kblocks][i % kblocks] = v; });
  } else if (SCALE == FP8MOE_SCALE_ROW) {
    gather(
        a.a2_scale, kRows,
        [&](int i) { return i < rows ? kref_off(a.a2_scale, row0 + i) : static_cast<int64_t>(-1); },
        [&](int i, float v) { mt.rs_act[i] = v; });
    gather(
        a.w_scale, kWRows, [&](int i) { return kref_off(a.w_scale, e, n0 + i); },
        [&](int i, float v) { mt.rs_w[i] = v; });
  } else if (lane == 0) {
    mt.tensor_scale = kref_at(a.a2_scale, 0) * kref_at(a.w_scale, e);
  }
}

template <int SCALE, int NH>
__device__ __forceinline__ void gemm2_consume(const fp8moe_gemm2_args& a, Smem& sm, Ring& ring, const Meta& mt,
                                              int64_t row0, int32_t n0) {
  const int tid = threadIdx.x, lane = tid % 32, g = lane / 4, tq = lane % 4;
  const uint8_t* xp[NH];
#pragma unroll
  for (int h = 0; h < NH; ++h) xp[h] = a.a2q + (row0 + 8 * h + g) * a.I + 16 * tq;
  item_sums<NH, SCALE == FP8MOE_SCALE_BLOCK>(sm, ring, mt, a.I / kBlockK, xp);
  /* Thread → token r, 4 consecutive output columns (gemm_decode.cu's gemm2_item epilogue). */
  const int r = tid / 8, c = (tid % 8) * 4;
  if (r >= 8 * NH) return;
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = reduced(sm, (c + j) / 16, (c + j) % 16, r);
  if (SCALE == FP8MOE_SCALE_TENSOR) {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] *= mt.tensor_scale;
  } else if (SCALE == FP8MOE_SCALE_ROW) {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = v[j] * mt.rs_act[r] * mt.rs_w[c + j];
  }
  const int32_t slot = mt.slot[r]; /* y is by slot; padding rows are not stored */
  if (slot >= 0)
    *reinterpret_cast<uint2*>(a.y + static_cast<int64_t>(slot) * a.H + n0 + c) =
        make_uint2(y_bf16x2(v[0], v[1]), y_bf16x2(v[2], v[3]));
}

template <int SCALE>
__global__ void __launch_bounds__(kThreads, FP8MOE_DECODE_TMA_CTAS_PER_SM)
    gemm2_decode_tma_kernel(fp8moe_gemm2_args a) {
  Smem& sm = smem();
  init_barriers(sm);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kblocks = a.I / kBlockK;
  auto items_of = [&](int32_t tiles) { return static_cast<int64_t>(tiles) * (a.H / kCols2); };
  Ring ring;
  if (warp == kProducerWarp) {
    /* Only the tile list (final since the permutation completed, before GEMM1 let this grid start) and the
     * weights are read here, so the ring fills while GEMM1 drains; no griddepcontrol.wait. Read through L2. */
    const int32_t tiles = __ldcg(a.num_tiles);
    const int64_t items = items_of(tiles);
    int32_t e_next = blockIdx.x < items ? __ldcg(a.tile_expert + blockIdx.x % tiles) : 0;
    for (int64_t w = blockIdx.x; w < items; w += gridDim.x) {
      const int32_t e = e_next;
      if (w + gridDim.x < items) e_next = __ldcg(a.tile_expert + (w + gridDim.x) % tiles); /* used one item later */
      const int32_t n0 = static_cast<int32_t>(w / tiles) * kCols2;
      produce_item(sm, ring,
                   a.w + static_cast<int64_t>(e) * a.w_stride_e + static_cast<int64_t>(n0 + lane) * a.w_stride_n,
                   kblocks);
    }
    return;
  }
  wait_prior(); /* a2q and its scales come from GEMM1 (or the row quantization) */
  allow_next();
  const int32_t tiles = *a.num_tiles;
  const int64_t items = items_of(tiles);
  if (warp == kStagingWarp) {
    int32_t slot_next = -1, e_next = 0;
    auto head = [&](int64_t w) {
      const int tile = static_cast<int>(w % tiles);
      slot_next = lane < kRows ? a.sorted_slots[static_cast<int64_t>(tile) * kRows + lane] : -1;
      e_next = a.tile_expert[tile];
    };
    if (blockIdx.x < items) head(blockIdx.x);
    int j = 0;
    for (int64_t w = blockIdx.x; w < items; w += gridDim.x, ++j) {
      const int32_t slot = slot_next, e = e_next;
      if (w + gridDim.x < items) head(w + gridDim.x); /* used one item later */
      const int m = j & 1;
      mbar_wait(&sm.meta_empty[m], ((j >> 1) & 1) ^ 1);
      gemm2_stage_meta<SCALE>(a, sm.meta[m], slot, e, (w % tiles) * kRows, static_cast<int32_t>(w / tiles) * kCols2);
      publish(&sm.meta_full[m]);
    }
    return;
  }
  int j = 0;
  for (int64_t w = blockIdx.x; w < items; w += gridDim.x, ++j) {
    const int m = j & 1;
    mbar_wait(&sm.meta_full[m], (j >> 1) & 1);
    const Meta& mt = sm.meta[m];
    const int64_t row0 = (w % tiles) * kRows;
    const int32_t n0 = static_cast<int32_t>(w / tiles) * kCols2;
    if (mt.halves == 2)
      gemm2_consume<SCALE, 2>(a, sm, ring, mt, row0, n0);
    else
      gemm2_consume<SCALE, 1>(a, sm, ring, mt, row0, n0);
    release_meta(&sm.meta_empty[m]);
  }
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_gemm1_decode_tma(const fp8moe_gemm1_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->max_tiles == 0) return cudaSuccess;
  const int64_t most = static_cast<int64_t>(a->max_tiles) * (a->I / FP8MOE_GEMM_TILE_N) * kCluster;
  const int64_t ctas = a->max_ctas / kCluster * kCluster;
  if (ctas < kCluster) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(most < ctas ? most : ctas));
  void (*kernel)(fp8moe_gemm1_args) = gemm1_decode_tma_kernel<FP8MOE_SCALE_TENSOR>;
  if (a->scale_mode == FP8MOE_SCALE_BLOCK) kernel = gemm1_decode_tma_kernel<FP8MOE_SCALE_BLOCK>;
  if (a->scale_mode == FP8MOE_SCALE_ROW) kernel = gemm1_decode_tma_kernel<FP8MOE_SCALE_ROW>;
  return static_cast<int>(launch_pdl(kernel, grid, dim3(kThreads), sizeof(Smem), stream, *a));
}

extern "C" int fp8moe_launch_gemm2_decode_tma(const fp8moe_gemm2_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->max_tiles == 0) return cudaSuccess;
  const int64_t most = static_cast<int64_t>(a->max_tiles) * (a->H / kCols2);
  const int64_t ctas = a->max_ctas > 0 ? a->max_ctas : 1;
  const dim3 grid(static_cast<unsigned>(most < ctas ? most : ctas));
  void (*kernel)(fp8moe_gemm2_args) = gemm2_decode_tma_kernel<FP8MOE_SCALE_TENSOR>;
  if (a->scale_mode == FP8MOE_SCALE_BLOCK) kernel = gemm2_decode_tma_kernel<FP8MOE_SCALE_BLOCK>;
  if (a->scale_mode == FP8MOE_SCALE_ROW) kernel = gemm2_decode_tma_kernel<FP8MOE_SCALE_ROW>;
  return static_cast<int>(launch_pdl(kernel, grid, dim3(kThreads), sizeof(Smem), stream, *a));
}

/* Every CTA resident at once (persistent grids): GEMM1 the most co-resident clusters of 8, × 8; GEMM2 SMs ×
 * resident CTAs per SM. 0 when a query fails or nothing fits (not an error of the context). */
extern "C" int fp8moe_prepare_gemm_decode_tma(int32_t sm_count, int32_t* ctas1, int32_t* ctas2) {
  using namespace fp8moe;
  *ctas1 = 0;
  *ctas2 = 0;
  void (*const k1[3])(fp8moe_gemm1_args) = {gemm1_decode_tma_kernel<FP8MOE_SCALE_TENSOR>,
                                            gemm1_decode_tma_kernel<FP8MOE_SCALE_BLOCK>,
                                            gemm1_decode_tma_kernel<FP8MOE_SCALE_ROW>};
  void (*const k2[3])(fp8moe_gemm2_args) = {gemm2_decode_tma_kernel<FP8MOE_SCALE_TENSOR>,
                                            gemm2_decode_tma_kernel<FP8MOE_SCALE_BLOCK>,
                                            gemm2_decode_tma_kernel<FP8MOE_SCALE_ROW>};
  const int bytes = static_cast<int>(sizeof(Smem));
  int clusters = -1, per_sm = -1;
  for (int i = 0; i < 3; ++i) {
    if (cudaFuncSetAttribute(k1[i], cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(k2[i], cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
      (void)cudaGetLastError(); /* the bulk-copy decode kernels just stay unused */
      return cudaSuccess;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(kCluster * sm_count));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = sizeof(Smem);
    int n = 0, b = 0;
    if (cudaOccupancyMaxActiveClusters(&n, k1[i], &cfg) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, k2[i], kThreads, sizeof(Smem)) != cudaSuccess) {
      (void)cudaGetLastError();
      return cudaSuccess;
    }
    if (clusters < 0 || n < clusters) clusters = n;
    if (per_sm < 0 || b < per_sm) per_sm = b;
  }
  *ctas1 = clusters > 0 ? clusters * kCluster : 0;
  *ctas2 = per_sm > 0 ? per_sm * sm_count : 0;
  return cudaSuccess;
}
