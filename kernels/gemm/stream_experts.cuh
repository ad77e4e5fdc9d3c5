/* stream_experts.cuh — what a stream GEMM's CTA reads from its tile list at start, by the whole block: how many
 * experts the list holds (the expert-aligned split's rule needs it, docs/GPU.md "Experts routed more than a unit")
 * and, in the PAIRS kernels, the list of units of one or two tiles ("Units of two tiles"). Portable device code:
 * tests/test_stream_experts_emu.cpp runs it on the host's emulated block (tests/routing_emu/warp_emu.h), at every
 * block size and list length the kernels use. */
#ifndef FP8MOE_KERNELS_GEMM_STREAM_EXPERTS_CUH
#define FP8MOE_KERNELS_GEMM_STREAM_EXPERTS_CUH

#include <stdint.h>

#include "ordered_append.cuh"
#include "sm90_items.h" /* FP8MOE_SM90_PAIR_TWO */

/* The PAIRS kernels' unit list capacity: max_tiles ≤ 2·E at the stream rows' < 16 rows per expert. */
#define FP8MOE_STREAM_LIST_TILES 1024

namespace fp8moe {
namespace stream {

/* The block's sum of one count per thread, 0 ≤ count ≤ trips (trips: the same bound in every thread), by every
 * thread of the block: __syncthreads_count counts threads, not their values, so the sum is taken bit by bit, one
 * barrier per bit of trips (at least one, which also orders what the threads stored before it, as __syncthreads). */
__device__ __forceinline__ int32_t block_sum_by_bits(int32_t count, int32_t trips) {
  int32_t sum = __syncthreads_count(count & 1);
  for (int32_t b = 1; (1 << b) <= trips; ++b) sum += __syncthreads_count((count >> b) & 1) << b;
  return sum;
}

/* The experts among `tiles` expert-sorted tiles, by every thread of the block (it synchronizes the block, also where
 * tiles ≤ 0). Thread i looks at tiles i, i + threads, …, so a thread can see several starts (⌈tiles / threads⌉ trips
 * at most). The PAIRS kernels count the same starts in build_groups' first pass (below). */
template <class ExpertOf>
__device__ __forceinline__ int32_t count_experts(ExpertOf expert_of, int32_t tiles, int32_t thread, int32_t threads) {
  const int32_t trips = tiles > 0 ? (tiles + threads - 1) / threads : 0;
  int32_t starts = 0;
  for (int32_t t = thread; t < tiles; t += threads) starts += t == 0 || expert_of(t) != expert_of(t - 1);
  return block_sum_by_bits(starts, trips);
}

/* A PAIRS kernel's unit list: `entries` units (first tile | FP8MOE_SM90_PAIR_TWO where the unit also takes the next
 * tile) and the experts among the tiles. */
struct GroupList {
  int32_t entries, experts;
};

/* PAIRS, by every thread of a THREADS-thread block (it synchronizes the block): the unit list of the first `tiles`
 * tiles in tile order into sm.group_first — tile t starts a unit when it is an even number of tiles past its
 * expert's first (the permutation keeps an expert's tiles consecutive and tile_expert non-decreasing), and takes
 * t + 1 too when that is the same expert's — and the experts among the tiles, counted from the first pass's expert
 * starts (count_experts' sum: no second walk of the list). expert_of(t): tile t's expert (< the size of
 * sm.first_tile); sm also holds warp_count[THREADS / 32]. */
template <int THREADS, class ExpertOf, class SM>
__device__ GroupList build_groups(SM& sm, ExpertOf expert_of, int32_t tiles) {
  constexpr int kWarps = THREADS / 32;
  static_assert(kWarps * 32 == THREADS && kWarps <= 8, "whole warps; warp_count holds one count per warp");
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32;
  int32_t starts = 0;
  for (int32_t t = tid; t < tiles; t += THREADS) {
    const int32_t e = expert_of(t);
    if (t == 0 || expert_of(t - 1) != e) {
      sm.first_tile[e] = static_cast<int16_t>(t);
      ++starts;
    }
  }
  const int32_t experts = block_sum_by_bits(starts, tiles > 0 ? (tiles + THREADS - 1) / THREADS : 0);
  int32_t base = 0; /* the sum's barriers also made every first_tile store visible */
#pragma unroll 1
  for (int32_t c0 = 0; c0 < tiles; c0 += THREADS) {
    const int32_t t = c0 + tid;
    bool start = false, two = false;
    if (t < tiles) {
      const int32_t e = expert_of(t);
      start = ((t - sm.first_tile[e]) & 1) == 0;
      two = start && t + 1 < tiles && expert_of(t + 1) == e;
    }
    base = ordered_append<kWarps>(start, static_cast<uint16_t>(t | (two ? FP8MOE_SM90_PAIR_TWO : 0u)), warp, base,
                                  sm.warp_count, sm.group_first, [] { __syncthreads(); });
  }
  return {base, experts};
}

}  // namespace stream
}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_GEMM_STREAM_EXPERTS_CUH */
