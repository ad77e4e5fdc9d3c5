/* permute.cu — expert counting and token permutation, entirely on the device. Contract: ids [T*K] hold
 * global expert ids (−1 = skipped); slots whose expert lies in [local_offset, local_offset+E_local) are
 * grouped by local expert, each expert's rows padded to a multiple of tile_m. Writes sorted_slots (slot
 * t*K+k per row, −1 for padding), slot_row (row of each slot, −1 when not local), tile_expert (the local
 * expert of each tile) and num_tiles. Row order inside one expert is arbitrary: every row is computed
 * independently. Launch: one block of 1024 threads, counts in shared memory (E_local ≤ 2048). */
#include "common.cuh"
#include "pdl.cuh"

namespace fp8moe {
namespace {

constexpr int kThreads = 1024;
constexpr int kMaxExperts = 2048;

__global__ void __launch_bounds__(kThreads) permute_kernel(fp8moe_permute_args a) {
  __shared__ int32_t count[kMaxExperts];
  __shared__ int32_t start[kMaxExperts];
  __shared__ int32_t total_tiles;
  wait_prior(); /* ids come from the routing kernel */
  allow_next();
  const int tid = threadIdx.x;
  const int32_t tile_m = a.tile_m;
  for (int e = tid; e < a.E_local; e += kThreads) count[e] = 0;
  __syncthreads();
  for (int32_t i = tid; i < a.TK; i += kThreads) {
    const int32_t e = a.ids[i] - a.local_offset;
    if (a.ids[i] >= 0 && e >= 0 && e < a.E_local) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  /* Exclusive scan of padded tile counts: warp 0, each lane a contiguous run of experts. */
  if (tid < 32) {
    const int per = (a.E_local + 31) / 32;
    const int lo = min(tid * per, a.E_local), hi = min(lo + per, a.E_local);
    int32_t run = 0;
    for (int e = lo; e < hi; ++e) run += (count[e] + tile_m - 1) / tile_m;
    int32_t incl = run;
    for (int o = 1; o < 32; o <<= 1) {
      int32_t v = __shfl_up_sync(0xffffffffu, incl, o);
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
  if (tid == 0) *a.num_tiles = total_tiles;
  for (int e = tid; e < a.E_local; e += kThreads) {
    const int32_t tiles = (count[e] + tile_m - 1) / tile_m;
    const int32_t first = start[e] / tile_m;
    for (int32_t j = 0; j < tiles; ++j) a.tile_expert[first + j] = e;
    for (int32_t r = start[e] + count[e]; r < start[e] + tiles * tile_m; ++r) a.sorted_slots[r] = -1;
  }
  __syncthreads();
  /* count[] becomes each expert's fill cursor. */
  for (int e = tid; e < a.E_local; e += kThreads) count[e] = start[e];
  __syncthreads();
  for (int32_t i = tid; i < a.TK; i += kThreads) {
    const int32_t e = a.ids[i] - a.local_offset;
    int32_t row = -1;
    if (a.ids[i] >= 0 && e >= 0 && e < a.E_local) {
      row = atomicAdd(&count[e], 1);
      a.sorted_slots[row] = i;
    }
    a.slot_row[i] = row;
  }
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_permute(const fp8moe_permute_args* a, cudaStream_t stream) {
  return static_cast<int>(fp8moe::launch_pdl(fp8moe::permute_kernel, dim3(1), dim3(fp8moe::kThreads), 0, stream, *a));
}
