/* gemm1_mma_sm89.cu — grouped GEMM1 with the gated activation and the FP8 requantization fused into its epilogue.
 * Contract: rows are the expert-sorted slots of permute.cu (tile_expert, sorted_slots, num_tiles); row r
 * of tile m reads token sorted_slots[r]/K of x (e4m3, H contiguous) and multiplies it with the gate and up
 * rows [n0, n0+128) of W13[e] (natural layout, rows along H). h is dequantized per docs/DESIGN.md (TENSOR:
 * acc·(s_x·s_w); BLOCK: Σ_kb partial·s_x[t,kb]·s_w[e,nb,kb]; ROW: acc·s_x[t]·s_w[e,n]), multiplied by the
 * token weight when an fp8 input carries it, then a = act(gate)·up and, by `requant`:
 * FUSED_GROUP e4m3 in 1×128 groups (a2q, a2s [rows, I/128]); FUSED_STATIC e4m3 with the given a2 scale;
 * DEFERRED_* fp32 `inter` plus a finite-value amax (global or per row) for quantize_rows.cu.
 * Padding rows compute zeros. Launch: min(max_tiles·I/128, max_ctas) persistent CTAs of 256 threads (one
 * per SM) over (tile, column block) items, tiles of tile_m = 16 or 64 rows, 4 operand stages (≤ 182 KB
 * dynamic shared memory, raised once per device by fp8moe_prepare_gemm1). */
#include "gemm_tile_mma_sm89.cuh"

namespace fp8moe {
namespace {

constexpr int kStages = 4;
template <int TM>
using Smem1 = GemmSmem<2, kStages, TM>;

/* One work item: rows of `tile`, intermediate columns [n0, n0+128). */
template <int SCALE, int TM>
__device__ __forceinline__ void gemm1_tile(const fp8moe_gemm1_args& a, Smem1<TM>& sm, int32_t* tok, float* tw,
                                           int tile, int32_t n0) {
  using L = Layout<TM>;
  const int32_t e = a.tile_expert[tile];
  const int64_t row0 = static_cast<int64_t>(tile) * TM;
  const int tid = threadIdx.x;
  if (tid < TM) {
    const int32_t slot = a.sorted_slots[row0 + tid];
    const int32_t t = slot >= 0 ? slot / a.K : -1;
    tok[tid] = t;
    sm.arow[tid] = t >= 0 ? a.x + static_cast<int64_t>(t) * a.x_stride : nullptr;
    tw[tid] = (a.token_weight && slot >= 0) ? a.token_weight[slot] : 1.0f;
  }
  __syncthreads();

  /* Weight rows of the gate and the up projection for output columns [n0, n0+128). */
  const int32_t gate_row = (a.gate_first ? 0 : a.I) + n0, up_row = (a.gate_first ? a.I : 0) + n0;
  const uint8_t* we = a.w + static_cast<int64_t>(e) * a.w_stride_e;
  const uint8_t* const brow[2] = {we + gate_row * a.w_stride_n, we + up_row * a.w_stride_n};
  const int32_t nrow[2] = {gate_row, up_row};

  Acc<2, TM> acc;
  auto row_scale = [&](int r, int kb) { return tok[r] >= 0 ? kref_at(a.x_scale, tok[r], kb) : 0.0f; };
  auto block_scale = [&](int b, int kb) { return kref_at(a.w_scale, e, nrow[b] / kTileN, kb); };
  gemm_mainloop<2, kStages, TM, SCALE == FP8MOE_SCALE_BLOCK>(sm, brow, a.w_stride_n, a.H, row_scale, block_scale,
                                                             acc);

  /* Dequantize, weight, activate; stage the TM×128 tile of a in shared memory (main loop is done). */
  float sxw[2] = {0.0f, 0.0f};
  if (SCALE == FP8MOE_SCALE_TENSOR) {
    const float sx = kref_at(a.x_scale, 0);
    sxw[0] = sx * kref_at(a.w_scale, e);
    sxw[1] = sxw[0];
  }
#pragma unroll
  for (int i = 0; i < L::MT; ++i)
#pragma unroll
    for (int j = 0; j < L::NT; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = acc_row<TM>(i, c), col = acc_col<TM>(j, c);
        float h[2];
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          float v = acc.v[b][i][j][c];
          if (SCALE == FP8MOE_SCALE_TENSOR) {
            v = v * sxw[b];
          } else if (SCALE == FP8MOE_SCALE_ROW) {
            const float sx = tok[r] >= 0 ? kref_at(a.x_scale, tok[r]) : 0.0f;
            v = v * sx * kref_at(a.w_scale, e, nrow[b] + col);
          }
          h[b] = a.token_weight ? v * tw[r] : v;
        }
        sm.u.epi[r][col] = gated_activation(a.activation, h[0], h[1]);
      }
  __syncthreads();

  /* Requantize: TPR consecutive threads per row (one warp-aligned group), CPT consecutive columns each. */
  constexpr int TPR = kGemmThreads / TM, CPT = kTileN / TPR;
  static_assert(TPR <= 32 && CPT % 4 == 0, "a row's threads share a warp");
  const int r = tid / TPR, q = tid % TPR;
  const int64_t grow = row0 + r;
  const float* src = &sm.u.epi[r][q * CPT];
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < CPT; ++k) m = fmaxf(m, finite_abs(src[k]));
#pragma unroll
  for (int o = 1; o < TPR; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (a.requant == FP8MOE_REQ_FUSED_GROUP || a.requant == FP8MOE_REQ_FUSED_STATIC) {
    const float s = a.requant == FP8MOE_REQ_FUSED_GROUP ? dynamic_scale(m) : kref_at(a.a2_static, 0);
    uint32_t* dst = reinterpret_cast<uint32_t*>(a.a2q + grow * a.I + n0 + q * CPT);
#pragma unroll
    for (int k = 0; k < CPT / 4; ++k)
      dst[k] = e4m3x4(src[4 * k] / s, src[4 * k + 1] / s, src[4 * k + 2] / s, src[4 * k + 3] / s);
    if (a.requant == FP8MOE_REQ_FUSED_GROUP && q == 0) a.a2s[grow * (a.I / kTileN) + n0 / kTileN] = s;
  } else {
    float4* dst = reinterpret_cast<float4*>(a.inter + grow * a.I + n0 + q * CPT);
#pragma unroll
    for (int k = 0; k < CPT / 4; ++k) dst[k] = make_float4(src[4 * k], src[4 * k + 1], src[4 * k + 2], src[4 * k + 3]);
    if (a.requant == FP8MOE_REQ_DEFERRED_ROW) {
      if (q == 0) atomic_amax(a.amax + grow, m);
    } else {
      m = warp_max(m);
      if (tid % 32 == 0) atomic_amax(a.amax, m);
    }
  }
}

/* Persistent CTAs walk the work items (tile, column block), column block major, so CTAs running together
 * share a weight column block across the tiles of one expert. */
template <int SCALE, int TM>
__global__ void __launch_bounds__(kGemmThreads, 1) gemm1_kernel(fp8moe_gemm1_args a) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Smem1<TM>& sm = *reinterpret_cast<Smem1<TM>*>(smem_raw);
  __shared__ int32_t tok[TM];
  __shared__ float tw[TM];
  const int32_t tiles = *a.num_tiles;
  const int64_t items = static_cast<int64_t>(tiles) * (a.I / kTileN);
  for (int64_t w = blockIdx.x; w < items; w += gridDim.x) {
    __syncthreads(); /* the previous item's epilogue is done with shared memory */
    gemm1_tile<SCALE, TM>(a, sm, tok, tw, static_cast<int>(w % tiles), static_cast<int32_t>(w / tiles) * kTileN);
  }
}

template <int TM>
cudaError_t launch(const fp8moe_gemm1_args& a, dim3 grid, cudaStream_t stream) {
  switch (a.scale_mode) {
    case FP8MOE_SCALE_BLOCK:
      gemm1_kernel<FP8MOE_SCALE_BLOCK, TM><<<grid, kGemmThreads, sizeof(Smem1<TM>), stream>>>(a);
      break;
    case FP8MOE_SCALE_ROW: gemm1_kernel<FP8MOE_SCALE_ROW, TM><<<grid, kGemmThreads, sizeof(Smem1<TM>), stream>>>(a); break;
    default: gemm1_kernel<FP8MOE_SCALE_TENSOR, TM><<<grid, kGemmThreads, sizeof(Smem1<TM>), stream>>>(a); break;
  }
  return cudaGetLastError();
}

template <int TM>
cudaError_t prepare() {
  const int bytes = static_cast<int>(sizeof(Smem1<TM>));
  cudaError_t e = cudaFuncSetAttribute(gemm1_kernel<FP8MOE_SCALE_BLOCK, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(gemm1_kernel<FP8MOE_SCALE_ROW, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(gemm1_kernel<FP8MOE_SCALE_TENSOR, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  return e;
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_gemm1(const fp8moe_gemm1_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->max_tiles == 0) return cudaSuccess;
  const int64_t items = static_cast<int64_t>(a->max_tiles) * (a->I / kTileN);
  const dim3 grid(static_cast<unsigned>(items < a->max_ctas ? items : a->max_ctas));
  return static_cast<int>(a->tile_m == 16 ? launch<16>(*a, grid, stream) : launch<64>(*a, grid, stream));
}

extern "C" int fp8moe_prepare_gemm1(void) {
  using namespace fp8moe;
  cudaError_t e = prepare<16>();
  if (e == cudaSuccess) e = prepare<64>();
  return static_cast<int>(e);
}
