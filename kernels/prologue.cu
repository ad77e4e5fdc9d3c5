/* prologue.cu — everything before GEMM1 for small T in one launch (docs/GPU.md "Small-T prologue"):
 * routing (routing_token.cuh) or the PRECOMPUTED intake (precomputed_slot.cuh), the expert counts, the
 * tile-padded scan and the expert-sorted slot list (permute.cu's contract: sorted_slots, slot_row,
 * tile_expert, num_tiles; rows of one expert in ascending slot order), and the input quantization
 * (quantize_token.cuh), plus the zeroing of the scalar words and the per-row amax that the host would
 * otherwise enqueue as memsets. At decode each of those was a launch of a few µs that did well under a µs of
 * work (docs/PERFORMANCE.md, stage breakdown).
 *
 * Blocks 0..7 form one cluster (1024 threads each) that routes: warp w of block r routes token r + 8w
 * (T ≤ 64: one token per warp, so routing costs one token's latency, not T/32 of them; one block alone would
 * issue ~1,100 warp instructions per DeepSeek-V3 token, ~9 µs for 64 tokens on one SM) and stores the ids into
 * block 0's shared memory (distributed shared memory; a cluster barrier publishes them). Block 0 counts
 * them with shared-memory atomics (order-free), warp 0 scans the padded tile counts and then fills the slot
 * list 32 slots per step in slot order (__match_any_sync ranks equal experts within a step), so the order
 * inside an expert is the slot order without a sort. Blocks 8..8+T−1 quantize token b−8 each (the grid is
 * rounded up to whole clusters); where the weight applies to the input (K = 1) the block first computes its
 * token's routing weight itself (the same code, so the same bits as the routing blocks'), which keeps the
 * quantizing blocks independent: no grid-wide synchronization, except that DYN_TENSOR's scale needs every
 * token's amax, so those blocks only add their amax and the encoding pass runs as the next launch
 * (quantize_input.cu, amax_done).
 *
 * For the smallest T the host's rule (src/cuda/cuda_plan.c) takes prologue_block_kernel instead: no cluster;
 * block 0 (512 threads) routes token w with warp w into its own shared memory and builds the same slot list
 * (at T = 1 warp 0 alone, build_slot_list_warp); blocks 1..T quantize as above. Same device code for every
 * output except that one-warp slot list, which writes the same values.
 *
 * Ordering: launched in plain stream order, because it overwrites workspace (ids, slot lists, scalar words)
 * that the previous run's kernels may still read; its own allow_next() lets the next (PDL) kernel be
 * scheduled early, and that kernel reads anything written here only after griddepcontrol.wait, i.e. after
 * this whole grid has completed — the zeroed words included. */
#include <cooperative_groups.h>

#include "common.cuh"
#include "pdl.cuh"
#include "precomputed_slot.cuh"
#include "quantize_token.cuh"
#include "routing_team.cuh"
#include "routing_token.cuh"
#include "slot_list.cuh"

namespace fp8moe {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = FP8MOE_PROLOGUE_THREADS;
constexpr int kWarps = kThreads / 32;
constexpr int kRouteBlocks = FP8MOE_PROLOGUE_ROUTE_BLOCKS; /* one cluster routes; also the cluster size */
static_assert(FP8MOE_PROLOGUE_MAX_TOKENS <= kRouteBlocks * kWarps, "a routing warp routes one token at most");
constexpr int kBlockThreads = FP8MOE_PROLOGUE_BLOCK_THREADS; /* the one-block variant */
constexpr int kBlockWarps = kBlockThreads / 32;
static_assert(FP8MOE_PROLOGUE_BLOCK_MAX_TOKENS <= kBlockWarps, "block 0's warp w routes token w");

/* The cluster barrier in two halves: a thread's arrival (no ordering) and its wait for every thread of the
 * cluster. A block may touch another block's shared memory only once that block has started (the CUDA
 * programming guide's rule for distributed shared memory): arrive at the start, wait before the first
 * remote store. */
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

/* Code warming (docs/GPU.md "Routing's critical path"): after a flushed L2 the routing warp's ~1,500 instructions
 * (~24 KB, DeepSeek-V3) come from HBM as it reaches them, one sequential stream per SM. Idle warps w ≥ n of a
 * block that routes (the first four) each run route_token from a later phase (keys, groups, top-K, weights)
 * on placeholder values and discard the result, so those phases' lines are fetched in parallel with the
 * routing warp's loads and earlier phases instead of after them. 0: this warp does not warm. */
__device__ __forceinline__ int warm_phase(int w, int n) {
  const int i = w - n;
  return i >= 0 && i < kPhaseWeights ? kPhaseKeys + i : 0;
}

template <int PL, bool kV1>
__global__ void __cluster_dims__(kRouteBlocks, 1, 1) __launch_bounds__(kThreads, 1) prologue_kernel(fp8moe_prologue_args a) {
  extern __shared__ int32_t smem[];
  __shared__ int32_t skipped;
  __shared__ float token_wt;
  wait_prior(); /* plain launch: returns at once (the previous run has completed) */
  allow_next();
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int32_t TK = a.perm.TK, n_local = a.perm.E_local;
  int32_t* ids = smem;                    /* [TK] */
  int32_t* count = ids + TK;              /* [E_local] */
  int32_t* start = count + n_local;       /* [E_local] */
  int32_t* cursor = start + n_local;      /* [E_local] */
  float* gkey = reinterpret_cast<float*>(cursor + n_local); /* [kWarps × E] where route_uses_scratch */

  const bool quant_block = blockIdx.x >= kRouteBlocks;
  const int32_t qt = static_cast<int32_t>(blockIdx.x) - kRouteBlocks; /* a quantizing block's token */
  const int32_t T = a.precomputed ? a.pre.T : a.r.T;
  if (!quant_block) cluster_arrive_relaxed();
  if (a.zero_rows)
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + tid; i < a.n_zero_rows;
         i += static_cast<int64_t>(gridDim.x) * kThreads)
      a.zero_rows[i] = 0u;
  if (quant_block && qt >= T) return; /* the grid is rounded up to whole clusters */
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = quant_block ? 0 : static_cast<int>(cluster.block_rank());
  /* block 0's shared ids, where every routing block writes its tokens' experts (distributed shared memory) */
  int32_t* ids0 = quant_block ? ids : cluster.map_shared_rank(ids, 0);
  if (!quant_block && rank == 0) {
    if (a.zero_words && tid < a.n_zero_words) a.zero_words[tid] = 0u;
    if (tid == 0) skipped = 0;
    for (int e = tid; e < n_local; e += kThreads) count[e] = 0;
  }
  __syncthreads();
  if (!quant_block) cluster_wait(); /* every routing block has started: block 0's ids may be written */
  if (a.precomputed) {
    if (!quant_block && rank == 0) {
      for (int32_t i = tid; i < TK; i += kThreads) {
        const int32_t t = i / a.pre.K, k = i % a.pre.K;
        int32_t e;
        float w;
        if (!precomputed_slot(a.pre, t, k, &e, &w)) atomicAdd(&skipped, 1);
        store_precomputed(a.pre, t, k, e, w);
        ids[i] = e;
      }
    } else if (a.q.token_weight && tid == 0) {
      int32_t e;
      precomputed_slot(a.pre, qt, 0, &e, &token_wt);
    }
  } else {
    /* Routing blocks: warp w of block r routes token r + 8w (T ≤ 64 < 8 × 32: one token per warp at most). A
     * quantizing block whose token weight applies to the input: warp 0 routes its token (one call site, so one
     * inlined copy of the routing code). A warp of a routing block with no token (r + 8w ≥ T, in a block that
     * routes some) may warm the code: one pass from its phase (warm_phase) on token 0, results discarded. */
    const int32_t idle = rank < T ? warp - (T - rank + kRouteBlocks - 1) / kRouteBlocks : -1;
    const int from = kV1 || quant_block || !a.warm_code || idle < 0 ? 0 : warm_phase(idle, 0);
    const int32_t t = quant_block ? qt : (from > 0 ? 0 : rank + kRouteBlocks * warp);
    const bool routes = quant_block ? (a.q.token_weight != nullptr && warp == 0) : (t < T || from > 0);
    if (routes) {
      int32_t e;
      float w;
      if (route_token<PL, kV1>(a.r, t, gkey + warp * a.r.E, &e, &w, from) && from == 0) {
        if (!quant_block) {
          store_route(a.r, t, lane, e, w);
          ids0[t * a.r.K + lane] = e;
        } else if (lane == 0) {
          token_wt = w;
        }
      }
    }
  }
  if (quant_block) {
    __syncthreads();
    const float wt = a.q.token_weight ? token_wt : 1.0f;
    if (a.q.mode == FP8MOE_ACTQ_DYN_TENSOR)
      token_amax<kThreads>(a.q, qt, wt);
    else
      quantize_token<kThreads>(a.q, qt, wt);
    return;
  }
  cluster.sync(); /* every routing block's ids are in block 0's shared memory (release/acquire) */
  if (rank != 0) return;
  if (a.pre.device_status && tid == 0) *a.pre.device_status = skipped; /* 0 when routing from logits */
  build_slot_list<kThreads, kV1>(a.perm, ids, count, start, cursor);
}

/* The one-block variant's dynamic shared memory: the ids and the three per-expert arrays, then (16-byte aligned)
 * the routing scratch — the team's (routing_team.cuh), or the E floats of the warps that run route_token (T
 * routing warps and up to kPhaseWeights warming ones, warm_phase), not of all 16. */
__host__ __device__ constexpr size_t block_keys_offset(int32_t TK, int32_t E_local) {
  return ((static_cast<size_t>(TK) + 3 * static_cast<size_t>(E_local)) * sizeof(int32_t) + 15) / 16 * 16;
}

/* The one-block variant for the smallest T (docs/GPU.md "Small-T prologue"): block 0 (16 warps) routes token w
 * with warp w into its own shared memory and builds the slot list there; blocks 1..T quantize token b−1 each,
 * exactly as the cluster's quantizing blocks do (they never wait for block 0). What it leaves out is the
 * cluster's fixed cost: the co-scheduling of 8 blocks of 1024 threads in one GPC, the two cluster barriers
 * (arrive/wait before the remote stores, cluster.sync after them) and the distributed-shared-memory stores, and
 * 256 routing warps started where T ≤ 8 of them route. The routing, intake, slot-list and quantization code
 * is the same (route_token, precomputed_slot, build_slot_list, quantize_token), so the bits are the same. */
template <int PL, bool kV1>
__global__ void __launch_bounds__(kBlockThreads, 1) prologue_block_kernel(fp8moe_prologue_args a) {
  extern __shared__ int32_t smem[];
  __shared__ int32_t skipped;
  __shared__ float token_wt;
  wait_prior(); /* plain launch: returns at once */
  allow_next();
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int32_t TK = a.perm.TK, n_local = a.perm.E_local;
  int32_t* ids = smem;                    /* [TK] */
  int32_t* count = ids + TK;              /* [E_local] */
  int32_t* start = count + n_local;       /* [E_local] */
  int32_t* cursor = start + n_local;      /* [E_local] */
  /* then (block_keys_offset) either the team's scratch or route_token's scratch, [key_warps × E] */
  char* keys = reinterpret_cast<char*>(smem) + block_keys_offset(TK, n_local);
  float* gkey = reinterpret_cast<float*>(keys);

  const bool quant_block = blockIdx.x > 0; /* uniform per block: the barriers below are block-uniform */
  const int32_t qt = static_cast<int32_t>(blockIdx.x) - 1; /* a quantizing block's token */
  const int32_t T = a.precomputed ? a.pre.T : a.r.T;
  if (a.zero_rows)
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * kBlockThreads + tid; i < a.n_zero_rows;
         i += static_cast<int64_t>(gridDim.x) * kBlockThreads)
      a.zero_rows[i] = 0u;
  if (!quant_block) {
    if (a.zero_words && tid < a.n_zero_words) a.zero_words[tid] = 0u;
    if (tid == 0) skipped = 0;
    for (int e = tid; e < n_local; e += kBlockThreads) count[e] = 0;
    /* The PRECOMPUTED intake counts into skipped right away; routing touches count and skipped only after the
     * barrier that follows it, so its warps start on their loads without waiting here. */
    if (kV1 || a.precomputed) __syncthreads();
  }
  if (a.precomputed) {
    if (!quant_block) {
      for (int32_t i = tid; i < TK; i += kBlockThreads) {
        const int32_t t = i / a.pre.K, k = i % a.pre.K;
        int32_t e;
        float w;
        if (!precomputed_slot(a.pre, t, k, &e, &w)) atomicAdd(&skipped, 1);
        store_precomputed(a.pre, t, k, e, w);
        ids[i] = e;
      }
    } else if (a.q.token_weight && tid == 0) {
      int32_t e;
      precomputed_slot(a.pre, qt, 0, &e, &token_wt);
    }
  } else if (a.team && !kV1 && !quant_block) {
    /* One token (a.team: T = 1, the host's rule fp8moe_cuda_plan_prologue_team): warps 0..⌈E/32⌉−1 route it
     * together (routing_team.cuh); warp 0 ends up holding its slots, as after route_token below. */
    if (warp < team_warps(a.r.E)) {
      int32_t e;
      float w;
      if (route_token_team(a.r, 0, *reinterpret_cast<team_shared*>(keys), &e, &w)) {
        store_route(a.r, 0, lane, e, w);
        ids[lane] = e;
      }
    }
  } else {
    /* Block 0: warp w routes token w. A quantizing block whose token weight applies to the input: warp 0 routes
     * its token (one call site, so one inlined copy of the routing code). Warp-uniform: route_token is
     * warp-collective. */
    const int32_t t = quant_block ? qt : warp;
    const int from = kV1 || quant_block || !a.warm_code ? 0 : warm_phase(warp, T);
    const bool routes = quant_block ? (a.q.token_weight != nullptr && warp == 0) : (warp < T || from > 0);
    if (routes) {
      int32_t e;
      float w;
      if (route_token<PL, kV1>(a.r, from > 0 ? 0 : t, gkey + warp * a.r.E, &e, &w, from) && from == 0) {
        if (!quant_block) {
          store_route(a.r, t, lane, e, w);
          ids[t * a.r.K + lane] = e;
        } else if (lane == 0) {
          token_wt = w;
        }
      }
    }
  }
  /* One token: warp 0 routed it (or took its ids) and holds every slot, so it builds the slot list alone and
   * no other warp waits for it (block-uniform: T and TK are parameters). */
  if (!kV1 && !quant_block && T == 1 && TK <= 32) {
    if (warp != 0) return;
    __syncwarp(); /* the intake's ids and skipped count, written by lanes of this warp */
    if (a.pre.device_status && lane == 0) *a.pre.device_status = skipped; /* 0 when routing from logits */
    build_slot_list_warp(a.perm, lane < TK ? ids[lane] : -1);
    return;
  }
  __syncthreads(); /* block 0: every token's ids and the skipped count; a quantizing block: its token weight */
  if (quant_block) {
    const float wt = a.q.token_weight ? token_wt : 1.0f;
    if (a.q.mode == FP8MOE_ACTQ_DYN_TENSOR)
      token_amax<kBlockThreads>(a.q, qt, wt);
    else
      quantize_token<kBlockThreads>(a.q, qt, wt);
    return;
  }
  if (a.pre.device_status && tid == 0) *a.pre.device_status = skipped; /* 0 when routing from logits */
  /* PL = 16 (257–512 experts, logits only): the scan covers 16 experts per lane */
  build_slot_list<kBlockThreads, kV1, (PL > 8 ? FP8MOE_PROLOGUE_BLOCK_MAX_EXPERTS : FP8MOE_PROLOGUE_MAX_EXPERTS)>(
      a.perm, ids, count, start, cursor);
}

template <int PL>
cudaError_t launch_block(const fp8moe_prologue_args& a, cudaStream_t stream) {
  const int32_t T = a.precomputed ? a.pre.T : a.r.T;
  const bool scratch = !a.precomputed && route_uses_scratch(a.r); /* route_token's E floats per warp */
  const int key_warps = T + kPhaseWeights < kBlockWarps ? T + kPhaseWeights : kBlockWarps;
  const size_t keys =
      a.team ? sizeof(team_shared) : scratch ? static_cast<size_t>(key_warps) * a.r.E * sizeof(float) : 0;
  const size_t smem = block_keys_offset(a.perm.TK, a.perm.E_local) + keys;
  const unsigned blocks = 1u + (a.quantize ? static_cast<unsigned>(T) : 0u);
  if (a.r.v1)
    prologue_block_kernel<PL, true><<<blocks, kBlockThreads, smem, stream>>>(a);
  else
    prologue_block_kernel<PL, false><<<blocks, kBlockThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

template <int PL>
cudaError_t launch(const fp8moe_prologue_args& a, cudaStream_t stream) {
  if (a.single_block) return launch_block<PL>(a, stream);
  const int32_t T = a.precomputed ? a.pre.T : a.r.T;
  const bool scratch = !a.precomputed && route_uses_scratch(a.r); /* route_token's E floats per warp */
  const unsigned quant_blocks = a.quantize ? (static_cast<unsigned>(T) + kRouteBlocks - 1) / kRouteBlocks * kRouteBlocks : 0u;
  const size_t smem = (static_cast<size_t>(a.perm.TK) + 3 * static_cast<size_t>(a.perm.E_local)) * sizeof(int32_t) +
                      (scratch ? static_cast<size_t>(kWarps) * a.r.E * sizeof(float) : 0);
  const unsigned blocks = kRouteBlocks + quant_blocks; /* whole clusters */
  if (a.r.v1)
    prologue_kernel<PL, true><<<blocks, kThreads, smem, stream>>>(a);
  else
    prologue_kernel<PL, false><<<blocks, kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_prologue(const fp8moe_prologue_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  const int32_t T = a->precomputed ? a->pre.T : a->r.T;
  const int32_t E = a->precomputed ? a->pre.E : a->r.E;
  if (T == 0) return cudaSuccess;
  /* The cluster's 1,024-thread blocks hold 8 experts per lane (E ≤ 256); the one-block variant's 512 threads hold
   * 16 where the routing reads logits (E ≤ 512: route_token<16>, or a team at T = 1). */
  const bool team = a->team && a->single_block && T == 1 && !a->precomputed && !a->r.v1 && a->r.K <= 32;
  const int32_t max_e = a->single_block && !a->precomputed ? FP8MOE_PROLOGUE_BLOCK_MAX_EXPERTS : FP8MOE_PROLOGUE_MAX_EXPERTS;
  if (T > FP8MOE_PROLOGUE_MAX_TOKENS || a->perm.TK > FP8MOE_PROLOGUE_MAX_ROWS || E > max_e || (a->team && !team) ||
      a->perm.E_local > E || a->n_zero_words > kThreads ||
      (a->single_block && (T > FP8MOE_PROLOGUE_BLOCK_MAX_TOKENS || a->n_zero_words > kBlockThreads)))
    return cudaErrorInvalidValue; /* the host's rule (cuda_plan.c) never asks for this */
  switch (lane_experts(a->precomputed ? 1 : E)) {
    case 1: return static_cast<int>(launch<1>(*a, stream));
    case 2: return static_cast<int>(launch<2>(*a, stream));
    case 4: return static_cast<int>(launch<4>(*a, stream));
    case 8: return static_cast<int>(launch<8>(*a, stream));
    default: /* single_block (the check above). Where a team routes and no quantizing block routes its token, no
              * route_token runs: the PL = 8 kernel, which measured 1.3 µs faster than the PL = 16 one at kimi-k2
              * T = 1 (docs/PERFORMANCE.md, session 25; the same team code, a larger kernel around it) */
      if (team && !(a->quantize && a->q.token_weight)) return static_cast<int>(launch_block<8>(*a, stream));
      return static_cast<int>(launch_block<16>(*a, stream));
  }
}

/* Whether the routing cluster (8 blocks of 1024 threads, the largest dynamic shared memory the rule allows)
 * can be resident on the current device; 0 when a query fails or nothing fits (the host then keeps the
 * separate launches where the one-block variant does not apply; a failed query does not fail the context). At
 * context creation only. */
extern "C" int fp8moe_prepare_prologue(int32_t* usable) {
  using namespace fp8moe;
  *usable = 1;
  void (*const k[8])(fp8moe_prologue_args) = {prologue_kernel<1, false>, prologue_kernel<2, false>,
                                              prologue_kernel<4, false>, prologue_kernel<8, false>,
                                              prologue_kernel<1, true>,  prologue_kernel<2, true>,
                                              prologue_kernel<4, true>,  prologue_kernel<8, true>};
  const size_t smem = (FP8MOE_PROLOGUE_MAX_ROWS + 3 * FP8MOE_PROLOGUE_MAX_EXPERTS) * sizeof(int32_t) +
                      static_cast<size_t>(kWarps) * FP8MOE_PROLOGUE_MAX_EXPERTS * sizeof(float);
  for (int i = 0; i < 8; ++i) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kRouteBlocks);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, k[i], &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    if (n < 1) *usable = 0;
  }
  return cudaSuccess;
}
