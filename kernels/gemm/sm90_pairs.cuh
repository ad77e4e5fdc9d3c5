/* sm90_pairs.cuh — what the two 128-row wgmma GEMMs (gemm1_wgmma128_sm90.cu, gemm2_wgmma128_sm90.cu) share:
 * work items on *pairs* of consecutive 64-row tiles of one expert (the layout keeps tile_m = 64), the pair
 * list each CTA builds in shared memory from the device's num_tiles and tile_expert (graph-capturable, no
 * extra launch), the shared-memory layout of their 4-stage ring (per stage two 8 KB A tiles, rows 0..63 and
 * 64..127 of the pair, and two 16 KB B boxes that both consumer warpgroups read), and the consumer main loop:
 * warpgroup w multiplies A tile w by B box 0, promotes, then by B box 1, promotes, per 128-K stage (GEMM1's
 * alternating items: one 64-row tile per item, the warpgroup that owns the item multiplies A tile 0).
 * docs/GPU.md "128-row GEMM1 items", "Alternating 64-row items" and "128-row GEMM2 items" have the arithmetic. */
#ifndef FP8MOE_KERNELS_SM90_PAIRS_CUH
#define FP8MOE_KERNELS_SM90_PAIRS_CUH

#include <stddef.h>

#include "group_edges.cuh"
#include "ordered_append.cuh"
#include "wgmma_sm90.cuh"

namespace fp8moe {
namespace sm90 {

struct PairStage {
  uint8_t a[2][kATileBytes]; /* rows 0..63 and 64..127 of the pair, 128-byte swizzle */
  uint8_t b[2][kBTileBytes]; /* GEMM1: gate rows, up rows; GEMM2: output columns n0.., n0 + 128.. */
};
static_assert(sizeof(PairStage) % 1024 == 0, "tiles stay 1024-byte aligned for the 128-byte swizzle");

constexpr int kPairWarps = kConsumers / 32; /* the warps that build the pair list */
static_assert(FP8MOE_GEMM1_PAIR_MAX_TILES <= FP8MOE_SM90_PAIR_TWO, "tile numbers fit below the pair entry's flag bit");

struct PairSmem {
  PairStage st[kStages];
  uint64_t full[kStages];
  uint64_t empty[kStages];
  uint64_t list_ready; /* one arrival per consumer thread (publish_pairs): the pair list and num_pairs are written */
  uint64_t turn[2];    /* GEMM1, alternating items: warpgroup w may start its next main loop (one arrival per
                          warp of the other warpgroup) */
  int32_t stage_item[kStages]; /* GEMM1, claimed items: the item of the stage that starts it (−1: no more) */
  int32_t claim[2];            /* GEMM1, claimed items: the producer's next item, by item parity */
  int32_t done[2];             /* GEMM1, claimed alternating items: warpgroup w met the end (released by its turn
                                  arrivals; per warpgroup, so a warp never reads its own warpgroup's flag) */
  float row_scale[kStages][2 * kBM];          /* GEMM1, BLOCK: each stage's 128 activation row scales (0: padding) */
  float w_scale[kStages][4];                  /* GEMM1, BLOCK: each stage's gate and up weight-block scales */
  int32_t num_pairs;                          /* the pair list's length */
  int32_t warp_count[kPairWarps];             /* the pair list's compaction, per warp */
  uint16_t pair_first[FP8MOE_GEMM1_PAIR_MAX_TILES]; /* first tile | kPairTwo */
  int16_t first_tile[FP8MOE_GEMM1_PAIR_MAX_EXPERTS]; /* first tile of each expert that has one */
  /* GEMM1's 2-CTA clusters with claimed units (last, so the fields above keep their offsets in every kernel):
   * rank 0's producer hands each unit it claims to rank 1 through peer_claim (claim_full in rank 1, one arrival
   * by rank 0; claim_empty in rank 0, one arrival by rank 1 once it has read the slot) */
  uint64_t claim_full;
  uint64_t claim_empty;
  int32_t peer_claim;
  /* GEMM1's pair items with expert-aligned groups (a.aligned_groups; build_pair_edges): the edges over pairs and the
   * bitmap of the pairs that start an expert (one bit per pair and one past the last) */
  int32_t pair_edges[FP8MOE_SM90_MAX_GROUP_EDGES];
  uint32_t pair_bits[FP8MOE_GEMM1_PAIR_MAX_TILES / 32 + 1];
};
constexpr size_t kPairSmemBytes = sizeof(PairSmem) + 1024; /* + slack to align the dynamic buffer to 1024 */
/* GEMM1's alternating items keep no pair list: with expert-aligned groups (a.aligned_groups) pair_first holds the
 * group edges (int32 [FP8MOE_SM90_MAX_GROUP_EDGES]) and after them the expert-start bitmap, one bit per tile and
 * one past the last: up to kAlignedMaxTiles tiles, which the launcher checks. */
constexpr uint32_t kAlignedBitsOffset = 4u * FP8MOE_SM90_MAX_GROUP_EDGES;
constexpr int64_t kAlignedMaxTiles = 32 * ((sizeof(PairSmem::pair_first) - kAlignedBitsOffset) / 4u) - 1;
static_assert(kAlignedMaxTiles >= 1023 * 64, "the bitmap holds the edge bound's tiles with groups of 64 (the cap)");
static_assert(kPairSmemBytes <= 227u * 1024u, "within Hopper's 227 KB of dynamic shared memory per block");

#if FP8MOE_SM90A
constexpr uint32_t kPairTwo = FP8MOE_SM90_PAIR_TWO; /* pair_first bit: the pair has a second tile */

__device__ __forceinline__ PairSmem& pair_smem_of(uint8_t* raw) {
  return *reinterpret_cast<PairSmem*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~static_cast<uintptr_t>(1023));
}

/* The layout's parts as 32-bit shared-memory addresses: the main loops keep one register for the layout
 * instead of 64-bit generic pointers (the consumers' 192 accumulator registers leave ~40 of their 232, the
 * producers have 40 in all). */
struct PairAddr {
  uint32_t base; /* the 1024-aligned PairSmem */
  __device__ __forceinline__ uint32_t a(uint32_t s, int half) const {
    return base + s * static_cast<uint32_t>(sizeof(PairStage)) + static_cast<uint32_t>(half * kATileBytes);
  }
  __device__ __forceinline__ uint32_t b(uint32_t s, int k) const {
    return base + s * static_cast<uint32_t>(sizeof(PairStage)) +
           static_cast<uint32_t>(offsetof(PairStage, b) + k * kBTileBytes);
  }
  __device__ __forceinline__ uint32_t full(uint32_t s) const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, full)) + 8u * s;
  }
  __device__ __forceinline__ uint32_t empty(uint32_t s) const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, empty)) + 8u * s;
  }
  __device__ __forceinline__ uint32_t row_scale(uint32_t s, int row) const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, row_scale)) + 4u * (s * 2u * kBM + static_cast<uint32_t>(row));
  }
  __device__ __forceinline__ uint32_t w_scale(uint32_t s, int k) const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, w_scale)) + 4u * (s * 4u + static_cast<uint32_t>(k));
  }
  __device__ __forceinline__ uint32_t list_ready() const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, list_ready));
  }
  __device__ __forceinline__ uint32_t turn(int wg) const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, turn)) + 8u * static_cast<uint32_t>(wg);
  }
  __device__ __forceinline__ uint32_t stage_item(uint32_t s) const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, stage_item)) + 4u * s;
  }
  __device__ __forceinline__ uint32_t claim(uint32_t k) const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, claim)) + 4u * (k & 1u);
  }
  __device__ __forceinline__ uint32_t done(int wg) const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, done)) + 4u * static_cast<uint32_t>(wg);
  }
  __device__ __forceinline__ uint32_t claim_full() const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, claim_full));
  }
  __device__ __forceinline__ uint32_t claim_empty() const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, claim_empty));
  }
  __device__ __forceinline__ uint32_t peer_claim() const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, peer_claim));
  }
  __device__ __forceinline__ uint32_t num_pairs() const {
    return base + static_cast<uint32_t>(offsetof(PairSmem, num_pairs));
  }
  __device__ __forceinline__ uint32_t group_edges() const { /* alternating items: in pair_first's bytes */
    return base + static_cast<uint32_t>(offsetof(PairSmem, pair_first));
  }
  __device__ __forceinline__ uint32_t pair_edges() const { /* pair items: build_pair_edges */
    return base + static_cast<uint32_t>(offsetof(PairSmem, pair_edges));
  }
  __device__ __forceinline__ uint32_t pair_first(int32_t pair) const { /* an entry, ld.shared.u16 */
    uint16_t v;
    asm volatile("ld.shared.u16 %0, [%1];\n"
                 : "=h"(v)
                 : "r"(base + static_cast<uint32_t>(offsetof(PairSmem, pair_first)) + 2u * static_cast<uint32_t>(pair))
                 : "memory");
    return v;
  }
};

__device__ __forceinline__ PairAddr pair_addr_of(uint8_t* raw) { return PairAddr{(saddr(raw) + 1023u) & ~1023u}; }

/* 2-CTA clusters (GEMM1's cluster pairs): an arrive by lane 0 of the warp on the mbarrier at the same offset in
 * cluster CTA `peer`, predicated inside the asm (a divergent branch between a wgmma's issue and its wait makes
 * ptxas serialize the loop's wgmmas: docs/GPU.md "2-CTA clusters"). Default .release.cta semantics, as
 * mbar_arrive_cluster (wgmma_sm90.cuh): the peer's barrier guards only the B boxes its producer multicasts into
 * this CTA, which the async proxy wrote and this warp's wgmmas have finished reading when it arrives. */
__device__ __forceinline__ void mbar_arrive_peer_lane0(uint32_t b, uint32_t peer) {
  asm volatile(
      "{\n.reg .b32 ra, lane;\n.reg .pred p;\n"
      "mov.u32 lane, %%laneid;\n"
      "setp.eq.u32 p, lane, 0;\n"
      "mapa.shared::cluster.u32 ra, %0, %1;\n"
      "@p mbarrier.arrive.shared::cluster.b64 _, [ra];\n"
      "}\n" ::"r"(b),
      "r"(peer)
      : "memory");
}

/* Named barrier among the producer warpgroup's 128 threads (id 4: 0 is __syncthreads, 1 the consumers'). */
__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 4, 128;\n" ::: "memory"); }

/* Barrier setup by thread 0 (the caller's CTA barrier, before the warpgroups split, publishes it): full counts
 * full_count arrivals (the TMA issuer's expect_tx, plus any gathering producer threads), empty empty_count
 * (every consumer thread of the warpgroups that read a stage), list_ready one per consumer thread
 * (publish_pairs), turn one per warp of a consumer warpgroup. */
__device__ __forceinline__ void init_pair_barriers(uint8_t* raw, uint32_t full_count, uint32_t empty_count = kConsumers) {
  if (threadIdx.x == 0) {
    PairSmem& sm = pair_smem_of(raw);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&sm.full[s], full_count);
      mbar_init(&sm.empty[s], empty_count);
    }
    mbar_init(&sm.list_ready, kConsumers);
    mbar_init(&sm.turn[0], kConsumers / 64); /* one arrival per warp of the warpgroup that hands over */
    mbar_init(&sm.turn[1], kConsumers / 64);
    sm.done[0] = sm.done[1] = 0;
    mbar_init_fence();
  }
}

/* The 256 consumer threads (after setmaxnreg, so this runs in their registers; ptxas budgets code before the
 * warpgroups' split at the producers' 40): the pair list of the first `tiles` tiles into sm.pair_first, in
 * tile order, and its length into sm.num_pairs (and returned). tile_expert is non-decreasing (permute.cu: experts
 * in order, each padded to whole tiles), so tile t starts a pair when t − (its expert's first tile) is even. The
 * caller then publishes the list (publish_pairs). */
__device__ __forceinline__ int32_t build_pairs(PairSmem& sm, const int32_t* tile_expert, int32_t tiles) {
  const int ct = static_cast<int>(threadIdx.x) - 128, warp = ct / 32;
  for (int32_t t = ct; t < tiles; t += kConsumers) {
    const int32_t e = tile_expert[t];
    if (t == 0 || tile_expert[t - 1] != e) sm.first_tile[e] = static_cast<int16_t>(t);
  }
  consumer_sync();
  int32_t base = 0;
#pragma unroll 1
  for (int32_t c0 = 0; c0 < tiles; c0 += kConsumers) {
    const int32_t t = c0 + ct;
    bool start = false;
    uint32_t word = 0;
    if (t < tiles) start = fp8moe_sm90_pair_start(tile_expert, tiles, t, sm.first_tile[tile_expert[t]], &word) != 0;
    base = ordered_append<kPairWarps>(start, static_cast<uint16_t>(word), warp, base, sm.warp_count, sm.pair_first,
                                      [] { consumer_sync(); });
  }
  if (ct == 0) sm.num_pairs = base;
  return base; /* the same in every consumer thread */
}

/* The alternating items' expert-aligned group edges (a.aligned_groups; group_edges.cuh), by the 256 consumer threads
 * in place of build_pairs, published the same way (publish_pairs): the edges and then the bitmap in pair_first's
 * bytes. */
__device__ __forceinline__ void build_group_edges(PairSmem& sm, const int32_t* tile_expert, int32_t tiles,
                                                  int32_t group) {
  uint32_t* const bytes = reinterpret_cast<uint32_t*>(sm.pair_first);
  fp8moe::build_group_edges<kConsumers>(reinterpret_cast<int32_t*>(bytes), bytes + kAlignedBitsOffset / 4u, tile_expert,
                                        tiles, group, static_cast<int32_t>(threadIdx.x) - 128, [] { consumer_sync(); });
}

/* The pair items' expert-aligned group edges (a.aligned_groups; group_edges.cuh over pairs in place of tiles), by the
 * 256 consumer threads after build_pairs (pairs: its return) and before publish_pairs: pair p starts an expert where
 * its first tile's expert differs from pair p − 1's. build_pairs' last ordered_append ends on the consumers' barrier,
 * so the list is complete here (num_pairs is not yet published: hence the count by argument). */
__device__ __forceinline__ void build_pair_edges(PairSmem& sm, const int32_t* tile_expert, int32_t pairs,
                                                 int32_t group) {
  auto first_tile = [&](int32_t p) { return static_cast<int32_t>(sm.pair_first[p] & (kPairTwo - 1u)); };
  fp8moe::build_group_edges_by<kConsumers>(
      sm.pair_edges, sm.pair_bits, pairs, group, static_cast<int32_t>(threadIdx.x) - 128, [] { consumer_sync(); },
      [&](int32_t p) { return tile_expert[first_tile(p)] != tile_expert[first_tile(p - 1)]; });
}

/* After build_pairs, by every consumer thread: the list to the other consumers (their barrier) and to the
 * producer warpgroup through list_ready, which it waits for (wait_pairs). Every consumer thread arrives
 * (release) for its own stores: compute-sanitizer's racecheck pairs an arrive with the waits on it but does
 * not carry other threads' stores through a named barrier to one arriving thread, nor two __syncthreads at
 * different instructions (the two roles' CTA barriers before); both reported the list's stores against the
 * producer's reads (docs/GPU.md "128-row GEMM1 items"). */
__device__ __forceinline__ void publish_pairs(PairSmem& sm) {
  consumer_sync();
  mbar_arrive(&sm.list_ready);
}
__device__ __forceinline__ void wait_pairs(PairAddr sm) { mbar_wait(sm.list_ready(), 0u); }

/* One item's pair: its first tile and whether it has a second (entry `pair` of the list). */
struct Pair {
  int32_t tile0;
  bool two;
};
__device__ __forceinline__ Pair pair_of(PairAddr sm, int32_t pair) {
  const uint32_t pf = sm.pair_first(pair);
  return {static_cast<int32_t>(pf & (kPairTwo - 1u)), (pf & kPairTwo) != 0};
}

/* Consumer warpgroup wg, one item: per stage the 4 wgmmas of A tile wg by B box 0 into p, wait, promote into
 * acc0, then the 4 by B box 1 into p, wait, release the stage, promote into acc1. Each promotion is
 * promote_stage_fold_if (wgmma_sm90.cuh): BLOCK acc += p·(s_row·s_w) with the thread's row scales c0 (row r0),
 * c1 (r0 + 8) and the box's weight-block scale cw0 / cw1 where the warp's vote allows the fold for both boxes
 * (fold_allowed in every lane), else the unfolded (p·s_row)·s_w; otherwise acc += p. Stages in order, so wherever
 * every lane may fold the sums are the 64-row kernels' bit for bit (the same wgmmas on the same 64-row A tile and
 * 128-row B box, the same promotion per element; those decide per thread and box). scales(s, kb, c0, c1, cw0,
 * cw1) fetches the block scales: after the stage's full wait when STAGED (the producer put them in the stage,
 * GEMM1), before it otherwise (global loads whose latency the wait and the wgmmas hide, GEMM2). The other consumer
 * warpgroup runs its own products meanwhile: one's promotion overlaps the other's wgmmas.
 *
 * Early waits (all but GEMM2's BLOCK form, whose scales load before the wait): stage kb + 1's full wait (and the
 * proxy fence) run while stage kb's box-1 wgmmas do, off the warpgroup's serial chain (wait, products, promotions:
 * with two warpgroups it must fit in the other's 512 tensor-core cycles per stage; docs/GPU.md "The main loop's
 * chain"). The last stage waits on itself again (complete, so at once) rather than branching: every control-flow
 * merge then has the same wgmma groups in flight (none at the loop head), so ptxas keeps the wgmmas async; and it
 * never waits on a stage of the next item (GEMM1's alternating items give that to the other warpgroup). Stage
 * kb + 1 is waited for before stage kb is released: a different slot, filled without kb's release (kStages ≥ 2).
 * PEERS = 2 (GEMM1's 2-CTA pair clusters): lane 0 of each warp also releases the stage in the peer CTA, whose
 * producer may multicast a B box into this CTA's copy of it. */
template <bool BLOCK, bool STAGED, bool GATHERED, int PEERS = 1, class Scales>
__device__ __forceinline__ void consume_pair(PairAddr sm, int wg, int kblocks, uint32_t& it, float (&acc0)[64],
                                             float (&acc1)[64], Scales scales) {
  constexpr bool kEarly = STAGED || !BLOCK;
  const uint32_t peer = PEERS > 1 ? cluster_ctarank() ^ 1u : 0u;
  float p[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc0[i] = acc1[i] = 0.0f;
  auto wait_full = [&](uint32_t pos) {
    mbar_wait(sm.full(pos % kStages), (pos / kStages) & 1u);
    if (GATHERED) fence_proxy_async(); /* A came by cp.async (generic proxy): publish_gathered */
  };
  if (kEarly) wait_full(it);
#pragma unroll 1
  for (int kb = 0; kb < kblocks; ++kb) {
    const uint32_t pos = it + static_cast<uint32_t>(kb);
    const uint32_t s = pos % kStages;
    float c0 = 0.0f, c1 = 0.0f, cw0 = 0.0f, cw1 = 0.0f;
    if (BLOCK && !STAGED) scales(s, kb, c0, c1, cw0, cw1);
    if (!kEarly) wait_full(pos);
    const uint64_t da = desc_sw128(sm.a(s, wg));
    const uint64_t db0 = desc_sw128(sm.b(s, 0)), db1 = desc_sw128(sm.b(s, 1));
    if (BLOCK && STAGED) scales(s, kb, c0, c1, cw0, cw1);
    wgmma_fence();
    fence_regs(p);
#pragma unroll
    for (int kk = 0; kk < kBK / 32; ++kk) wgmma_m64n128k32(p, da + 2 * kk, db0 + 2 * kk, kk > 0);
    wgmma_commit();
    /* One fold decision per warp and stage for both products, taken while the wgmmas run (a vote: the promotions
     * then branch once, uniformly, and the scale tests leave the chain); any lane or product outside the fold's
     * range sends the warp's stage down the unfolded form. */
    const bool fold = BLOCK && __all_sync(0xffffffffu, fold_allowed(c0, c1, cw0) & fold_allowed(c0, c1, cw1));
    wgmma_wait<0>();
    fence_regs(p);
    promote_stage_fold_if<BLOCK>(acc0, p, c0, c1, cw0, fold);
    wgmma_fence(); /* p was read by the promotion: order those reads before the next wgmmas overwrite it */
    fence_regs(p);
#pragma unroll
    for (int kk = 0; kk < kBK / 32; ++kk) wgmma_m64n128k32(p, da + 2 * kk, db1 + 2 * kk, kk > 0);
    wgmma_commit();
    if (kEarly) wait_full(kb + 1 < kblocks ? pos + 1u : pos);
    wgmma_wait<0>();
    fence_regs(p);
    mbar_arrive(sm.empty(s)); /* both products of this warpgroup are done with the stage */
    if (PEERS > 1) mbar_arrive_peer_lane0(sm.empty(s), peer); /* the peer may multicast into this stage's B */
    promote_stage_fold_if<BLOCK>(acc1, p, c0, c1, cw1, fold);
  }
  it += static_cast<uint32_t>(kblocks);
}

/* The second consumer warpgroup of a single pair (no second tile): nothing to compute, but it passes every
 * stage (waits for it to land, so its arrival counts toward this use of the stage, then releases it), keeping
 * the empty barrier's 256 arrivals per phase exact (PEERS = 2: and the peer's, as consume_pair). */
template <int PEERS = 1>
__device__ __forceinline__ void pass_stages(PairAddr sm, int kblocks, uint32_t& it) {
  const uint32_t peer = PEERS > 1 ? cluster_ctarank() ^ 1u : 0u;
#pragma unroll 1
  for (int kb = 0; kb < kblocks; ++kb) {
    const uint32_t pos = it + static_cast<uint32_t>(kb);
    const uint32_t s = pos % kStages;
    mbar_wait(sm.full(s), (pos / kStages) & 1u);
    mbar_arrive(sm.empty(s));
    if (PEERS > 1) mbar_arrive_peer_lane0(sm.empty(s), peer);
  }
  it += static_cast<uint32_t>(kblocks);
}
#endif /* FP8MOE_SM90A */

}  // namespace sm90
}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_SM90_PAIRS_CUH */
