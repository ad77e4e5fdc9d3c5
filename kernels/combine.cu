/* combine.cu — the weighted combine: out[t,:] = Σ_k w[t,k]·y[t·K+k,:] over the token's local slots
 * (slot_row ≥ 0) in slot order (y is GEMM2's bf16 rows by slot, widened exactly), in fp32 (separately rounded
 * multiply and add, as the CPU backend's C code does), rounded once (RNE) to bf16/fp16/fp32. Weight 1 when the
 * weight was applied to the input (weights NULL). Tokens with no local slot get zeros.
 * Launch: grid (T, H/1024), 256 threads of 4 columns each; lane k of every warp holds slot k (K ≤ 32, the
 * capability table's max_top_k).
 *
 * Why it is shaped this way (docs/GPU.md "Combine"): the kernel only streams y, so its speed is the bytes it
 * keeps in flight. Each thread issues the loads of up to kSlotBatch slots before it uses any of them (one
 * memory round trip per batch, not one per slot), and the token's slot rows and weights are read before
 * griddepcontrol.wait: they come from stages before GEMM2, complete once this grid may start (kernels/pdl.cuh). */
#include "common.cuh"
#include "pdl.cuh"

namespace fp8moe {
namespace {

constexpr int kSlotBatch = 8;  /* loads in flight per thread: 64 bytes, 128 KB per SM at 8 blocks */
constexpr int kThreads = 256;
constexpr int kColumns = 4;    /* per thread: one 8-byte load of 4 bf16 per slot */
constexpr int kBlocksPerSm = 8; /* 2,048 threads: 128 KB of y loads in flight per SM at K = 8 */

/* Four fp32 values, rounded to nearest even, at element off of out (a multiple of 4): one 8-byte (bf16, fp16) or
 * 16-byte (fp32) store. Aligned by the contract: the output's data and row stride are multiples of 16 bytes
 * (src/contract.c, checked before run) and H is a multiple of 128 (every format's k_multiple). __stwb is a plain
 * (write-back) store; a vector assignment through a cast pointer was split into 4-byte stores in the PTX. */
__device__ __forceinline__ void store_out4(const fp8moe_kout& out, int64_t off, float4 v) {
  if (out.dt == FP8MOE_DT_F32) {
    __stwb(reinterpret_cast<float4*>(static_cast<float*>(out.data) + off), v);
  } else if (out.dt == FP8MOE_DT_BF16) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    __stwb(reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(out.data) + off),
           make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi)));
  } else if (out.dt == FP8MOE_DT_F16) {
    const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    __stwb(reinterpret_cast<uint2*>(static_cast<__half*>(out.data) + off),
           make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi)));
  }
}

__global__ void __launch_bounds__(kThreads, kBlocksPerSm) combine_kernel(fp8moe_combine_args a) {
  /* Every warp reads the token's slot rows and weights itself (lane k: slot k), so no block barrier stands
   * between a warp and its loads of y. From L2 (ld.global.cg), never this SM's L1: they are read before
   * griddepcontrol.wait and their writers are not this kernel's immediate predecessor (as the permutation's
   * early reads of ids, permute_segment.cuh). */
  const int64_t t = blockIdx.x;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const bool slot = lane < a.K;
  const int32_t row = slot ? __ldcg(a.slot_row + t * a.K + lane) : -1;
  const float w_lane = slot && a.weights ? __ldcg(a.weights + t * a.K + lane) : 1.0f;
  const uint32_t mask = __ballot_sync(0xffffffffu, row >= 0); /* bit k: slot k is local (expert parallelism) */
  wait_prior(); /* y comes from GEMM2 */
  const int64_t h = (static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x) * kColumns;
  const bool in = h < a.H; /* the warp stays whole for the shuffles below */
  const uint16_t* y = a.y + t * a.K * a.H + (in ? h : 0);
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int k0 = 0; k0 < a.K; k0 += kSlotBatch) {
    uint2 raw[kSlotBatch];
    const uint16_t* p = y + static_cast<int64_t>(k0) * a.H;
#pragma unroll
    for (int j = 0; j < kSlotBatch; ++j) { /* every load of the batch before any use */
      raw[j] = make_uint2(0u, 0u);
      if (in && ((mask >> (k0 + j)) & 1u)) raw[j] = *reinterpret_cast<const uint2*>(p);
      p += a.H;
    }
#pragma unroll
    for (int j = 0; j < kSlotBatch; ++j) { /* then the sum in slot order, the non-local slots skipped */
      if (!((mask >> (k0 + j)) & 1u)) continue; /* warp-uniform */
      const float w = __shfl_sync(0xffffffffu, w_lane, k0 + j);
      const float4 v = y_widen4(raw[j]);
      acc.x = __fadd_rn(acc.x, __fmul_rn(w, v.x));
      acc.y = __fadd_rn(acc.y, __fmul_rn(w, v.y));
      acc.z = __fadd_rn(acc.z, __fmul_rn(w, v.z));
      acc.w = __fadd_rn(acc.w, __fmul_rn(w, v.w));
    }
  }
  if (in) store_out4(a.out, t * a.out.s[0] + h, acc);
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_combine(const fp8moe_combine_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->T == 0) return cudaSuccess;
  constexpr int kBlockColumns = kThreads * kColumns;
  const dim3 grid(static_cast<unsigned>(a->T), static_cast<unsigned>((a->H + kBlockColumns - 1) / kBlockColumns));
  return static_cast<int>(launch_pdl(combine_kernel, grid, dim3(kThreads), 0, stream, *a));
}
