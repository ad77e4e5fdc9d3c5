/* sm90_items.h — the order in which the persistent sm90 wgmma GEMMs (gemm1_wgmma_sm90.cu,
 * gemm2_wgmma_sm90.cu) walk their (tile, column block) work items: the one mapping from an item number w to
 * its tile and column block, used by both kernels' producer and consumers (which must agree item by item:
 * they share a ring of shared-memory stages) and, compiled as C, by the host unit test (test_cuda_plan.c
 * checks that every order visits each (tile, column block) exactly once for many shapes and groups).
 * Orders (FP8MOE_SM90_ORDER_*, kernels_internal.h; docs/GPU.md "Item order"):
 * - TILE_MAJOR: tile w / col_blocks, column block w % col_blocks;
 * - COLUMN_MAJOR: tile w % tiles, column block w / tiles;
 * - GROUPED: tiles in groups of `group` consecutive tiles (the last group may be shorter); the items of one
 *   group come before the next group's, and inside a group column-block major (all the group's tiles of
 *   column block 0, then of column block 1, ...). A wave of CTAs then touches the A rows of at most about
 *   `group` tiles and few column blocks' B slices, so DRAM sees A about once and each B slice about once per
 *   group instead of once per column block (COLUMN_MAJOR re-reads all of A per column block) or once per
 *   wave (TILE_MAJOR re-streams an expert's B for every wave of its tiles).
 * Every order is a bijection of [0, tiles·col_blocks) onto the items, so the result never depends on it. */
#ifndef FP8MOE_KERNELS_SM90_ITEMS_H
#define FP8MOE_KERNELS_SM90_ITEMS_H

#include <stdint.h>

#include "kernels_internal.h"

#if defined(__CUDACC__)
#define FP8MOE_ITEMS_FN __host__ __device__ __forceinline__
#else
#define FP8MOE_ITEMS_FN static inline
#endif

typedef struct fp8moe_sm90_item {
  int32_t tile;      /* 0 .. tiles − 1 */
  int32_t col_block; /* 0 .. col_blocks − 1 */
} fp8moe_sm90_item;

/* Item w (0 ≤ w < tiles·col_blocks ≤ INT32_MAX, which the launchers check; tiles, col_blocks ≥ 1) in `order`;
 * group ≥ 1 (GROUPED only; the launchers refuse group < 1). An order outside FP8MOE_SM90_ORDER_* maps like
 * TILE_MAJOR (the launchers refuse it). 32-bit arithmetic: the producer threads run in 40 registers. */
FP8MOE_ITEMS_FN fp8moe_sm90_item fp8moe_sm90_item_of(int32_t w, int32_t tiles, int32_t col_blocks, int32_t order,
                                                     int32_t group) {
  fp8moe_sm90_item it;
  if (order == FP8MOE_SM90_ORDER_COLUMN_MAJOR) {
    it.tile = w % tiles;
    it.col_block = w / tiles;
  } else if (order == FP8MOE_SM90_ORDER_GROUPED) {
    const int32_t per_group = group * col_blocks; /* the launchers check that it fits */
    const int32_t g = w / per_group, r = w - g * per_group;
    const int32_t first = g * group, left = tiles - first;
    const int32_t in_group = left < group ? left : group; /* the last group may hold fewer tiles */
    it.tile = first + r % in_group;
    it.col_block = r / in_group;
  } else {
    it.tile = w / col_blocks;
    it.col_block = w % col_blocks;
  }
  return it;
}

/* Whether max_tiles tiles in groups of `group` keep their edges within the per-CTA table (FP8MOE_SM90_MAX_GROUP_EDGES):
 * the host asks it before it sets aligned_groups, the launcher refuses the launch otherwise. */
FP8MOE_ITEMS_FN int fp8moe_sm90_aligned_fits(int64_t max_tiles, int32_t group) {
  return group >= 1 && (max_tiles + group - 1) / group + 1 <= FP8MOE_SM90_MAX_GROUP_EDGES;
}
/* The most pairs of a layout of max_tiles tiles over e_local experts (the 128-row GEMM1's items, sm90_pairs.cuh):
 * Σ_e ceil(n_e / 2) ≤ (max_tiles + e_local) / 2 and never more than the tiles. The launchers size their grids by it
 * and the host bounds the pair items' group edges by it (fp8moe_sm90_aligned_ok). */
FP8MOE_ITEMS_FN int64_t fp8moe_sm90_max_pairs(int64_t max_tiles, int64_t e_local) {
  const int64_t half = (max_tiles + e_local + 1) / 2;
  return half < max_tiles ? half : max_tiles;
}
/* Where the expert-aligned groups can run: the grouped order on one CTA per item (the cluster kernels pair
 * consecutive items and keep plain edges) with the edges fitting the table. The host sets aligned_groups only
 * where this holds; the launchers refuse aligned_groups where it does not. */
FP8MOE_ITEMS_FN int fp8moe_sm90_aligned_ok(int32_t order, int32_t max_clusters, int64_t max_tiles, int32_t group) {
  return order == FP8MOE_SM90_ORDER_GROUPED && max_clusters == 0 && fp8moe_sm90_aligned_fits(max_tiles, group);
}
/* GROUPED with expert-aligned edges (the 64-row GEMM2 and the 128-row GEMM1's items, a.aligned_groups; docs/GPU.md
 * "Expert-aligned groups"; the pair items' units are pairs in place of tiles): group
 * g ≥ 1 starts at the first expert's first tile within [g·group, g·group + group/2], or at g·group when no expert
 * starts there (an expert of more tiles than that slack is cut, as in plain GROUPED), so an expert's tiles share a
 * group and its B slices are read once, where a plain edge cuts one expert in about (tiles per expert − 1) / tiles
 * per expert of the groups and that expert's B comes from DRAM twice. edge_bits: bit t set for t = 0, for t = tiles
 * and where tile t starts an expert (tile_expert[t] ≠ tile_expert[t − 1]); every bit past tiles clear. The slack is
 * below the group, so the edges grow strictly until one reaches `tiles` (the groups after it are empty) and every
 * group but the last holds at least group/2 tiles. */
FP8MOE_ITEMS_FN int32_t fp8moe_sm90_bit_at_or_after(uint32_t word, int32_t bit) { /* −1: none */
  const uint32_t w = word >> bit;
#if defined(__CUDA_ARCH__)
  return w ? bit + __ffs(static_cast<int>(w)) - 1 : -1;
#else
  return w ? bit + __builtin_ctz(w) : -1;
#endif
}
FP8MOE_ITEMS_FN int32_t fp8moe_sm90_group_edge(const uint32_t* edge_bits, int32_t tiles, int32_t group, int32_t g) {
  const int32_t n = g * group; /* ≤ tiles + group: the launchers check group · col_blocks and max_tiles */
  if (g <= 0) return 0;
  if (n >= tiles) return tiles;
  const int32_t last = n + group / 2; /* the window [n, last] */
  for (int32_t t = n; t <= last; t = (t | 31) + 1) {
    const int32_t f = fp8moe_sm90_bit_at_or_after(edge_bits[t >> 5], t & 31);
    if (f >= 0) {
      const int32_t e = (t & ~31) + f;
      return e <= last ? e : n;
    }
  }
  return n;
}
/* Item w of the aligned grouping: edges[g] = fp8moe_sm90_group_edge(…, g) for g = 0 … ceil(tiles / group) (the last
 * = tiles). Tile q = w / col_blocks lies in group q / group or the one before (edges[g] ≥ g·group > edges[g − 1]), and
 * inside a group the items go column-block major, as plain GROUPED: a bijection of [0, tiles·col_blocks). */
FP8MOE_ITEMS_FN fp8moe_sm90_item fp8moe_sm90_item_aligned(int32_t w, int32_t col_blocks, int32_t group,
                                                          const int32_t* edges) {
  const int32_t q = w / col_blocks;
  int32_t g = q / group;
  if (q < edges[g]) --g;
  const int32_t lo = edges[g], size = edges[g + 1] - lo, r = w - lo * col_blocks;
  fp8moe_sm90_item it;
  it.tile = lo + r % size;
  it.col_block = r / size;
  return it;
}

/* Item w of the GEMMs' one-CTA kernels: through the expert-aligned edges where the kernel built them (aligned; the
 * edges in shared memory), otherwise fp8moe_sm90_item_of. */
FP8MOE_ITEMS_FN fp8moe_sm90_item fp8moe_sm90_item_at(int32_t w, int32_t tiles, int32_t col_blocks, int32_t order,
                                                     int32_t group, int aligned, const int32_t* edges) {
  if (aligned) return fp8moe_sm90_item_aligned(w, col_blocks, group, edges);
  return fp8moe_sm90_item_of(w, tiles, col_blocks, order, group);
}

/* The item a CTA takes in unit u of its walk. One CTA per unit (peers = 1): item u. A 2-CTA cluster
 * (peers = 2; both GEMMs' cluster kernels, docs/GPU.md "2-CTA clusters") takes the item pair (2u, 2u + 1)
 * per unit, rank r item 2u + r, except that past the last item (an odd count) rank 1 shadows item 2u: it
 * computes it and stores nothing (store = 0), so both CTAs walk the same stages. Units: ceil(items / peers). */
typedef struct fp8moe_sm90_unit {
  int32_t item; /* the item number, for fp8moe_sm90_item_of */
  int32_t store; /* 0: a shadow item (computed, nothing written) */
} fp8moe_sm90_unit;
FP8MOE_ITEMS_FN fp8moe_sm90_unit fp8moe_sm90_unit_item(int32_t u, int32_t items, int32_t peers, uint32_t rank) {
  const int32_t w = peers * u + (int32_t)rank;
  fp8moe_sm90_unit r;
  r.store = w < items;
  r.item = w < items ? w : peers * u;
  return r;
}

/* The 128-row GEMM1 (gemm1_wgmma128_sm90.cu) takes pairs of consecutive 64-row tiles of one expert as its
 * "tiles": tile t (< tiles) of expert tile_expert[t], whose first tile is `first`, starts a pair when t − first
 * is even (tile_expert is non-decreasing: experts in order, each padded to whole tiles), so an expert of n
 * tiles gives ceil(n / 2) pairs, the last one single when n is odd. Returns 1 for a pair start and sets
 * *entry = t | FP8MOE_SM90_PAIR_TWO when tile t + 1 is the pair's second tile (same expert, < tiles). */
#define FP8MOE_SM90_PAIR_TWO 0x8000u
FP8MOE_ITEMS_FN int fp8moe_sm90_pair_start(const int32_t* tile_expert, int32_t tiles, int32_t t, int32_t first,
                                           uint32_t* entry) {
  const int32_t e = tile_expert[t];
  const int two = t + 1 < tiles && tile_expert[t + 1] == e;
  *entry = (uint32_t)t | (two ? FP8MOE_SM90_PAIR_TWO : 0u);
  return ((t - first) & 1) == 0;
}

/* What the launchers accept: an order of FP8MOE_SM90_ORDER_*, for GROUPED a group of at least 1 tile, and
 * item numbers (max_tiles · col_blocks, group · col_blocks) that fit the mapping's 32-bit arithmetic. */
FP8MOE_ITEMS_FN int fp8moe_sm90_order_ok(int32_t order, int32_t group, int64_t max_tiles, int64_t col_blocks) {
  const int64_t lim = 2147483647;
  if (max_tiles * col_blocks > lim || (order == FP8MOE_SM90_ORDER_GROUPED && (int64_t)group * col_blocks > lim))
    return 0;
  return order == FP8MOE_SM90_ORDER_TILE_MAJOR || order == FP8MOE_SM90_ORDER_COLUMN_MAJOR ||
         (order == FP8MOE_SM90_ORDER_GROUPED && group >= 1);
}

#endif /* FP8MOE_KERNELS_SM90_ITEMS_H */
