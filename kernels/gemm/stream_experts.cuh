/* stream_experts.cuh — how many experts a stream GEMM's tile list holds, counted by the whole block (the kernel:
 * gemm_stream_sm90.cu's experts_of_entries; the expert-aligned split's rule needs it, docs/GPU.md "Experts routed
 * more than a unit"). Portable device code: tests/test_stream_experts_emu.cpp runs it on the host's emulated block
 * (tests/routing_emu/warp_emu.h), at every block size and list length the kernels use. */
#ifndef FP8MOE_KERNELS_GEMM_STREAM_EXPERTS_CUH
#define FP8MOE_KERNELS_GEMM_STREAM_EXPERTS_CUH

#include <stdint.h>

namespace fp8moe {
namespace stream {

/* The experts among `tiles` expert-sorted tiles, by every thread of the block (it synchronizes the block, also where
 * tiles ≤ 0): tile t starts an expert where t = 0 or its expert (expert_of(t)) differs from tile t − 1's. Thread i
 * looks at tiles i, i + threads, …, so a thread can see several starts, and __syncthreads_count counts threads, not
 * their sums: the sum is taken bit by bit, one barrier per bit of the largest per-thread count (⌈tiles / threads⌉). */
template <class ExpertOf>
__device__ __forceinline__ int32_t count_experts(ExpertOf expert_of, int32_t tiles, int32_t thread, int32_t threads) {
  const int32_t trips = tiles > 0 ? (tiles + threads - 1) / threads : 0;
  int32_t starts = 0;
  for (int32_t t = thread; t < tiles; t += threads) starts += t == 0 || expert_of(t) != expert_of(t - 1);
  int32_t experts = __syncthreads_count(starts & 1);
  for (int32_t b = 1; (1 << b) <= trips; ++b) experts += __syncthreads_count((starts >> b) & 1) << b;
  return experts;
}

}  // namespace stream
}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_GEMM_STREAM_EXPERTS_CUH */
