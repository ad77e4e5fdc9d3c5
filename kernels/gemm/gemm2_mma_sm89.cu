/* gemm2_mma_sm89.cu — grouped GEMM2: y[r, n] = a2q[r]·W2[e, n] dequantized (TENSOR: acc·(s_a2·s_w); BLOCK:
 * Σ_kb partial·s_a2[r,kb]·s_w[e,nb,kb]; ROW: acc·s_a2[r]·s_w[e,n]) in fp32, stored as bf16, for the rows of
 * permute.cu. W2 is read in its natural layout (rows along I). Each real row is stored (bf16) as y's row of
 * its slot; padding rows are not stored. Launch: min(max_tiles·H/128, max_ctas) persistent CTAs of 256 threads
 * (two per SM) over (tile, column block) items, tiles of tile_m = 16 or 64 rows, 4 operand stages (≤ 110 KB
 * dynamic shared memory, raised once per device by fp8moe_prepare_gemm2). */
#include "gemm_tile_mma_sm89.cuh"

namespace fp8moe {
namespace {

constexpr int kStages = 4;
template <int TM>
using Smem2 = GemmSmem<1, kStages, TM>;

/* One work item: rows of `tile`, output columns [n0, n0+128). */
template <int SCALE, int TM>
__device__ __forceinline__ void gemm2_tile(const fp8moe_gemm2_args& a, Smem2<TM>& sm, int tile, int32_t n0) {
  using L = Layout<TM>;
  const int32_t e = a.tile_expert[tile];
  const int64_t row0 = static_cast<int64_t>(tile) * TM;
  if (threadIdx.x < TM) sm.arow[threadIdx.x] = a.a2q + (row0 + threadIdx.x) * a.I;
  __syncthreads();
  const uint8_t* const brow[1] = {a.w + static_cast<int64_t>(e) * a.w_stride_e + static_cast<int64_t>(n0) * a.w_stride_n};
  Acc<1, TM> acc;
  auto row_scale = [&](int r, int kb) { return kref_at(a.a2_scale, row0 + r, kb); };
  auto block_scale = [&](int, int kb) { return kref_at(a.w_scale, e, n0 / kTileN, kb); };
  gemm_mainloop<1, kStages, TM, SCALE == FP8MOE_SCALE_BLOCK>(sm, brow, a.w_stride_n, a.I, row_scale, block_scale,
                                                             acc);

  float st = 0.0f;
  if (SCALE == FP8MOE_SCALE_TENSOR) st = kref_at(a.a2_scale, 0) * kref_at(a.w_scale, e);
#pragma unroll
  for (int i = 0; i < L::MT; ++i)
#pragma unroll
    for (int j = 0; j < L::NT; ++j)
#pragma unroll
      for (int c = 0; c < 4; c += 2) {
        const int r = acc_row<TM>(i, c), col = acc_col<TM>(j, c);
        float v0 = acc.v[0][i][j][c], v1 = acc.v[0][i][j][c + 1];
        if (SCALE == FP8MOE_SCALE_TENSOR) {
          v0 *= st;
          v1 *= st;
        } else if (SCALE == FP8MOE_SCALE_ROW) {
          const float sr = kref_at(a.a2_scale, row0 + r);
          v0 = v0 * sr * kref_at(a.w_scale, e, n0 + col);
          v1 = v1 * sr * kref_at(a.w_scale, e, n0 + col + 1);
        }
        const int32_t slot = a.sorted_slots[row0 + r];
        if (slot >= 0) *reinterpret_cast<uint32_t*>(a.y + static_cast<int64_t>(slot) * a.H + n0 + col) = y_bf16x2(v0, v1);
      }
}

/* Persistent CTAs over (tile, column block) items, column block major (as gemm1_mma_sm89.cu). */
template <int SCALE, int TM>
__global__ void __launch_bounds__(kGemmThreads, FP8MOE_GEMM2_CTAS_PER_SM) gemm2_kernel(fp8moe_gemm2_args a) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Smem2<TM>& sm = *reinterpret_cast<Smem2<TM>*>(smem_raw);
  const int32_t tiles = *a.num_tiles;
  const int64_t items = static_cast<int64_t>(tiles) * (a.H / kTileN);
  for (int64_t w = blockIdx.x; w < items; w += gridDim.x) {
    __syncthreads(); /* the previous item is done with shared memory */
    gemm2_tile<SCALE, TM>(a, sm, static_cast<int>(w % tiles), static_cast<int32_t>(w / tiles) * kTileN);
  }
}

template <int TM>
cudaError_t launch(const fp8moe_gemm2_args& a, dim3 grid, cudaStream_t stream) {
  switch (a.scale_mode) {
    case FP8MOE_SCALE_BLOCK:
      gemm2_kernel<FP8MOE_SCALE_BLOCK, TM><<<grid, kGemmThreads, sizeof(Smem2<TM>), stream>>>(a);
      break;
    case FP8MOE_SCALE_ROW: gemm2_kernel<FP8MOE_SCALE_ROW, TM><<<grid, kGemmThreads, sizeof(Smem2<TM>), stream>>>(a); break;
    default: gemm2_kernel<FP8MOE_SCALE_TENSOR, TM><<<grid, kGemmThreads, sizeof(Smem2<TM>), stream>>>(a); break;
  }
  return cudaGetLastError();
}

template <int TM>
cudaError_t prepare() {
  const int bytes = static_cast<int>(sizeof(Smem2<TM>));
  cudaError_t e = cudaFuncSetAttribute(gemm2_kernel<FP8MOE_SCALE_BLOCK, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(gemm2_kernel<FP8MOE_SCALE_ROW, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(gemm2_kernel<FP8MOE_SCALE_TENSOR, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  return e;
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_gemm2(const fp8moe_gemm2_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->max_tiles == 0) return cudaSuccess;
  const int64_t items = static_cast<int64_t>(a->max_tiles) * (a->H / kTileN);
  const dim3 grid(static_cast<unsigned>(items < a->max_ctas ? items : a->max_ctas));
  return static_cast<int>(a->tile_m == 16 ? launch<16>(*a, grid, stream) : launch<64>(*a, grid, stream));
}

extern "C" int fp8moe_prepare_gemm2(void) {
  using namespace fp8moe;
  cudaError_t e = prepare<16>();
  if (e == cudaSuccess) e = prepare<64>();
  return static_cast<int>(e);
}
