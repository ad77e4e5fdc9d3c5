/* cuda_internal.h — the CUDA backend's private state and its workspace layout. The context holds only
 * immutable facts about its device, so concurrent runs on different streams share it safely; every
 * byte a run writes lives in the caller's workspace, carved by fp8moe_cuda_layout_make into 256-byte
 * aligned slices (docs/GPU.md has the picture). */
#ifndef FP8MOE_CUDA_INTERNAL_H
#define FP8MOE_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend_internal.h"
#include "error_internal.h"
#include "fp8moe.h"
#include "kernels_internal.h" /* FP8MOE_STREAM_MAX_CTAS sizes the scalar words */
#include "problem_internal.h"

#define FP8MOE_CUDA_ALIGN 256
#define FP8MOE_CUDA_MIN_CC 90 /* sm_90a SASS + compute_90 PTX */

typedef struct fp8moe_cuda_impl {
  int32_t ordinal;
  int32_t sm_count;
  int32_t compute_capability; /* major·10 + minor */
  char device_name[FP8MOE_NAME_CAPACITY];
  void* tma_encode;           /* the driver's cuTensorMapEncodeTiled, or NULL (then no TMA plan rows) */
  uint32_t plan_offers;       /* fp8moe_cuda_plan_context_offers, fixed at creation */
  int32_t decode_ctas1, decode_ctas2; /* resident grids of the decode GEMMs (0: not usable here) */
  int32_t decode_ctas1_dense; /* the same for GEMM1's dense variant (kernels/gemm_decode.h) */
  int32_t decode_dense;       /* fp8moe_cuda_plan_context_decode_dense: its mode */
  int32_t stream_ctas;        /* grid of the stream GEMMs (one CTA per SM, ≤ FP8MOE_STREAM_MAX_CTAS; 0: not usable) */
  uint32_t prologue;          /* the small-T prologue variants offered (FP8MOE_PROLOGUE_* mask, cuda_plan.h) */
  int32_t permute_chunks;     /* fp8moe_cuda_plan_context_permute_chunks: the chunked permutation is allowed */
  int32_t route_v1;           /* fp8moe_cuda_plan_context_route_v1: the previous routing/slot-list code (A/B) */
  int32_t route_warm;         /* fp8moe_cuda_plan_context_route_warm: the prologue's code warming */
  int32_t route_filtered;     /* fp8moe_cuda_plan_context_route_filtered: DeepSeek-V3's filtered selection */
  int32_t sm90_loop, gemm1_order, gemm2_order; /* fp8moe_cuda_plan_context_sm90_variant, fixed at creation */
  int32_t gemm1_alternate;    /* the same: the alternating pair kernel in place of the 64-row GEMM1 */
  int32_t gemm2_group;        /* the same: the 64-row GEMM2's own group rule where it holds (0: GEMM1's) */
  int32_t gemm2_aligned;      /* the same: the 64-row GEMM2's expert-aligned group edges */
  int32_t gemm1_aligned;      /* the same: GEMM1's alternating items' expert-aligned group edges */
  int32_t gemm1_pair_aligned; /* the same: the pair items' expert-aligned group edges */
  int32_t gemm1_sparse_group; /* the same: GEMM1's alternating items' own group rule below a tile per expert */
  int32_t gemm2_sparse_group; /* the same: the 64-row GEMM2's sparse group rule below a tile per expert */
  int32_t gemm1_claim;        /* the same: the pair kernel's CTAs claim items in order (docs/GPU.md "Claimed items") */
  int32_t gemm1_partitioned;  /* the same, and the L2 partitions measured at creation: claims split by partition */
  uint32_t sm_partition[FP8MOE_SM_PARTITION_WORDS]; /* fp8moe_l2_partition_map's, where gemm1_partitioned */
  int32_t stream_handoff;     /* the same: the stream GEMMs' epilogue-warpgroup variant where the plan takes it */
  int32_t stream_pairs;       /* the same: the stream GEMMs' units of two tiles where the plan takes them */
  int32_t stream_align;       /* the same: the stream GEMMs' expert-aligned split where the plan allows it */
  int32_t stream_rounds;      /* the same, and this device's DRAM bandwidth per SM: that split in rounds allowed (1),
                                 balanced (2), balanced also by entries an expert (3) */
  int32_t gemm1_pair_clusters; /* the same for the 128-row GEMM1's cluster kernel ("e"; 0: one CTA per item) */
  int32_t gemm1_sorted_x;     /* the same: the pair items' A by TMA from expert-sorted rows (mode: 1 the rule) */
  int32_t gemm1_clusters, gemm2_clusters; /* 2-CTA clusters of the sm90 GEMM1 / GEMM2 resident at once where
                                             the variant takes the cluster kernels (fp8moe_prepare_gemm{1,2}_
                                             sm90_clusters); 0: the one-CTA kernel */
} fp8moe_cuda_impl;

/* Byte offsets of the workspace slices; a slice a problem does not need has size 0 (offset unused). */
typedef struct fp8moe_cuda_layout {
  int32_t tile_m;        /* GEMM tile rows, from the kernel plan (cuda_plan.c) */
  int64_t max_tiles;     /* ceil(T·K / tile_m) + E_local: every expert's rows padded to a tile */
  int64_t rows;          /* max_tiles · tile_m */
  size_t scalars;        /* one slice: the words below, zeroed at the start of every run */
  size_t ids, weights, slot_row;   /* [T·K] int32 / fp32 / int32 */
  size_t sorted_slots, tile_expert;/* [rows] / [max_tiles] int32 */
  int32_t permute_chunk; /* slots per chunk of the chunked permutation, 0: one block (cuda_plan.c) */
  size_t chunk_counts;   /* int32 [(ceil(T·K / permute_chunk) + 1) × E_local] when permute_chunk > 0 */
  size_t xq, xs;         /* e4m3 [T,H]; fp32 x scales (GROUP [T,H/128], ROW [T]) */
  size_t a2q, a2s;       /* e4m3 [rows,I]; fp32 a2 scales (GROUP [rows,I/128], ROW [rows]) */
  size_t inter;          /* fp32 [rows,I] (deferred requantization only) */
  size_t row_amax;       /* uint32 [rows] (per-row deferred requantization only) */
  size_t y;              /* bf16 [T·K,H] */
  size_t xq_sorted;      /* e4m3 [rows,H], GEMM1's expert-sorted activations ("7"), in y's bytes (y is written only
                            after GEMM1): the offset of y where rows·H fits them, else 0 (docs/GPU.md "Expert-sorted
                            activations") */
  size_t stream_partials; /* fp32 [FP8MOE_STREAM_MAX_CTAS][2][FP8MOE_STREAM_PARTIAL_FLOATS] where a stream row
                             can match (cuda_plan.c), shared by both stream GEMMs; never read before written */
  size_t row_amax_bytes; /* bytes of row_amax to zero per run */
  size_t total;
} fp8moe_cuda_layout;

/* Word offsets inside the scalars slice. */
#define FP8MOE_CUDA_S_NUM_TILES 0 /* int32 */
#define FP8MOE_CUDA_S_X_AMAX 1    /* uint32 bits of the input amax (dynamic per-tensor) */
#define FP8MOE_CUDA_S_X_SCALE 2   /* fp32 */
#define FP8MOE_CUDA_S_A2_AMAX 3   /* uint32 bits of the intermediate amax (dynamic per-tensor) */
#define FP8MOE_CUDA_S_A2_SCALE 4  /* fp32 */
#define FP8MOE_CUDA_S_GEMM1_ITEMS 5 /* uint32 [2]: the sm90 pair kernel's claimed-item counters (one per L2
                                       partition where its claims are partitioned, else [0]) */
#define FP8MOE_CUDA_S_STREAM_COUNTERS 8 /* uint32 [FP8MOE_STREAM_MAX_CTAS]: the stream GEMMs' unit counters */
_Static_assert(FP8MOE_CUDA_S_GEMM1_ITEMS + 2 <= FP8MOE_CUDA_S_STREAM_COUNTERS, "GEMM1's two counters");
#define FP8MOE_CUDA_S_WORDS (8 + FP8MOE_STREAM_MAX_CTAS) /* ≤ 512: the prologue's one-block zeroing */

/* cc: the device's compute capability (the kernel plan's tile height depends on it). */
void fp8moe_cuda_layout_make(const fp8moe_problem* p, int32_t cc, fp8moe_cuda_layout* l);


/* Enqueues the whole pipeline for a validated problem with T > 0 on p->stream (the caller has made the
 * context's device current). Never synchronizes, never allocates. */
int32_t fp8moe_cuda_enqueue(const fp8moe_cuda_impl* impl, const fp8moe_problem* p, fp8moe_err* err);

#endif /* FP8MOE_CUDA_INTERNAL_H */
