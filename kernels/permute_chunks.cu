/* permute_chunks.cu — the permutation of permute.cu (same contract, same outputs bit for bit) spread over many
 * blocks, for large T·K: the one-block kernel sends every scattered store from one SM and scans its slots on
 * 32 warps. The slots are cut into chunks of args.chunk_slots (chunk c holds slots [c·chunk, (c+1)·chunk));
 * chunk_counts [chunks × E_local] (workspace) carries the counts between three launches:
 *
 *   1. permute_count_kernel, one block per chunk: chunk_counts[c][e] = slots of chunk c routed to expert e.
 *   2. permute_scan_kernel, one block: per expert, an exclusive scan over chunks; then the padded tile scan
 *      over experts gives each expert its first row; chunk_counts[c][e] becomes the row of chunk c's first
 *      slot of expert e. Writes num_tiles, tile_expert and the −1 padding rows of sorted_slots.
 *   3. permute_place_kernel, one block per chunk: the one-block kernel's two passes over the chunk's warp
 *      segments (permute_segment.cuh), the segments' counters starting at the chunk's first rows.
 *
 * Rows of an expert are in ascending slot order: chunks are ordered by the scan over chunks, segments inside
 * a chunk by the scan over segments, slots inside a segment by pass 2. Nothing depends on timing or on
 * atomics' order (the shared-memory atomics only count), so replays are identical. The launches are chained
 * by programmatic dependent launch (pdl.cuh): each waits for its predecessor before reading what it wrote,
 * and no host synchronization or allocation happens; capturable in a CUDA graph. Every kernel's name contains
 * "permute": fp8moe-bench finds the end of its "routing + permutation" prefix graph by kernel name
 * (bench/bench_main.c, route_prefix). */
#include <stdint.h>

#include "pdl.cuh"
#include "permute_segment.cuh"

namespace fp8moe {
namespace {

using permute::kMaxExperts;
constexpr int kChunkThreads = 256;
constexpr int kChunkWarps = kChunkThreads / 32;
constexpr int kScanThreads = 1024;
constexpr int kScanBatch = 16;      /* chunks whose counts one scan thread loads at once (independent loads) */
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

__global__ void __launch_bounds__(kScanThreads) permute_scan_kernel(fp8moe_permute_args a) {
  __shared__ int32_t count[kMaxExperts]; /* rows of each expert */
  __shared__ int32_t start[kMaxExperts]; /* each expert's first row (a multiple of tile_m) */
  __shared__ int32_t part[kMaxExperts];  /* part[q·E + e]: chunk group q's count of e, then its offset in e */
  __shared__ int32_t total_tiles;
  wait_prior(); /* chunk_counts come from permute_count_kernel */
  allow_next();
  const int tid = threadIdx.x;
  const int32_t E = a.E_local, tile_m = a.tile_m;
  const int64_t chunks = chunk_count(a);
  /* g threads per expert, each over a contiguous group of chunks: a power of two, no more than one batch of
   * chunks per thread needs (the scan over the groups below is g serial steps), g·E ≤ kScanThreads (g = 1
   * past half of it). Consecutive threads take consecutive experts, so each chunk row is read coalesced. */
  int g = 1;
  while (2 * g * E <= kScanThreads && (int64_t)g * kScanBatch < chunks) g *= 2;
  const int ept = kScanThreads / g; /* experts per pass */
  const int q = tid / ept, e0 = tid % ept;
  const int64_t per = (chunks + g - 1) / g;
  const int64_t c_lo = q * per < chunks ? q * per : chunks;
  const int64_t c_hi = c_lo + per < chunks ? c_lo + per : chunks;
  /* Counts of each (chunk group, expert). */
  for (int e = e0; e < E; e += ept) {
    const int32_t* col = a.chunk_counts + e;
    int32_t sum = 0;
    for (int64_t c = c_lo; c < c_hi; c += kScanBatch) {
      const int32_t* at = col + c * E;
      const int n = (int)min((int64_t)kScanBatch, c_hi - c);
      int32_t v[kScanBatch];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) v[u] = at[min(u, n - 1) * E]; /* unconditional: all in flight */
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) sum += u < n ? v[u] : 0;
    }
    part[q * E + e] = sum;
  }
  __syncthreads();
  /* Exclusive scan over the chunk groups of each expert; its total. */
  for (int e = tid; e < E; e += kScanThreads) {
    int32_t run = 0;
    for (int j = 0; j < g; ++j) {
      const int32_t v = part[j * E + e];
      part[j * E + e] = run;
      run += v;
    }
    count[e] = run;
  }
  __syncthreads();
  /* Exclusive scan of padded tile counts over experts (as permute.cu): warp 0, a contiguous run per lane. */
  if (tid < 32) {
    const int per_lane = (E + 31) / 32;
    const int lo = min(tid * per_lane, E), hi = min(lo + per_lane, E);
    int32_t run = 0;
    for (int e = lo; e < hi; ++e) run += (count[e] + tile_m - 1) / tile_m;
    int32_t incl = run;
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t v = __shfl_up_sync(0xffffffffu, incl, o);
      if (tid >= o) incl += v;
    }
    int32_t tile = incl - run;
    for (int e = lo; e < hi; ++e) {
      start[e] = tile * tile_m;
      tile += (count[e] + tile_m - 1) / tile_m;
    }
    if (tid == 31) total_tiles = incl;
  }
  __syncthreads();
  /* chunk_counts[c][e] becomes the row of chunk c's first slot of e: loads of a batch issued before its stores. */
  for (int e = e0; e < E; e += ept) {
    int32_t* col = a.chunk_counts + e;
    int32_t run = start[e] + part[q * E + e];
    for (int64_t c = c_lo; c < c_hi; c += kScanBatch) {
      int32_t* at = col + c * E;
      const int n = (int)min((int64_t)kScanBatch, c_hi - c);
      int32_t v[kScanBatch];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) v[u] = at[min(u, n - 1) * E];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) {
        if (u < n) {
          at[u * E] = run;
          run += v[u];
        }
      }
    }
  }
  const int32_t tiles_used = total_tiles;
  if (tid == 0) *a.num_tiles = tiles_used;
  /* Tile j belongs to the last expert whose first row is ≤ j·tile_m (experts without rows share their
   * successor's first row, so they are never the last such expert of a used tile). */
  for (int32_t j = tid; j < tiles_used; j += kScanThreads) {
    const int32_t r = j * tile_m;
    int lo = 0, hi = E; /* start[lo] ≤ r (start[0] = 0); start[hi] > r or hi = E */
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (start[mid] <= r) lo = mid;
      else hi = mid;
    }
    a.tile_expert[j] = lo;
  }
  for (int e = tid; e < E; e += kScanThreads) {
    const int32_t end = start[e] + (count[e] + tile_m - 1) / tile_m * tile_m;
    for (int32_t r = start[e] + count[e]; r < end; ++r) a.sorted_slots[r] = -1;
  }
}

__global__ void __launch_bounds__(kChunkThreads) permute_place_kernel(fp8moe_permute_args a) {
  __shared__ int32_t seg[kSegCounters]; /* seg[w·E + e]: warp w's count of e, then its next row of e */
  const int warp = threadIdx.x / 32;
  const int32_t E = a.E_local;
  const int S = min(kChunkWarps, kSegCounters / E);
  for (int i = threadIdx.x; i < S * E; i += kChunkThreads) seg[i] = 0;
  __syncthreads();
  int32_t lo = 0, hi = 0;
  warp_segment(a, S, &lo, &hi);
  /* Pass 1 before the wait: the ids were written before permute_count_kernel started reading them, and
   * everything before this kernel's predecessor is complete once that predecessor let it start (pdl.cuh). */
  if (warp < S) permute::count_segment(a, lo, hi, seg + warp * E);
  wait_prior(); /* the first rows come from permute_scan_kernel */
  allow_next();
  __syncthreads();
  /* Exclusive scan over the segments, from the chunk's first row of each expert. */
  const int32_t* first = a.chunk_counts + (int64_t)blockIdx.x * E;
  for (int e = threadIdx.x; e < E; e += kChunkThreads) {
    int32_t run = first[e];
    for (int w = 0; w < S; ++w) {
      const int32_t c = seg[w * E + e];
      seg[w * E + e] = run;
      run += c;
    }
  }
  __syncthreads();
  if (warp < S) permute::place_segment(a, lo, hi, seg + warp * E, nullptr);
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
  if (e == cudaSuccess) e = launch_pdl(permute_scan_kernel, dim3(1), dim3(kScanThreads), 0, stream, *a);
  if (e == cudaSuccess) e = launch_pdl(permute_place_kernel, chunks, dim3(kChunkThreads), 0, stream, *a);
  return static_cast<int>(e);
}
