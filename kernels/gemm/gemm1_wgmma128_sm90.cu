/* gemm1_wgmma128_sm90.cu — grouped GEMM1 on Hopper with 128-row work items (the default from 256 rows per
 * expert, 128 at H ≥ 7168; FP8MOE_CUDA_GEMM_FALLBACK "v" switches it off; docs/GPU.md "128-row GEMM1 items"),
 * and, ALT below, the default kernel for the 64-row items. Same contract and arithmetic as gemm1_wgmma_sm90.cu (the same
 * per-stage partial sums promoted in stage order, the same epilogue operations per element), so it writes
 * the same bits; what changes is the shape of a work item and with it the L2→SM bytes per tensor-core cycle.
 *
 * Work item: a *pair* of consecutive 64-row tiles of one expert (the layout keeps tile_m = 64; an expert with
 * n tiles gives ceil(n/2) pairs, the last one single when n is odd) × 128 intermediate columns. Per stage the
 * producer warpgroup gathers the pair's 128 token rows into two 8 KB swizzled A tiles with cp.async and one
 * thread loads the 128 gate rows and the 128 up rows of W13[e] by TMA (two 16 KB boxes, as the 64-row
 * kernel); consumer warpgroup w multiplies A tile w (rows 64w..64w+63) by both B tiles: 4 gate wgmmas into
 * one partial, promoted into acc_gate, then 4 up wgmmas into the same partial, promoted into acc_up. So a
 * stage moves A 16 KB + B 32 KB = 48 KB from L2 for 1,024 tensor-core cycles (the 64-row kernel: 40 KB for
 * 512). Each thread then holds gate and up of the same outputs: the activation, the 1×128 group amax (over
 * the 4 lanes of a quad) and the requantization run in registers, with no shared-memory round trip.
 *
 * The pair list, the ring's layout and the consumer main loop are sm90_pairs.cuh's (shared with the 128-row
 * GEMM2). The pair list is built by every CTA at start in shared memory from the device's num_tiles and tile_expert
 * (graph-capturable, no extra launch): the first tile of each expert, then the tiles at an even distance from
 * it, in tile order (bit 15 of an entry: the pair has a second tile). Items = pairs × column blocks, walked in
 * the grouped order of sm90_items.h with pairs in place of tiles (a.aligned_groups: its edges at experts' first
 * pairs, built after the list; docs/GPU.md "Expert-aligned groups"). Limits: max_tiles ≤
 * FP8MOE_GEMM1_PAIR_MAX_TILES, E_local ≤ FP8MOE_GEMM1_PAIR_MAX_EXPERTS (the plan's needs; the launcher refuses
 * beyond them).
 *
 * Alternating (ALT, a.alternate; docs/GPU.md "Alternating 64-row items"): items are single 64-row tiles × 128
 * columns (the 64-row kernel's items, no pair list), and the two consumer warpgroups take the CTA's items in
 * turns, each computing gate and up of its whole tile: so one warpgroup's epilogue (activation,
 * requantization, stores: no wgmma for thousands of cycles) runs while the other's main loop keeps the
 * tensor cores and the ring busy, where gemm1_wgmma_sm90.cu stops both. A warpgroup starts its main loop only
 * after the other has passed every full wait of the previous item (`turn` barriers): the ring's stages go to
 * the items in order, and a parity wait must never be two phases ahead. Empty barriers count one warpgroup.
 *
 * Claimed items (a.item_counter; docs/GPU.md "Claimed items"): after the first wave the CTAs claim their items
 * in order from a zeroed counter instead of walking b, b + grid, …, so the CTAs that share a group's B slices
 * and A rows stay close in time and meet in L2; the producer tells the consumers each item through the item's
 * first stage (stage_item), and ends with a stage that carries item −1. */
#include "scale_div.h"
#include "sm90_pairs.cuh"

namespace fp8moe {
namespace sm90 {
namespace {

/* An activation as a type, so a generic lambda sees it as a compile-time constant (decltype(tag)::value). */
template <int32_t ACT>
struct ActivationTag {
  static constexpr int32_t value = ACT;
};

#if FP8MOE_SM90A
/* One 16-byte chunk of a gathered row: x + row · stride + off (mad.wide inside the asm, so the 64-bit
 * address lives only here: the producer keeps a 32-bit row number per row instead of a 64-bit pointer);
 * bytes = 0 zero-fills. */
__device__ __forceinline__ void cp_async_row16(uint32_t dst, const uint8_t* x_off, uint32_t row, uint32_t stride,
                                               int bytes) {
  asm volatile(
      "{\n.reg .u64 src;\n"
      "mad.wide.u32 src, %1, %2, %3;\n"
      "cp.async.cg.shared.global [%0], [src], 16, %4;\n"
      "}\n" ::"r"(dst),
      "r"(row), "r"(stride), "l"(x_off), "r"(bytes)
      : "memory");
}

/* Claimed items, the producer warpgroup past the last item: the next stage in ring order carries item −1 and
 * no data (every producer thread waits for the slot, as for a stage, and gives its kGatherArrivals arrivals;
 * thread 0 one more, in place of its expect_tx), so the consumer warpgroup that waits for it there learns
 * that the CTA is done. */
__device__ __forceinline__ void end_claims(PairAddr sm, uint32_t it) {
  const uint32_t s = it % kStages;
  mbar_wait(sm.empty(s), ((it / kStages) & 1u) ^ 1u);
  if (threadIdx.x == 0) st_shared_s32(sm.stage_item(s), -1);
  mbar_arrive_count(sm.full(s), kGatherArrivals + (threadIdx.x == 0 ? 1u : 0u));
}

/* CLUSTER (2-CTA clusters of pair items, docs/GPU.md "2-CTA pair clusters"): a unit of work is the item pair
 * (2u, 2u + 1) of the grouped order; rank r computes item 2u + r, and past the last item rank 1 passes the
 * stages of a shadow of item 2u (loaded, so that rank 0 still gets its multicast box, not computed). Where both
 * items need the same B boxes (one column block, one expert: cluster_shares_b) each CTA's thread 0 loads box
 * `rank` (gate rows for rank 0, up rows for rank 1) and multicasts it into both CTAs; otherwise each loads both.
 * Either way a CTA's full barrier expects 32 KB, and its empty barrier counts its own 256 consumer threads and
 * one arrival per consumer warp of the peer (consume_pair's PEERS), since either producer may write into both. */
__device__ __forceinline__ bool cluster_shares_b(const fp8moe_gemm1_args& a, PairAddr sm, int32_t u, int32_t pairs,
                                                 int32_t col_blocks) {
  const int32_t items = pairs * col_blocks;
  if (2 * u + 1 >= items) return true; /* the shadow: rank 1 loads what rank 0 does */
  const fp8moe_sm90_item i0 = fp8moe_sm90_item_of(2 * u, pairs, col_blocks, a.item_order, a.item_group);
  const fp8moe_sm90_item i1 = fp8moe_sm90_item_of(2 * u + 1, pairs, col_blocks, a.item_order, a.item_group);
  const int32_t t0 = static_cast<int32_t>(sm.pair_first(i0.tile) & (kPairTwo - 1u));
  const int32_t t1 = static_cast<int32_t>(sm.pair_first(i1.tile) & (kPairTwo - 1u));
  return i0.col_block == i1.col_block && a.tile_expert[t0] == a.tile_expert[t1];
}

/* Claimed units in a cluster: rank 0's thread 0 claims for both CTAs and hands each claim to rank 1 (one slot,
 * a full/empty barrier pair at cluster scope: the slot is a plain store into the peer's shared memory, so its
 * release and acquire must reach the peer; once per unit, off the stages' path). */
__device__ __forceinline__ void st_peer_s32(uint32_t addr, uint32_t peer, int32_t v) {
  asm volatile(
      "{\n.reg .b32 ra;\n"
      "mapa.shared::cluster.u32 ra, %0, %1;\n"
      "st.shared::cluster.s32 [ra], %2;\n"
      "}\n" ::"r"(addr),
      "r"(peer), "r"(v)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive_peer_release(uint32_t b, uint32_t peer) {
  asm volatile(
      "{\n.reg .b32 ra;\n"
      "mapa.shared::cluster.u32 ra, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n"
      "}\n" ::"r"(b),
      "r"(peer)
      : "memory");
}
__device__ __forceinline__ void mbar_wait_acquire_cluster(uint32_t b, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(b),
      "r"(parity)
      : "memory");
}
/* Thread 0 of each producer warpgroup, after the unit's stages (k: the CTA's unit count so far): rank 0 sends its
 * claim `next` once rank 1 has read the previous one; rank 1 receives it and frees the slot. */
__device__ __forceinline__ int32_t exchange_claim(PairAddr sm, uint32_t rank, uint32_t k, int32_t next) {
  if (rank == 0) {
    mbar_wait_acquire_cluster(sm.claim_empty(), (k & 1u) ^ 1u);
    st_peer_s32(sm.peer_claim(), 1u, next);
    mbar_arrive_peer_release(sm.claim_full(), 1u);
    return next;
  }
  mbar_wait_acquire_cluster(sm.claim_full(), k & 1u);
  const int32_t v = ld_shared_s32(sm.peer_claim());
  mbar_arrive_peer_release(sm.claim_empty(), 0u);
  return v;
}

/* Partitioned claims (a.partitioned; one-CTA kernel, claimed items; docs/GPU.md "L2 partitions"): the items' first
 * half in the grouped order is partition 0's, the rest partition 1's, each claimed from its own counter
 * (a.item_counter[0], [1]) by the CTAs whose SM sits in that L2 partition (a.sm_partition, bit s for SM s), so the
 * CTAs that share an expert's W13 slices and its A rows mostly read them through one partition, and the L2 fabric
 * between the partitions carries each line once rather than per reading CTA. A CTA whose half is exhausted claims
 * from the other; total (past the last item) when both are. */
__device__ __forceinline__ uint32_t sm_partition(const fp8moe_gemm1_args& a) {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(s));
  return s < 32u * FP8MOE_SM_PARTITION_WORDS ? (a.sm_partition[s >> 5] >> (s & 31u)) & 1u : 0u;
}
__device__ __forceinline__ int32_t claim_in_partition(const fp8moe_gemm1_args& a, uint32_t part, int32_t total) {
  const int32_t half = total / 2; /* selects, not an array indexed by part (that one went to local memory) */
  const int32_t own_base = part ? half : 0, own_n = part ? total - half : half;
  const int32_t other_base = part ? 0 : half, other_n = total - own_n;
  const int32_t i = static_cast<int32_t>(atomicAdd(a.item_counter + part, 1u));
  if (i < own_n) return own_base + i;
  const int32_t j = static_cast<int32_t>(atomicAdd(a.item_counter + (part ^ 1u), 1u));
  return j < other_n ? other_base + j : total;
}

/* Item w's tile (ALT) or pair and its column block (fp8moe_sm90_item_at): with a.aligned_groups through the
 * expert-aligned group edges the consumers built, over tiles (ALT, build_group_edges) or over pairs
 * (build_pair_edges; docs/GPU.md "Expert-aligned groups"). */
template <bool ALT>
__device__ __forceinline__ fp8moe_sm90_item pair_item(const fp8moe_gemm1_args& a, PairAddr sm, int32_t w, int32_t pairs,
                                                      int32_t col_blocks) {
  return fp8moe_sm90_item_at(w, pairs, col_blocks, a.item_order, a.item_group, a.aligned_groups,
                             static_cast<const int32_t*>(
                                 __cvta_shared_to_generic(ALT ? sm.group_edges() : sm.pair_edges())));
}

/* Producer warpgroup: thread p copies 16-byte chunk p % 8 of rows p / 8 + 16i (i < 8) of the pair's 128 rows
 * (rows 64.. into the second A tile); the rows of a missing second tile and padding rows are zero-filled.
 * Thread 0 loads both B boxes. BLOCK: the stage's block scales go to shared memory with it (thread p the
 * activation scale of row p / 8 + 16·(p % 8), thread 0 also the gate and up weight-block scales: F32 by
 * 4-byte cp.async in the stage's group, otherwise converted by load_f32 and stored), so the consumers keep
 * no scale addresses in their registers. Each thread's share of the stage's full barrier completes when its
 * copies land (publish_gathered; its plain arrive's release also covers the shared-memory stores), as
 * gemm1_wgmma_sm90.cu. */
template <bool BLOCK, bool F32, bool ALT, bool CLUSTER, bool SORTED>
__device__ __forceinline__ void produce_pairs(const fp8moe_gemm1_args& a, const CUtensorMap& map_w,
                                              const CUtensorMap& map_a, PairAddr sm, int kblocks) {
  static_assert(!(ALT && CLUSTER), "clusters of pair items only");
  static_assert(!(SORTED && (ALT || CLUSTER)), "expert-sorted rows: the one-CTA pair items only");
  constexpr int kRowSets = ALT ? 4 : 8; /* rows rb + 16i gathered per stage: one tile or two */
  constexpr int32_t kPeers = CLUSTER ? 2 : 1;
  const uint32_t rank = CLUSTER ? cluster_ctarank() : 0u;
  const int p = threadIdx.x, c = p & 7, rb = p >> 3;
  /* This thread's chunk in row rb of a tile, in the 128-byte swizzle (row % 8 is rb % 8 for every i). */
  const uint32_t dst0 = static_cast<uint32_t>(rb * kBK + ((c ^ (rb & 7)) << 4));
  const uint32_t stride = static_cast<uint32_t>(a.x_stride); /* ≤ UINT32_MAX: the launcher checks */
  uint32_t it = 0;
  const bool claimed = a.item_counter != nullptr;
  const bool parted = !CLUSTER && claimed && a.partitioned; /* the first item claimed too, from this SM's half */
  const uint32_t part = parted ? sm_partition(a) : 0u;
  /* pairs and items are re-read from shared memory per item rather than kept live across the K loop */
  int32_t w = static_cast<int32_t>(blockIdx.x) / kPeers; /* the item, or the cluster's unit (gridDim.x / 2 clusters) */
  for (uint32_t k = 0;; ++k) {
    const int32_t pairs = ALT ? *a.num_tiles : ld_shared_s32(sm.num_pairs()), col_blocks = a.I / kBN;
    if (parted && k == 0) { /* slot 1: rewritten only after item 0, when every thread has read it */
      if (p == 0) st_shared_s32(sm.claim(1u), claim_in_partition(a, part, pairs * col_blocks));
      producer_sync();
      w = ld_shared_s32(sm.claim(1u));
    }
    if (w >= (CLUSTER ? (pairs * col_blocks + 1) / 2 : pairs * col_blocks)) {
      if (claimed) end_claims(sm, it);
      break;
    }
    /* Claimed items: the CTA's next item (cluster: rank 0's, the unit), asked for one item ahead so the
     * atomic's latency hides under this item's stages (the first wave takes the first gridDim.x / kPeers
     * without asking). */
    int32_t next = 0;
    if (parted && p == 0) next = claim_in_partition(a, part, pairs * col_blocks);
    else if (claimed && p == 0 && rank == 0)
      next = static_cast<int32_t>(gridDim.x / kPeers + atomicAdd(a.item_counter, 1u));
    int32_t wi = w; /* this CTA's item */
    bool share = false;
    if (CLUSTER) {
      wi = kPeers * w + static_cast<int32_t>(rank) < pairs * col_blocks ? kPeers * w + static_cast<int32_t>(rank)
                                                                          : kPeers * w;
      if (p == 0) share = cluster_shares_b(a, sm, w, pairs, col_blocks);
    }
    const fp8moe_sm90_item item = pair_item<ALT>(a, sm, wi, pairs, col_blocks);
    const uint32_t pf = ALT ? 0u : sm.pair_first(item.tile);
    const int32_t tile0 = ALT ? item.tile : static_cast<int32_t>(pf & (kPairTwo - 1u));
    const bool two = !ALT && (pf & kPairTwo) != 0;
    const int32_t e = a.tile_expert[tile0];
    const int64_t row0 = static_cast<int64_t>(tile0) * kBM;
    uint32_t tok[kRowSets]; /* token of row rb + 16i (0 for a zero-filled row) */
    uint32_t valid = 0; /* bit i: row rb + 16i is a real row */
#pragma unroll
    for (int i = 0; i < kRowSets; ++i) {
      /* SORTED: no gathering (thread 0 loads the pair's rows by TMA), nothing read */
      const int32_t slot = !SORTED && (i < 4 || two) ? a.sorted_slots[row0 + rb + 16 * i] : -1;
      tok[i] = slot >= 0 ? static_cast<uint32_t>(slot / a.K) : 0u;
      valid |= slot >= 0 ? 1u << i : 0u;
    }
    int32_t stok = -1; /* BLOCK: the token of row rb + 16c, whose activation scale this thread stages */
    if (BLOCK) {
      const int32_t slot = (c < 4 || two) ? a.sorted_slots[row0 + rb + 16 * c] : -1;
      stok = slot >= 0 ? slot / a.K : -1;
    }
    const int32_t gate_row = (a.gate_first ? 0 : a.I) + item.col_block * kBN;
    const int32_t up_row = gate_row + (a.gate_first ? a.I : -a.I);
#pragma unroll 1
    for (int kb = 0; kb < kblocks; ++kb, ++it) {
      const uint32_t s = it % kStages;
      mbar_wait(sm.empty(s), ((it / kStages) & 1u) ^ 1u);
      if (p == 0) {
        if (claimed && kb == 0) st_shared_s32(sm.stage_item(s), w); /* released by the arrive below */
        /* SORTED: the pair's rows, one 64-row box per tile (a single pair's warpgroup 1 reads no A: one box); padding
         * rows come as they are in memory (never written) and the epilogue stores zeros for them */
        mbar_arrive_expect_tx(sm.full(s), 2 * kBTileBytes + (SORTED ? (two ? 2 : 1) * kATileBytes : 0));
        if (SORTED) {
          tma_load_2d(sm.a(s, 0), &map_a, sm.full(s), kb * kBK, static_cast<int32_t>(row0));
          if (two) tma_load_2d(sm.a(s, 1), &map_a, sm.full(s), kb * kBK, static_cast<int32_t>(row0 + kBM));
        }
        if (CLUSTER && share) {
          tma_load_3d_multicast(sm.b(s, static_cast<int>(rank)), &map_w, sm.full(s), kb * kBK,
                                rank == 0 ? gate_row : up_row, e, static_cast<uint16_t>(0x3));
        } else {
          tma_load_3d(sm.b(s, 0), &map_w, sm.full(s), kb * kBK, gate_row, e);
          tma_load_3d(sm.b(s, 1), &map_w, sm.full(s), kb * kBK, up_row, e);
        }
      }
      if (!SORTED) {
        const uint32_t dst = sm.a(s, 0) + dst0;
        const uint8_t* x_off = a.x + (c * 16 + kb * kBK);
#pragma unroll
        for (int i = 0; i < kRowSets; ++i) /* rows 64.. (i ≥ 4) land in the second A tile, right after the first */
          cp_async_row16(dst + static_cast<uint32_t>(16 * i * kBK), x_off, tok[i], stride, (valid >> i) & 1u ? 16 : 0);
      }
      if (BLOCK && (!ALT || c < 4)) {
        const uint32_t ds = sm.row_scale(s, rb + 16 * c);
        if (F32) {
          const float* xs = static_cast<const float*>(a.x_scale.data);
          cp_async_4(ds, stok >= 0 ? xs + stok * a.x_scale.s[0] + kb * a.x_scale.s[1] : xs, stok >= 0 ? 4 : 0);
        } else {
          st_shared_f32(ds, stok >= 0 ? scale_at<false>(a.x_scale, stok, kb, 0) : 0.0f);
        }
        if (p == 0) {
          if (F32) {
            const float* ws = static_cast<const float*>(a.w_scale.data) + e * a.w_scale.s[0] + kb * a.w_scale.s[2];
            cp_async_4(sm.w_scale(s, 0), ws + (gate_row / kBN) * a.w_scale.s[1], 4);
            cp_async_4(sm.w_scale(s, 1), ws + (up_row / kBN) * a.w_scale.s[1], 4);
          } else {
            st_shared_f32(sm.w_scale(s, 0), scale_at<false>(a.w_scale, e, gate_row / kBN, kb));
            st_shared_f32(sm.w_scale(s, 1), scale_at<false>(a.w_scale, e, up_row / kBN, kb));
          }
        }
      }
      publish_gathered(sm.full(s));
    }
    if (claimed) { /* thread 0's claim to the warpgroup; two slots, so a slot is rewritten only after all read it */
      if (CLUSTER && p == 0) next = exchange_claim(sm, rank, k, next);
      if (p == 0) st_shared_s32(sm.claim(k), next);
      producer_sync();
      w = ld_shared_s32(sm.claim(k));
    } else {
      w += static_cast<int32_t>(gridDim.x) / kPeers;
    }
  }
  cp_async_wait_all(); /* as gemm1_wgmma_sm90.cu */
}

#endif

/* SORTED (a.x_sorted; pair items, one CTA): A by TMA from the expert-sorted rows through map_a (docs/GPU.md
 * "Expert-sorted activations"); every other instantiation ignores map_a. */
template <int SCALE, bool F32, bool ALT, bool CLUSTER = false, bool SORTED = false>
__global__ void __launch_bounds__(kThreads, 1)
    gemm1_wgmma128_kernel(const __grid_constant__ fp8moe_gemm1_args a, const __grid_constant__ CUtensorMap map_w,
                          const __grid_constant__ CUtensorMap map_a) {
#if FP8MOE_SM90A
  constexpr int32_t kPeers = CLUSTER ? 2 : 1;
  extern __shared__ uint8_t smem_raw[];
  /* the TMA issuer's expect_tx + every gathering producer thread; ALT: one warpgroup reads each stage; CLUSTER:
   * also one arrival per consumer warp of the peer */
  init_pair_barriers(smem_raw, 1 + 128 * kGatherArrivals,
                     ALT ? 128u : static_cast<uint32_t>(kConsumers + (CLUSTER ? kConsumers / 32 : 0)));
  if (CLUSTER && threadIdx.x == 0) {
    PairSmem& sm = pair_smem_of(smem_raw);
    mbar_init(&sm.claim_full, 1);
    mbar_init(&sm.claim_empty, 1);
    mbar_init_fence();
  }
  /* Nothing is computed before the split: ptxas budgets code before setmaxnreg.dec at the producers' 40
   * registers, and values live across it were spilled. */
  if (CLUSTER) cluster_sync_all(); /* both CTAs' barriers are initialized before either multicasts or arrives */
  else __syncthreads(); /* the barriers are initialized */
  if (threadIdx.x < 128) {
    setmaxnreg_dec<kProducerRegs>();
    if (!ALT || a.aligned_groups) wait_pairs(pair_addr_of(smem_raw)); /* the consumers built the pair list or edges */
    produce_pairs<SCALE == FP8MOE_SCALE_BLOCK, F32, ALT, CLUSTER, SORTED>(a, map_w, map_a, pair_addr_of(smem_raw),
                                                                         a.H / kBK);
    if (CLUSTER) cluster_sync_all(); /* neither CTA exits while its peer may multicast into it or arrive on it */
    return;
  }
  setmaxnreg_inc<kConsumerRegs>();
  if (!ALT) {
    const int32_t pairs = build_pairs(pair_smem_of(smem_raw), a.tile_expert, *a.num_tiles);
    if (a.aligned_groups) build_pair_edges(pair_smem_of(smem_raw), a.tile_expert, pairs, a.item_group);
    publish_pairs(pair_smem_of(smem_raw));
  } else if (a.aligned_groups) {
    build_group_edges(pair_smem_of(smem_raw), a.tile_expert, *a.num_tiles, a.item_group);
    publish_pairs(pair_smem_of(smem_raw));
  }
  const PairAddr sp = pair_addr_of(smem_raw);
  const int kblocks = a.H / kBK;
  const int wg = consumer_wg();
  uint32_t it = 0;
  uint32_t turns = 0; /* ALT: bit 0 the parity of the CTA's next item (whose turn), bit 1 set after its first item,
                         bit 2 the parity of this warpgroup's turn waits */
  /* Little stays live across the main loop (the item number, its pair and column block, the ring position):
   * the pair count is re-read from shared memory per item and the thread's lanes and rows are recomputed
   * after the loop, so the 192 accumulator and partial registers fit the consumers' 232 (ptxas -v). */
  const bool claimed = a.item_counter != nullptr;
  /* ALT: this warp's share of handing the turn to the other warpgroup (one arrival per warp, lane 0) */
  auto hand_turn = [&] {
    if (threadIdx.x % 32 == 0) mbar_arrive(sp.turn(1 - wg));
  };
  /* CLUSTER: ws walks the cluster's units of two items (gridDim.x / 2 clusters) */
  for (int32_t ws = static_cast<int32_t>(blockIdx.x) / kPeers;;
       ws += claimed ? 0 : static_cast<int32_t>(gridDim.x) / kPeers) {
    const int32_t pairs = ALT ? *a.num_tiles : ld_shared_s32(sp.num_pairs()), col_blocks = a.I / kBN;
    /* static items (b, b + grid, …): w = ws, items ≤ max_tiles · col_blocks < 2^31 (the launcher checks) */
    if (!claimed && ws >= (CLUSTER ? (pairs * col_blocks + 1) / 2 : pairs * col_blocks)) break;
    if (ALT) {
      const uint32_t owner = turns & 1u; /* the CTA's item k: warpgroup k % 2 computes it */
      const bool later = (turns & 2u) != 0; /* k > 0 */
      turns = (turns ^ 1u) | 2u;
      if (owner != static_cast<uint32_t>(wg)) { /* the other warpgroup's item: its stages pass by */
        it += static_cast<uint32_t>(kblocks);
        continue;
      }
      if (later) { /* the other warpgroup has passed every full wait of item k − 1 */
        mbar_wait(sp.turn(wg), (turns >> 2) & 1u);
        turns ^= 4u;
        /* the other warpgroup met the end at item k − 1 (its own flag: a warp of this warpgroup may already have
         * met it at item k and flagged this warpgroup's). Lane 0 reads it for the warp: its turn arrival after the
         * main loop then orders the read before the flag's write (racecheck pairs the arrive with the wait). */
        if (claimed) {
          int32_t other_done = 0;
          if (threadIdx.x % 32 == 0) other_done = ld_shared_s32(sp.done(1 - wg));
          if (__shfl_sync(0xffffffffu, other_done, 0) != 0) break;
        }
      }
    }
    int32_t w = ws;
    if (claimed) { /* the item is in its first stage (end_claims: −1) */
      mbar_wait(sp.full(it % kStages), (it / kStages) & 1u);
      w = ld_shared_s32(sp.stage_item(it % kStages));
      if (w < 0) {
        if (ALT) { /* the other warpgroup may wait for its turn: hand it over with the end flagged */
          if (threadIdx.x % 128 == 0) st_shared_s32(sp.done(wg), 1);
          hand_turn();
        }
        break;
      }
    }
    if (CLUSTER) { /* w is the unit: this CTA's item, or past the last item the shadow, which only passes */
      w = kPeers * w + static_cast<int32_t>(cluster_ctarank());
      if (w >= pairs * col_blocks) {
        pass_stages<kPeers>(sp, kblocks, it);
        continue;
      }
    }
    const fp8moe_sm90_item item = pair_item<ALT>(a, sp, w, pairs, col_blocks);
    const uint32_t pf = ALT ? 0u : sp.pair_first(item.tile);
    const int32_t tile0 = ALT ? item.tile : static_cast<int32_t>(pf & (kPairTwo - 1u));
    if (!ALT && wg == 1 && (pf & kPairTwo) == 0) { /* warpgroup-uniform: a single pair has no rows for warpgroup 1 */
      pass_stages<kPeers>(sp, kblocks, it);
      continue;
    }
    float acc_g[64], acc_u[64];
    const int tid = static_cast<int>(threadIdx.x);
    const int r0 = 16 * (tid % 128 / 32) + tid % 32 / 4;
    const int ha = ALT ? 0 : wg; /* this warpgroup's A tile in the stage */
    /* BLOCK: staged with the stage by the producer: the thread's rows r0 and r0 + 8, gate and up */
    auto scales = [&](uint32_t s, int, float& c0, float& c1, float& cg, float& cu) {
      c0 = ld_shared_f32(sp.row_scale(s, kBM * ha + r0));
      c1 = ld_shared_f32(sp.row_scale(s, kBM * ha + r0 + 8));
      cg = ld_shared_f32(sp.w_scale(s, 0));
      cu = ld_shared_f32(sp.w_scale(s, 1));
    };
    consume_pair<SCALE == FP8MOE_SCALE_BLOCK, true, !SORTED, kPeers>(sp, ha, kblocks, it, acc_g, acc_u, scales);
    /* every warp's full waits are done: the other's turn (per warp, so none of this warpgroup can still be short
     * of its own turn wait when the other warpgroup hands back) */
    if (ALT) hand_turn();
    const int lane = tid % 32, q = tid % 128 / 32;
    const int g = lane / 4, t = lane % 4;
    const int rr[2] = {16 * q + g, 16 * q + g + 8};
    const int32_t n0 = item.col_block * kBN;
    const int32_t e = a.tile_expert[tile0];
    const int64_t row0 = static_cast<int64_t>(tile0 + ha) * kBM;
    int32_t tok[2];
    float tw[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int32_t slot = a.sorted_slots[row0 + rr[h]];
      tok[h] = slot >= 0 ? slot / a.K : -1;
      tw[h] = (a.token_weight && slot >= 0) ? a.token_weight[slot] : 1.0f;
    }
    const int32_t nrow_g = (a.gate_first ? 0 : a.I) + n0, nrow_u = (a.gate_first ? a.I : 0) + n0;

    /* Epilogue in registers: the same operations per element as gemm1_wgmma_sm90.cu (dequantization, token
     * weight, activation), the activated value kept in acc_g. */
    float sxw = 0.0f, sx[2] = {0.0f, 0.0f};
    if (SCALE == FP8MOE_SCALE_TENSOR) sxw = kref_at(a.x_scale, 0) * kref_at(a.w_scale, e);
    if (SCALE == FP8MOE_SCALE_ROW)
#pragma unroll
      for (int h = 0; h < 2; ++h) sx[h] = tok[h] >= 0 ? kref_at(a.x_scale, tok[h]) : 0.0f;
    /* m: max |v| of the thread's two rows, NaN-propagating (fmax_nan); the finite amax after the test below */
    float m[2] = {0.0f, 0.0f};
    /* The activation is chosen once per item, outside the 64-element loop (ACT is a compile-time constant in each
     * copy): one loop body per activation instead of both inlined per element behind a branch, half the
     * epilogue's code and no per-element test. Same operations per element, so the same bits. */
    auto activate = [&](auto act) {
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        const int h = acc_half(i);
        float gv = acc_g[i], uv = acc_u[i];
        if (SCALE == FP8MOE_SCALE_TENSOR) {
          gv = gv * sxw;
          uv = uv * sxw;
        } else if (SCALE == FP8MOE_SCALE_ROW) {
          gv = gv * sx[h] * scale_at<F32>(a.w_scale, e, nrow_g + acc_col(i, t), 0);
          uv = uv * sx[h] * scale_at<F32>(a.w_scale, e, nrow_u + acc_col(i, t), 0);
        }
        if (a.token_weight) {
          gv = gv * tw[h];
          uv = uv * tw[h];
        }
        float v = gated_activation(decltype(act)::value, gv, uv);
        if (SORTED) v = tok[h] >= 0 ? v : 0.0f; /* a padding row's A was never written: its outputs are zeros */
        acc_g[i] = v;
        m[h] = fmax_nan(m[h], fabsf(v));
      }
    };
    if (a.activation == FP8MOE_ACTIVATION_GEGLU) activate(ActivationTag<FP8MOE_ACTIVATION_GEGLU>{});
    else activate(ActivationTag<FP8MOE_ACTIVATION_SWIGLU>{});
    /* A row's 128 columns are spread over the 4 lanes of its quad (t = 0..3): its group amax. Where every value of
     * the warp's rows is finite, max |v| is the finite amax (finite_abs's); otherwise (an overflowing activation, a
     * NaN: rare, the branch warp-uniform) the finite amax comes element by element as before. Max is exact, so
     * either way the same value as finite_abs's per element. */
    auto quad_amax = [&]() {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        m[h] = fmax_nan(m[h], __shfl_xor_sync(0xffffffffu, m[h], 1));
        m[h] = fmax_nan(m[h], __shfl_xor_sync(0xffffffffu, m[h], 2));
      }
    };
    quad_amax();
    const bool rows_finite = __all_sync(0xffffffffu, isfinite(m[0]) & isfinite(m[1]));
    if (!rows_finite) {
      m[0] = m[1] = 0.0f;
#pragma unroll
      for (int i = 0; i < 64; ++i) m[acc_half(i)] = fmaxf(m[acc_half(i)], finite_abs(acc_g[i]));
      quad_amax(); /* every operand finite now: fmax_nan is fmaxf */
    }
    const int64_t grow[2] = {row0 + rr[0], row0 + rr[1]};
    if (a.requant == FP8MOE_REQ_FUSED_GROUP || a.requant == FP8MOE_REQ_FUSED_STATIC) {
      float s[2], r[2];
      bool fast = true;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s[h] = a.requant == FP8MOE_REQ_FUSED_GROUP ? dynamic_scale(m[h]) : kref_at(a.a2_static, 0);
        r[h] = __frcp_rn(s[h]);
        /* m: the group's finite amax (padding rows: 0); every |x| ≤ m, so x·r is finite where m·r is */
        fast = fast && fp8moe_scale_div_fast_for(s[h], m[h]) && isfinite(__fmul_rn(m[h], r[h]));
      }
      /* one path per warp: the stores below shuffle across the quad (scales differ per row under FUSED_GROUP);
       * with a non-finite value in the warp's rows (rare) the IEEE division */
      fast = __all_sync(0xffffffffu, fast) && rows_finite;
      /* 8-byte stores: the quad's 4 lanes hold 2 codes each of every 8-column chunk; per 4 chunks two shuffles
       * transpose them so lane t stores chunk t's 8 codes (one 32-byte sector per row per warp instruction). The
       * e4m3 codes of x / s come by the reciprocal and one correction where the scales allow it (scale_div.h: the
       * same codes), else by IEEE division; one loop each, so no element tests which. */
      const bool hi = (t & 2) != 0, odd = (t & 1) != 0;
      const uint32_t sel2 = odd ? 0x5410u : 0x7632u;
      const uint32_t sel_w0 = odd ? 0x3254u : 0x5410u, sel_w1 = odd ? 0x3276u : 0x7610u;
      auto store = [&](auto quotient) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
            uint32_t v[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              const int i = 4 * (4 * jj + k) + 2 * h;
              v[k] = e4m3x2(quotient(acc_g[i], h), quotient(acc_g[i + 1], h));
            }
            const uint32_t A = v[0] | (v[1] << 16), Bw = v[2] | (v[3] << 16);
            const uint32_t r1 = __shfl_xor_sync(0xffffffffu, hi ? A : Bw, 2);
            const uint32_t lo_src = hi ? r1 : A, hi_src = hi ? Bw : r1;
            const uint32_t r2 = __shfl_xor_sync(0xffffffffu, __byte_perm(lo_src, hi_src, sel2), 1);
            const uint2 w = make_uint2(__byte_perm(lo_src, r2, sel_w0), __byte_perm(hi_src, r2, sel_w1));
            *reinterpret_cast<uint2*>(a.a2q + grow[h] * a.I + n0 + 8 * (4 * jj + t)) = w;
          }
      };
      if (fast) store([&](float x, int h) { return fp8moe_scale_div_finite(x, s[h], r[h]); });
      else store([&](float x, int h) { return x / s[h]; });
      if (a.requant == FP8MOE_REQ_FUSED_GROUP && t == 0)
#pragma unroll
        for (int h = 0; h < 2; ++h) a.a2s[grow[h] * (a.I / kBN) + n0 / kBN] = s[h];
    } else {
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = 4 * j + 2 * h;
          *reinterpret_cast<float2*>(a.inter + grow[h] * a.I + n0 + acc_col(i, t)) = make_float2(acc_g[i], acc_g[i + 1]);
        }
      if (a.requant == FP8MOE_REQ_DEFERRED_ROW) {
        if (t == 0)
#pragma unroll
          for (int h = 0; h < 2; ++h) atomic_amax(a.amax + grow[h], m[h]);
      } else {
        /* Every lane of the warp takes part: the shuffles inside are warp-wide, and the branch above is
         * warpgroup-uniform. */
        const float mm = warp_max(fmaxf(m[0], m[1]));
        if (lane == 0) atomic_amax(a.amax, mm);
      }
    }
  }
  if (CLUSTER) cluster_sync_all(); /* the producers' counterpart: no CTA exits while its peer may still arrive */
#elif defined(__CUDA_ARCH__)
  (void)a;
  (void)map_w;
  (void)map_a;
  __trap(); /* the plan selects this kernel only where the sm_90a SASS loads */
#endif
}

using Kernel = void (*)(fp8moe_gemm1_args, CUtensorMap, CUtensorMap);

/* max_clusters > 0 (pair items only): the cluster kernel on 2 × min(units, max_clusters) CTAs. ma: the expert-sorted
 * rows' tensor map where a.x_sorted (otherwise unread). */
template <int SCALE, bool F32 = false>
cudaError_t launch(const fp8moe_gemm1_args& a, const CUtensorMap& mw, const CUtensorMap& ma, cudaStream_t stream) {
  const int64_t items = (a.alternate ? a.max_tiles : fp8moe_sm90_max_pairs(a.max_tiles, a.E_local)) * (a.I / kBN);
  if (!a.alternate && a.max_clusters > 0) {
    const int64_t units = (items + 1) / 2;
    const ClusterConfig c(dim3(static_cast<unsigned>(2 * (units < a.max_clusters ? units : a.max_clusters))), stream,
                          kPairSmemBytes);
    return cudaLaunchKernelEx(&c.cfg, gemm1_wgmma128_kernel<SCALE, F32, false, true>, a, mw, ma);
  }
  const int64_t ctas_max = a.max_ctas / FP8MOE_GEMM1_CTAS_PER_SM;
  const int64_t grid = items < ctas_max ? items : ctas_max;
  const dim3 g(static_cast<unsigned>(grid));
  if (a.alternate) gemm1_wgmma128_kernel<SCALE, F32, true><<<g, kThreads, kPairSmemBytes, stream>>>(a, mw, ma);
  else if (a.x_sorted)
    gemm1_wgmma128_kernel<SCALE, F32, false, false, true><<<g, kThreads, kPairSmemBytes, stream>>>(a, mw, ma);
  else gemm1_wgmma128_kernel<SCALE, F32, false><<<g, kThreads, kPairSmemBytes, stream>>>(a, mw, ma);
  return cudaGetLastError();
}

template <int SCALE, bool F32>
cudaError_t raise_smem() {
  cudaError_t e = cudaFuncSetAttribute(gemm1_wgmma128_kernel<SCALE, F32, false>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kPairSmemBytes));
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(gemm1_wgmma128_kernel<SCALE, F32, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kPairSmemBytes));
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(gemm1_wgmma128_kernel<SCALE, F32, false, false, true>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kPairSmemBytes));
  return e;
}
template <int SCALE, bool F32>
cudaError_t raise_cluster_smem() {
  return cudaFuncSetAttribute(gemm1_wgmma128_kernel<SCALE, F32, false, true>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kPairSmemBytes));
}

}  // namespace
}  // namespace sm90
}  // namespace fp8moe

/* What both item shapes need: the layout's 64-row tiles, a grid of at least one CTA, and gathered rows whose
 * stride fits the producer's 32-bit row addressing (cp_async_row16). */
static bool gather_args_ok(const fp8moe_gemm1_args* a) {
  return a->tile_m == FP8MOE_GEMM_TILE_M_LARGE && a->max_ctas >= FP8MOE_GEMM1_CTAS_PER_SM && a->x_stride >= 0 &&
         a->x_stride <= 0xFFFFFFFFll;
}

/* Where the alternating items are run (the caller takes gemm1_wgmma_sm90.cu elsewhere): gather_args_ok. ALT
 * reads an item's tile unmasked (no pair list, no 8,192-tile bound), keeps only parities of its item and turn
 * counts, and its turn barriers count one arrival per warp, so no warp of a warpgroup can still be short of its
 * turn wait when the other warpgroup hands back, at any number of stages per item (docs/GPU.md). */
extern "C" int fp8moe_gemm1_sm90_alternate_fits(const fp8moe_gemm1_args* a) { return gather_args_ok(a); }

extern "C" int fp8moe_launch_gemm1_sm90_pairs(const fp8moe_gemm1_args* a, cudaStream_t stream) {
  using namespace fp8moe::sm90;
  if (a->max_tiles == 0) return cudaSuccess;
  /* the pair list bounds only where there is a pair list */
  const bool list_fits = a->max_tiles <= FP8MOE_GEMM1_PAIR_MAX_TILES && a->E_local <= FP8MOE_GEMM1_PAIR_MAX_EXPERTS;
  if (!gather_args_ok(a) || (!a->alternate && !list_fits)) return cudaErrorInvalidValue;
  /* the edges' units: tiles (alternating items; their bitmap shares pair_first's bytes) or pairs */
  const int64_t units = a->alternate ? a->max_tiles : fp8moe_sm90_max_pairs(a->max_tiles, a->E_local);
  if (a->aligned_groups && ((a->alternate && a->max_tiles > kAlignedMaxTiles) ||
                            !fp8moe_sm90_aligned_ok(a->item_order, a->max_clusters, units, a->item_group)))
    return cudaErrorInvalidValue;
  if (!fp8moe_sm90_order_ok(a->item_order, a->item_group, a->max_tiles, a->I / kBN)) return cudaErrorInvalidValue;
  CUtensorMap mw;
  const uint64_t dw[3] = {static_cast<uint64_t>(a->H), 2 * static_cast<uint64_t>(a->I),
                          static_cast<uint64_t>(a->E_local)};
  const uint64_t sw[2] = {static_cast<uint64_t>(a->w_stride_n), static_cast<uint64_t>(a->w_stride_e)};
  int e = fp8moe_sm90_encode(a->tma_encode, &mw, a->w, 3, dw, sw, kBK, kBN);
  if (e != 0) return e;
  /* expert-sorted rows (one-CTA pair items only): x is [max_tiles · 64, H] at stride x_stride, by 64-row boxes */
  CUtensorMap ma = {};
  if (a->x_sorted) {
    if (a->alternate || a->max_clusters > 0) return cudaErrorInvalidValue;
    const uint64_t dx[2] = {static_cast<uint64_t>(a->H), static_cast<uint64_t>(a->max_tiles) * kBM};
    const uint64_t sx[1] = {static_cast<uint64_t>(a->x_stride)};
    e = fp8moe_sm90_encode(a->tma_encode, &ma, a->x, 2, dx, sx, kBK, kBM);
    if (e != 0) return e;
  }
  return static_cast<int>(with_scale_kind(a->scale_mode, a->x_scale.dt, a->w_scale.dt, [&](auto k) {
    return launch<decltype(k)::scale, decltype(k)::f32>(*a, mw, ma, stream);
  }));
}

extern "C" int fp8moe_prepare_gemm1_sm90_pairs_smem(void) {
  using namespace fp8moe::sm90;
  return static_cast<int>(for_each_scale_kind([](auto k) { return raise_smem<decltype(k)::scale, decltype(k)::f32>(); }));
}

/* The cluster pair kernel's shared-memory limit raised, then the most of its 2-CTA clusters resident at once
 * (resident_clusters). Called only where the variant asks for the clusters ("e"), so the default context makes
 * no call for them. */
extern "C" int fp8moe_prepare_gemm1_sm90_pair_clusters(int32_t sm_count, int32_t* clusters) {
  using namespace fp8moe::sm90;
  *clusters = 0;
  const cudaError_t e =
      for_each_scale_kind([](auto k) { return raise_cluster_smem<decltype(k)::scale, decltype(k)::f32>(); });
  if (e != cudaSuccess) return static_cast<int>(e);
  return resident_clusters(gemm1_wgmma128_kernel<FP8MOE_SCALE_TENSOR, false, false, true>, sm_count, clusters,
                           kPairSmemBytes);
}
