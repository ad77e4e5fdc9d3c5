/* gemm2_wgmma_sm90.cu — grouped GEMM2 on Hopper: y[r, n] = a2q[r]·W2[e, n] dequantized exactly as
 * gemm2_mma_sm89.cu (TENSOR acc·(s_a2·s_w); BLOCK Σ_kb partial·s_a2[r,kb]·s_w[e,nb,kb]; ROW acc·s_a2[r]·s_w[e,n])
 * with the warp-specialized wgmma + TMA machinery of wgmma_sm90.cuh. a2q rows are contiguous and expert-sorted
 * (tile_m = 64), so the producer loads both operands by TMA: per stage one 64×128 box of a2q and two
 * 128×128 boxes of W2[e] (output columns n0 … n0+255), 40 KB, expect_tx on the stage's full barrier; with fp32
 * block scales producer warps 1–2 also copy the stage's scales into it (produce_stage_scales).
 * Persistent CTAs (one per SM, 384 threads) walk (tile, 256-column block) items over the device-side
 * num_tiles/tile_expert in the host's order (item_order, item_group: src/cuda/cuda_plan.c); consumer
 * warpgroup w writes columns n0 + 128w … of the 64 rows, as bf16 into y's row of each row's slot (padding
 * rows are not stored).
 * Orders (kernels/gemm/sm90_items.h; docs/GPU.md "Item order"): grouped (the default) walks groups of
 * item_group tiles column-block major, so a wave shares a few tiles' a2q rows and a few column blocks of one
 * or two experts' W2; tile major: the CTAs of one wave share a few A tiles and one or two experts' W2, which
 * a wave re-streams whenever an expert has more tiles than a wave covers (mixtral-8x7b T = 8192: 32 tiles ×
 * 16 column blocks per expert, 59 MB of W2 per wave); column-block major (the mma.sync kernel's order)
 * re-reads all of a2q (rows·I bytes, 151 MB at deepseek-v3 T = 8192, beyond L2) once per column block:
 * 28 × 151 MB ≈ 4.2 GB, more than W2's 3.8 GB.
 * Producer and consumers map items through the same function (gemm2_item), and every order visits every
 * (tile, column block) once, so the output does not depend on it. With a.aligned_groups every CTA first computes the
 * grouped order's edges, moved to experts' first tiles, into shared memory (build_group_edges; docs/GPU.md
 * "Expert-aligned groups"). */
#include "group_edges.cuh"
#include "sm90_items.h"
#include "wgmma_sm90.cuh"

namespace fp8moe {
namespace sm90 {
namespace {

#if FP8MOE_SM90A
/* Expert-aligned groups (group_edges.cuh): all 384 threads, before init_barriers' CTA barrier (which publishes the
 * edges). The bitmap (≤ 257 words) lives in the epilogue buffer, whose first writes (the y tiles) come after that
 * barrier. */
__device__ __forceinline__ void build_group_edges(const fp8moe_gemm2_args& a, Smem& sm, int32_t tiles) {
  fp8moe::build_group_edges<kThreads>(sm.group_edge, reinterpret_cast<uint32_t*>(&sm.epi[0][0]), a.tile_expert, tiles,
                                      a.item_group, static_cast<int32_t>(threadIdx.x), [] { __syncthreads(); });
}

/* Item w's tile and column block (fp8moe_sm90_item_at), through the expert-aligned groups (above) where built. */
__device__ __forceinline__ fp8moe_sm90_item gemm2_item(const fp8moe_gemm2_args& a, const Smem& sm, int32_t w,
                                                       int32_t tiles, int32_t col_blocks) {
  return fp8moe_sm90_item_at(w, tiles, col_blocks, a.item_order, a.item_group, a.aligned_groups, sm.group_edge);
}

/* The producer threads' wait until the slot of ring position `it` is free (both CTAs' releases in a cluster). */
template <bool CLUSTER>
__device__ __forceinline__ void wait_empty(Smem& sm, uint32_t it) {
  const int s = static_cast<int>(it % kStages);
  if (CLUSTER) mbar_wait_cluster(&sm.empty[s], ((it / kStages) & 1u) ^ 1u);
  else mbar_wait(&sm.empty[s], ((it / kStages) & 1u) ^ 1u);
}

/* What one CTA does for one unit of work: a tile and its first output column, whether its rows are stored
 * (a shadow item is computed but not stored), and whether the two CTAs of a cluster share the B slices. */
struct Work {
  int tile;
  int32_t n0;
  int32_t e;
  bool store;
  bool share;
};

/* The producer's view of unit u (fp8moe_sm90_unit_item), and whether the pair shares B (pair_shares_b). */
template <bool CLUSTER>
__device__ __forceinline__ Work gemm2_work(const fp8moe_gemm2_args& a, const Smem& sm, int32_t u, int32_t items,
                                           int32_t tiles, int32_t col_blocks, uint32_t rank) {
  if (!CLUSTER) {
    const fp8moe_sm90_item it = gemm2_item(a, sm, u, tiles, col_blocks);
    return {it.tile, it.col_block * kGemm2Cols, a.tile_expert[it.tile], true, false};
  }
  const fp8moe_sm90_unit un = fp8moe_sm90_unit_item(u, items, 2, rank);
  const fp8moe_sm90_item it = gemm2_item(a, sm, un.item, tiles, col_blocks);
  return {it.tile, it.col_block * kGemm2Cols, a.tile_expert[it.tile], un.store != 0,
          pair_shares_b(u, items, tiles, col_blocks, a.item_order, a.item_group, a.tile_expert)};
}

/* STAGED block scales (fp32): producer thread 32 + r copies row r's a2 scale of each stage into the stage
 * (gemm2_row_scale; 0 for a padding row and for every row of a shadow item, as the consumers' direct loads read
 * them), thread 32 also the stage's two weight-block scales (Smem::w_scale), arriving on the stage's full barrier
 * when the copies land (publish_gathered). Loaded by the consumers before the full wait, the row scales waited on
 * the scoreboard of the next stage's loads in the middle of a stage's wgmmas (docs/GPU.md "GEMM2's fold test"), and
 * each item's first weight-block scale on two dependent loads (its expert, then the scale) before its first wgmma
 * (docs/GPU.md "GEMM2's weight-block scale, staged"); read from shared memory after the wait they wait for nothing.
 * The walk over units is thread 0's. */
template <bool CLUSTER>
__device__ __forceinline__ void produce_stage_scales(const fp8moe_gemm2_args& a, Smem& sm, int32_t first, int32_t stride,
                                                   int32_t units, int32_t items, int32_t tiles, int32_t col_blocks,
                                                   int kblocks, int r) {
  const float* const base = static_cast<const float*>(a.a2_scale.data);
  const float* const wbase = static_cast<const float*>(a.w_scale.data);
  uint32_t it = 0;
  for (int32_t u = first; u < units; u += stride) {
    const fp8moe_sm90_unit un = fp8moe_sm90_unit_item(u, items, CLUSTER ? 2 : 1, CLUSTER ? cluster_ctarank() : 0u);
    const fp8moe_sm90_item item = gemm2_item(a, sm, un.item, tiles, col_blocks);
    const int64_t row = static_cast<int64_t>(item.tile) * kBM + r;
    const bool real = un.store != 0 && a.sorted_slots[row] >= 0;
    const float* src = real ? base + row * a.a2_scale.s[0] : base;
    const int64_t step = real ? a.a2_scale.s[1] : 0;
    /* thread 32 (r = 0) also: the two warpgroups' weight-block scales, w_scale[e, 2·col_block + wg, kb] */
    const float* ws = r == 0 ? wbase + a.tile_expert[item.tile] * a.w_scale.s[0] + 2 * item.col_block * a.w_scale.s[1]
                             : wbase;
#pragma unroll 1
    for (int kb = 0; kb < kblocks; ++kb, ++it) {
      const int s = static_cast<int>(it % kStages);
      wait_empty<CLUSTER>(sm, it);
      cp_async_4(gemm2_row_scale(sm, s, r), src + kb * step, real ? 4 : 0);
      if (r == 0) {
        cp_async_4(saddr(&sm.w_scale[s][0]), ws + kb * a.w_scale.s[2], 4);
        cp_async_4(saddr(&sm.w_scale[s][1]), ws + a.w_scale.s[1] + kb * a.w_scale.s[2], 4);
      }
      publish_gathered(&sm.full[s]);
    }
  }
  cp_async_wait_all(); /* no copy of this thread outlives it */
}
#endif

/* CLUSTER: launched in clusters of 2 CTAs (cudaLaunchAttributeClusterDimension; the grid is even). Every
 * stage still lands 40 KB in each CTA (A 8 KB by its own TMA; B 2 × 16 KB, either both by its own TMA or one
 * half by its own multicast and the other by the peer's), so the full barriers' expect_tx is the same in both
 * cases; an empty barrier completes only when the consumer warps of both CTAs have released the stage, since
 * either producer may write into both CTAs' copy of it. */
template <int SCALE, bool F32, int LOOP, bool CLUSTER>
__global__ void __launch_bounds__(kThreads, 1)
    gemm2_wgmma_kernel(const __grid_constant__ fp8moe_gemm2_args a, const __grid_constant__ CUtensorMap map_a,
                       const __grid_constant__ CUtensorMap map_w) {
#if FP8MOE_SM90A
  constexpr int kPeers = CLUSTER ? 2 : 1;
  /* Block scales in fp32: the row and weight-block scales come with the stage (produce_stage_scales) */
  constexpr bool kStaged = SCALE == FP8MOE_SCALE_BLOCK && F32;
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = smem_of(smem_raw);
  const int32_t tiles = *a.num_tiles;
  if (!CLUSTER && a.aligned_groups) build_group_edges(a, sm, tiles);
  init_barriers<kPeers>(sm, kStaged ? 1u + static_cast<uint32_t>(kBM) * kGatherArrivals : 1u);
  const int32_t col_blocks = a.H / kGemm2Cols;
  const int32_t items = tiles * col_blocks; /* < 2^31: the launcher checks max_tiles · col_blocks */
  const int kblocks = a.I / kBK;
  const uint32_t rank = CLUSTER ? cluster_ctarank() : 0u; /* = blockIdx.x % 2: clusters of 2 along x */
  const int32_t units = CLUSTER ? (items + 1) / 2 : items;
  const int32_t first = static_cast<int32_t>(blockIdx.x) / kPeers, stride = static_cast<int32_t>(gridDim.x) / kPeers;

  if (threadIdx.x < 128) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      uint32_t it = 0;
      for (int32_t u = first; u < units; u += stride) {
        const Work wk = gemm2_work<CLUSTER>(a, sm, u, items, tiles, col_blocks, rank);
        /* Not unrolled: the producer thread runs within setmaxnreg's 40 registers. */
#pragma unroll 1
        for (int kb = 0; kb < kblocks; ++kb, ++it) {
          const int s = static_cast<int>(it % kStages);
          wait_empty<CLUSTER>(sm, it);
          mbar_arrive_expect_tx(&sm.full[s], kATileBytes + 2 * kBTileBytes);
          tma_load_2d(sm.st[s].a, &map_a, &sm.full[s], kb * kBK, wk.tile * kBM);
          if (CLUSTER && wk.share) {
            tma_load_3d_multicast(sm.st[s].b[rank], &map_w, &sm.full[s], kb * kBK, wk.n0 + static_cast<int32_t>(rank) * kBN,
                                  wk.e, static_cast<uint16_t>(0x3));
          } else {
            tma_load_3d(sm.st[s].b[0], &map_w, &sm.full[s], kb * kBK, wk.n0, wk.e);
            tma_load_3d(sm.st[s].b[1], &map_w, &sm.full[s], kb * kBK, wk.n0 + kBN, wk.e);
          }
        }
      }
      /* Cluster: wait until both CTAs' consumers released every stage this producer filled, so no arrival
       * of the peer is still on its way to this CTA's barriers when it exits (the empty phase of position
       * it + j is the release of position it + j − kStages). */
      if (CLUSTER)
#pragma unroll 1
        for (uint32_t j = 0; j < static_cast<uint32_t>(kStages); ++j)
          wait_empty<true>(sm, it + j);
    } else if (kStaged && threadIdx.x >= 32 && threadIdx.x < 32 + kBM) {
      produce_stage_scales<CLUSTER>(a, sm, first, stride, units, items, tiles, col_blocks, kblocks,
                                  static_cast<int>(threadIdx.x) - 32);
    }
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    const int ct = threadIdx.x - 128, wg = consumer_wg(), lane = ct % 32, q = (ct % 128) / 32;
    const int g = lane / 4, t = lane % 4;
    const int rr[2] = {16 * q + g, 16 * q + g + 8};
    uint32_t it = 0;
    for (int32_t u = first; u < units; u += stride) {
      /* The rank is read again here (a special register) rather than kept live across the main loop: the
       * block-scale consumers have no register to spare. */
      const fp8moe_sm90_unit un = fp8moe_sm90_unit_item(u, items, kPeers, CLUSTER ? cluster_ctarank() : 0u);
      const bool store = un.store != 0;
      const fp8moe_sm90_item item = gemm2_item(a, sm, un.item, tiles, col_blocks);
      const int tile = item.tile;
      const int32_t nb = item.col_block * kGemm2Cols + wg * kBN; /* this warpgroup's columns */
      const int32_t e = a.tile_expert[tile];
      const int64_t row0 = static_cast<int64_t>(tile) * kBM;
      /* The y rows (slots) of the thread's two rows, loaded before the main loop hides their latency; a
       * shadow item stores none. */
      const int32_t slot[2] = {store ? a.sorted_slots[row0 + rr[0]] : -1, store ? a.sorted_slots[row0 + rr[1]] : -1};
      float acc[64];
      /* A padding row's a2 scale is FLT_MIN (GEMM1's dynamic_scale(0)), which with the usual |s_w| < 1 never
       * folds (fold_allowed): read as 0 (its a2q row is 0 and nothing of it is stored), so a warp that
       * mixes real and padding rows stays on the folded path. */
      auto sa = [&](int h, int kb, int s) {
        if (kStaged) return ld_shared_f32(gemm2_row_scale(sm, s, rr[h]));
        return slot[h] >= 0 ? scale_at<F32>(a.a2_scale, row0 + rr[h], kb, 0) : 0.0f;
      };
      /* BLOCK: the warpgroup's weight-block scales of K-blocks 32j … 32j + 31 one per lane (wreg), loaded before the
       * main loop and every 32 stages, each stage's taken by a shuffle. Loaded per stage from its warp-uniform
       * address, ptxas moved each value into a uniform register right after its load (R2UR), so every stage waited
       * there for an L1/L2 round trip before its promotion (docs/GPU.md "GEMM2's weight-block scale"). */
      float wreg = 0.0f;
      auto load_w = [&](int kb0) {
        const int k = kb0 + lane;
        wreg = k < kblocks ? scale_at<F32>(a.w_scale, e, nb / kBN, k) : 0.0f;
      };
      if (SCALE == FP8MOE_SCALE_BLOCK && !kStaged) load_w(0);
      auto sb = [&](int kb, int s) {
        if (kStaged) return ld_shared_f32(saddr(&sm.w_scale[s][wg]));
        if ((kb & 31) == 0 && kb > 0) load_w(kb);
        return __shfl_sync(0xffffffffu, wreg, kb & 31);
      };
      consume<LOOP, SCALE == FP8MOE_SCALE_BLOCK, kPeers, false, kStaged>(sm, wg, kblocks, it, acc, sa, sb);

      store_y_box_staged<SCALE, F32>(a, acc, e, nb, t, y_scales<SCALE>(a, e, row0 + rr[0], row0 + rr[1]), slot,
                                     saddr(&sm.epi[0][0]) + static_cast<uint32_t>(wg) * kYStageBytes, wg, q, lane);
    }
  }
  /* Cluster: neither CTA exits while the peer may still multicast into it or arrive on its barriers. */
  if (CLUSTER) cluster_sync_all();
#elif defined(__CUDA_ARCH__)
  (void)a;
  (void)map_a;
  (void)map_w;
  __trap(); /* the plan selects this kernel only where the sm_90a SASS loads */
#endif
}

using Kernel = void (*)(fp8moe_gemm2_args, CUtensorMap, CUtensorMap);

/* The instantiation for a main-loop variant, or nullptr for a value outside FP8MOE_SM90_LOOP_*. */
template <int SCALE, bool F32, bool CLUSTER = false>
Kernel kernel_for(int32_t loop) {
  switch (loop) {
    case FP8MOE_SM90_LOOP_OVERLAP: return gemm2_wgmma_kernel<SCALE, F32, FP8MOE_SM90_LOOP_OVERLAP, CLUSTER>;
    case FP8MOE_SM90_LOOP_SERIAL: return gemm2_wgmma_kernel<SCALE, F32, FP8MOE_SM90_LOOP_SERIAL, CLUSTER>;
    case FP8MOE_SM90_LOOP_EARLY_RELEASE: return gemm2_wgmma_kernel<SCALE, F32, FP8MOE_SM90_LOOP_EARLY_RELEASE, CLUSTER>;
    default: return nullptr;
  }
}

/* max_clusters > 0: the cluster kernel on 2 × min(item pairs, max_clusters) CTAs; otherwise one CTA per SM. */
template <int SCALE, bool F32 = false>
cudaError_t launch(const fp8moe_gemm2_args& a, const CUtensorMap& ma, const CUtensorMap& mw, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(a.max_tiles) * (a.H / kGemm2Cols);
  if (a.max_clusters > 0) {
    const Kernel k = kernel_for<SCALE, F32, true>(a.sm90_loop);
    if (k == nullptr) return cudaErrorInvalidValue;
    const int64_t pairs = (items + 1) / 2;
    const ClusterConfig c(dim3(static_cast<unsigned>(2 * (pairs < a.max_clusters ? pairs : a.max_clusters))), stream);
    return cudaLaunchKernelEx(&c.cfg, k, a, ma, mw);
  }
  const Kernel k = kernel_for<SCALE, F32>(a.sm90_loop);
  if (k == nullptr) return cudaErrorInvalidValue;
  const int64_t ctas_max = a.max_ctas / FP8MOE_GEMM2_CTAS_PER_SM; /* one CTA per SM here */
  k<<<dim3(static_cast<unsigned>(items < ctas_max ? items : ctas_max)), kThreads, kSmemBytes, stream>>>(a, ma, mw);
  return cudaGetLastError();
}

/* Raises the dynamic shared-memory limit of every main-loop variant of one (SCALE, F32), both kinds. */
template <int SCALE, bool F32>
cudaError_t raise_smem(int bytes) {
  cudaError_t e = cudaSuccess;
  const int32_t loops[3] = {FP8MOE_SM90_LOOP_OVERLAP, FP8MOE_SM90_LOOP_SERIAL, FP8MOE_SM90_LOOP_EARLY_RELEASE};
  for (int i = 0; i < 3 && e == cudaSuccess; ++i) {
    e = cudaFuncSetAttribute(kernel_for<SCALE, F32>(loops[i]), cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(kernel_for<SCALE, F32, true>(loops[i]), cudaFuncAttributeMaxDynamicSharedMemorySize,
                               bytes);
  }
  return e;
}

}  // namespace
}  // namespace sm90
}  // namespace fp8moe

extern "C" int fp8moe_launch_gemm2_sm90(const fp8moe_gemm2_args* a, cudaStream_t stream) {
  using namespace fp8moe::sm90;
  if (a->max_tiles == 0) return cudaSuccess;
  if (!fp8moe_sm90_order_ok(a->item_order, a->item_group, a->max_tiles, a->H / kGemm2Cols)) return cudaErrorInvalidValue;
  if (a->aligned_groups && !fp8moe_sm90_aligned_ok(a->item_order, a->max_clusters, a->max_tiles, a->item_group))
    return cudaErrorInvalidValue;
  CUtensorMap ma, mw;
  const int e = fp8moe_sm90_encode_gemm2(a, &ma, &mw);
  if (e != 0) return e;
  return static_cast<int>(with_scale_kind(a->scale_mode, a->a2_scale.dt, a->w_scale.dt, [&](auto k) {
    return launch<decltype(k)::scale, decltype(k)::f32>(*a, ma, mw, stream);
  }));
}

extern "C" int fp8moe_prepare_gemm2_sm90_smem(void) {
  using namespace fp8moe::sm90;
  return static_cast<int>(
      for_each_scale_kind([](auto k) { return raise_smem<decltype(k)::scale, decltype(k)::f32>(static_cast<int>(kSmemBytes)); }));
}

/* The most 2-CTA clusters of the GEMM2 cluster kernel resident at once (resident_clusters). */
extern "C" int fp8moe_prepare_gemm2_sm90_clusters(int32_t sm_count, int32_t* clusters) {
  using namespace fp8moe::sm90;
  return resident_clusters(kernel_for<FP8MOE_SCALE_TENSOR, false, true>(FP8MOE_SM90_LOOP_OVERLAP), sm_count,
                           clusters);
}
