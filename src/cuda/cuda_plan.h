/* cuda_plan.h — the kernel plan: the one place the CUDA backend chooses a GEMM kernel and its tile shape.
 * A plan row maps (compute capability range, M regime = average rows per expert, size and layout
 * requirements) to (kernel, tile_m, stages); cuda_plan.c holds the rows as data, first match wins.
 * The workspace layout asks the plan for tile_m only, which depends on the regime and the device, never on
 * tensor addresses, so query_workspace and run agree; every row of one (device, regime) has the same tile_m.
 * docs/GPU.md prints the table. */
#ifndef FP8MOE_CUDA_PLAN_H
#define FP8MOE_CUDA_PLAN_H

#include <stdint.h>

#include "problem_internal.h"

/* Which grouped GEMM kernel runs (kernels/gemm/). */
typedef enum fp8moe_gemm_kernel {
  FP8MOE_GEMM_MMA_SYNC = 0,   /* mma.sync m16n8k32 e4m3, cp.async, any sm_89+ (gemm{1,2}_mma.cu) */
  FP8MOE_GEMM_WGMMA_SM90 = 1, /* wgmma m64n128k32 e4m3 + TMA, warp-specialized, sm_90a only (gemm{1,2}_wgmma_sm90.cu) */
  FP8MOE_GEMM_DECODE = 2,     /* swap-AB weight streaming into mma.sync fragments, clusters (gemm_decode.cu) */
  FP8MOE_GEMM_STREAM_SM90 = 3, /* swap-AB TMA weight streaming into wgmma, stream-K over a persistent grid,
                                  sm_90a only (gemm_stream_sm90.cu) */
  FP8MOE_GEMM_WGMMA128_SM90 = 4 /* the wgmma kernels on 128-row items, pairs of 64-row tiles of one expert
                                   sharing each weight stage (gemm{1,2}_wgmma128_sm90.cu) */
} fp8moe_gemm_kernel;

/* M regimes by the average routed rows per expert T·K/E: at most one half is TINY (most experts get no row,
 * the hit ones one: decode), below 16 SMALL, 16 to 32 MEDIUM, otherwise LARGE. TINY and SMALL share the
 * 16-row tile; MEDIUM takes 64-row tiles where the wgmma kernels exist (compute capability 9.0: four times
 * the tensor-core work of 16-row tiles, at several times the mma.sync rate, and every expert's weights
 * streamed once instead of about 1.5 times; docs/GPU.md) and 16-row tiles elsewhere. */
typedef enum fp8moe_m_regime {
  FP8MOE_M_SMALL = 0,
  FP8MOE_M_LARGE = 1,
  FP8MOE_M_TINY = 2,
  FP8MOE_M_MEDIUM = 3
} fp8moe_m_regime;

/* Requirements a row may state (bit mask), checked against the problem at run time. */
#define FP8MOE_PLAN_NEEDS_TMA_W13 1u  /* w13 base 16-byte aligned, row and expert strides multiples of 16 */
#define FP8MOE_PLAN_NEEDS_TMA_W2 2u   /* the same for w2 */
#define FP8MOE_PLAN_NEEDS_H256 4u     /* H a multiple of 256 (GEMM2 tiles of 2×128 columns) */
#define FP8MOE_PLAN_NEEDS_TMA_ENC 8u  /* the driver's cuTensorMapEncodeTiled was found at context creation */
#define FP8MOE_PLAN_NEEDS_SM90_GEMM1 16u /* the sm90 GEMM1 is not switched off (FP8MOE_CUDA_GEMM_FALLBACK) */
#define FP8MOE_PLAN_NEEDS_SM90_GEMM2 32u /* the same for GEMM2 */
#define FP8MOE_PLAN_NEEDS_DECODE_GRIDS 64u /* the decode GEMMs' grids fit this device (context creation), and
                                              FP8MOE_CUDA_GEMM_FALLBACK does not name them ("d") */
#define FP8MOE_PLAN_NEEDS_DECODE_SHAPES 128u /* 16-byte aligned weight rows (and e4m3 hidden rows), and with
                                                block scales at most FP8MOE_DECODE_MAX_KBLOCKS along H and I */
#define FP8MOE_PLAN_NEEDS_STREAM 256u /* the stream GEMMs' grid fits this device (context creation), and
                                         FP8MOE_CUDA_GEMM_FALLBACK does not name them ("k") */
#define FP8MOE_PLAN_NEEDS_STREAM_SMALL 512u /* the stream GEMMs also at 1–16 rows per expert (the SMALL regime)
                                               unless FP8MOE_CUDA_GEMM_FALLBACK names "j" */
#define FP8MOE_PLAN_NEEDS_GEMM1_PAIRS 1024u /* the 128-row GEMM1, unless FP8MOE_CUDA_GEMM_FALLBACK names "v" */
#define FP8MOE_PLAN_NEEDS_PAIR_TILES 2048u /* the 64-row layout's max_tiles ≤ FP8MOE_GEMM1_PAIR_MAX_TILES and E_local ≤
                                             FP8MOE_GEMM1_PAIR_MAX_EXPERTS (the 128-row GEMM1's shared-memory pair
                                             list), and e4m3 hidden rows at most 2^32 − 1 bytes apart */
#define FP8MOE_PLAN_NEEDS_GEMM2_PAIRS 4096u /* the 128-row GEMM2, opt-in: FP8MOE_CUDA_GEMM_FALLBACK names "i" */
#define FP8MOE_PLAN_NEEDS_STREAM_PAYS 8192u /* at ≤ ½ row per expert the stream pair beats the register pair
                                              (fp8moe_cuda_plan_size_rule), or the register pair is not offered,
                                              or FP8MOE_CUDA_GEMM_FALLBACK names "l" */
#define FP8MOE_PLAN_NEEDS_PAIRS_PAY 16384u /* the 128-row GEMM1 beats the 64-row one at this size
                                             (fp8moe_cuda_plan_size_rule), or FP8MOE_CUDA_GEMM_FALLBACK names "l" */

/* Context-level offers, decided once at context creation: TMA_ENC when the encoder was found, DECODE_GRIDS
 * when the decode GEMMs' grids fit, STREAM when the stream GEMMs' grid fits, and SM90_GEMM1/2
 * (DECODE_GRIDS, STREAM) unless the environment variable FP8MOE_CUDA_GEMM_FALLBACK names that GEMM ("1",
 * "2", "d" for the register-path decode pair, "k" for the stream pair, or any mix: those rows give way to the
 * next ones; a diagnostic and A/B switch, read only here); STREAM_SMALL when the
 * stream grid fits, unless it names "j"; GEMM1_PAIRS unless it names "v" (the 128-row GEMM1; "1" still
 * switches every sm90 GEMM1 off). Both were opt-in letters until measured on an H200 (2026-12-03). GEMM2_PAIRS
 * only where it names "i" (the 128-row GEMM2, opt-in until measured; "2" still switches every sm90 GEMM2 off).
 * STREAM_PAYS and PAIRS_PAY for every problem where it names "l": the size rule's A/B and test switch. */
uint32_t fp8moe_cuda_plan_context_offers(int have_tma_encoder, int have_decode_grids, int have_stream_grid);

/* Whether some stream row can match (cc, the regime of p's T or of any smaller T): the workspace then holds the
 * stream GEMMs' partial tiles (cuda_layout.c), whichever row the run's offers pick, and a workspace queried at a
 * host's largest T serves all its smaller ones (test_cuda_plan's workspace_grows_with_T; without this, qwen3-30b-a3b
 * at T = 256 needed 5.7 MB less than at T = 255). */
int fp8moe_cuda_plan_stream_workspace(int32_t cc, const fp8moe_problem* p);

/* How the sm90 wgmma GEMMs run, one choice per context (kernels/kernels_internal.h): the consumer main loop
 * of both GEMMs and each GEMM's item order. Every variant computes the same bits; they exist to be measured
 * against each other (docs/GPU.md "Main-loop and item-order switches", "Item order"). */
typedef struct fp8moe_sm90_variant {
  int32_t loop;        /* FP8MOE_SM90_LOOP_* */
  int32_t gemm1_order; /* FP8MOE_SM90_ORDER_* */
  int32_t gemm2_order; /* FP8MOE_SM90_ORDER_* */
  int32_t gemm1_cluster; /* 1: GEMM1 in 2-CTA clusters with B multicast where the clusters fit the device */
  int32_t gemm2_cluster; /* the same for GEMM2 */
  int32_t gemm1_alternate; /* 1: where the 64-row GEMM1 would run, the pair kernel with alternating 64-row items */
  int32_t gemm1_claim;     /* 1: the pair kernel (both item shapes) claims items from a counter in order; 0 ("y"):
                              CTA b takes items b, b + grid, … */
  int32_t stream_handoff;  /* 1: the stream GEMMs take their epilogue-warpgroup variant where
                              fp8moe_cuda_plan_stream_handoff says so; 0 ("h"): never */
  int32_t stream_pairs;    /* 1: the 160-thread stream GEMMs take units of two tiles of one expert where
                              fp8moe_cuda_plan_stream_pairs says so; 2 ("l", the size rules off): wherever an
                              expert can hold two tiles; 0 ("b", wins over "l"): one tile per unit */
  int32_t gemm1_pair_cluster; /* 1 ("e"): the 128-row GEMM1's pair items in 2-CTA clusters with W13 multicast
                                 where the clusters fit the device; 0: one CTA per item */
  int32_t stream_align;    /* 1: the stream GEMMs' expert-aligned split where fp8moe_cuda_plan_stream_align says so;
                              0 ("3"): stream-K over the whole grid there too */
  int32_t gemm1_sorted_x;  /* the input quantization writes each token's codes into its expert-sorted rows and the
                              one-CTA pair items load A from them by TMA (docs/GPU.md "Expert-sorted activations"):
                              1 where fp8moe_cuda_plan_sorted_x says so, 2 ("7") wherever they can, 0 ("8") never */
  int32_t gemm2_group;     /* 1: the 64-row GEMM2's own group rule where it holds; 0 ("5"): GEMM1's rule everywhere,
                              as both GEMMs had before session 46 (docs/GPU.md "GEMM2's group size") */
  int32_t gemm2_aligned;   /* 1: the 64-row GEMM2's group edges moved to experts' first tiles where its grouped order
                              runs and the edges fit; 0 ("6"): plain groups (docs/GPU.md "Expert-aligned groups") */
  int32_t gemm1_aligned;   /* the same for GEMM1's alternating 64-row items; 0 ("9"): plain groups */
  int32_t gemm1_pair_aligned; /* the same for the 128-row GEMM1's pair items, edges at experts' first pairs where
                                 its one-CTA kernel runs and the edges fit; 0 ("A"): plain groups */
  int32_t gemm1_sparse_group; /* 1: GEMM1's alternating items below one tile per expert by their own group rule;
                                 0 ("4"): GEMM1's rule (docs/GPU.md "GEMM1's groups below a tile per expert") */
  int32_t gemm2_sparse_group; /* 1: the 64-row GEMM2 below one tile per expert by its sparse rule; 0 ("0"): its own */
  int32_t gemm1_partitioned;  /* 1 ("P"): the pair kernel's claimed items split by L2 partition where the context
                                 measured the partitions (docs/GPU.md "L2 partitions"); 0: one counter */
  int32_t stream_rounds;      /* the aligned split in rounds (more entries than CTAs): 2 on every device, 1 ("B",
                                 opt-in until measured on an H200) where the device's DRAM bandwidth per SM allows
                                 (fp8moe_cuda_plan_stream_rounds), 0 ("R", wins over "B"): never, stream-K there
                                 (docs/GPU.md "Rounds and bandwidth") */
  int32_t stream_balanced;    /* 2: the rounds' last round spread over the whole grid by stream-K (kernels/gemm/
                                 stream_split.h fp8moe_split_balanced; docs/GPU.md "Balanced rounds"), where the
                                 rounds' rule holds and also where the entries are at least 1.35 an expert
                                 (fp8moe_split_balanced_pays); 1 ("V") balanced only by the rounds' rule; 0 ("W")
                                 whole rounds by the rounds' rule */
} fp8moe_sm90_variant;

/* At context creation: the default variant (data in cuda_plan.c: both GEMMs grouped), with each letter
 * FP8MOE_CUDA_GEMM_FALLBACK names switching one choice: "q" the serial (sequential) main loop, "r" the
 * early-release main loop ("q" wins when both are named), "u" the ungrouped orders of before (GEMM1
 * column-block major, GEMM2 tile major), "o" GEMM2 column-block major (wins over "u" for GEMM2), "m" both
 * GEMMs in 2-CTA clusters with TMA multicast of the shared weights, "n" the one-CTA GEMMs (wins over "m"), "g"
 * the 64-row GEMM1 kernel for 64-row items, "y" the pair kernel's static item walk, "h" the stream GEMMs without
 * their epilogue warpgroup, "b" the stream GEMMs without units of two tiles, "e" the 128-row GEMM1's pair items in
 * 2-CTA clusters ("n" wins over it), "3" the stream GEMMs without the expert-aligned split, "7" the pair items' A
 * from expert-sorted rows by TMA wherever they can, "8" never (wins over "7"), "5" the 64-row GEMM2's groups by
 * GEMM1's rule, "6" its groups without expert-aligned edges, "9" GEMM1's alternating items' groups without them,
 * "4" those items' groups by GEMM1's rule at every size, "0" the 64-row GEMM2's own rule below a tile per expert too,
 * "A" the 128-row GEMM1's pair items' groups without expert-aligned edges; "P" (on, where the others turn off) the
 * pair kernel's claimed items split by L2 partition (docs/GPU.md "L2 partitions"); "R" the stream GEMMs without
 * the split in rounds, "B" with it only up to the bandwidth bound (fp8moe_cuda_plan_stream_rounds; "R" wins), "W"
 * whole rounds (not balanced), "V" balanced rounds only by the rounds' rule ("W" wins).
 * Letters of the other switches ("1", "2", "d", "k", "j", "p", "c", "s") leave it. */
fp8moe_sm90_variant fp8moe_cuda_plan_context_sm90_variant(void);

/* The grouped order's tiles per group (FP8MOE_SM90_ORDER_GROUPED): as many 64-row tiles as keep one group's
 * A rows (group · 64 · K bytes, K = the GEMM's reduction length in bytes: H for GEMM1, I for GEMM2) within
 * a_bytes, rounded down to even, clamped to [min_group, max_group] (both even). The rule is data (cuda_plan.c
 * has the arithmetic). */
typedef struct fp8moe_sm90_group_rule {
  int64_t a_bytes;   /* L2 bytes one group's A rows may take */
  int32_t min_group; /* at least this many tiles per group */
  int32_t max_group; /* at most this many */
  int32_t max_rows;  /* the rule holds up to this many routed rows per expert on average (T·K/E); 0: at any */
  const char* why;
} fp8moe_sm90_group_rule;

const fp8moe_sm90_group_rule* fp8moe_cuda_plan_sm90_group_rule(void);

/* Tiles per group for a GEMM reducing over k_bytes (≥ 1); always even, within [min_group, max_group]. */
int32_t fp8moe_cuda_plan_sm90_group(int64_t k_bytes);

/* The 64-row GEMM2's groups (docs/GPU.md "GEMM2's group size"): its own rule, a smaller A budget, where the
 * experts hold few rows (routed_rows = T·K ≤ max_rows · E); GEMM1's rule elsewhere and wherever the variant's
 * gemm2_group says so ("5"). The same arithmetic as fp8moe_cuda_plan_sm90_group. */
const fp8moe_sm90_group_rule* fp8moe_cuda_plan_sm90_gemm2_group_rule(void);
/* Below one tile per expert (T·K ≤ 63·E) a smaller budget still where gemm2_group and sparse are both set ("0"
 * clears sparse). */
const fp8moe_sm90_group_rule* fp8moe_cuda_plan_sm90_gemm2_sparse_group_rule(void);
int32_t fp8moe_cuda_plan_sm90_gemm2_group(int64_t k_bytes, int64_t routed_rows, int64_t experts, int32_t gemm2_group,
                                          int32_t sparse);

/* GEMM1's alternating 64-row items' groups: their own rule below one tile per expert (T·K ≤ max_rows · E), GEMM1's
 * elsewhere and wherever the variant's gemm1_sparse_group is 0 ("4"). */
const fp8moe_sm90_group_rule* fp8moe_cuda_plan_sm90_gemm1_sparse_group_rule(void);
int32_t fp8moe_cuda_plan_sm90_gemm1_alt_group(int64_t k_bytes, int64_t routed_rows, int64_t experts, int32_t sparse);

/* The 128-row GEMMs' group in pairs of 64-row tiles: half the tiles per group, so a group holds the same A
 * rows (≥ 4 pairs). */
int32_t fp8moe_cuda_plan_sm90_pair_group(int64_t k_bytes);
/* The same for the pair items in 2-CTA clusters: rounded down to even (at least 2), so that a cluster's unit, the
 * item pair (2u, 2u + 1), is two pairs of one column block everywhere but in a short last group. */
int32_t fp8moe_cuda_plan_sm90_cluster_pair_group(int64_t k_bytes);

typedef enum fp8moe_gemm_which { FP8MOE_GEMM1 = 1, FP8MOE_GEMM2 = 2 } fp8moe_gemm_which;

/* Whether stream GEMM `gemm` runs its epilogue-warpgroup variant on a grid of ctas (docs/GPU.md "The epilogue
 * warpgroup"): where the expected units (one tile per active expert, as the size rule's estimate, times the
 * GEMM's units per tile) give every CTA at least FP8MOE_STREAM_HANDOFF_UNITS whole units, so that a CTA's epilogues
 * can overlap its next unit (measured: deepseek-v3 T = 2, ~2 units per CTA, +2 %), and below
 * FP8MOE_STREAM_HANDOFF_ROWS routed rows per expert (measured: at 4 rows per expert and more the variant
 * gained nothing or lost up to 2.3 %). */
#define FP8MOE_STREAM_HANDOFF_UNITS 2
#define FP8MOE_STREAM_HANDOFF_ROWS 4
int32_t fp8moe_cuda_plan_stream_handoff(const fp8moe_problem* p, fp8moe_gemm_which gemm, int32_t ctas);

/* Whether the 160-thread stream GEMMs take units of up to two consecutive tiles of one expert (wgmma N = 32;
 * docs/GPU.md "Units of two tiles"): where an expert can be routed more than one tile's rows, T > 16 (each
 * token routes a row to an expert at most once; below, a unit is one tile and the kernels build no list), and
 * only on the shapes where the H200 measured a gain at every point: H ≥ FP8MOE_STREAM_PAIRS_MIN_H and at least
 * FP8MOE_STREAM_PAIRS_MIN_EXPERTS experts (deepseek-v3 T = 128 −2 to −7 %, T = 256 −16 % block and −19 %
 * per-tensor, skewed T = 128 −5 to −10 %; kimi-k2 T = 256 −9 %, T = 512 −21 %). At H = 4,096 glm-4.5-air gained
 * 5 % at T = 128 but lost 16 % at T = 64, qwen3-235b-a22b lost 2 % at T = 128; qwen3-30b-a3b (H = 2,048) lost 4 %
 * uniform and 11–23 % skewed at T = 128; mixtral-8x7b and llama4-scout (8 and 16 experts) were flat or lost 2 %.
 * Mode: fp8moe_sm90_variant's stream_pairs (0 never, 1 this rule, 2 wherever T > 16). */
#define FP8MOE_STREAM_PAIRS_MIN_H 6144
#define FP8MOE_STREAM_PAIRS_MIN_EXPERTS 64
int32_t fp8moe_cuda_plan_stream_pairs(const fp8moe_problem* p, int32_t mode);
/* Whether the stream GEMMs may take the expert-aligned split (kernels/gemm/stream_split.h, docs/GPU.md "Experts
 * routed more than a unit"): only where an expert can hold more rows than one tile, T > 16 (an expert gets at
 * most T rows); the kernels then look at the tile list for an expert that fills more than one unit. Mode:
 * fp8moe_sm90_variant's stream_align (0 never). */
int32_t fp8moe_cuda_plan_stream_align(const fp8moe_problem* p, int32_t mode);

/* At context creation: how the stream GEMMs may split in rounds on this device, the kernels' stream_rounds: 0 not,
 * 1 whole rounds, 2 balanced, 3 balanced also by entries an expert (fp8moe_sm90_variant's stream_rounds mode and
 * stream_balanced; the peak DRAM bytes per second from the device's memory clock and bus width, 0 unknown). */
int32_t fp8moe_cuda_plan_stream_rounds(int32_t mode, int32_t balanced, double dram_bytes_per_s, int32_t sm_count);
/* Whether the register GEMM1 (the decode kernel) runs its dense variant: 4 CTAs per SM at 128 registers, so more of
 * its clusters of 8 are resident (clusters → dense_clusters, from fp8moe_prepare_gemm_decode), with balanced rounds
 * (docs/GPU.md "Denser decode GEMM1"). Where its expected items (the expected active experts × I/128 column groups)
 * take fewer rounds on the dense clusters and at most FP8MOE_DECODE_DENSE_MAX_ROUNDS: H100, both orders, layer
 * −10 to −13 % at qwen3-30b-a3b T = 1 (48 items: 2 rounds → 1), −2 to −9 % at T = 2 (96: 3 → 2); llama4-scout, whose
 * items take as many rounds either way at T = 1–2 (64, 128) or five against six at T = 4, lost 2–4 % with it.
 * Mode: fp8moe_cuda_plan_context_decode_dense (0 never, 1 this rule, 2 wherever the dense grid fits). */
#define FP8MOE_DECODE_DENSE_MAX_ROUNDS 2
int32_t fp8moe_cuda_plan_decode_dense(const fp8moe_problem* p, int32_t clusters, int32_t dense_clusters, int32_t mode);
/* Whether the 128-row GEMM1's pair items read A by TMA from expert-sorted rows (docs/GPU.md "Expert-sorted
 * activations"; the caller also needs that kernel, one CTA per item, the separate launches and room in y's bytes).
 * The input quantization then writes K copies of every token's row, T·K·H bytes instead of T·H, so it pays where K is
 * small and the pairs are long: H100, paired A/B both orders (sessions 41–42), mixtral-8x7b (K = 2) T = 2048 and 8192
 * −5 to −6 % of the layer (512 and 2,048 rows per expert), T = 1024 −4 % (256), llama4-scout (K = 1) T = 8192 −3 to
 * −4 % (512), T = 4096 −2 % (256), neutral at T = 2048 (128 rows), mixtral-8x7b T = 512 (128) +3 to +4 %; with K = 8
 * (deepseek-v3, qwen3-30b-a3b at T = 8192) +1 to +4 %. So K ≤ FP8MOE_SORTED_X_MAX_K and at least
 * FP8MOE_SORTED_X_MIN_ROWS rows per expert on average.
 * Mode: fp8moe_sm90_variant's gemm1_sorted_x (0 never, 1 this rule, 2 wherever the kernel runs). */
#define FP8MOE_SORTED_X_MAX_K 2
#define FP8MOE_SORTED_X_MIN_ROWS 256
int32_t fp8moe_cuda_plan_sorted_x(const fp8moe_problem* p, int32_t mode);

typedef struct fp8moe_plan_row {
  int32_t gemm;        /* fp8moe_gemm_which */
  int32_t cc_min, cc_max; /* compute capability range (major·10 + minor), inclusive */
  int32_t regime;      /* fp8moe_m_regime */
  int32_t kernel;      /* fp8moe_gemm_kernel */
  int32_t tile_m;      /* rows per tile (every expert's rows are padded to it) */
  int32_t stages;      /* shared-memory pipeline depth */
  uint32_t needs;      /* FP8MOE_PLAN_NEEDS_* */
  const char* why;     /* one line: why this row exists */
} fp8moe_plan_row;

/* The rows, in match order (for docs and tests). */
const fp8moe_plan_row* fp8moe_cuda_plan_rows(int32_t* count);

fp8moe_m_regime fp8moe_cuda_plan_regime(const fp8moe_problem* p);

/* Tile rows for the workspace layout: the tile_m of the first GEMM1 row of (cc, regime). */
int32_t fp8moe_cuda_plan_tile_m(int32_t cc, const fp8moe_problem* p);

/* Where a kernel that fits is still not the faster one: the thresholds measured on an H200 (docs/GPU.md
 * "Size rules", docs/PERFORMANCE.md 2026-12-03). At ≤ ½ row per expert the stream pair is taken only where
 * I ≥ stream_min_I (smaller experts give units too short to amortize a unit's fixed costs), or I ≥
 * stream_min_I_group where the intermediate is requantized in 1×128 groups (the register pair's GEMM1 then
 * waits on its 8-CTA cluster's amax exchange, which the stream pair does inside one CTA) and the units below
 * reach stream_units_per_4_sms_group quarters of the SMs (skewed routing hits fewer experts than the estimate
 * assumes, and these short units pay for it at the lower count), and the GEMM2
 * units of the active experts, min(⌈T·K·E_local/E⌉, E_local)·⌈H/FP8MOE_STREAM_UNIT_ROWS⌉ (an expert-parallel
 * shard's expected share), reach stream_units_per_4_sms quarters of the SM count (fewer are cut into
 * stream-K pieces that each pay a fixup); the 128-row GEMM1 only at ≥ pairs_min_rows rows per expert
 * (T·K/E), or ≥ pairs_min_rows_wide at H ≥ pairs_min_H or I ≥ pairs_min_I. */
typedef struct fp8moe_size_rule {
  int64_t stream_min_I;
  int64_t stream_min_I_group;         /* below stream_min_I, where p->requant is FP8MOE_REQUANT_GROUP, ... */
  int32_t stream_units_per_4_sms_group; /* ... with this many quarters of the SM count in GEMM2 units */
  int32_t stream_units_per_4_sms;
  int64_t pairs_min_rows;
  int64_t pairs_min_H;
  int64_t pairs_min_rows_wide;
  int64_t pairs_min_I; /* ... or at I ≥ this */
  const char* why;
} fp8moe_size_rule;
const fp8moe_size_rule* fp8moe_cuda_plan_size_rule(void);

/* What the problem and the context satisfy (FP8MOE_PLAN_NEEDS_* bits) on a device of sm_count SMs. */
uint32_t fp8moe_cuda_plan_offers(const fp8moe_problem* p, uint32_t context_offers, int32_t sm_count);

/* The row chosen for one GEMM: the first row of (gemm, cc, regime) whose needs ⊆ offers and whose tile_m is
 * the layout's. Never NULL for cc ≥ 90 (the mma.sync rows need nothing). */
const fp8moe_plan_row* fp8moe_cuda_plan_pick(int32_t gemm, int32_t cc, const fp8moe_problem* p, uint32_t offers);

/* The stages before GEMM1 at small T: one launch (kernels/prologue.cu: routing or PRECOMPUTED intake, the
 * expert-sorted slot list, input quantization, the zeroing of the scalar words) instead of memsets and three
 * to four launches. The rule is data (cuda_plan.c): T, routed rows T·K and experts E at most these; the
 * context offers the prologue when its routing cluster fits the device (fp8moe_prepare_prologue). */
typedef struct fp8moe_prologue_rule {
  int32_t max_tokens;  /* the routing cluster's warps route one token each */
  int32_t max_rows;    /* T·K: one warp places the sorted slots, 32 per step */
  int32_t max_experts; /* E: experts per lane in registers */
  int32_t block_max_tokens; /* at most this T and ... */
  int32_t block_max_rows;   /* ... this T·K: the one-block variant (no cluster) where the context offers it */
  int32_t block_max_experts; /* the one-block variant also past max_experts, up to this, where routing reads
                                logits (16 experts per lane; the cluster's larger blocks hold 8) */
  int32_t team_min_experts; /* T = 1 in the one-block variant: a team of ⌈E/32⌉ warps routes the token where */
  int32_t team_max_experts; /* E is within these (and the method lets a team route) */
  int32_t team_any_min_experts; /* team_min_experts where the context offers FP8MOE_PROLOGUE_TEAM_ANY */
  const char* why;
} fp8moe_prologue_rule;

/* The prologue variants: what a context offers (a mask) and what the rule picks for a problem (one of them,
 * or FP8MOE_PROLOGUE_SEPARATE). */
#define FP8MOE_PROLOGUE_SEPARATE 0u
#define FP8MOE_PROLOGUE_CLUSTER 1u /* prologue_kernel: a routing cluster of 8 blocks */
#define FP8MOE_PROLOGUE_BLOCK 2u   /* prologue_block_kernel: one routing block */
#define FP8MOE_PROLOGUE_TEAM 4u    /* offered only: the one-block variant may route one token with a team of warps
                                      (kernels/routing_team.cuh) */
#define FP8MOE_PROLOGUE_TEAM_ANY 8u /* offered only (FALLBACK 'a', the A/B switch): the team from
                                       team_any_min_experts on, not only past route_token's experts */

const fp8moe_prologue_rule* fp8moe_cuda_plan_prologue_rule(void);

/* At context creation, the variants FP8MOE_CUDA_GEMM_FALLBACK leaves (A/B switches; the GPU tests compare the
 * paths with them): all three by default; "p": none (separate routing, permutation and quantization launches at
 * every T); "c": the cluster only (the cluster variant also where the rule would take the one-block one); "t" or
 * "w": no team routing (route_token's one warp per token at T = 1 too; past max_experts with 16 experts per
 * lane); "a": the team at every E it can route (FP8MOE_PROLOGUE_TEAM_ANY), not only past max_experts. The
 * backend further clears FP8MOE_PROLOGUE_CLUSTER where the cluster does not fit the device. */
uint32_t fp8moe_cuda_plan_context_prologue(void);

/* 1 where the one-block variant routes p's token with a team of warps (kernels/routing_team.cuh): T = 1, the
 * context offers the one-block variant and the team, E within the rule's team bounds (from team_any_min_experts
 * where the context offers FP8MOE_PROLOGUE_TEAM_ANY), K ≤ 32, a method that reads logits, and DeepSeek-V3's
 * groups, where they limit, of exactly 32 experts (one warp each). */
int32_t fp8moe_cuda_plan_prologue_team(const fp8moe_problem* p, uint32_t context_prologue);

/* The variant run takes (FP8MOE_PROLOGUE_*): T ≥ 1 within the rule, the one-block variant where T and T·K are
 * within its bounds and the context offers it, else the cluster where offered, else separate launches; past
 * max_experts (up to block_max_experts) only the one-block variant, and only where routing reads logits. */
uint32_t fp8moe_cuda_plan_prologue(const fp8moe_problem* p, uint32_t context_prologue);

/* 1 where FP8MOE_CUDA_GEMM_FALLBACK contains 'w' (read at context creation): routing and the prologue's slot
 * list keep their previous instruction sequences (the A/B switch; same bits). */
int32_t fp8moe_cuda_plan_context_route_v1(void);

/* 1 unless FP8MOE_CUDA_GEMM_FALLBACK contains 'f' or 'w' (read at context creation): DeepSeek-V3 routing tries the
 * filtered selection (kernels/routing_filter.h) before the exact one (the A/B switch; same bits). */
int32_t fp8moe_cuda_plan_context_route_filtered(void);

/* 1 unless FP8MOE_CUDA_GEMM_FALLBACK contains 'x' or 'w' (read at context creation): the small-T prologue's idle
 * routing warps warm the routing code (kernels/prologue.cu warm_phase). */
int32_t fp8moe_cuda_plan_context_route_warm(void);
/* At context creation: the mode of fp8moe_cuda_plan_decode_dense, 1 unless FP8MOE_CUDA_GEMM_FALLBACK names "E" (0,
 * never) or "D" (2, wherever it fits; "E" wins): the A/B and test switches. */
int32_t fp8moe_cuda_plan_context_decode_dense(void);

/* The permutation at large T·K (kernels/permute_chunks.cu): from min_rows routed rows on, the slots are cut
 * into chunks spread over many blocks (count per chunk, one scan block, placement) instead of the one-block
 * kernel (kernels/permute.cu), whose scattered stores all leave one SM. Chunks are multiples of
 * FP8MOE_PERMUTE_CHUNK_ALIGN slots, about target_chunks of them, fewer where chunks × E_local would pass
 * max_counters (the scan block reads every counter twice). The rule is data (cuda_plan.c). */
typedef struct fp8moe_permute_rule {
  int32_t min_rows;      /* T·K from which the chunked path runs */
  int32_t target_chunks; /* chunks (blocks) aimed at */
  int32_t max_counters;  /* chunks × E_local aimed at, at most */
  const char* why;
} fp8moe_permute_rule;

const fp8moe_permute_rule* fp8moe_cuda_plan_permute_rule(void);

/* Slots per chunk of the chunked permutation for the problem, or 0 for the one-block kernel: a pure function
 * of T·K and E_local, so the workspace layout (chunks × E_local counters) and run agree. */
int32_t fp8moe_cuda_plan_permute_chunk(const fp8moe_problem* p);

/* At context creation: 1 unless FP8MOE_CUDA_GEMM_FALLBACK names "s" (then the one-block permutation at every
 * T·K: the A/B switch for measuring the two paths; the workspace keeps the chunk counters either way). */
int fp8moe_cuda_plan_context_permute_chunks(void);

#endif /* FP8MOE_CUDA_PLAN_H */
