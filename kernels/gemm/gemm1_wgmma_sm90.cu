/* gemm1_wgmma_sm90.cu — grouped GEMM1 on Hopper with the gated activation and the FP8 requantization fused
 * into its epilogue; same contract and arithmetic as gemm1_mma_sm89.cu (dequantization, input-side token
 * weight on both projections, SwiGLU/GeGLU in either gate/up order, FUSED_GROUP / FUSED_STATIC e4m3 or
 * DEFERRED_* fp32 + amax), on the warp-specialized wgmma + TMA machinery of wgmma_sm90.cuh.
 * Work item: 64 expert-sorted rows (tile_m = 64) × 128 intermediate columns. Per stage the producer
 * warpgroup gathers the 64 token rows of x through sorted_slots with 16-byte cp.async into the swizzled
 * layout (each producer thread's share of the stage's barrier completes when its copies land:
 * publish_gathered), and
 * one thread loads the 128 gate rows and the 128 up rows of W13[e] by TMA; consumer warpgroup 0 computes the
 * gate half, 1 the up half. Epilogue: each warpgroup hands the other, through shared memory, its values of the
 * columns the other activates (gate: 0..63, up: 64..127), and both write the activated tile there; all 256
 * consumer threads then requantize it (4 threads per row, as the mma.sync kernel).
 * Persistent CTAs walk the items in the host's order (item_order, item_group: src/cuda/cuda_plan.c), mapped
 * by the producer and the consumers through the same fp8moe_sm90_item_of (sm90_items.h). Grouped (the
 * default) keeps a wave on about item_group tiles' gathered rows; column-block major (the old order) puts a
 * wave on one 128-column block of up to 132 tiles, so the gathered rows (deepseek-v3 T = 8192: 470 MB) are
 * read from DRAM once per column block (docs/GPU.md "Item order"). */
#include "sm90_items.h"
#include "wgmma_sm90.cuh"

namespace fp8moe {
namespace sm90 {
namespace {

#if FP8MOE_SM90A
/* Producer warpgroup: thread p copies 16-byte chunk p % 8 of rows p / 8 + 16i (i < 4) of every A stage.
 * CLUSTER (2-CTA clusters, unit = item pair: fp8moe_sm90_unit_item): where the pair shares B (pair_shares_b)
 * thread 0 loads B box `rank` (gate rows for rank 0, up rows for rank 1) and multicasts it into both CTAs;
 * each CTA still receives both boxes (32 KB of transactions on its own full barrier) and gathers its own A. */
template <bool CLUSTER>
__device__ __forceinline__ void produce(const fp8moe_gemm1_args& a, const CUtensorMap& map_w, Smem& sm,
                                        int32_t tiles, int32_t col_blocks, int32_t items, int kblocks) {
  constexpr int kPeers = CLUSTER ? 2 : 1;
  const int p = threadIdx.x, c = p & 7, rb = p >> 3;
  const uint32_t swz = static_cast<uint32_t>((c ^ (rb & 7)) << 4); /* 128-byte swizzle: chunk ^ (row % 8) */
  const uint32_t rank = CLUSTER ? cluster_ctarank() : 0u;
  const int32_t units = (items + kPeers - 1) / kPeers;
  uint32_t it = 0;
  for (int32_t u = static_cast<int32_t>(blockIdx.x) / kPeers; u < units; u += static_cast<int32_t>(gridDim.x) / kPeers) {
    const fp8moe_sm90_unit un = fp8moe_sm90_unit_item(u, items, kPeers, rank);
    const fp8moe_sm90_item item = fp8moe_sm90_item_of(un.item, tiles, col_blocks, a.item_order, a.item_group);
    const int tile = item.tile;
    const int32_t n0 = item.col_block * kBN;
    const int32_t e = a.tile_expert[tile];
    const int64_t row0 = static_cast<int64_t>(tile) * kBM;
    const uint8_t* src[4];
    int bytes[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int32_t slot = a.sorted_slots[row0 + rb + 16 * i];
      bytes[i] = slot >= 0 ? 16 : 0; /* padding rows: zero-filled */
      src[i] = slot >= 0 ? a.x + static_cast<int64_t>(slot / a.K) * a.x_stride + c * 16 : a.x;
    }
    const int32_t gate_row = (a.gate_first ? 0 : a.I) + n0, up_row = (a.gate_first ? a.I : 0) + n0;
    const bool share =
        CLUSTER && p == 0 && pair_shares_b(u, items, tiles, col_blocks, a.item_order, a.item_group, a.tile_expert);
#pragma unroll 1
    for (int kb = 0; kb < kblocks; ++kb, ++it) {
      const int s = static_cast<int>(it % kStages);
      if (CLUSTER) mbar_wait_cluster(&sm.empty[s], ((it / kStages) & 1u) ^ 1u);
      else mbar_wait(&sm.empty[s], ((it / kStages) & 1u) ^ 1u);
      if (p == 0) {
        mbar_arrive_expect_tx(&sm.full[s], 2 * kBTileBytes);
        if (share) {
          tma_load_3d_multicast(sm.st[s].b[rank], &map_w, &sm.full[s], kb * kBK, rank == 0 ? gate_row : up_row, e,
                                static_cast<uint16_t>(0x3));
        } else {
          tma_load_3d(sm.st[s].b[0], &map_w, &sm.full[s], kb * kBK, gate_row, e);
          tma_load_3d(sm.st[s].b[1], &map_w, &sm.full[s], kb * kBK, up_row, e);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
        cp_async_16(sm.st[s].a + (rb + 16 * i) * kBK + swz, src[i] + kb * kBK, bytes[i]);
      publish_gathered(&sm.full[s]);
    }
  }
  cp_async_wait_all(); /* no copy of this thread outlives it (the consumers wait for them anyway) */
  /* Cluster: wait until both CTAs' consumers released every stage filled here, so no arrival of the peer
   * is still on its way to this CTA's barriers when it exits (as GEMM2's producer). */
  if (CLUSTER && p == 0)
#pragma unroll 1
    for (uint32_t j = 0; j < static_cast<uint32_t>(kStages); ++j)
      mbar_wait_cluster(&sm.empty[(it + j) % kStages], (((it + j) / kStages) & 1u) ^ 1u);
}
#endif

/* CLUSTER: launched in clusters of 2 CTAs (as GEMM2's cluster kernel, docs/GPU.md "2-CTA clusters"): the
 * empty barriers count both CTAs' consumer warps, a shadow item (odd item count) is computed but nothing of
 * it is written, and no CTA exits before its peer is done with it. */
template <int SCALE, bool F32, int LOOP, bool CLUSTER>
__global__ void __launch_bounds__(kThreads, 1)
    gemm1_wgmma_kernel(const __grid_constant__ fp8moe_gemm1_args a, const __grid_constant__ CUtensorMap map_w) {
#if FP8MOE_SM90A
  constexpr int kPeers = CLUSTER ? 2 : 1;
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = aligned_smem<Smem>(smem_raw); /* shared and aligned to the compiler: the epilogue's LDS/STS */
  init_barriers<kPeers>(sm, 1 + 128 * kGatherArrivals);
  const int32_t tiles = *a.num_tiles;
  const int32_t col_blocks = a.I / kBN;
  const int32_t items = tiles * col_blocks; /* < 2^31: the launcher checks max_tiles · col_blocks */
  const int kblocks = a.H / kBK;

  if (threadIdx.x < 128) {
    setmaxnreg_dec<kProducerRegs>();
    produce<CLUSTER>(a, map_w, sm, tiles, col_blocks, items, kblocks);
    if (CLUSTER) cluster_sync_all();
    return;
  }
  setmaxnreg_inc<kConsumerRegs>();
  const int ct = threadIdx.x - 128, wg = consumer_wg(), lane = ct % 32, q = (ct % 128) / 32;
  const int g = lane / 4, t = lane % 4;
  const int rr[2] = {16 * q + g, 16 * q + g + 8};
  const uint32_t rank = CLUSTER ? cluster_ctarank() : 0u;
  const int32_t units = (items + kPeers - 1) / kPeers;
  uint32_t it = 0;
  for (int32_t u = static_cast<int32_t>(blockIdx.x) / kPeers; u < units; u += static_cast<int32_t>(gridDim.x) / kPeers) {
    const fp8moe_sm90_unit un = fp8moe_sm90_unit_item(u, items, kPeers, rank);
    const bool store = un.store != 0;
    const fp8moe_sm90_item item = fp8moe_sm90_item_of(un.item, tiles, col_blocks, a.item_order, a.item_group);
    const int tile = item.tile;
    const int32_t n0 = item.col_block * kBN;
    const int32_t e = a.tile_expert[tile];
    const int64_t row0 = static_cast<int64_t>(tile) * kBM;
    int32_t tok[2];
    float tw[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int32_t slot = a.sorted_slots[row0 + rr[h]];
      tok[h] = slot >= 0 ? slot / a.K : -1;
      tw[h] = (a.token_weight && slot >= 0) ? a.token_weight[slot] : 1.0f;
    }
    /* Warpgroup 0: the gate rows, 1: the up rows of W13[e] for intermediate columns [n0, n0+128). */
    const int32_t nrow = ((wg == 0) == (a.gate_first != 0) ? 0 : a.I) + n0;
    float acc[64];
    auto sa = [&](int h, int kb, int) { return tok[h] >= 0 ? scale_at<F32>(a.x_scale, tok[h], kb, 0) : 0.0f; };
    auto sb = [&](int kb, int) { return scale_at<F32>(a.w_scale, e, nrow / kBN, kb); };
    consume<LOOP, SCALE == FP8MOE_SCALE_BLOCK, kPeers, true>(sm, wg, kblocks, it, acc, sa, sb);

    float sxw = 0.0f, sx[2] = {0.0f, 0.0f};
    if (SCALE == FP8MOE_SCALE_TENSOR) sxw = kref_at(a.x_scale, 0) * kref_at(a.w_scale, e);
    if (SCALE == FP8MOE_SCALE_ROW)
#pragma unroll
      for (int h = 0; h < 2; ++h) sx[h] = tok[h] >= 0 ? kref_at(a.x_scale, tok[h]) : 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int h = acc_half(i);
      float v = acc[i];
      if (SCALE == FP8MOE_SCALE_TENSOR) v = v * sxw;
      else if (SCALE == FP8MOE_SCALE_ROW) v = v * sx[h] * scale_at<F32>(a.w_scale, e, nrow + acc_col(i, t), 0);
      acc[i] = a.token_weight ? v * tw[h] : v;
    }
    /* The activation, split between the warpgroups: warpgroup 0 (gate) evaluates columns 0..63 (a thread's
     * elements i < 32), warpgroup 1 (up) columns 64..127, each after the other has handed it its values of
     * those columns through epi. It was warpgroup 0 alone, with warpgroup 1 waiting at the barrier for ~24 % of
     * the consumers' time at qwen3-30b-a3b T = 512 (docs/GPU.md "Next"). Same operations per element:
     * gated_activation(gate, up) either way. */
    consumer_sync(); /* the previous item's requantization is done reading epi */
#pragma unroll
    for (int i = 0; i < 64; ++i)
      if ((i < 32) == (wg == 1)) sm.epi[rr[acc_half(i)]][acc_col(i, t)] = acc[i]; /* the other half's evaluator */
    consumer_sync();
#pragma unroll
    for (int i = 0; i < 64; ++i)
      if ((i < 32) == (wg == 0)) {
        float& cell = sm.epi[rr[acc_half(i)]][acc_col(i, t)];
        cell = wg == 0 ? gated_activation(a.activation, acc[i], cell) : gated_activation(a.activation, cell, acc[i]);
      }
    consumer_sync();

    /* Requantize: 4 consecutive threads per row, 32 consecutive columns each. */
    constexpr int TPR = kConsumers / kBM, CPT = kBN / TPR;
    const int r = ct / TPR, qq = ct % TPR;
    const int64_t grow = row0 + r;
    const float* src = &sm.epi[r][qq * CPT];
    float m = 0.0f;
#pragma unroll
    for (int k = 0; k < CPT; ++k) m = fmaxf(m, finite_abs(src[k]));
#pragma unroll
    for (int o = 1; o < TPR; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (store) { /* a shadow item (odd item count, cluster rank 1) writes nothing; store is CTA-uniform */
      if (a.requant == FP8MOE_REQ_FUSED_GROUP || a.requant == FP8MOE_REQ_FUSED_STATIC) {
        const float s = a.requant == FP8MOE_REQ_FUSED_GROUP ? dynamic_scale(m) : kref_at(a.a2_static, 0);
        uint32_t* dst = reinterpret_cast<uint32_t*>(a.a2q + grow * a.I + n0 + qq * CPT);
#pragma unroll
        for (int k = 0; k < CPT / 4; ++k)
          dst[k] = e4m3x4(src[4 * k] / s, src[4 * k + 1] / s, src[4 * k + 2] / s, src[4 * k + 3] / s);
        if (a.requant == FP8MOE_REQ_FUSED_GROUP && qq == 0) a.a2s[grow * (a.I / kBN) + n0 / kBN] = s;
      } else {
        float4* dst = reinterpret_cast<float4*>(a.inter + grow * a.I + n0 + qq * CPT);
#pragma unroll
        for (int k = 0; k < CPT / 4; ++k) dst[k] = make_float4(src[4 * k], src[4 * k + 1], src[4 * k + 2], src[4 * k + 3]);
        if (a.requant == FP8MOE_REQ_DEFERRED_ROW) {
          if (qq == 0) atomic_amax(a.amax + grow, m);
        } else {
          m = warp_max(m);
          if (lane == 0) atomic_amax(a.amax, m);
        }
      }
    }
  }
  /* Cluster: neither CTA exits while the peer may still multicast into it or arrive on its barriers. */
  if (CLUSTER) cluster_sync_all();
#elif defined(__CUDA_ARCH__)
  (void)a;
  (void)map_w;
  __trap(); /* the plan selects this kernel only where the sm_90a SASS loads */
#endif
}

using Kernel = void (*)(fp8moe_gemm1_args, CUtensorMap);

/* The instantiation for a main-loop variant, or nullptr for a value outside FP8MOE_SM90_LOOP_*. */
template <int SCALE, bool F32, bool CLUSTER = false>
Kernel kernel_for(int32_t loop) {
  switch (loop) {
    case FP8MOE_SM90_LOOP_OVERLAP: return gemm1_wgmma_kernel<SCALE, F32, FP8MOE_SM90_LOOP_OVERLAP, CLUSTER>;
    case FP8MOE_SM90_LOOP_SERIAL: return gemm1_wgmma_kernel<SCALE, F32, FP8MOE_SM90_LOOP_SERIAL, CLUSTER>;
    case FP8MOE_SM90_LOOP_EARLY_RELEASE: return gemm1_wgmma_kernel<SCALE, F32, FP8MOE_SM90_LOOP_EARLY_RELEASE, CLUSTER>;
    default: return nullptr;
  }
}

/* max_clusters > 0: the cluster kernel on 2 × min(item pairs, max_clusters) CTAs; otherwise one CTA per SM. */
template <int SCALE, bool F32 = false>
cudaError_t launch(const fp8moe_gemm1_args& a, const CUtensorMap& mw, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(a.max_tiles) * (a.I / kBN);
  if (a.max_clusters > 0) {
    const Kernel k = kernel_for<SCALE, F32, true>(a.sm90_loop);
    if (k == nullptr) return cudaErrorInvalidValue;
    const int64_t pairs = (items + 1) / 2;
    const ClusterConfig c(dim3(static_cast<unsigned>(2 * (pairs < a.max_clusters ? pairs : a.max_clusters))), stream);
    return cudaLaunchKernelEx(&c.cfg, k, a, mw);
  }
  const Kernel k = kernel_for<SCALE, F32>(a.sm90_loop);
  if (k == nullptr) return cudaErrorInvalidValue;
  const int64_t ctas_max = a.max_ctas / FP8MOE_GEMM1_CTAS_PER_SM;
  k<<<dim3(static_cast<unsigned>(items < ctas_max ? items : ctas_max)), kThreads, kSmemBytes, stream>>>(a, mw);
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

extern "C" int fp8moe_launch_gemm1_sm90(const fp8moe_gemm1_args* a, cudaStream_t stream) {
  using namespace fp8moe::sm90;
  if (a->max_tiles == 0) return cudaSuccess;
  if (!fp8moe_sm90_order_ok(a->item_order, a->item_group, a->max_tiles, a->I / kBN)) return cudaErrorInvalidValue;
  CUtensorMap mw;
  const uint64_t dw[3] = {static_cast<uint64_t>(a->H), 2 * static_cast<uint64_t>(a->I),
                          static_cast<uint64_t>(a->E_local)};
  const uint64_t sw[2] = {static_cast<uint64_t>(a->w_stride_n), static_cast<uint64_t>(a->w_stride_e)};
  const int e = fp8moe_sm90_encode(a->tma_encode, &mw, a->w, 3, dw, sw, kBK, kBN);
  if (e != 0) return e;
  return static_cast<int>(with_scale_kind(a->scale_mode, a->x_scale.dt, a->w_scale.dt, [&](auto k) {
    return launch<decltype(k)::scale, decltype(k)::f32>(*a, mw, stream);
  }));
}

extern "C" int fp8moe_prepare_gemm1_sm90_smem(void) {
  using namespace fp8moe::sm90;
  return static_cast<int>(
      for_each_scale_kind([](auto k) { return raise_smem<decltype(k)::scale, decltype(k)::f32>(static_cast<int>(kSmemBytes)); }));
}

/* As fp8moe_prepare_gemm2_sm90_clusters, for GEMM1's cluster kernel. */
extern "C" int fp8moe_prepare_gemm1_sm90_clusters(int32_t sm_count, int32_t* clusters) {
  using namespace fp8moe::sm90;
  return resident_clusters(kernel_for<FP8MOE_SCALE_TENSOR, false, true>(FP8MOE_SM90_LOOP_OVERLAP), sm_count,
                           clusters);
}
