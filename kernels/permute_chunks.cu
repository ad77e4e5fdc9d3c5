/* permute_chunks.cu — the permutation of permute.cu (same contract, same outputs bit for bit) spread over many
 * blocks, for large T·K: the one-block kernel sends every scattered store from one SM and scans its slots on
 * 32 warps. The slots are cut into chunks of args.chunk_slots (chunk c holds slots [c·chunk, (c+1)·chunk));
 * chunk_counts [(chunks + 1) × E_local] (workspace) carries the counts between three launches:
 *
 *   1. permute_count_kernel, one block per chunk: chunk_counts[c][e] = slots of chunk c routed to expert e.
 *   2. permute_scan_kernel, one block per 32 experts: per expert, an exclusive scan over chunks;
 *      chunk_counts[c][e] becomes the rows of e in chunks before c, row `chunks` the expert's rows.
 *   3. permute_place_kernel, one block per chunk: the padded tile scan over experts from the totals (each
 *      block for itself), then the one-block kernel's two passes over the chunk's warp segments
 *      (permute_segment.cuh), the segments' counters starting at the chunk's first rows; all the grid's
 *      warps write num_tiles, tile_expert and the −1 padding rows of sorted_slots.
 *
 * Rows of an expert are in ascending slot order: chunks are ordered by the scan over chunks, segments inside
 * a chunk by the scan over segments, slots inside a segment by pass 2. Nothing depends on timing or on
 * atomics' order (the shared-memory atomics only count), so replays are identical. The launches are chained
 * by programmatic dependent launch (pdl.cuh): each waits for its predecessor before reading what it wrote,
 * and no host synchronization or allocation happens; capturable in a CUDA graph. Every kernel's name contains
 * "permute": fp8moe-bench finds the end of its "routing + permutation" prefix graph by kernel name
 * (bench/bench_main.c, route_prefix). */
#include <stdint.h>

#include "common.cuh"
#include "pdl.cuh"
#include "permute_segment.cuh"

namespace fp8moe {
namespace {

using permute::kMaxExperts;
constexpr int kChunkThreads = 256;
constexpr int kChunkWarps = kChunkThreads / 32;
constexpr int kScanGroups = 32;     /* chunk groups of a scan block: one warp each, lane = expert */
constexpr int kScanThreads = 32 * kScanGroups;
constexpr int kScanBatch = 4;       /* chunks one scan thread loads at once: the plan's ≤ 128 chunks are one batch */
constexpr int kSegCounters = 8192;  /* 32 KiB: 8 warp segments at E_local ≤ 1024, 4 at 2048 */
static_assert(FP8MOE_PERMUTE_CHUNK_ALIGN == 32 * kChunkWarps, "an aligned chunk is one 32-slot step per warp");
static_assert(kSegCounters / kMaxExperts >= 1, "at least one segment at the largest E_local");

__host__ __device__ __forceinline__ int64_t chunk_count(const fp8moe_permute_args& a) {
  return ((int64_t)a.TK + a.chunk_slots - 1) / a.chunk_slots;
}

/* Warp w's contiguous share [lo, hi) of this block's chunk, the chunk cut into S segments (empty for w ≥ S). */
__device__ __forceinline__ void warp_segment(const fp8moe_permute_args& a, int S, int32_t* lo, int32_t* hi) {
  const int64_t c_lo = (int64_t)blockIdx.x * a.chunk_slots;
  const int64_t c_hi = c_lo + a.chunk_slots < a.TK ? c_lo + a.chunk_slots : a.TK;
  const int64_t len = (c_hi - c_lo + S - 1) / S;
  const int64_t w = threadIdx.x / 32;
  const int64_t l = w < S ? c_lo + w * len : c_hi;
  *lo = (int32_t)(l < c_hi ? l : c_hi);
  *hi = (int32_t)(l + len < c_hi ? l + len : c_hi);
}

__global__ void __launch_bounds__(kChunkThreads) permute_count_kernel(fp8moe_permute_args a) {
  __shared__ int32_t count[kMaxExperts];
  const int32_t E = a.E_local;
  for (int e = threadIdx.x; e < E; e += kChunkThreads) count[e] = 0;
  __syncthreads();
  wait_prior(); /* ids come from the routing kernel */
  allow_next();
  int32_t lo = 0, hi = 0;
  warp_segment(a, kChunkWarps, &lo, &hi);
  permute::count_segment(a, lo, hi, count);
  __syncthreads();
  int32_t* row = a.chunk_counts + (int64_t)blockIdx.x * E;
  for (int e = threadIdx.x; e < E; e += kChunkThreads) row[e] = count[e]; /* zeros too: the row is all written */
}

/* One block per 32 experts (lane l of every warp: expert 32·blockIdx.x + l, so each warp load is one 128-byte
 * piece of a chunk row); warp w sums a contiguous group of the chunks (the 32 groups together cover them all).
 * A transpose through shared memory gives warp w expert lane w's 32 group sums, which a shuffle scan turns into
 * exclusive offsets; then each thread rewrites its chunks' counters as offsets inside the expert, and the
 * totals go to row `chunks` of chunk_counts. The padded tile scan over experts, tile_expert and the −1 padding
 * rows are left to permute_place_kernel's many blocks. Why: the old one-block scan walked every counter through
 * one SM three times and wrote the padding rows serially, one expert per thread, 32 different lines per warp
 * store (docs/GPU.md "Permutation", 10.8–17 µs measured at E = 256). */
__global__ void __launch_bounds__(kScanThreads) permute_scan_kernel(fp8moe_permute_args a) {
  __shared__ int32_t part[kScanGroups][kScanGroups + 1]; /* part[group][expert lane]; +1: no bank conflicts */
  wait_prior(); /* chunk_counts come from permute_count_kernel */
  allow_next();
  const int lane = threadIdx.x % 32, grp = threadIdx.x / 32;
  const int32_t E = a.E_local;
  const int32_t e = (int32_t)blockIdx.x * 32 + lane;
  const int64_t chunks = chunk_count(a);
  const int64_t per = (chunks + kScanGroups - 1) / kScanGroups;
  const int64_t c_lo = grp * per < chunks ? grp * per : chunks;
  const int64_t c_hi = c_lo + per < chunks ? c_lo + per : chunks;
  const int n0 = e < E ? (int)min((int64_t)kScanBatch, c_hi - c_lo) : 0; /* counters of the first batch */
  int32_t* col = a.chunk_counts + (e < E ? e : 0);
  /* The first batch stays in registers for the rewrite (all of a group at ≤ 32·kScanBatch chunks). */
  int32_t v0[kScanBatch];
#pragma unroll
  for (int u = 0; u < kScanBatch; ++u) v0[u] = u < n0 ? __ldcg(col + (c_lo + u) * E) : 0;
  int32_t sum = 0;
#pragma unroll
  for (int u = 0; u < kScanBatch; ++u) sum += v0[u];
  if (e < E)
    for (int64_t c = c_lo + kScanBatch; c < c_hi; c += kScanBatch) {
      const int n = (int)min((int64_t)kScanBatch, c_hi - c);
      int32_t v[kScanBatch];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) v[u] = u < n ? __ldcg(col + (c + u) * E) : 0;
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) sum += v[u];
    }
  part[grp][lane] = sum;
  __syncthreads();
  /* Warp w: expert lane w's group sums, lane j holding group j; exclusive scan over the groups. */
  {
    const int32_t mine = part[lane][grp];
    const int32_t incl = warp_inclusive_sum(mine, lane);
    part[lane][grp] = incl - mine;
    const int32_t ew = (int32_t)blockIdx.x * 32 + grp;
    if (lane == 31 && ew < E) a.chunk_counts[chunks * E + ew] = incl; /* the expert's rows */
  }
  __syncthreads();
  /* chunk_counts[c][e] := rows of e in chunks before c (the offset inside the expert). */
  int32_t run = part[grp][lane];
#pragma unroll
  for (int u = 0; u < kScanBatch; ++u)
    if (u < n0) {
      col[(c_lo + u) * E] = run;
      run += v0[u];
    }
  if (e < E)
    for (int64_t c = c_lo + kScanBatch; c < c_hi; c += kScanBatch) {
      const int n = (int)min((int64_t)kScanBatch, c_hi - c);
      int32_t v[kScanBatch];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) v[u] = u < n ? __ldcg(col + (c + u) * E) : 0;
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u)
        if (u < n) {
          col[(c + u) * E] = run;
          run += v[u];
        }
    }
}

/* Every place block scans the padded tiles of all E experts itself (E totals, one L2 round trip, a block scan:
 * cheaper than a fourth launch boundary or one block doing it for all), then places its chunk. The tile list,
 * num_tiles and the −1 padding rows are written by all warps of the grid, one expert per warp at a time with
 * coalesced stores: expert e by the grid's warp e mod (chunks × 8). */
__global__ void __launch_bounds__(kChunkThreads) permute_place_kernel(fp8moe_permute_args a) {
  __shared__ int32_t seg[kSegCounters];  /* seg[w·E + e]: warp w's count of e, then its next row of e */
  __shared__ int32_t start[kMaxExperts]; /* each expert's rows, then its first row (a multiple of tile_m) */
  __shared__ int32_t warp_tiles[kChunkWarps];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int32_t E = a.E_local, tile_m = a.tile_m;
  const int64_t chunks = chunk_count(a);
  const int S = min(kChunkWarps, kSegCounters / E);
  for (int i = tid; i < S * E; i += kChunkThreads) seg[i] = 0;
  __syncthreads();
  int32_t lo = 0, hi = 0;
  warp_segment(a, S, &lo, &hi);
  /* Pass 1 before the wait: the ids were written before permute_count_kernel started reading them, and
   * everything before this kernel's predecessor is complete once that predecessor let it start (pdl.cuh). */
  if (warp < S) permute::count_segment(a, lo, hi, seg + warp * E);
  wait_prior(); /* offsets and totals come from permute_scan_kernel */
  allow_next();
  /* This chunk's offsets and every expert's rows, all loads in flight together. */
  constexpr int kPerThread = kMaxExperts / kChunkThreads;
  const int32_t* offset = a.chunk_counts + (int64_t)blockIdx.x * E;
  const int32_t* total = a.chunk_counts + chunks * E;
  int32_t off[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int e = tid + k * kChunkThreads;
    off[k] = e < E ? __ldcg(offset + e) : 0;
    if (e < E) start[e] = __ldcg(total + e);
  }
  __syncthreads();
  /* Exclusive scan of padded tile counts over experts (as permute.cu): each thread a contiguous run. */
  const int run_len = (E + kChunkThreads - 1) / kChunkThreads;
  const int r_lo = min(tid * run_len, E), r_hi = min(r_lo + run_len, E);
  int32_t mine = 0;
  for (int e = r_lo; e < r_hi; ++e) mine += (start[e] + tile_m - 1) / tile_m;
  const int32_t incl = warp_inclusive_sum(mine, lane);
  if (lane == 31) warp_tiles[warp] = incl;
  __syncthreads();
  int32_t tile = incl - mine, tiles_used = 0;
#pragma unroll
  for (int w = 0; w < kChunkWarps; ++w) {
    tile += w < warp ? warp_tiles[w] : 0;
    tiles_used += warp_tiles[w];
  }
  for (int e = r_lo; e < r_hi; ++e) {
    const int32_t rows = start[e];
    start[e] = tile * tile_m;
    tile += (rows + tile_m - 1) / tile_m;
  }
  __syncthreads();
  /* Exclusive scan over the segments, from the chunk's first row of each expert. */
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int e = tid + k * kChunkThreads;
    if (e < E) {
      int32_t run = start[e] + off[k];
      for (int w = 0; w < S; ++w) {
        const int32_t c = seg[w * E + e];
        seg[w * E + e] = run;
        run += c;
      }
    }
  }
  __syncthreads();
  if (warp < S) permute::place_segment(a, lo, hi, seg + warp * E, nullptr);
  /* The tile list and the padding rows of this warp's experts (rows of other experts: no overlap). */
  if (blockIdx.x == 0 && tid == 0) *a.num_tiles = tiles_used;
  const int64_t grid_warps = (int64_t)gridDim.x * kChunkWarps;
  for (int64_t e = (int64_t)blockIdx.x * kChunkWarps + warp; e < E; e += grid_warps) {
    const int32_t rows = __ldcg(total + e), first = start[e];
    const int32_t tiles = (rows + tile_m - 1) / tile_m;
    for (int32_t j = lane; j < tiles; j += 32) a.tile_expert[first / tile_m + j] = (int32_t)e;
    for (int32_t r = first + rows + lane; r < first + tiles * tile_m; r += 32) a.sorted_slots[r] = -1;
  }
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_permute_chunks(const fp8moe_permute_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->chunk_slots <= 0 || a->TK <= 0 || a->E_local < 1 || a->E_local > FP8MOE_PERMUTE_MAX_EXPERTS ||
      a->tile_m <= 0 || a->chunk_counts == nullptr)
    return static_cast<int>(cudaErrorInvalidValue);
  const dim3 chunks(static_cast<unsigned>(chunk_count(*a)));
  cudaError_t e = launch_pdl(permute_count_kernel, chunks, dim3(kChunkThreads), 0, stream, *a);
  const dim3 expert_blocks(static_cast<unsigned>((a->E_local + 31) / 32));
  if (e == cudaSuccess) e = launch_pdl(permute_scan_kernel, expert_blocks, dim3(kScanThreads), 0, stream, *a);
  if (e == cudaSuccess) e = launch_pdl(permute_place_kernel, chunks, dim3(kChunkThreads), 0, stream, *a);
  return static_cast<int>(e);
}
