/* ordered_append.cuh — one round of an order-keeping list build across the warps of a block: each thread whose
 * `keep` holds appends its entry, the entries in thread order (warp by warp, lane by lane), by one ballot per
 * warp and a per-warp count in shared memory. The pair GEMMs' pair list (sm90_pairs.cuh) and the stream GEMMs'
 * list of two-tile units (gemm_stream_sm90.cu) are built with it. */
#ifndef FP8MOE_KERNELS_ORDERED_APPEND_CUH
#define FP8MOE_KERNELS_ORDERED_APPEND_CUH

#include <stdint.h>

namespace fp8moe {

/* WARPS warps (warp: this thread's index among them) append to list from base; returns base + the round's
 * appends. warp_count: WARPS ints of shared memory; sync: the barrier of exactly these warps (called twice: the
 * counts are read after it, and rewritten by the next round only after it). */
template <int WARPS, class Sync>
__device__ __forceinline__ int32_t ordered_append(bool keep, uint16_t entry, int warp, int32_t base,
                                                  int32_t* warp_count, uint16_t* list, Sync sync) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const uint32_t m = __ballot_sync(0xffffffffu, keep);
  if (lane == 0) warp_count[warp] = __popc(m);
  sync();
  int32_t off = base, total = 0;
#pragma unroll
  for (int w = 0; w < WARPS; ++w) {
    const int32_t n = warp_count[w];
    off += w < warp ? n : 0;
    total += n;
  }
  if (keep) list[off + __popc(m & ((1u << lane) - 1u))] = entry;
  sync(); /* warp_count is rewritten next round */
  return base + total;
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_ORDERED_APPEND_CUH */
