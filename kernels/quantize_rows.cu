/* quantize_rows.cu — the deferred requantization of GEMM1's fp32 intermediate, for the formats whose
 * scale needs more than one GEMM1 tile: dynamic per-tensor (amax over all local rows) and per-row
 * (amax over the row's I values). Contract: inter [rows, I] fp32 and amax bits from GEMM1 (kernels/gemm/); writes
 * a2q [rows, I] e4m3 = e4m3(a / s) with s = max(amax/448, FLT_MIN) and the scale (a2s[0] or a2s[r]).
 * Launch: one block of 256 threads per row of the used tiles (grid max_tiles·tile_m; extra rows exit). */
#include "common.cuh"

namespace fp8moe {
namespace {

__global__ void __launch_bounds__(256) quantize_rows_kernel(fp8moe_quantize_rows_args a) {
  const int64_t r = blockIdx.x;
  if (r >= static_cast<int64_t>(*a.num_tiles) * a.tile_m) return;
  const float s = dynamic_scale(__uint_as_float(a.per_row ? a.amax[r] : a.amax[0]));
  if (threadIdx.x == 0 && (a.per_row || r == 0)) a.a2s[a.per_row ? r : 0] = s;
  const float4* src = reinterpret_cast<const float4*>(a.inter + r * a.I);
  uint32_t* dst = reinterpret_cast<uint32_t*>(a.a2q + r * a.I);
  for (int32_t i = threadIdx.x; i < a.I / 4; i += blockDim.x) {
    const float4 v = src[i];
    dst[i] = e4m3x4(v.x / s, v.y / s, v.z / s, v.w / s);
  }
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_quantize_rows(const fp8moe_quantize_rows_args* a, cudaStream_t stream) {
  if (a->max_tiles == 0) return cudaSuccess;
  fp8moe::quantize_rows_kernel<<<static_cast<unsigned>(a->max_tiles) * a->tile_m, 256, 0, stream>>>(*a);
  return static_cast<int>(cudaGetLastError());
}
