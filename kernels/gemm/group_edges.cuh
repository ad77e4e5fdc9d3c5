/* group_edges.cuh — the grouped order's expert-aligned edges built in shared memory at a kernel's start, from the
 * device's num_tiles and tile_expert (graph-capturable, no extra launch): first the bitmap of expert starts (bit t:
 * tile t starts an expert, or t = 0 or t = tiles), then one thread per edge places it (fp8moe_sm90_group_edge,
 * sm90_items.h). The 64-row GEMM2 (gemm2_wgmma_sm90.cu, all its threads) and GEMM1's alternating items
 * (sm90_pairs.cuh, the consumer warpgroups) build them; docs/GPU.md "Expert-aligned groups" has why. */
#ifndef FP8MOE_KERNELS_GROUP_EDGES_CUH
#define FP8MOE_KERNELS_GROUP_EDGES_CUH

#include <stdint.h>

#include "sm90_items.h"

namespace fp8moe {

/* By THREADS threads (tid: this thread's index among them); sync: the barrier of exactly these threads, called twice
 * (the bitmap is cleared, then complete). bits: ≥ tiles / 32 + 1 words; edges: ceil(tiles / group) + 1 entries.
 * The caller publishes the edges (they are written after the last sync). */
template <int THREADS, class Sync>
__device__ __forceinline__ void build_group_edges(int32_t* edges, uint32_t* bits, const int32_t* tile_expert,
                                                  int32_t tiles, int32_t group, int32_t tid, Sync sync) {
  for (int32_t i = tid; i <= (tiles >> 5); i += THREADS) bits[i] = 0u;
  sync();
  for (int32_t t = tid; t <= tiles; t += THREADS)
    if (t == 0 || t == tiles || tile_expert[t] != tile_expert[t - 1]) atomicOr(&bits[t >> 5], 1u << (t & 31));
  sync();
  const int32_t groups = (tiles + group - 1) / group;
  for (int32_t g = tid; g <= groups; g += THREADS) edges[g] = fp8moe_sm90_group_edge(bits, tiles, group, g);
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_GROUP_EDGES_CUH */
