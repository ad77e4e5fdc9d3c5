/* group_edges.cuh — the grouped order's expert-aligned edges built in shared memory at a kernel's start, from the
 * device's num_tiles and tile_expert (graph-capturable, no extra launch): first the bitmap of expert starts (bit t:
 * tile t starts an expert, or t = 0 or t = tiles), then one thread per edge places it (fp8moe_sm90_group_edge,
 * sm90_items.h). The 64-row GEMM2 (gemm2_wgmma_sm90.cu, all its threads) and the 128-row GEMM1's items, alternating
 * (over tiles) or pairs (over pairs; sm90_pairs.cuh, the consumer warpgroups) build them; docs/GPU.md "Expert-aligned
 * groups" has why. */
#ifndef FP8MOE_KERNELS_GROUP_EDGES_CUH
#define FP8MOE_KERNELS_GROUP_EDGES_CUH

#include <stdint.h>

#include "sm90_items.h"

namespace fp8moe {

/* By THREADS threads (tid: this thread's index among them); sync: the barrier of exactly these threads, called twice
 * (the bitmap is cleared, then complete). Over `units` units (tiles, or the 128-row GEMM1's pairs) in groups of
 * `group`: starts(u) for 0 < u < units says whether unit u starts an expert (its expert differs from unit u − 1's).
 * bits: ≥ units / 32 + 1 words; edges: ceil(units / group) + 1 entries. The caller publishes the edges (they are
 * written after the last sync). */
template <int THREADS, class Sync, class Starts>
__device__ __forceinline__ void build_group_edges_by(int32_t* edges, uint32_t* bits, int32_t units, int32_t group,
                                                     int32_t tid, Sync sync, Starts starts) {
  for (int32_t i = tid; i <= (units >> 5); i += THREADS) bits[i] = 0u;
  sync();
  for (int32_t u = tid; u <= units; u += THREADS)
    if (u == 0 || u == units || starts(u)) atomicOr(&bits[u >> 5], 1u << (u & 31));
  sync();
  const int32_t groups = (units + group - 1) / group;
  for (int32_t g = tid; g <= groups; g += THREADS) edges[g] = fp8moe_sm90_group_edge(bits, units, group, g);
}

/* Over tiles: tile t starts an expert where tile_expert[t] ≠ tile_expert[t − 1]. */
template <int THREADS, class Sync>
__device__ __forceinline__ void build_group_edges(int32_t* edges, uint32_t* bits, const int32_t* tile_expert,
                                                  int32_t tiles, int32_t group, int32_t tid, Sync sync) {
  build_group_edges_by<THREADS>(edges, bits, tiles, group, tid, sync,
                                [&](int32_t t) { return tile_expert[t] != tile_expert[t - 1]; });
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_GROUP_EDGES_CUH */
