/* gemm2_wgmma128_sm90.cu — grouped GEMM2 on Hopper with 128-row work items (FP8MOE_CUDA_GEMM_FALLBACK "i",
 * opt-in; docs/GPU.md "128-row GEMM2 items"). Same contract and arithmetic as gemm2_wgmma_sm90.cu: y[r, n] =
 * a2q[r]·W2[e, n], the same per-stage partial sums (the same four m64n128k32 wgmmas on the same 64-row A tile
 * and 128-row W2 box) promoted in stage order by the same operations (BLOCK acc += (p·s_a2)·s_w, otherwise
 * acc += p), the same epilogue per element (TENSOR acc·(s_a2·s_w); ROW acc·s_a2[r]·s_w[e, n]) and the same
 * bf16 store into y's row of each real row's slot, so it writes the same bits. What changes is the work item
 * and with it the L2→SM bytes per tensor-core cycle.
 *
 * Work item: a pair of consecutive 64-row tiles of one expert (sm90_pairs.cuh; an expert of n tiles gives
 * ceil(n/2) pairs, the last one single when n is odd) × 256 output columns. Per stage one producer thread
 * loads by TMA the pair's two 64 × 128 boxes of a2q (rows are contiguous and expert-sorted; one box for a
 * single pair) and two 128 × 128 boxes of W2[e] (columns n0 … n0 + 255); consumer warpgroup w multiplies A
 * tile w (rows 64w … 64w + 63) by both W2 boxes, 4 wgmmas into one partial per box, each promoted into its
 * own accumulator (acc0: columns n0 …, acc1: n0 + 128 …). So a stage moves A 16 KB + B 32 KB = 48 KB for
 * 1,024 tensor-core cycles (the 64-row kernel: 40 KB for 512), and each W2 box is read from L2 once per pair
 * instead of once per tile. Block scales are read by the consumers from global memory before the stage's
 * wait (2 row scales and 2 weight-block scales per stage and thread), as the 64-row kernel does.
 *
 * Items = pairs × column blocks in the host's order (item_order; item_group counts pairs), persistent CTAs
 * (one per SM, 384 threads). Limits: max_tiles ≤ FP8MOE_GEMM1_PAIR_MAX_TILES, E_local ≤
 * FP8MOE_GEMM1_PAIR_MAX_EXPERTS (the shared-memory pair list, the plan's PAIR_TILES need), H % 256 = 0. */
#include "sm90_pairs.cuh"

namespace fp8moe {
namespace sm90 {
namespace {

#if FP8MOE_SM90A
/* Producer thread: per item and stage, the pair's A boxes and the item's two W2 boxes into the stage, with
 * the stage's transaction bytes on its full barrier (8 KB less for a single pair, whose second A tile
 * nobody reads). The loop is not unrolled: the producer runs within setmaxnreg's 40 registers; pairs and
 * items are re-read from shared memory per item. */
__device__ __forceinline__ void produce(const fp8moe_gemm2_args& a, const CUtensorMap& map_a, const CUtensorMap& map_w,
                                        PairAddr sm, int kblocks) {
  uint32_t it = 0;
  for (int32_t w = static_cast<int32_t>(blockIdx.x);; w += static_cast<int32_t>(gridDim.x)) {
    const int32_t pairs = ld_shared_s32(sm.num_pairs()), col_blocks = a.H / kGemm2Cols;
    if (w >= pairs * col_blocks) break;
    const fp8moe_sm90_item item = fp8moe_sm90_item_of(w, pairs, col_blocks, a.item_order, a.item_group);
    const Pair pr = pair_of(sm, item.tile);
    const int32_t e = a.tile_expert[pr.tile0], n0 = item.col_block * kGemm2Cols;
    const uint32_t bytes = static_cast<uint32_t>((pr.two ? 2 : 1) * kATileBytes + 2 * kBTileBytes);
#pragma unroll 1
    for (int kb = 0; kb < kblocks; ++kb, ++it) {
      const uint32_t s = it % kStages;
      mbar_wait(sm.empty(s), ((it / kStages) & 1u) ^ 1u);
      mbar_arrive_expect_tx(sm.full(s), bytes);
      tma_load_2d(sm.a(s, 0), &map_a, sm.full(s), kb * kBK, pr.tile0 * kBM);
      if (pr.two) tma_load_2d(sm.a(s, 1), &map_a, sm.full(s), kb * kBK, (pr.tile0 + 1) * kBM);
      tma_load_3d(sm.b(s, 0), &map_w, sm.full(s), kb * kBK, n0, e);
      tma_load_3d(sm.b(s, 1), &map_w, sm.full(s), kb * kBK, n0 + kBN, e);
    }
  }
}
#endif

template <int SCALE, bool F32>
__global__ void __launch_bounds__(kThreads, 1)
    gemm2_wgmma128_kernel(const __grid_constant__ fp8moe_gemm2_args a, const __grid_constant__ CUtensorMap map_a,
                          const __grid_constant__ CUtensorMap map_w) {
#if FP8MOE_SM90A
  extern __shared__ uint8_t smem_raw[];
  init_pair_barriers(smem_raw, 1); /* full: the TMA issuer's expect_tx */
  /* Nothing is computed before the split (gemm1_wgmma128_sm90.cu: ptxas budgets code before setmaxnreg.dec
   * at the producers' 40 registers). */
  __syncthreads(); /* the barriers are initialized */
  if (threadIdx.x < 128) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      wait_pairs(pair_addr_of(smem_raw)); /* the consumers built the pair list */
      produce(a, map_a, map_w, pair_addr_of(smem_raw), a.I / kBK);
    }
    return;
  }
  setmaxnreg_inc<kConsumerRegs>();
  build_pairs(pair_smem_of(smem_raw), a.tile_expert, *a.num_tiles);
  publish_pairs(pair_smem_of(smem_raw));
  const PairAddr sp = pair_addr_of(smem_raw);
  const int kblocks = a.I / kBK;
  uint32_t it = 0;
  auto item_at = [&](int32_t w) {
    return fp8moe_sm90_item_of(w, ld_shared_s32(sp.num_pairs()), a.H / kGemm2Cols, a.item_order, a.item_group);
  };
  for (int32_t w = static_cast<int32_t>(blockIdx.x);; w += static_cast<int32_t>(gridDim.x)) {
    /* items ≤ max_tiles · col_blocks < 2^31 (the launcher checks) */
    if (w >= ld_shared_s32(sp.num_pairs()) * (a.H / kGemm2Cols)) break;
    const int wg = consumer_wg();
    const fp8moe_sm90_item item = item_at(w);
    const Pair pr = pair_of(sp, item.tile);
    if (wg == 1 && !pr.two) { /* warpgroup-uniform: a single pair has no rows for warpgroup 1 */
      pass_stages(sp, kblocks, it);
      continue;
    }
    const int tid = static_cast<int>(threadIdx.x);
    const int r0 = 16 * (tid % 128 / 32) + tid % 32 / 4; /* the thread's rows r0 and r0 + 8 of its tile */
    float acc0[64], acc1[64];
    {
      /* BLOCK: the 64-row kernel's scale reads (its sa, sb) for both W2 boxes, from two element offsets kept
       * across the loop (the thread's row r0 of its tile, the item's first weight-scale block) */
      const int64_t oa = (static_cast<int64_t>(pr.tile0 + wg) * kBM + r0) * a.a2_scale.s[0];
      const int64_t ow = a.tile_expert[pr.tile0] * a.w_scale.s[0] + item.col_block * 2 * a.w_scale.s[1];
      auto scales = [&](uint32_t, int kb, float& c0, float& c1, float& cw0, float& cw1) {
        cw0 = scale_off<F32>(a.w_scale, ow + kb * a.w_scale.s[2]);
        cw1 = scale_off<F32>(a.w_scale, ow + a.w_scale.s[1] + kb * a.w_scale.s[2]);
        c0 = scale_off<F32>(a.a2_scale, oa + kb * a.a2_scale.s[1]);
        c1 = scale_off<F32>(a.a2_scale, oa + 8 * a.a2_scale.s[0] + kb * a.a2_scale.s[1]);
      };
      consume_pair<SCALE == FP8MOE_SCALE_BLOCK, false, false>(sp, wg, kblocks, it, acc0, acc1, scales);
    }
    const int64_t row0 = static_cast<int64_t>(pr.tile0 + wg) * kBM;
    const int32_t e = a.tile_expert[pr.tile0];
    const int32_t nb = item.col_block * 2; /* the item's first 128-column block */
    const int32_t slot[2] = {a.sorted_slots[row0 + r0], a.sorted_slots[row0 + r0 + 8]};
    const int t = tid % 4;
    /* The 64-row kernel's epilogue, for each W2 box's 128 columns. */
    const YScales ys = y_scales<SCALE>(a, e, row0 + r0, row0 + r0 + 8);
    store_y_box<SCALE, F32>(a, acc0, e, nb * kBN, t, ys, slot);
    store_y_box<SCALE, F32>(a, acc1, e, (nb + 1) * kBN, t, ys, slot);
  }
#elif defined(__CUDA_ARCH__)
  (void)a;
  (void)map_a;
  (void)map_w;
  __trap(); /* the plan selects this kernel only where the sm_90a SASS loads */
#endif
}

template <int SCALE, bool F32 = false>
cudaError_t launch(const fp8moe_gemm2_args& a, const CUtensorMap& ma, const CUtensorMap& mw, cudaStream_t stream) {
  const int64_t items = fp8moe_sm90_max_pairs(a.max_tiles, a.E_local) * (a.H / kGemm2Cols);
  const int64_t ctas_max = a.max_ctas / FP8MOE_GEMM2_CTAS_PER_SM; /* one CTA per SM here */
  gemm2_wgmma128_kernel<SCALE, F32>
      <<<dim3(static_cast<unsigned>(items < ctas_max ? items : ctas_max)), kThreads, kPairSmemBytes, stream>>>(a, ma, mw);
  return cudaGetLastError();
}

template <int SCALE, bool F32>
cudaError_t raise_smem() {
  return cudaFuncSetAttribute(gemm2_wgmma128_kernel<SCALE, F32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kPairSmemBytes));
}

}  // namespace
}  // namespace sm90
}  // namespace fp8moe

extern "C" int fp8moe_launch_gemm2_sm90_pairs(const fp8moe_gemm2_args* a, cudaStream_t stream) {
  using namespace fp8moe::sm90;
  if (a->max_tiles == 0) return cudaSuccess;
  if (a->max_tiles > FP8MOE_GEMM1_PAIR_MAX_TILES || a->E_local > FP8MOE_GEMM1_PAIR_MAX_EXPERTS || a->tile_m != kBM ||
      a->max_ctas < FP8MOE_GEMM2_CTAS_PER_SM || a->H % kGemm2Cols != 0)
    return cudaErrorInvalidValue;
  if (!fp8moe_sm90_order_ok(a->item_order, a->item_group, a->max_tiles, a->H / kGemm2Cols)) return cudaErrorInvalidValue;
  CUtensorMap ma, mw;
  const int e = fp8moe_sm90_encode_gemm2(a, &ma, &mw);
  if (e != 0) return e;
  return static_cast<int>(with_scale_kind(a->scale_mode, a->a2_scale.dt, a->w_scale.dt, [&](auto k) {
    return launch<decltype(k)::scale, decltype(k)::f32>(*a, ma, mw, stream);
  }));
}

extern "C" int fp8moe_prepare_gemm2_sm90_pairs_smem(void) {
  using namespace fp8moe::sm90;
  return static_cast<int>(for_each_scale_kind([](auto k) { return raise_smem<decltype(k)::scale, decltype(k)::f32>(); }));
}
