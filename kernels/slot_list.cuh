/* slot_list.cuh — the small-T prologue's expert-sorted slot list (kernels/prologue.cu; docs/GPU.md "Small-T
 * prologue"): from the routed ids in shared memory, the expert counts, the tile-padded scan and the list in slot order
 * — permute.cu's contract (sorted_slots, slot_row, tile_expert, num_tiles; rows of one expert in ascending slot
 * order) — by a block (build_slot_list) or, for one token, by one warp (build_slot_list_warp). A header of its own so
 * that tests/test_slot_list_emu.cpp runs this code on the host's emulated block against a stable counting sort. */
#ifndef FP8MOE_KERNELS_SLOT_LIST_CUH
#define FP8MOE_KERNELS_SLOT_LIST_CUH

#include <stdint.h>

#include "common.cuh"
#include "kernels_internal.h"

namespace fp8moe {

/* ⌊x / tile_m⌋ by one multiply-high: magic = ⌈2^32 / tile_m⌉ (tile_m = 1 overflows it: x itself), exact while
 * x·tile_m < 2^32 — the argument of routing_token.cuh's group test; here x < T·K + (E + 1)·tile_m
 * (≤ 512 + 257·256) and tile_m ≤ 256. A runtime integer division is ~20 dependent instructions. */
__device__ __forceinline__ int32_t div_tile(int32_t x, int32_t tile_m, uint32_t magic) {
  return tile_m == 1 ? x : static_cast<int32_t>(__umulhi(static_cast<uint32_t>(x), magic));
}
/* div_tile's magic for tile_m (0 for tile_m = 1, which div_tile passes through). */
__device__ __forceinline__ uint32_t tile_magic(int32_t tile_m) {
  return tile_m == 1 ? 0u : 0xFFFFFFFFu / static_cast<uint32_t>(tile_m) + 1u;
}
/* ⌈x / tile_m⌉: the tiles of x rows. */
__device__ __forceinline__ int32_t tiles_of(int32_t x, int32_t tile_m, uint32_t magic) {
  return div_tile(x + tile_m - 1, tile_m, magic);
}

/* Block 0's expert-sorted slot list from the ids in shared memory (count[] zeroed, E_local entries; start[] and
 * cursor[] E_local entries each), by a block of THREADS threads.
 * kV1 (FALLBACK 'w'): the previous sequence — runtime divisions by tile_m, warp 0's scan loads one count per
 * dependent step, and a fourth __syncthreads before the fill, because the fill advanced start[] while the
 * padding loop read it. Now warp 0 issues its ≤ 8 count loads at once, divides by a multiply-high, and fills
 * from its own cursor[] copy, so the padding stores of the other warps run beside the fill. Same bits. */
template <int THREADS, bool kV1, int MAX_E = FP8MOE_PROLOGUE_MAX_EXPERTS>
__device__ void build_slot_list(const fp8moe_permute_args& p, const int32_t* ids, int32_t* count, int32_t* start,
                                int32_t* cursor) {
  const int tid = threadIdx.x, lane = tid % 32;
  __shared__ int32_t total_tiles;
  const int32_t tile_m = p.tile_m, off = p.local_offset, n_local = p.E_local;
  const uint32_t magic = tile_magic(tile_m);
  for (int32_t i = tid; i < p.TK; i += THREADS) {
    const int32_t e = ids[i] - off;
    if (ids[i] >= 0 && e >= 0 && e < n_local) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  /* Exclusive scan of padded tile counts: warp 0, each lane a contiguous run of experts. */
  if (tid < 32) {
    if (kV1) {
      const int32_t incl = scan_tile_starts(count, start, n_local, tile_m, tid);
      if (tid == 31) total_tiles = incl;
    } else {
      const int per = (n_local + 31) / 32;
      const int lo = min(tid * per, n_local), hi = min(lo + per, n_local);
      constexpr int kPer = (MAX_E + 31) / 32; /* per ≤ kPer: the launcher's E_local bound for this kernel */
      int32_t tiles[kPer];
      int32_t run = 0;
#pragma unroll
      for (int i = 0; i < kPer; ++i) tiles[i] = lo + i < hi ? count[lo + i] : 0;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        tiles[i] = tiles_of(tiles[i], tile_m, magic);
        run += tiles[i];
      }
      const int32_t incl = warp_inclusive_sum(run, tid);
      int32_t tile = incl - run;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        if (lo + i < hi) {
          start[lo + i] = tile * tile_m;
          cursor[lo + i] = tile * tile_m;
        }
        tile += tiles[i];
      }
      if (tid == 31) total_tiles = incl;
    }
  }
  __syncthreads();
  if (tid == 0) *p.num_tiles = total_tiles;
  for (int e = tid; e < n_local; e += THREADS) {
    const int32_t tiles = kV1 ? (count[e] + tile_m - 1) / tile_m : tiles_of(count[e], tile_m, magic);
    const int32_t first = kV1 ? start[e] / tile_m : div_tile(start[e], tile_m, magic);
    for (int32_t j = 0; j < tiles; ++j) p.tile_expert[first + j] = e;
    for (int32_t r = start[e] + count[e]; r < start[e] + tiles * tile_m; ++r) p.sorted_slots[r] = -1;
  }
  if (kV1) __syncthreads();
  /* Warp 0 fills in slot order: cursor[] (kV1: start[]) is each expert's next row. */
  if (tid >= 32) return;
  int32_t* next = kV1 ? start : cursor;
  for (int32_t base = 0; base < p.TK; base += 32) {
    const int32_t i = base + lane;
    const int32_t id = i < p.TK ? ids[i] : -1;
    const int32_t e = id - off;
    const bool local = id >= 0 && e >= 0 && e < n_local;
    const uint32_t peers = __match_any_sync(0xffffffffu, local ? e : -1);
    const int32_t rank = __popc(peers & ((1u << lane) - 1u));
    if (local) {
      const int32_t row = next[e] + rank;
      p.sorted_slots[row] = i;
      p.slot_row[i] = row;
    } else if (i < p.TK) {
      p.slot_row[i] = -1;
    }
    __syncwarp();
    if (local && rank == 0) next[e] += __popc(peers);
    __syncwarp();
  }
}

/* The slot list of a single token (T = 1, T·K ≤ 32) by warp 0 alone, lane i holding slot i's id: the outputs of
 * build_slot_list (same rows, tiles, padding, slot_row) without its four block barriers, shared counters and
 * cold code path, which a phase trace of the one-block prologue measured at ~2.5 µs of deepseek-v3's ~8.7 at
 * T = 1 (docs/GPU.md "Small-T prologue"). Experts in ascending order: an expert's first tile is the sum of the
 * tiles of the smaller local experts, taken over the group leaders (the lowest lane of each expert); its rows
 * in slot order (the rank among the lanes holding it). */
__device__ __forceinline__ void build_slot_list_warp(const fp8moe_permute_args& p, int32_t id) {
  const int lane = threadIdx.x % 32;
  const int32_t tile_m = p.tile_m, off = p.local_offset, n_local = p.E_local;
  const uint32_t magic = tile_magic(tile_m);
  const int32_t e = id - off;
  const bool local = lane < p.TK && id >= 0 && e >= 0 && e < n_local;
  const uint32_t peers = __match_any_sync(0xffffffffu, local ? e : -1);
  const uint32_t below = (1u << lane) - 1u;
  const int32_t rank = __popc(peers & below);
  const bool leader = local && rank == 0;
  const int32_t tiles = leader ? tiles_of(__popc(peers), tile_m, magic) : 0;
  int32_t before = 0; /* tiles of the local experts smaller than this lane's */
  for (int j = 0; j < p.TK; ++j) {
    const int32_t tj = __shfl_sync(0xffffffffu, tiles, j), ej = __shfl_sync(0xffffffffu, e, j);
    if (ej < e) before += tj; /* only leaders carry tiles, so each smaller expert counts once */
  }
  const int32_t total = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(tiles));
  const int32_t start = before * tile_m;
  if (lane == 0) *p.num_tiles = total;
  if (leader) {
    const int32_t count = __popc(peers);
    for (int32_t j = 0; j < tiles; ++j) p.tile_expert[before + j] = e;
    for (int32_t r = start + count; r < start + tiles * tile_m; ++r) p.sorted_slots[r] = -1;
  }
  if (local) {
    p.sorted_slots[start + rank] = lane;
    p.slot_row[lane] = start + rank;
  } else if (lane < p.TK) {
    p.slot_row[lane] = -1;
  }
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_SLOT_LIST_CUH */
