/* permute.cu — expert counting and token permutation, entirely on the device. Contract: ids [T*K] hold
 * global expert ids (−1 = skipped); slots whose expert lies in [local_offset, local_offset+E_local) are
 * grouped by local expert, each expert's rows padded to a multiple of tile_m. Writes sorted_slots (slot
 * t*K+k per row, −1 for padding), slot_row (row of each slot, −1 when not local), tile_expert (the local
 * expert of each tile) and num_tiles.
 *
 * Rows inside one expert are in ascending slot order (a stable counting sort), so the permutation, and with
 * it every GEMM tile's rows, is the same on every replay of the same routing. Each row is computed
 * independently, so the order never changes results; it changes timing: with atomic placement the tiles'
 * rows, and the L2 traffic of the gathered activations, differed between graph replays
 * (docs/PERFORMANCE.md, run-to-run spread).
 *
 * Two paths with the same outputs, chosen by args.chunk_slots (the host's rule: src/cuda/cuda_plan.c):
 * 0 runs the one-block kernel below; otherwise permute_chunks.cu spreads the slots over many blocks.
 *
 * One block of 1024 threads: the slots are cut into S contiguous segments, one per warp; each warp counts
 * its segment per expert (pass 1), a scan over segments gives each (segment, expert) its first row, and each
 * warp places its segment in slot order (pass 2; permute_segment.cuh). S·E_local counters live in shared
 * memory (E_local ≤ 2048); S grows with the slot count, so a decode call scans one segment. Every scattered
 * store of sorted_slots leaves from this one SM, which is what limits it at large T·K. */
#include "common.cuh"
#include "pdl.cuh"
#include "permute_segment.cuh"

namespace fp8moe {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kSegCounters = 7936; /* with count[] and start[]: just under the 48 KiB of static shared memory */
constexpr int kSlotsPerSegment = 256;
using permute::kMaxExperts;
static_assert(kSegCounters / kMaxExperts >= 1, "at least one segment at the largest E_local");

__global__ void __launch_bounds__(kThreads) permute_kernel(fp8moe_permute_args a) {
  __shared__ int32_t count[kMaxExperts];
  __shared__ int32_t start[kMaxExperts];
  __shared__ int32_t seg[kSegCounters]; /* seg[w * E_local + e] */
  __shared__ int32_t total_tiles;
  wait_prior(); /* ids come from the routing kernel */
  allow_next();
  const int tid = threadIdx.x, warp = tid / 32;
  const int32_t E = a.E_local, tile_m = a.tile_m;
  /* Enough segments to keep ~256 slots per warp busy, no more: the scan over segments costs S per expert. */
  const int S = max(1, min(min(kWarps, kSegCounters / E), (a.TK + kSlotsPerSegment - 1) / kSlotsPerSegment));
  const int32_t seg_len = (a.TK + S - 1) / S;
  const int32_t lo_slot = min(warp * seg_len, a.TK), hi_slot = min(lo_slot + seg_len, a.TK);
  for (int i = tid; i < S * E; i += kThreads) seg[i] = 0;
  __syncthreads();
  /* Pass 1: per-segment counts. */
  if (warp < S) permute::count_segment(a, lo_slot, hi_slot, seg + warp * E);
  __syncthreads();
  /* Exclusive scan over segments: seg becomes each (segment, expert)'s offset inside the expert. */
  for (int e = tid; e < E; e += kThreads) {
    int32_t run = 0;
    for (int w = 0; w < S; ++w) {
      const int32_t c = seg[w * E + e];
      seg[w * E + e] = run;
      run += c;
    }
    count[e] = run;
  }
  __syncthreads();
  /* Exclusive scan of padded tile counts: warp 0, each lane a contiguous run of experts. */
  if (tid < 32) {
    const int32_t incl = scan_tile_starts(count, start, E, tile_m, tid);
    if (tid == 31) total_tiles = incl;
  }
  __syncthreads();
  if (tid == 0) *a.num_tiles = total_tiles;
  for (int e = tid; e < E; e += kThreads) {
    const int32_t tiles = (count[e] + tile_m - 1) / tile_m;
    const int32_t first = start[e] / tile_m;
    for (int32_t j = 0; j < tiles; ++j) a.tile_expert[first + j] = e;
    for (int32_t r = start[e] + count[e]; r < start[e] + tiles * tile_m; ++r) a.sorted_slots[r] = -1;
  }
  /* Pass 2: place each segment in slot order after its expert's first row. */
  if (warp < S) permute::place_segment(a, lo_slot, hi_slot, seg + warp * E, start);
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_permute(const fp8moe_permute_args* a, cudaStream_t stream) {
  if (a->chunk_slots != 0 && a->TK > 0) return fp8moe_launch_permute_chunks(a, stream);
  return static_cast<int>(fp8moe::launch_pdl(fp8moe::permute_kernel, dim3(1), dim3(fp8moe::kThreads), 0, stream, *a));
}
