/* combine.cu — the weighted combine: out[t,:] = Σ_k w[t,k]·y[t·K+k,:] over the token's local slots
 * (slot_row ≥ 0) in slot order (y is GEMM2's bf16 rows by slot, widened exactly), in fp32 (separately rounded multiply and add, as the CPU backend's C code does), rounded
 * once (RNE) to bf16/fp16/fp32. Weight 1 when the weight was applied to the input (weights NULL). Tokens
 * with no local slot get zeros. Launch: grid (T, H/1024), 256 threads of 4 columns each, so a token's slots load in parallel. */
#include "common.cuh"
#include "pdl.cuh"

namespace fp8moe {
namespace {

constexpr int kMaxK = 32;

__global__ void __launch_bounds__(256) combine_kernel(fp8moe_combine_args a) {
  __shared__ int32_t rows[kMaxK];
  __shared__ float ws[kMaxK];
  wait_prior(); /* y comes from GEMM2 */
  const int64_t t = blockIdx.x;
  if (threadIdx.x < a.K) {
    rows[threadIdx.x] = a.slot_row[t * a.K + threadIdx.x];
    ws[threadIdx.x] = a.weights ? a.weights[t * a.K + threadIdx.x] : 1.0f;
  }
  __syncthreads();
  const int64_t h = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 4;
  if (h < a.H) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
    for (int k = 0; k < a.K; ++k) {
      if (rows[k] < 0) continue;
      const float4 y = y_load4(a.y + (t * a.K + k) * a.H + h);
      const float w = ws[k];
      acc.x = __fadd_rn(acc.x, __fmul_rn(w, y.x));
      acc.y = __fadd_rn(acc.y, __fmul_rn(w, y.y));
      acc.z = __fadd_rn(acc.z, __fmul_rn(w, y.z));
      acc.w = __fadd_rn(acc.w, __fmul_rn(w, y.w));
    }
    const int64_t o = t * a.out.s[0] + h;
    store_out(a.out.data, a.out.dt, o, acc.x);
    store_out(a.out.data, a.out.dt, o + 1, acc.y);
    store_out(a.out.data, a.out.dt, o + 2, acc.z);
    store_out(a.out.data, a.out.dt, o + 3, acc.w);
  }
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_combine(const fp8moe_combine_args* a, cudaStream_t stream) {
  if (a->T == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(a->T), static_cast<unsigned>((a->H + 1023) / 1024));
  return static_cast<int>(fp8moe::launch_pdl(fp8moe::combine_kernel, grid, dim3(256), 0, stream, *a));
}
