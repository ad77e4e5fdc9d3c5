/* quantize_rows.cu — the deferred requantization of GEMM1's fp32 intermediate, for the formats whose
 * scale needs more than one GEMM1 tile: dynamic per-tensor (amax over all local rows) and per-row
 * (amax over the row's I values). Contract: inter [rows, I] fp32 and amax bits from GEMM1 (kernels/gemm/); writes
 * a2q [rows, I] e4m3 = e4m3(a / s) with s = max(amax/448, FLT_MIN) and the scale (a2s[0] or a2s[r]).
 * Launch: one block of 256 threads per row of the used tiles (grid max_tiles·tile_m; extra rows exit). */
#include "common.cuh"

namespace fp8moe {
namespace {

/* Loads in flight per thread: a step's 16-byte loads of kBatch pieces go out before the first is used (the SASS
 * had one load per step, behind the previous step's store, and the amax load behind the num_tiles test). */
constexpr int kBatch = 4;

__global__ void __launch_bounds__(256) quantize_rows_kernel(fp8moe_quantize_rows_args a) {
  const int64_t r = blockIdx.x;
  /* Both scalars loaded before the test (volatile: ptxas otherwise sank the amax load below the exit, a second
   * round trip in series); r < max_tiles·tile_m, so the amax entry is inside its slice either way. */
  const int32_t tiles = *static_cast<const volatile int32_t*>(a.num_tiles);
  const uint32_t amax = *static_cast<const volatile uint32_t*>(a.per_row ? a.amax + r : a.amax);
  if (r >= static_cast<int64_t>(tiles) * a.tile_m) return;
  const float s = dynamic_scale(__uint_as_float(amax));
  const EncodeScale q = encode_scale(s, __uint_as_float(amax));
  if (threadIdx.x == 0 && (a.per_row || r == 0)) a.a2s[a.per_row ? r : 0] = s;
  const float4* src = reinterpret_cast<const float4*>(a.inter + r * a.I);
  uint32_t* dst = reinterpret_cast<uint32_t*>(a.a2q + r * a.I);
  const int32_t n = a.I / 4;
  for (int32_t i0 = threadIdx.x; i0 < n; i0 += kBatch * blockDim.x) {
    float4 v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int32_t i = i0 + b * static_cast<int32_t>(blockDim.x);
      v[b] = i < n ? src[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int32_t i = i0 + b * static_cast<int32_t>(blockDim.x);
      if (i < n) dst[i] = quant4(v[b], q);
    }
  }
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_quantize_rows(const fp8moe_quantize_rows_args* a, cudaStream_t stream) {
  if (a->max_tiles == 0) return cudaSuccess;
  fp8moe::quantize_rows_kernel<<<static_cast<unsigned>(a->max_tiles) * a->tile_m, 256, 0, stream>>>(*a);
  return static_cast<int>(cudaGetLastError());
}
