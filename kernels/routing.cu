/* routing.cu — expert selection and weights for every logit-reading routing method, any T (docs/DESIGN.md
 * "Routing"). Contract: logits [T,E] and the optional bias [E] are fp32/bf16/fp16 with any strides, read
 * directly and converted to fp32; all arithmetic is fp32. NaN/−Inf logits are unselectable (key −Inf,
 * weight 0), +Inf reads as FLT_MAX. Selection is by key descending, ties to the lower expert index; slots
 * left when fewer than K experts are selectable take the lowest-index unselectable experts (weight 0).
 * Writes ids [T*K] (global) and weights [T*K] (× routed_scaling_factor), and the optional host outputs.
 * The per-token work is routing_token.cuh (shared with the fused small-T prologue, prologue.cu).
 * Launch: one warp per token, 4 warps per block, experts in registers (E ≤ 2048, K ≤ 32, n_group ≤ 32);
 * E floats of shared memory per warp where route_token uses them (route_uses_scratch: group limiting, the filtered
 * selection). */
#include "common.cuh"
#include "pdl.cuh"
#include "routing_token.cuh"

namespace fp8moe {
namespace {

constexpr int kWarpsPerBlock = 4;
/* Resident blocks per SM asked of ptxas for PL ≤ 8 (E ≤ 256): 12 × 4 warps caps registers at 40 (43 without
 * it, allocated as 48: 10 blocks, 40 warps per SM); 16 would cap them at 32 and spill 136 bytes. At PL = 8 the
 * cap costs 32 bytes of spill stores (ptxas -v, sm_90a, CUDA 13, 2026-12-05): six STL/LDL around the sigmoid
 * divisions per token, L1-resident. More warps per SM hide more of a token's dependent chain (loads, sigmoids,
 * the redux rounds of top-K) and put 6,336 tokens in flight on an H200 instead of 5,280 (deepseek-v3 T = 8192:
 * 8,192 tokens, docs/GPU.md "Permutation"). Register allocation does not change arithmetic, so the bits stay. */
template <int PL>
constexpr int min_blocks() { return PL <= 8 ? 12 : 1; }

template <int PL, bool kV1>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, min_blocks<PL>()) routing_kernel(fp8moe_routing_args a,
                                                                                      fp8moe_zero_args z) {
  extern __shared__ float gkey[];
  wait_prior(); /* plain launch: returns at once */
  allow_next(); /* the permutation (PDL) may be scheduled now; it waits for this grid before reading ids */
  /* The run's scratch words, zeroed here rather than by memset nodes before this launch (a node each in the
   * graph, in series): this grid starts after the previous run's last kernel has finished (plain launch), and
   * every stage that reads them waits for this grid (griddepcontrol.wait). */
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t gstride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = gid; i < z.n_words; i += gstride) z.words[i] = 0u;
  for (int64_t i = gid; i < z.n_rows; i += gstride) z.rows[i] = 0u;
  if (z.status && gid == 0) *z.status = 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (t >= a.T) return;
  int32_t e;
  float w;
  if (route_token<PL, kV1>(a, t, gkey + warp * a.E, &e, &w)) store_route(a, t, lane, e, w);
}

template <int PL>
cudaError_t launch(const fp8moe_routing_args& a, const fp8moe_zero_args& z, cudaStream_t stream) {
  const size_t smem = route_uses_scratch(a) ? static_cast<size_t>(kWarpsPerBlock) * a.E * sizeof(float) : 0;
  const unsigned blocks = static_cast<unsigned>((a.T + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (a.v1)
    routing_kernel<PL, true><<<blocks, kWarpsPerBlock * 32, smem, stream>>>(a, z);
  else
    routing_kernel<PL, false><<<blocks, kWarpsPerBlock * 32, smem, stream>>>(a, z);
  return cudaGetLastError();
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_routing(const fp8moe_routing_args* a, const fp8moe_zero_args* z, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->T == 0) return cudaSuccess;
  switch (lane_experts(a->E)) {
    case 1: return static_cast<int>(launch<1>(*a, *z, stream));
    case 2: return static_cast<int>(launch<2>(*a, *z, stream));
    case 4: return static_cast<int>(launch<4>(*a, *z, stream));
    case 8: return static_cast<int>(launch<8>(*a, *z, stream));
    case 16: return static_cast<int>(launch<16>(*a, *z, stream));
    case 32: return static_cast<int>(launch<32>(*a, *z, stream));
    default: return static_cast<int>(launch<64>(*a, *z, stream));
  }
}
