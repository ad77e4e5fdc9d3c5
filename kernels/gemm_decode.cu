/* gemm_decode.cu — the grouped GEMMs for few rows per expert (16-row tiles, decode): weight streaming at
 * the HBM limit. At decode a tile holds 1–16 tokens, so the cost is reading the experts' weights once;
 * the kernels therefore
 *  - swap A and B: weight rows are the m16n8k32 MMA's M (16 rows per fragment), the tile's tokens its N
 *    (one n8 half, or two when the tile holds more than 8 real rows);
 *  - stream weights through a per-thread ring in shared memory: thread (g, tq) of a warp copies bytes
 *    [16·tq, 16·tq+16) of each 64-K chunk of weight rows g and g+8 (and of token rows g, g+8) with 16-byte
 *    cp.async into its own slots, kStages chunks ahead of the MMAs, and reads back only what it copied
 *    itself, so the ring needs no barrier: cp.async.wait_group alone orders it. The dot product is
 *    invariant under a permutation of K applied to both operands, so bytes 8j..8j+7 of a copy feed MMA j
 *    of the chunk (a0/a2 = row g's words 2j/2j+1, a1/a3 = row g+8's, b0/b1 = the token's): the fragment
 *    layout with K renumbered inside the chunk. The ring runs across items: while a CTA reduces, requantizes
 *    and synchronizes its cluster for one item, the next item's first chunks are already in flight, so the
 *    bytes in flight per SM (3 CTAs × 128 threads × kStages (5) × 64 B of weights = 120 KB) do not depend on
 *    registers and do not drop at item boundaries (Little's law at ~4.5 TB/s and ~1–1.5 µs loaded latency
 *    asks for 34–51 KB per SM);
 *  - split K over the 4 warps of a 128-thread CTA (contiguous ranges of 128-K blocks, so block scales are
 *    promoted per block exactly as gemm_tile.cuh does: acc += (partial·s_act)·s_w), reduce the warps'
 *    partial sums in shared memory in warp order (deterministic);
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
constexpr int kChunk = 64;                      /* K bytes per ring slot: two m16n8k32 MMAs */
constexpr int kCluster = FP8MOE_DECODE_CLUSTER;
constexpr int kCols1 = FP8MOE_GEMM_TILE_N / kCluster; /* GEMM1 intermediate columns per CTA */
constexpr int kCols2 = 32;                            /* GEMM2 output columns per CTA */
constexpr int kMaxKb = FP8MOE_DECODE_MAX_KBLOCKS;
constexpr int kStages = FP8MOE_DECODE_STAGES;
/* 16-byte pieces per thread and slot: weight rows g and g+8 of fragments 0 and 1, token rows g and g+8. */
constexpr int kSlotVecs = 6;
constexpr int kSlot = kSlotVecs * kDecThreads; /* uint4 per slot: piece q of thread i at [q·128 + i] */
constexpr size_t kRingBytes = static_cast<size_t>(kStages) * kSlot * sizeof(uint4);
static_assert(kRows == 16, "two n8 halves per tile");
static_assert(kCols1 == 16, "one m16 fragment each of gate and up rows per CTA");
static_assert(kBlockK == 2 * kChunk, "a scale block is two ring slots");

__device__ __forceinline__ float activate(int32_t act, float g, float u) {
  if (act == FP8MOE_ACTIVATION_GEGLU) return 0.5f * g * (1.0f + erff(g / 1.41421356237309505f)) * u;
  return g / (1.0f + expf(-g)) * u;
}

/* 16 bytes global → this thread's ring piece, L1 bypassed; src_bytes 0 zero-fills. The "memory" clobber
 * keeps the compiler from moving this thread's earlier reads of the slot below the copy that refills it. */
__device__ __forceinline__ void ring_copy(uint4* dst, const void* src, int src_bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

template <int I>
__device__ __forceinline__ uint32_t word(const uint4& v) {
  return I == 0 ? v.x : I == 1 ? v.y : I == 2 ? v.z : v.w;
}

__device__ __forceinline__ int warp_kb0(int kblocks) { return (threadIdx.x / 32) * kblocks / kDecWarps; }
__device__ __forceinline__ int warp_kb1(int kblocks) { return (threadIdx.x / 32 + 1) * kblocks / kDecWarps; }

/* ------------------------------------------------------------------------------------------ the feeder */
/* What the feeder needs of an item's tile, loaded one item ahead: its expert and the slots of this lane's
 * token rows g and g+8. */
struct Meta {
  int32_t e, s0, s1;
};

/* Where the feeder copies from for one item: byte 16·tq of this warp's first K byte of weight rows g, g+8
 * of fragment t (w[t][r]) and of token rows g, g+8 (x[h]; NULL: padding, zero-filled). */
struct Feed {
  const uint8_t* w[2][2];
  const uint8_t* x[2];
  bool h1; /* some row 8..15 of the tile is real (warp-uniform): half 1 is copied */
};

/* GEMM1's items: (tile, 128-column group), the CTA's 16 gate and 16 up rows at rank·16 of the group. */
struct Geo1 {
  const fp8moe_gemm1_args& a;
  int32_t tiles, rank;
  __device__ __forceinline__ Meta meta(int64_t item) const {
    const int g = (threadIdx.x % 32) / 4;
    const int64_t row0 = (item % tiles) * kRows;
    return Meta{a.tile_expert[item % tiles], a.sorted_slots[row0 + g], a.sorted_slots[row0 + 8 + g]};
  }
  __device__ __forceinline__ int32_t n0(int64_t item) const {
    return static_cast<int32_t>(item / tiles) * FP8MOE_GEMM_TILE_N + rank * kCols1;
  }
  __device__ __forceinline__ int32_t row(int t, int64_t item) const { /* first weight row of fragment t */
    return ((a.gate_first != 0) == (t == 0) ? 0 : a.I) + n0(item);
  }
  __device__ __forceinline__ void feed(int64_t item, const Meta& m, int64_t k0, Feed& f) const {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const uint8_t* we = a.w + static_cast<int64_t>(m.e) * a.w_stride_e + k0 + 16 * tq;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int r = 0; r < 2; ++r) f.w[t][r] = we + static_cast<int64_t>(row(t, item) + g + 8 * r) * a.w_stride_n;
    const int32_t s[2] = {m.s0, m.s1};
#pragma unroll
    for (int h = 0; h < 2; ++h)
      f.x[h] = s[h] >= 0 ? a.x + static_cast<int64_t>(s[h] / a.K) * a.x_stride + k0 + 16 * tq : nullptr;
    f.h1 = __any_sync(0xffffffffu, m.s1 >= 0);
  }
};

/* GEMM2's items: (tile, 32-column block), 32 weight rows; token rows are the tile's a2q rows. */
struct Geo2 {
  const fp8moe_gemm2_args& a;
  const int32_t* sorted_slots;
  int32_t tiles;
  __device__ __forceinline__ Meta meta(int64_t item) const {
    const int g = (threadIdx.x % 32) / 4;
    const int64_t row0 = (item % tiles) * kRows;
    return Meta{a.tile_expert[item % tiles], 0, sorted_slots[row0 + 8 + g]};
  }
  __device__ __forceinline__ int32_t n0(int64_t item) const { return static_cast<int32_t>(item / tiles) * kCols2; }
  __device__ __forceinline__ void feed(int64_t item, const Meta& m, int64_t k0, Feed& f) const {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const uint8_t* we = a.w + static_cast<int64_t>(m.e) * a.w_stride_e + k0 + 16 * tq;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int r = 0; r < 2; ++r) f.w[t][r] = we + static_cast<int64_t>(n0(item) + 16 * t + g + 8 * r) * a.w_stride_n;
    const int64_t row0 = (item % tiles) * kRows;
#pragma unroll
    for (int h = 0; h < 2; ++h) f.x[h] = a.a2q + (row0 + 8 * h + g) * a.I + k0 + 16 * tq;
    f.h1 = __any_sync(0xffffffffu, m.s1 >= 0);
  }
};

/* The copy side of a warp's ring: walks (item, chunk) in the order the MMAs consume them, kStages chunks
 * ahead, across items; the next item's Meta is loaded one item early so moving on does not wait. Every
 * call is warp-uniform. */
template <class Geo>
struct Feeder {
  int64_t item, stride, items;
  int64_t k0; /* this warp's first K byte */
  int ci, nc; /* next chunk of the item; chunks per item (0: this warp has no K share) */
  Feed f;
  Meta next;

  __device__ __forceinline__ void start(const Geo& geo, int64_t first) {
    item = first;
    ci = 0;
    next = Meta{0, -1, -1};
    if (nc == 0 || item >= items) return;
    geo.feed(item, geo.meta(item), k0, f);
    if (item + stride < items) next = geo.meta(item + stride);
  }

  /* Copies the next chunk into ring slot `slot` (this thread's pieces); nothing once the items run out. */
  __device__ __forceinline__ void copy(const Geo& geo, uint4* slot) {
    if (nc == 0 || item >= items) return;
    if (ci == nc) {
      item += stride;
      ci = 0;
      if (item >= items) return;
      geo.feed(item, next, k0, f);
      if (item + stride < items) next = geo.meta(item + stride);
    }
    const int64_t k = static_cast<int64_t>(ci) * kChunk;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int r = 0; r < 2; ++r) ring_copy(slot + (2 * t + r) * kDecThreads, f.w[t][r] + k, 16);
    ring_copy(slot + 4 * kDecThreads, f.x[0] ? f.x[0] + k : f.w[0][0], f.x[0] ? 16 : 0);
    if (f.h1) ring_copy(slot + 5 * kDecThreads, f.x[1] ? f.x[1] + k : f.w[0][0], f.x[1] ? 16 : 0);
    ++ci;
  }
};

/* ------------------------------------------------------------------------------------- block scales */
/* Block scales of the current item, staged once per item so the K loop reads them from shared memory:
 * act[token][kb], w[fragment][kb]. */
struct BlockScales {
  float act[kRows][kMaxKb + 1];
  float w[2][kMaxKb];
};

template <typename T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }

/* Element o of a scale tensor whose dtype is known here (T), or read through its dtype (AnyLoad). */
template <typename T>
struct TypedLoad {
  __device__ __forceinline__ float operator()(const fp8moe_kref& r, int64_t o) const {
    return to_f32(static_cast<const T*>(r.data)[o]);
  }
};
struct AnyLoad {
  __device__ __forceinline__ float operator()(const fp8moe_kref& r, int64_t o) const {
    return load_f32(r.data, r.dt, o);
  }
};

/* Index i of the staging space: rows 0, 1 are the weight fragments' scales, rows 2..17 the tokens'; src
 * gives the tensor and element of i (false: a padding token, staged as 0). Every thread issues its loads of
 * a pass before the first store, so the item's scales cost one load latency, not one per element. */
template <class Load, class Src>
__device__ __forceinline__ void stage_pass(BlockScales& bs, int kblocks, Load load, Src src) {
  const int n = (kRows + 2) * kblocks;
  for (int i0 = threadIdx.x; i0 < n; i0 += 4 * kDecThreads) {
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = i0 + u * kDecThreads;
      const fp8moe_kref* r = nullptr;
      int64_t off = 0;
      v[u] = i < n && src(i / kblocks, i % kblocks, r, off) ? load(*r, off) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = i0 + u * kDecThreads;
      if (i >= n) break;
      const int row = i / kblocks, kb = i % kblocks;
      if (row < 2) bs.w[row][kb] = v[u];
      else bs.act[row - 2][kb] = v[u];
    }
  }
}

template <class Src>
__device__ __forceinline__ void stage_scales(BlockScales& bs, int kblocks, int32_t dt_act, int32_t dt_w, Src src) {
  /* The dtype switch sits outside the loads when both tensors share it (loads behind a switch are not
   * batched). */
  const int32_t dt = dt_act == dt_w ? dt_act : FP8MOE_DT_NONE;
  if (dt == FP8MOE_DT_F32) stage_pass(bs, kblocks, TypedLoad<float>(), src);
  else if (dt == FP8MOE_DT_BF16) stage_pass(bs, kblocks, TypedLoad<__nv_bfloat16>(), src);
  else if (dt == FP8MOE_DT_F16) stage_pass(bs, kblocks, TypedLoad<__half>(), src);
  else stage_pass(bs, kblocks, AnyLoad(), src);
}

/* ------------------------------------------------------------------------------------------ the MMAs */
/* This warp's nc chunks of the current item from the ring, refilling each slot right after reading it.
 * BLOCK promotes each 128-K block's partial sum with its scales; otherwise the MMAs accumulate in acc
 * directly (the same sums, in the same order, as before the ring). */
template <bool BLOCK, class Geo>
__device__ __forceinline__ void consume(const Geo& geo, Feeder<Geo>& fd, uint4* ring, int& slot, bool h1, int kb0,
                                        const BlockScales& bs, float (&acc)[2][2][4]) {
  const int tid = threadIdx.x, tq = (tid % 32) % 4;
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[t][h][q] = 0.0f;
  float part[2][2][4];
  float(&d)[2][2][4] = *(BLOCK ? &part : &acc);
#pragma unroll 1
  for (int c = 0; c < fd.nc; ++c) {
    cp_async_wait_group<kStages - 1>(); /* this thread's copies of chunk c have landed */
    const uint4* s = ring + slot * kSlot + tid;
    uint4 w[2][2], x[2];
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int r = 0; r < 2; ++r) w[t][r] = s[(2 * t + r) * kDecThreads];
    x[0] = s[4 * kDecThreads];
    x[1] = h1 ? s[5 * kDecThreads] : make_uint4(0u, 0u, 0u, 0u);
    if (BLOCK && (c & 1) == 0) {
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int q = 0; q < 4; ++q) part[t][h][q] = 0.0f;
    }
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const uint32_t a0[4] = {word<0>(w[t][0]), word<0>(w[t][1]), word<1>(w[t][0]), word<1>(w[t][1])};
      const uint32_t a1[4] = {word<2>(w[t][0]), word<2>(w[t][1]), word<3>(w[t][0]), word<3>(w[t][1])};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (h == 1 && !h1) break;
        const uint32_t b0[2] = {word<0>(x[h]), word<1>(x[h])};
        const uint32_t b1[2] = {word<2>(x[h]), word<3>(x[h])};
        mma_e4m3_16832(d[t][h], a0, b0);
        mma_e4m3_16832(d[t][h], a1, b1);
      }
    }
    /* The MMAs consumed the slot's registers, so the slot is free: refill it kStages chunks ahead. */
    fd.copy(geo, ring + slot * kSlot + tid);
    cp_async_commit(); /* one group per chunk, empty or not, so wait_group counts chunks */
    slot = slot + 1 == kStages ? 0 : slot + 1;
    if (BLOCK && (c & 1) == 1) {
      const int kb = kb0 + c / 2;
      const float sw[2] = {bs.w[0][kb], bs.w[1][kb]};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (h == 1 && !h1) break;
        const float sx[2] = {bs.act[8 * h + 2 * tq][kb], bs.act[8 * h + 2 * tq + 1][kb]};
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[t][h][q] += part[t][h][q] * sx[q & 1] * sw[t];
      }
    }
  }
}

/* The ring's first kStages chunks (the first item's, or more items' when they are short). */
template <class Geo>
__device__ __forceinline__ void fill(const Geo& geo, Feeder<Geo>& fd, uint4* ring) {
#pragma unroll 1
  for (int s = 0; s < kStages; ++s) {
    fd.copy(geo, ring + s * kSlot + threadIdx.x);
    cp_async_commit();
  }
}

/* The warps' partial sums: red[warp][fragment][row of the fragment][token]. */
struct Reduce {
  float v[kDecWarps][2][16][kRows + 1];
};

__device__ __forceinline__ void stash(Reduce& red, const float (&acc)[2][2][4], bool h1) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h == 1 && !h1) break;
#pragma unroll
      for (int q = 0; q < 4; ++q) red.v[warp][t][g + 8 * (q >> 1)][8 * h + 2 * tq + (q & 1)] = acc[t][h][q];
    }
}

/* Σ over warps in warp order. */
__device__ __forceinline__ float reduced(const Reduce& red, int t, int row, int token) {
  float s = red.v[0][t][row][token];
#pragma unroll
  for (int w = 1; w < kDecWarps; ++w) s += red.v[w][t][row][token];
  return s;
}

/* ------------------------------------------------------------------------------------------------ GEMM1 */
/* The block scales are live from their staging to the end of the K loop, the partial sums after it, so
 * they share memory (a barrier separates the two uses): that leaves room for a fifth ring stage. */
union Stage {
  BlockScales bs;
  Reduce red;
};

struct Smem1 {
  Stage u;
  float amax[2][kRows]; /* this CTA's 16-column amax per token, double-buffered by item parity */
  int32_t tok[kRows];
  float tw[kRows];
};

/* Dequantize, weight, activate and requantize the reduced item. */
template <int SCALE>
__device__ __forceinline__ void gemm1_epilogue(const fp8moe_gemm1_args& a, const Geo1& geo, Smem1& sm,
                                               cg::cluster_group& cl, int32_t e, int64_t item, bool h1,
                                               int parity) {
  const int tid = threadIdx.x, lane = tid % 32;
  const int32_t n0 = geo.n0(item);
  const int32_t nrow[2] = {geo.row(0, item), geo.row(1, item)};
  const int64_t row0 = (item % geo.tiles) * kRows;
  /* Thread → token r, columns c, c+1 of this CTA's 16. */
  const int r = tid / 8, c = (tid % 8) * 2;
  const bool live = r < (h1 ? 16 : 8);
  const int32_t t = sm.tok[r];
  float act[2] = {0.0f, 0.0f};
  if (live) {
    float sxw = 0.0f, sx = 0.0f;
    if (SCALE == FP8MOE_SCALE_TENSOR) sxw = kref_at(a.x_scale, 0) * kref_at(a.w_scale, e);
    if (SCALE == FP8MOE_SCALE_ROW) sx = t >= 0 ? kref_at(a.x_scale, t) : 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float hv[2];
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        float v = reduced(sm.u.red, b, c + j, r);
        if (SCALE == FP8MOE_SCALE_TENSOR) v = v * sxw;
        else if (SCALE == FP8MOE_SCALE_ROW) v = v * sx * kref_at(a.w_scale, e, nrow[b] + c + j);
        hv[b] = a.token_weight ? v * sm.tw[r] : v;
      }
      act[j] = activate(a.activation, hv[0], hv[1]);
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

template <int SCALE>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kDecThreads, FP8MOE_DECODE_CTAS_PER_SM)
    gemm1_decode_kernel(fp8moe_gemm1_args a) {
  __shared__ Smem1 sm;
  extern __shared__ uint4 ring[]; /* kRingBytes */
  cg::cluster_group cl = cg::this_cluster();
  const int tid = threadIdx.x;
  const int64_t clusters = gridDim.x / kCluster, first = blockIdx.x / kCluster;
  const int kblocks = a.H / kBlockK, kb0 = warp_kb0(kblocks), kb1 = warp_kb1(kblocks);
  /* Before waiting for the input quantization, each warp prefetches into L2 the weight lines of its first
   * ring fill of its first item, overlapping the kernels before. The tile list is final by then when the
   * quantization ran (it lets this grid start only after waiting for permute.cu); with an e4m3 input the
   * predecessor is permute.cu itself and the list may be stale, so every index read here is range-checked
   * against the workspace and the weight tensor: a stale list prefetches the wrong lines, never an address
   * outside them. The loop below reads the list again after the wait. */
  {
    const int32_t tiles = *a.num_tiles;
    if (tiles > 0 && tiles <= a.max_tiles && first < static_cast<int64_t>(tiles) * (a.I / FP8MOE_GEMM_TILE_N)) {
      const int32_t e = a.tile_expert[first % tiles];
      if (e >= 0 && e < a.E_local) {
        const Geo1 pre{a, tiles, static_cast<int32_t>(cl.block_rank())};
        const uint8_t* we = a.w + static_cast<int64_t>(e) * a.w_stride_e + static_cast<int64_t>(kb0) * kBlockK;
        const int chunks = 2 * (kb1 - kb0) < kStages ? 2 * (kb1 - kb0) : kStages;
        const int lines = (chunks + 1) / 2; /* 128-byte lines per weight row */
        for (int i = tid % 32; i < 2 * kCols1 * lines; i += 32) {
          const int row = i / lines;
          prefetch_l2(we + static_cast<int64_t>(pre.row(row / kCols1, first) + row % kCols1) * a.w_stride_n +
                      (i % lines) * 128);
        }
      }
    }
  }
  wait_prior(); /* x, its scales and the expert-sorted rows come from the kernels before */
  allow_next(); /* GEMM2 may start prefetching its weights as CTAs here retire */
  const int32_t tiles = *a.num_tiles;
  const Geo1 geo{a, tiles, static_cast<int32_t>(cl.block_rank())};
  const int64_t items = static_cast<int64_t>(tiles) * (a.I / FP8MOE_GEMM_TILE_N);
  Feeder<Geo1> fd;
  fd.stride = clusters;
  fd.items = items;
  fd.k0 = static_cast<int64_t>(kb0) * kBlockK;
  fd.nc = 2 * (kb1 - kb0);
  fd.start(geo, first);
  fill(geo, fd, ring);
  /* The item's expert and (threads < 16) slot, one item ahead. */
  int32_t e_next = 0, slot_next = -1;
  if (first < items) {
    e_next = a.tile_expert[first % tiles];
    if (tid < kRows) slot_next = a.sorted_slots[(first % tiles) * kRows + tid];
  }
  int slot = 0, parity = 0;
  for (int64_t w = first; w < items; w += clusters, parity ^= 1) {
    const int32_t e = e_next, my_slot = slot_next;
    if (w + clusters < items) {
      const int64_t nt = (w + clusters) % tiles;
      e_next = a.tile_expert[nt];
      if (tid < kRows) slot_next = a.sorted_slots[nt * kRows + tid];
    }
    __syncthreads(); /* the previous item is done with tok, tw and the partial sums */
    if (tid < kRows) {
      sm.tok[tid] = my_slot >= 0 ? my_slot / a.K : -1;
      sm.tw[tid] = (a.token_weight && my_slot >= 0) ? a.token_weight[my_slot] : 1.0f;
    }
    const bool h1 = __syncthreads_or(tid >= 8 && tid < kRows && my_slot >= 0) != 0;
    if (SCALE == FP8MOE_SCALE_BLOCK) {
      const int32_t nb0 = geo.row(0, w) / kBlockK, nb1 = geo.row(1, w) / kBlockK;
      const int live_rows = h1 ? kRows : 8;
      stage_scales(sm.u.bs, kblocks, a.x_scale.dt, a.w_scale.dt,
                   [&](int row, int kb, const fp8moe_kref*& r, int64_t& off) {
                     if (row < 2) {
                       r = &a.w_scale;
                       off = e * a.w_scale.s[0] + (row == 0 ? nb0 : nb1) * a.w_scale.s[1] + kb * a.w_scale.s[2];
                       return true;
                     }
                     const int32_t t = row - 2 < live_rows ? sm.tok[row - 2] : -1;
                     r = &a.x_scale;
                     off = t * a.x_scale.s[0] + kb * a.x_scale.s[1];
                     return t >= 0;
                   });
      __syncthreads();
    }
    float acc[2][2][4];
    consume<SCALE == FP8MOE_SCALE_BLOCK>(geo, fd, ring, slot, h1, kb0, sm.u.bs, acc);
    __syncthreads(); /* every warp is done with the scales, whose memory the partial sums reuse */
    stash(sm.u.red, acc, h1);
    __syncthreads();
    gemm1_epilogue<SCALE>(a, geo, sm, cl, e, w, h1, parity);
  }
  cp_async_wait_group<0>();
  cl.sync(); /* no CTA leaves while another may still read its amax */
}

/* ------------------------------------------------------------------------------------------------ GEMM2 */
struct Smem2 {
  Stage u;
};

/* The output of GEMM2: 4 consecutive columns of row `row` of y. */
__device__ __forceinline__ void store_y(const fp8moe_gemm2_args& a, int64_t row, int32_t col, const float (&v)[4]) {
  *reinterpret_cast<float4*>(a.y + row * a.H + col) = make_float4(v[0], v[1], v[2], v[3]);
}

template <int SCALE>
__device__ __forceinline__ void gemm2_epilogue(const fp8moe_gemm2_args& a, const Geo2& geo, const Smem2& sm,
                                               int32_t e, int64_t item, bool h1) {
  const int tid = threadIdx.x;
  const int32_t n0 = geo.n0(item);
  const int64_t row0 = (item % geo.tiles) * kRows;
  /* Thread → token r, 4 consecutive output columns. */
  const int r = tid / 8, c = (tid % 8) * 4;
  if (r >= (h1 ? 16 : 8)) return;
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = reduced(sm.u.red, (c + j) / 16, (c + j) % 16, r);
  if (SCALE == FP8MOE_SCALE_TENSOR) {
    const float st = kref_at(a.a2_scale, 0) * kref_at(a.w_scale, e);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] *= st;
  } else if (SCALE == FP8MOE_SCALE_ROW) {
    const float sr = kref_at(a.a2_scale, row0 + r);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = v[j] * sr * kref_at(a.w_scale, e, n0 + c + j);
  }
  store_y(a, row0 + r, n0 + c, v);
}

template <int SCALE>
__global__ void __launch_bounds__(kDecThreads, FP8MOE_DECODE_CTAS_PER_SM)
    gemm2_decode_kernel(fp8moe_gemm2_args a, const int32_t* sorted_slots) {
  __shared__ Smem2 sm;
  extern __shared__ uint4 ring[]; /* kRingBytes */
  const int tid = threadIdx.x;
  const int kblocks = a.I / kBlockK, kb0 = warp_kb0(kblocks), kb1 = warp_kb1(kblocks);
  /* Before waiting for GEMM1, each warp prefetches into L2 the weight bytes of its first ring fill of its
   * first item, overlapping GEMM1's tail. The tile list it reads is final by then (permute.cu completed
   * before GEMM1 let this grid start); a stale read would only prefetch the wrong lines, and the loop below
   * reads it again after the wait. */
  {
    const int32_t tiles = *a.num_tiles;
    if (tiles > 0 && blockIdx.x < static_cast<int64_t>(tiles) * (a.H / kCols2)) {
      const int tile = static_cast<int>(blockIdx.x % tiles);
      const int64_t n0 = static_cast<int64_t>(blockIdx.x / tiles) * kCols2;
      const uint8_t* we = a.w + static_cast<int64_t>(a.tile_expert[tile]) * a.w_stride_e;
      const int chunks = 2 * (kb1 - kb0) < kStages ? 2 * (kb1 - kb0) : kStages;
      const int lines = (chunks + 1) / 2; /* 128-byte lines per weight row */
      for (int i = tid % 32; i < kCols2 * lines; i += 32)
        prefetch_l2(we + (n0 + i / lines) * a.w_stride_n + static_cast<int64_t>(kb0) * kBlockK + (i % lines) * 128);
    }
  }
  wait_prior(); /* a2q and its scales come from GEMM1 (or the row quantization) */
  allow_next();
  const int32_t tiles = *a.num_tiles;
  const Geo2 geo{a, sorted_slots, tiles};
  const int64_t items = static_cast<int64_t>(tiles) * (a.H / kCols2);
  const int64_t first = blockIdx.x;
  Feeder<Geo2> fd;
  fd.stride = gridDim.x;
  fd.items = items;
  fd.k0 = static_cast<int64_t>(kb0) * kBlockK;
  fd.nc = 2 * (kb1 - kb0);
  fd.start(geo, first);
  fill(geo, fd, ring);
  int32_t e_next = 0, slot_next = -1;
  if (first < items) {
    e_next = a.tile_expert[first % tiles];
    if (tid < kRows) slot_next = sorted_slots[(first % tiles) * kRows + tid];
  }
  int slot = 0;
  for (int64_t w = first; w < items; w += gridDim.x) {
    const int32_t e = e_next, my_slot = slot_next;
    if (w + gridDim.x < items) {
      const int64_t nt = (w + gridDim.x) % tiles;
      e_next = a.tile_expert[nt];
      if (tid < kRows) slot_next = sorted_slots[nt * kRows + tid];
    }
    __syncthreads(); /* the previous item is done with the partial sums */
    const bool h1 = __syncthreads_or(tid >= 8 && tid < kRows && my_slot >= 0) != 0;
    if (SCALE == FP8MOE_SCALE_BLOCK) {
      const int32_t nb0 = geo.n0(w) / kBlockK, nb1 = (geo.n0(w) + 16) / kBlockK;
      const int64_t row0 = (w % tiles) * kRows;
      const int live_rows = h1 ? kRows : 8;
      stage_scales(sm.u.bs, kblocks, a.a2_scale.dt, a.w_scale.dt,
                   [&](int row, int kb, const fp8moe_kref*& r, int64_t& off) {
                     if (row < 2) {
                       r = &a.w_scale;
                       off = e * a.w_scale.s[0] + (row == 0 ? nb0 : nb1) * a.w_scale.s[1] + kb * a.w_scale.s[2];
                       return true;
                     }
                     r = &a.a2_scale;
                     off = (row0 + row - 2) * a.a2_scale.s[0] + kb * a.a2_scale.s[1];
                     return row - 2 < live_rows;
                   });
      __syncthreads();
    }
    float acc[2][2][4];
    consume<SCALE == FP8MOE_SCALE_BLOCK>(geo, fd, ring, slot, h1, kb0, sm.u.bs, acc);
    __syncthreads(); /* every warp is done with the scales, whose memory the partial sums reuse */
    stash(sm.u.red, acc, h1);
    __syncthreads();
    gemm2_epilogue<SCALE>(a, geo, sm, e, w, h1);
  }
  cp_async_wait_group<0>();
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_gemm1_decode(const fp8moe_gemm1_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->max_tiles == 0) return cudaSuccess;
  const int64_t most = static_cast<int64_t>(a->max_tiles) * (a->I / FP8MOE_GEMM_TILE_N) * kCluster;
  int64_t ctas = a->max_ctas / kCluster * kCluster;
  if (ctas < kCluster) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(most < ctas ? most : ctas));
  void (*kernel)(fp8moe_gemm1_args) = gemm1_decode_kernel<FP8MOE_SCALE_TENSOR>;
  if (a->scale_mode == FP8MOE_SCALE_BLOCK) kernel = gemm1_decode_kernel<FP8MOE_SCALE_BLOCK>;
  if (a->scale_mode == FP8MOE_SCALE_ROW) kernel = gemm1_decode_kernel<FP8MOE_SCALE_ROW>;
  const cudaError_t e = launch_pdl(kernel, grid, dim3(kDecThreads), kRingBytes, stream, *a);
  return static_cast<int>(e);
}

extern "C" int fp8moe_launch_gemm2_decode(const fp8moe_gemm2_args* a, const int32_t* sorted_slots,
                                          cudaStream_t stream) {
  using namespace fp8moe;
  if (a->max_tiles == 0) return cudaSuccess;
  const int64_t most = static_cast<int64_t>(a->max_tiles) * (a->H / kCols2);
  const int64_t ctas = a->max_ctas > 0 ? a->max_ctas : 1;
  const dim3 grid(static_cast<unsigned>(most < ctas ? most : ctas));
  void (*kernel)(fp8moe_gemm2_args, const int32_t*) = gemm2_decode_kernel<FP8MOE_SCALE_TENSOR>;
  if (a->scale_mode == FP8MOE_SCALE_BLOCK) kernel = gemm2_decode_kernel<FP8MOE_SCALE_BLOCK>;
  if (a->scale_mode == FP8MOE_SCALE_ROW) kernel = gemm2_decode_kernel<FP8MOE_SCALE_ROW>;
  const cudaError_t e = launch_pdl(kernel, grid, dim3(kDecThreads), kRingBytes, stream, *a, sorted_slots);
  return static_cast<int>(e);
}

/* Opts a decode kernel into the ring's dynamic shared memory (static + dynamic exceeds the 48 KB default)
 * and asks for the largest shared-memory carveout, so FP8MOE_DECODE_CTAS_PER_SM CTAs fit on an SM. */
template <class Kernel>
static cudaError_t allow_ring(Kernel kernel) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(fp8moe::kRingBytes));
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  return e;
}

/* The decode kernels' grids on the current device: every CTA resident at once (they are persistent; a
 * cluster that could not start until others finish would run its items after them, as a tail). GEMM1:
 * the most clusters of 8 that can be co-resident, × 8; GEMM2: SMs × resident CTAs per SM. 0 when a query
 * fails or nothing fits (the host then keeps the tile GEMMs; a failed query does not fail the context). */
extern "C" int fp8moe_prepare_gemm_decode(int32_t sm_count, int32_t* ctas1, int32_t* ctas2) {
  using namespace fp8moe;
  *ctas1 = 0;
  *ctas2 = 0;
  int clusters = -1;
  void (*const k1[3])(fp8moe_gemm1_args) = {gemm1_decode_kernel<FP8MOE_SCALE_TENSOR>,
                                            gemm1_decode_kernel<FP8MOE_SCALE_BLOCK>,
                                            gemm1_decode_kernel<FP8MOE_SCALE_ROW>};
  for (int i = 0; i < 3; ++i) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(kCluster * sm_count));
    cfg.blockDim = dim3(kDecThreads);
    cfg.dynamicSmemBytes = kRingBytes;
    int n = 0;
    if (allow_ring(k1[i]) != cudaSuccess || cudaOccupancyMaxActiveClusters(&n, k1[i], &cfg) != cudaSuccess) {
      (void)cudaGetLastError(); /* not an error of the context: the decode kernels just stay unused */
      return cudaSuccess;
    }
    if (clusters < 0 || n < clusters) clusters = n;
  }
  int per_sm = -1;
  void (*const k2[3])(fp8moe_gemm2_args, const int32_t*) = {gemm2_decode_kernel<FP8MOE_SCALE_TENSOR>,
                                                            gemm2_decode_kernel<FP8MOE_SCALE_BLOCK>,
                                                            gemm2_decode_kernel<FP8MOE_SCALE_ROW>};
  for (int i = 0; i < 3; ++i) {
    int n = 0;
    if (allow_ring(k2[i]) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k2[i], kDecThreads, kRingBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return cudaSuccess;
    }
    if (per_sm < 0 || n < per_sm) per_sm = n;
  }
  *ctas1 = clusters > 0 ? clusters * kCluster : 0;
  *ctas2 = per_sm > 0 ? per_sm * sm_count : 0;
  return cudaSuccess;
}
