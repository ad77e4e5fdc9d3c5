/* permute_segment.cuh — the two passes both permutation paths run over one warp's contiguous segment of slots
 * (permute.cu: one block; permute_chunks.cu: one block per chunk). Pass 1 counts the segment's slots per
 * local expert into a warp-private row of shared counters; after a scan has turned each counter into the row
 * of the segment's first slot of that expert, pass 2 places the segment in slot order: equal experts inside
 * a 32-slot step are ranked with __match_any_sync, and the group's lowest lane advances the counter after
 * all lanes read it. Together they make a stable counting sort: rows of an expert in ascending slot order.
 * Included by kernels/permute*.cu only. */
#ifndef FP8MOE_KERNELS_PERMUTE_SEGMENT_CUH
#define FP8MOE_KERNELS_PERMUTE_SEGMENT_CUH

#include <stdint.h>

#include "kernels_internal.h"

namespace fp8moe {
namespace permute {

constexpr int kMaxExperts = FP8MOE_PERMUTE_MAX_EXPERTS; /* the contract's largest E_local (src/contract.c) */
constexpr int kBatch = 8;         /* 32-slot steps whose ids are loaded together, so their latencies overlap */

/* The local expert of slot i, or −1 (skipped id, or an expert of another rank). The id is read from L2
 * (ld.global.cg), never from this SM's L1: permute_chunks.cu's placement reads the ids before its
 * griddepcontrol.wait, and the ids' writer is not its immediate predecessor. */
__device__ __forceinline__ int32_t local_expert(const fp8moe_permute_args& a, int32_t i) {
  const int32_t id = __ldcg(a.ids + i);
  const int32_t e = id - a.local_offset;
  return (id >= 0 && e >= 0 && e < a.E_local) ? e : -1;
}

/* Local experts of slots first + 32u (u < kBatch), −1 past `end` or not local: independent loads. */
__device__ __forceinline__ void load_batch(const fp8moe_permute_args& a, int32_t first, int32_t end,
                                           int32_t (&ev)[kBatch]) {
#pragma unroll
  for (int u = 0; u < kBatch; ++u) ev[u] = first + 32 * u < end ? local_expert(a, first + 32 * u) : -1;
}

/* Pass 1, by a whole warp: counter[e] += slots of [lo, hi) routed to local expert e (shared atomics: only the
 * counts matter here, not their order). */
__device__ __forceinline__ void count_segment(const fp8moe_permute_args& a, int32_t lo, int32_t hi,
                                              int32_t* counter) {
  const int lane = threadIdx.x % 32;
  for (int32_t base = lo; base < hi; base += 32 * kBatch) {
    int32_t ev[kBatch];
    load_batch(a, base + lane, hi, ev);
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      if (ev[u] >= 0) atomicAdd(&counter[ev[u]], 1);
  }
}

/* Pass 2, by a whole warp: slot i of [lo, hi) routed to e goes to row first_row[e] + cursor[e] + (earlier
 * slots of e in this step); cursor[e] (the warp's own row of counters, holding the offset of its first slot
 * of e) advances past them. Writes sorted_slots[row] = i and slot_row[i] (−1 when not local). */
__device__ __forceinline__ void place_segment(const fp8moe_permute_args& a, int32_t lo, int32_t hi, int32_t* cursor,
                                              const int32_t* first_row) {
  const int lane = threadIdx.x % 32;
  const uint32_t lanes_below = (1u << lane) - 1u;
  for (int32_t base = lo; base < hi; base += 32 * kBatch) {
    int32_t ev[kBatch];
    load_batch(a, base + lane, hi, ev);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int32_t i = base + 32 * u + lane, e = ev[u];
      const uint32_t same = __match_any_sync(0xffffffffu, e);
      int32_t row = -1;
      if (e >= 0) {
        row = (first_row != nullptr ? first_row[e] : 0) + cursor[e] + __popc(same & lanes_below);
        a.sorted_slots[row] = i;
      }
      if (i < hi) a.slot_row[i] = row;
      __syncwarp();
      if (e >= 0 && (same & lanes_below) == 0) cursor[e] += __popc(same);
      __syncwarp();
    }
  }
}

}  // namespace permute
}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_PERMUTE_SEGMENT_CUH */
