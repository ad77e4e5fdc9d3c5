/* kernels_internal.h — the C-callable launchers of the CUDA kernels (kernels/<op>.cu) and the plain-C
 * argument structs they take. Host orchestration (src/cuda/) fills these from a validated fp8moe_problem;
 * kernels never see host descriptors. Every launcher enqueues on `stream`, checks cudaGetLastError and
 * returns it (cudaSuccess = 0); none synchronizes or allocates. */
#ifndef FP8MOE_KERNELS_INTERNAL_H
#define FP8MOE_KERNELS_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of one grouped-GEMM tile (every expert's rows are padded to a multiple of it), chosen per call:
 * 16 when experts get few rows (decode), 64 otherwise. */
#define FP8MOE_GEMM_TILE_M_SMALL 16
#define FP8MOE_GEMM_TILE_M_LARGE 64
/* Output columns of one GEMM tile and the K step (one 128-wide scale block). */
#define FP8MOE_GEMM_TILE_N 128
#define FP8MOE_GEMM_TILE_K 128
/* Resident CTAs per SM of the GEMM kernels (their shared memory allows no more). */
#define FP8MOE_GEMM1_CTAS_PER_SM 1
#define FP8MOE_GEMM2_CTAS_PER_SM 2

/* A strided tensor of fp32/bf16/fp16/int32/int64 elements as the kernels read it. dt is fp8moe_dt
 * (tensor_internal.h); s[d] are element strides (0 for a dimension the tensor does not have). */
typedef struct fp8moe_kref {
  const void* data;
  int32_t dt;
  int32_t pad_;
  int64_t s[3];
} fp8moe_kref;

/* Same, writable (output dtype bf16/fp16/fp32, or int32/fp32 routing outputs). */
typedef struct fp8moe_kout {
  void* data;
  int32_t dt;
  int32_t pad_;
  int64_t s[2];
} fp8moe_kout;

/* ---- routing.cu: one warp per token; writes ids [T,K] (global) and weights [T,K] fp32 ---- */
typedef struct fp8moe_routing_args {
  fp8moe_kref logits;      /* [T,E] */
  fp8moe_kref bias;        /* [E] or data NULL */
  int32_t T, E, K, method;
  int32_t n_group, topk_group;
  float scale;             /* routed_scaling_factor */
  int32_t* ids;            /* [T*K] workspace */
  float* weights;          /* [T*K] workspace */
  fp8moe_kout ids_out;     /* optional [T,K] int32 (data NULL when absent) */
  fp8moe_kout weights_out; /* optional [T,K] fp32 */
  int32_t v1;              /* 1: the previous routing and slot-list instruction sequences (FALLBACK 'w', A/B) */
  int32_t filtered;        /* 1: sigmoid keys try the filtered selection (routing_filter.h; not FALLBACK 'f'/'w') */
} fp8moe_routing_args;
/* What the routing grid zeroes before any later stage reads it (every later stage waits for it), instead of memset
 * nodes before it: the scalar words, the per-row amax, device_status. NULL / 0 where none. */
typedef struct fp8moe_zero_args {
  uint32_t* words;
  int32_t n_words;
  uint32_t* rows;
  int64_t n_rows;
  int32_t* status;
} fp8moe_zero_args;
int fp8moe_launch_routing(const fp8moe_routing_args* a, const fp8moe_zero_args* z, cudaStream_t stream);

/* ---- precomputed.cu: the host's ids/weights; out-of-range ids become -1 and are counted ---- */
typedef struct fp8moe_precomputed_args {
  fp8moe_kref ids_in;      /* [T,K] int32/int64 */
  fp8moe_kref weights_in;  /* [T,K] fp32/bf16/fp16 */
  int32_t T, E, K;
  float scale;
  int32_t* ids;
  float* weights;
  int32_t* device_status;  /* optional; zeroed by the host before, counts skipped ids */
  fp8moe_kout ids_out;
  fp8moe_kout weights_out;
} fp8moe_precomputed_args;
int fp8moe_launch_precomputed(const fp8moe_precomputed_args* a, cudaStream_t stream);

/* ---- permute.cu / permute_chunks.cu: expert counts, tile-padded offsets, expert-sorted slot list (rows of
 * an expert in ascending slot order). chunk_slots = 0: one block (permute.cu); > 0: the slots cut into
 * chunks of chunk_slots, three launches over many blocks (permute_chunks.cu). Same outputs either way; the
 * host's rule for chunk_slots is src/cuda/cuda_plan.c. ---- */
typedef struct fp8moe_permute_args {
  const int32_t* ids;      /* [T*K] global ids, -1 = skipped */
  int32_t TK, local_offset, E_local; /* 1 ≤ E_local ≤ 2048 */
  int32_t max_tiles;       /* capacity of tile_expert */
  int32_t tile_m;          /* FP8MOE_GEMM_TILE_M_SMALL or _LARGE */
  int32_t* sorted_slots;   /* [max_tiles*tile_m]: slot t*K+k, or -1 for padding */
  int32_t* slot_row;       /* [T*K]: row of the slot in sorted order, or -1 when not local */
  int32_t* tile_expert;    /* [max_tiles]: local expert of each tile */
  int32_t* num_tiles;      /* [1] */
  int32_t chunk_slots;     /* 0: one block; else slots per chunk (any positive count; the plan's are multiples
                              of FP8MOE_PERMUTE_CHUNK_ALIGN) */
  int32_t pad_;
  int32_t* chunk_counts;   /* chunk_slots > 0: [(ceil(TK/chunk_slots) + 1) × E_local] workspace, overwritten (per-
                              chunk counts, then each chunk's offset per expert; the last row the experts' rows);
                              never read before written */
} fp8moe_permute_args;
#define FP8MOE_PERMUTE_CHUNK_ALIGN 256 /* 8 warps × 32 slots: one step of every warp of a chunk block */
#define FP8MOE_PERMUTE_MAX_EXPERTS 2048
/* Either path, by a->chunk_slots (T·K = 0 always takes the one block: it writes num_tiles = 0). */
int fp8moe_launch_permute(const fp8moe_permute_args* a, cudaStream_t stream);
/* The chunked path alone (called by fp8moe_launch_permute); cudaErrorInvalidValue for chunk_slots ≤ 0, T·K ≤ 0,
 * E_local outside 1..FP8MOE_PERMUTE_MAX_EXPERTS, tile_m ≤ 0 or chunk_counts NULL (nothing enqueued). */
int fp8moe_launch_permute_chunks(const fp8moe_permute_args* a, cudaStream_t stream);

/* ---- quantize_input.cu: hidden [T,H] bf16/fp16 → e4m3 [T,H] + scales ---- */
#define FP8MOE_ACTQ_STATIC 0      /* per-tensor, given scale */
#define FP8MOE_ACTQ_DYN_TENSOR 1  /* per-tensor, amax over everything */
#define FP8MOE_ACTQ_GROUP128 2    /* 1×128 groups */
#define FP8MOE_ACTQ_ROW 3         /* per row (token) */
typedef struct fp8moe_quantize_input_args {
  fp8moe_kref hidden;          /* [T,H] bf16/fp16, row stride s[0] */
  int32_t T, H, K, mode;
  const float* token_weight;   /* [T*K] routing weights when the weight is applied to the input, else NULL */
  fp8moe_kref static_scale;    /* STATIC: the a1_scale scalar */
  uint32_t* amax;              /* DYN_TENSOR: [1] amax bits, zeroed by the host before */
  uint8_t* xq;                 /* [T,H] */
  float* xs;                   /* DYN_TENSOR/STATIC [1]; GROUP128 [T,H/128]; ROW [T] */
  int32_t amax_done;           /* DYN_TENSOR: *amax is final already (the prologue ran the amax pass) */
  int32_t pad_;
} fp8moe_quantize_input_args;
int fp8moe_launch_quantize_input(const fp8moe_quantize_input_args* a, cudaStream_t stream);
/* The same, but token t's codes go to xq + dest_rows[t·K + k]·H for every k < K with dest_rows[t·K + k] ≥ 0 (the
 * permutation's slot_row: GEMM1's expert-sorted rows, loaded by TMA; docs/GPU.md "Expert-sorted activations")
 * instead of row t; the scales xs stay per token. */
int fp8moe_launch_quantize_input_sorted(const fp8moe_quantize_input_args* a, const int32_t* dest_rows,
                                        cudaStream_t stream);

/* ---- prologue.cu: small T in one launch — routing (or PRECOMPUTED intake), the expert-sorted slot list
 * (permute.cu's outputs, rows of one expert in ascending slot order) and the input quantization, plus the
 * zeroing the host would otherwise do with memsets. A cluster of FP8MOE_PROLOGUE_ROUTE_BLOCKS blocks routes
 * the tokens into block 0's shared memory, where block 0 builds the slot list; the blocks after the cluster
 * quantize one token each (single_block: one block routes and builds, blocks 1..T quantize; DYN_TENSOR:
 * only its amax, the encoding pass follows as quantize_input.cu with amax_done). Launched in ordinary stream
 * order (no PDL): it overwrites workspace the previous run's kernels read. Limits: T ≤ FP8MOE_PROLOGUE_MAX_TOKENS, T·K ≤ FP8MOE_PROLOGUE_MAX_ROWS,
 * E ≤ FP8MOE_PROLOGUE_MAX_EXPERTS (the one-block variant: FP8MOE_PROLOGUE_BLOCK_MAX_EXPERTS where routing reads
 * logits); the host's rule is src/cuda/cuda_plan.c. ---- */
#define FP8MOE_PROLOGUE_THREADS 1024
#define FP8MOE_PROLOGUE_ROUTE_BLOCKS 8         /* the routing cluster (portable cluster size) */
#define FP8MOE_PROLOGUE_MAX_TOKENS 64          /* one token per warp of the routing cluster's first 8 warps */
#define FP8MOE_PROLOGUE_MAX_ROWS 512           /* one warp fills the slot list, 32 slots per step */
#define FP8MOE_PROLOGUE_MAX_EXPERTS 256        /* 8 experts per lane: 1024 threads' 64 registers hold no more
                                                  without spills (ptxas -v); group keys 32 warps × E floats = 32 KB */
/* The one-block variant for the smallest T (no cluster): block 0 of FP8MOE_PROLOGUE_BLOCK_THREADS threads routes
 * token w with warp w and builds the slot list in its own shared memory; blocks 1..T quantize one token each. */
#define FP8MOE_PROLOGUE_BLOCK_THREADS 512
#define FP8MOE_PROLOGUE_BLOCK_MAX_TOKENS 16    /* one token per warp of block 0 */
#define FP8MOE_PROLOGUE_BLOCK_MAX_EXPERTS 512  /* the one-block variant where routing reads logits: 16 experts
                                                  per lane (512 threads: up to 128 registers each) */
#define FP8MOE_PROLOGUE_TEAM_MAX_EXPERTS 512   /* team: one expert per lane of block 0's 16 warps (T = 1) */
typedef struct fp8moe_prologue_args {
  int32_t precomputed;             /* 1: pre, else r */
  int32_t quantize;                /* 1: q (one block per token), 0: the hidden states are e4m3 already */
  fp8moe_routing_args r;
  fp8moe_precomputed_args pre;     /* device_status is stored (the count), not added to */
  fp8moe_permute_args perm;        /* ids = r.ids / pre.ids */
  fp8moe_quantize_input_args q;    /* token_weight non-NULL: the weight is applied to the input (K = 1) */
  uint32_t* zero_words;            /* zeroed by block 0 (NULL: none), never read here */
  int32_t n_zero_words;
  int32_t single_block;            /* 1: the one-block variant (T ≤ FP8MOE_PROLOGUE_BLOCK_MAX_TOKENS), 0: the cluster */
  uint32_t* zero_rows;             /* per-row amax zeroed by every block (NULL: none) */
  int64_t n_zero_rows;
  int32_t warm_code;               /* 1: idle routing warps run route_token's later phases early (code warming) */
  int32_t team;                    /* 1: the one-block variant routes its one token with a team of warps
                                      (routing_team.cuh; the host's rule: fp8moe_cuda_plan_prologue_team) */
} fp8moe_prologue_args;
int fp8moe_launch_prologue(const fp8moe_prologue_args* a, cudaStream_t stream);
/* At context creation: *usable = 1 when the routing cluster fits the current device (else the host keeps the
 * separate launches past the one-block variant's bounds). Returns cudaSuccess (a failed query only clears
 * *usable). */
int fp8moe_prepare_prologue(int32_t* usable);

/* ---- GEMM1 (kernels/gemm/gemm1_*.cu): grouped x·W13ᵀ, activation, requantization of the intermediate.
 * Two kernels take these args, chosen by the host's kernel plan (src/cuda/cuda_plan.c): mma.sync
 * (fp8moe_launch_gemm1, any sm_89+, tile_m 16 or 64) and wgmma + TMA (fp8moe_launch_gemm1_sm90, sm_90a only,
 * tile_m 64). ---- */
#define FP8MOE_SCALE_TENSOR 0 /* one scale per matrix */
#define FP8MOE_SCALE_BLOCK 1  /* activation 1×128, weight 128×128 */
#define FP8MOE_SCALE_ROW 2    /* activation per row, weight per output row */
/* The sm90 wgmma GEMMs' consumer main loop (kernels/gemm/wgmma_sm90.cuh, consume): the same arithmetic in
 * every variant (each stage's partial sum starts from zero and is promoted in stage order); they differ in
 * when a shared-memory stage is released and whether a promotion overlaps the next stage's wgmmas. The
 * host picks one per context (src/cuda/cuda_plan.c; docs/GPU.md "Main-loop and item-order switches"). */
#define FP8MOE_SM90_LOOP_OVERLAP 0 /* two partials; stage kb+1 issued before kb retires (wait_group 1), so
                                      stage kb is released only once kb+1 has landed */
#define FP8MOE_SM90_LOOP_SERIAL 1  /* one partial: wait_group 0, release, promote, then the next stage */
#define FP8MOE_SM90_LOOP_EARLY_RELEASE 2 /* two partials: wait_group 0 and release stage kb before waiting
                                            for kb+1; kb is promoted while kb+1's wgmmas run */
/* The sm90 GEMMs' order of (tile, column block) work items over their persistent CTAs: the mapping is
 * fp8moe_sm90_item_of (kernels/gemm/sm90_items.h), shared by both GEMMs' producers and consumers. */
#define FP8MOE_SM90_ORDER_TILE_MAJOR 0   /* item w: tile w / column_blocks, column block w % column_blocks */
#define FP8MOE_SM90_ORDER_COLUMN_MAJOR 1 /* item w: tile w % tiles, column block w / tiles */
#define FP8MOE_SM90_ORDER_GROUPED 2      /* groups of item_group consecutive tiles, column-block major inside */
/* The expert-aligned groups of the 64-row GEMM2 and the 128-row GEMM1's items (aligned_groups in both args,
 * kernels/gemm/sm90_items.h): each CTA keeps the group edges in shared memory, at most this many
 * (ceil(units / item_group) + 1, units the tiles or, for pair items, fp8moe_sm90_max_pairs) */
#define FP8MOE_SM90_MAX_GROUP_EDGES 1024
/* The weight-streaming decode GEMMs (kernels/gemm_stream.h): shared-memory ring depth (stages of 32 KB of
 * weights + 2 KB of token rows), the most CTAs they run on (the workspace holds two partial tiles and one
 * counter per CTA), the weight rows of one unit (GEMM1: 128 gate + 128 up rows; GEMM2: 256 output columns;
 * the plan's size rule counts GEMM2 units with it), and the fp32 elements of one partial tile (a unit's
 * rows × 16 tokens). */
#define FP8MOE_STREAM_UNIT_ROWS 256
#define FP8MOE_STREAM_STAGES 6
#define FP8MOE_STREAM_MAX_CTAS 160
#define FP8MOE_STREAM_PARTIAL_FLOATS 8192
#define FP8MOE_SM_PARTITION_WORDS 8 /* SMs 0..255 in the L2 partition map (l2_partition.cu) */
#define FP8MOE_REQ_FUSED_STATIC 0 /* a2 = e4m3(a / given scale) in the epilogue */
#define FP8MOE_REQ_FUSED_GROUP 1  /* a2 in 1×128 groups in the epilogue */
#define FP8MOE_REQ_DEFERRED_TENSOR 2 /* fp32 intermediate + global amax, then quantize_rows */
#define FP8MOE_REQ_DEFERRED_ROW 3    /* fp32 intermediate + per-row amax, then quantize_rows */
typedef struct fp8moe_gemm1_args {
  const uint8_t* x;            /* activations, row of token t at x + t*x_stride */
  int64_t x_stride;
  fp8moe_kref x_scale;         /* TENSOR: [0]; BLOCK: [t*s0 + kb*s1]; ROW: [t*s0] */
  const uint8_t* w;            /* w13 [E_l,2I,H] with strides (elements = bytes) */
  int64_t w_stride_e, w_stride_n;
  fp8moe_kref w_scale;         /* TENSOR [e*s0]; BLOCK [e*s0 + nb*s1 + kb*s2]; ROW [e*s0 + n*s1] */
  const int32_t* sorted_slots;
  const int32_t* tile_expert;
  const int32_t* num_tiles;
  const float* token_weight;   /* [T*K] when the weight multiplies the (already fp8) input, else NULL */
  int32_t H, I, K, scale_mode, activation, gate_first, requant;
  fp8moe_kref a2_static;       /* FUSED_STATIC: the a2_scale scalar */
  uint8_t* a2q;                /* [rows, I] */
  float* a2s;                  /* FUSED_GROUP [rows, I/128]; FUSED_STATIC unused */
  float* inter;                /* DEFERRED: [rows, I] fp32 */
  uint32_t* amax;              /* DEFERRED_TENSOR [1]; DEFERRED_ROW [rows]; zeroed by the host */
  int32_t max_tiles;
  int32_t tile_m;              /* as permute.cu used */
  int32_t max_ctas;            /* persistent CTAs to launch at most (SMs × CTAs per SM) */
  int32_t E_local;             /* experts in w (the sm90 kernel's tensor map spans them) */
  void* tma_encode;            /* sm90 only: the driver's cuTensorMapEncodeTiled (fp8moe_prepare_gemm_sm90) */
  int32_t sm90_loop;           /* sm90 only: FP8MOE_SM90_LOOP_* */
  int32_t item_order;          /* sm90 only: FP8MOE_SM90_ORDER_* */
  int32_t item_group;          /* sm90 only, GROUPED: tiles per group (≥ 1; the plan's, cuda_plan.c) */
  int32_t max_clusters;        /* sm90 only: > 0 runs the 2-CTA cluster kernel (W13 boxes multicast to both
                                  CTAs of a pair of items of one column block and expert) on at most this many
                                  clusters (fp8moe_prepare_gemm1_sm90_clusters; for the 128-row pair items
                                  fp8moe_prepare_gemm1_sm90_pair_clusters); 0 the one-CTA kernel */
  int32_t alternate;           /* sm90 pairs only: 1 = 64-row items, the two consumer warpgroups take turns
                                  (gemm1_wgmma128_sm90.cu "Alternating"); 0 = pairs of tiles */
  int32_t aligned_groups;      /* sm90 pairs, GROUPED, one CTA only: 1 = group edges moved to experts' first tiles
                                  (alternating items) or first pairs (pair items; sm90_items.h; ceil(units /
                                  item_group) + 1 ≤ FP8MOE_SM90_MAX_GROUP_EDGES, units the tiles or
                                  fp8moe_sm90_max_pairs, else the launcher refuses); 0 = plain groups */
  uint32_t* item_counter;      /* sm90 pairs only: NULL = CTA b takes items b, b + grid, …; else a word that is 0
                                  at the kernel's start, from which the CTAs claim items grid, grid + 1, … in
                                  order as they finish one (docs/GPU.md "Claimed items") */
  float* stream_partials;      /* stream kernels only: [FP8MOE_STREAM_MAX_CTAS][2][FP8MOE_STREAM_PARTIAL_FLOATS] */
  uint32_t* stream_counters;   /* stream kernels only: [FP8MOE_STREAM_MAX_CTAS], zero at the kernel's start */
  int32_t stream_handoff;      /* stream kernels only: 1 = the variant with an epilogue warpgroup (the plan's) */
  int32_t stream_pairs;        /* stream kernels only, not with stream_handoff: 1 = units of up to two consecutive
                                  tiles of one expert (N = 32; the plan's where an expert can hold more than one
                                  tile; the launcher keeps single tiles past its list's capacity) */
  int32_t stream_align;        /* stream kernels only: 1 = the expert-aligned split where an expert's rows fill
                                  more than one unit list entry (fp8moe_cuda_plan_stream_align; stream_split.h) */
  int32_t stream_rounds;       /* stream kernels only, with stream_align: 1 = that split in rounds where the entries
                                  outnumber the CTAs, 2 = those rounds balanced (stream_split.h
                                  fp8moe_split_balanced), 3 = balanced also where entries ≥ 1.35 experts
                                  (fp8moe_split_balanced_pays), 0 = none (fp8moe_cuda_plan_stream_rounds) */
  int32_t x_sorted;            /* sm90 pair items only (not alternate, no clusters): 1 = x holds the expert-sorted
                                  rows, row r of tile_m·max_tiles the codes of sorted row r (stride x_stride = H;
                                  padding rows unwritten), loaded by TMA; the scales stay per token. 0 = rows
                                  gathered by token (docs/GPU.md "Expert-sorted activations") */
  int32_t decode_dense;        /* decode kernel only: 1 = its dense variant, 4 CTAs per SM with balanced rounds
                                  (kernels/gemm_decode.h; the plan's fp8moe_cuda_plan_decode_dense) */
  int32_t partitioned;         /* sm90 one-CTA pair kernel with item_counter only: 1 = partitioned claims (two
                                  counters, item_counter[0] and [1], both 0 at the start; gemm1_wgmma128_sm90.cu,
                                  docs/GPU.md "L2 partitions"); 0 = one counter */
  uint32_t sm_partition[FP8MOE_SM_PARTITION_WORDS]; /* with partitioned: bit s = SM s is in L2 partition 1 */
} fp8moe_gemm1_args;
int fp8moe_launch_gemm1(const fp8moe_gemm1_args* a, cudaStream_t stream);
/* sm_90a: needs tile_m 64, w 16-byte aligned with strides multiples of 16, a->tma_encode; encodes the weight
 * tensor map on the host (no allocation, no synchronization) and passes it as a kernel parameter; a
 * sm90_loop outside FP8MOE_SM90_LOOP_*, an item_order outside FP8MOE_SM90_ORDER_* or a GROUPED item_group
 * below 1 is refused (cudaErrorInvalidValue, nothing launched). */
int fp8moe_launch_gemm1_sm90(const fp8moe_gemm1_args* a, cudaStream_t stream);
/* sm_90a, 128-row work items (kernels/gemm/gemm1_wgmma128_sm90.cu): pairs of consecutive 64-row tiles of one
 * expert (the layout's tile_m stays 64), the pair list built by every CTA in shared memory from num_tiles and
 * tile_expert; item_group counts pairs. The same needs and refusals as fp8moe_launch_gemm1_sm90 (sm90_loop is
 * not read: one main loop; max_clusters > 0 runs the pair items in 2-CTA clusters, item_counter then counts
 * units of two items), and max_tiles ≤ FP8MOE_GEMM1_PAIR_MAX_TILES,
 * E_local ≤ FP8MOE_GEMM1_PAIR_MAX_EXPERTS (its shared-memory pair list). alternate = 1: 64-row items (tiles,
 * item_group counts tiles), no pair list; refused unless fp8moe_gemm1_sm90_alternate_fits (then the caller runs
 * fp8moe_launch_gemm1_sm90 for the same items). */
#define FP8MOE_GEMM1_PAIR_MAX_TILES 8192
#define FP8MOE_GEMM1_PAIR_MAX_EXPERTS FP8MOE_PERMUTE_MAX_EXPERTS
int fp8moe_launch_gemm1_sm90_pairs(const fp8moe_gemm1_args* a, cudaStream_t stream);
int fp8moe_gemm1_sm90_alternate_fits(const fp8moe_gemm1_args* a); /* host: 1 where alternate = 1 may run */
/* Raises GEMM1's dynamic shared-memory limit on the current device (once, at context creation: not a
 * stream operation, so never inside run). */
int fp8moe_prepare_gemm1(void);

/* ---- l2_partition.cu: which SMs share an L2 partition (docs/GPU.md "L2 partitions") ---- */
/* Measures it on the current device, once, at context creation (allocates a scratch buffer and synchronizes): all
 * SMs' CTAs resident at once by a cooperative launch, CTA 0 reads every CTA's lines first, then each CTA times a
 * chain of dependent loads through its own lines; SMs of CTA 0's partition find them in it, the others across the
 * fabric. On success map[w] bit b = SM 32w + b is in the other partition than CTA 0's SM and *found = 1; where the
 * groups do not separate (one L2, a restricted set of SMs, a cooperative launch refused) the map is all zero and
 * *found = 0, which is not an error. readings (NULL: not wanted) receives what the map was made from, where the kernel
 * ran (tools/l2_partition_probe prints it). Returns a cudaError_t. */
typedef struct fp8moe_l2_partition_readings {
  int32_t ctas;                                      /* one per SM; 0 where the kernel did not run */
  uint32_t sm[32 * FP8MOE_SM_PARTITION_WORDS];       /* CTA i's SM */
  uint32_t cycles[32 * FP8MOE_SM_PARTITION_WORDS];   /* its cycles per dependent load */
  uint32_t gap, cut; /* the widest gap between the sorted cycles, and the upper group's lowest value */
} fp8moe_l2_partition_readings;
int fp8moe_l2_partition_map(uint32_t map[FP8MOE_SM_PARTITION_WORDS], int32_t* found,
                            fp8moe_l2_partition_readings* readings);

/* ---- quantize_rows.cu: deferred requantization of the fp32 intermediate ---- */
typedef struct fp8moe_quantize_rows_args {
  const float* inter;          /* [rows, I] */
  const uint32_t* amax;        /* per-tensor [1] or per-row [rows] */
  int32_t per_row, I;
  const int32_t* num_tiles;
  int32_t max_tiles, tile_m;
  uint8_t* a2q;
  float* a2s;                  /* per-tensor [1] or per-row [rows] */
} fp8moe_quantize_rows_args;
int fp8moe_launch_quantize_rows(const fp8moe_quantize_rows_args* a, cudaStream_t stream);

/* ---- GEMM2 (kernels/gemm/gemm2_*.cu): grouped a2·W2ᵀ, accumulated in fp32 and stored as bf16, one
 * y row per slot t*K+k (padding rows are not stored; the combine adds a token's K rows in fp32;
 * docs/GPU.md "Workspace"); two kernels as GEMM1 ---- */
typedef struct fp8moe_gemm2_args {
  const uint8_t* a2q;          /* [rows, I] */
  fp8moe_kref a2_scale;        /* TENSOR [0]; BLOCK [r*s0 + kb]; ROW [r*s0] */
  const uint8_t* w;            /* w2 [E_l,H,I] */
  int64_t w_stride_e, w_stride_n;
  fp8moe_kref w_scale;
  const int32_t* tile_expert;
  const int32_t* num_tiles;
  int32_t H, I, scale_mode, max_tiles, tile_m;
  int32_t max_ctas;            /* persistent CTAs to launch at most */
  const int32_t* sorted_slots; /* [rows]: the slot of each expert-sorted row, −1 for padding (permute.cu) */
  uint16_t* y;                 /* [T*K, H] bf16 bits (common.cuh y_bf16x2), row = slot; rows of slots that
                                  are not local are never written */
  int32_t E_local;
  void* tma_encode;            /* sm90 only, as GEMM1 */
  int32_t sm90_loop;           /* sm90 only, as GEMM1 */
  int32_t item_order;          /* sm90 only: FP8MOE_SM90_ORDER_* */
  int32_t item_group;          /* sm90 only, as GEMM1 */
  int32_t max_clusters;        /* sm90 only: > 0 runs the 2-CTA cluster kernel (B multicast to both CTAs of a
                                  pair of items of one column block and expert) on at most this many
                                  clusters (fp8moe_prepare_gemm2_sm90_clusters); 0 the one-CTA kernel */
  int32_t aligned_groups;      /* the one-CTA 64-row sm90 kernel, GROUPED only: 1 = group edges moved to experts'
                                  first tiles (sm90_items.h; ceil(max_tiles / item_group) + 1 ≤
                                  FP8MOE_SM90_MAX_GROUP_EDGES, else the launcher refuses); 0 = plain groups */
  float* stream_partials;      /* stream kernels only, as GEMM1 (the two kernels share the slices) */
  uint32_t* stream_counters;
  int32_t stream_handoff;      /* stream kernels only, as GEMM1 */
  int32_t stream_pairs;        /* stream kernels only, as GEMM1 */
  int32_t stream_align;        /* stream kernels only, as GEMM1 */
  int32_t stream_rounds;       /* stream kernels only, as GEMM1 */
} fp8moe_gemm2_args;
int fp8moe_launch_gemm2(const fp8moe_gemm2_args* a, cudaStream_t stream);
int fp8moe_prepare_gemm2(void); /* as fp8moe_prepare_gemm1 */
/* sm_90a: as fp8moe_launch_gemm1_sm90 (the same refusals), and H a multiple of 256 (tiles of 2×128
 * columns). */
int fp8moe_launch_gemm2_sm90(const fp8moe_gemm2_args* a, cudaStream_t stream);
/* sm_90a, 128-row work items (kernels/gemm/gemm2_wgmma128_sm90.cu): pairs of consecutive 64-row tiles of one
 * expert × 256 output columns, the pair list built as the 128-row GEMM1's; item_group counts pairs. The same
 * refusals as fp8moe_launch_gemm2_sm90 (sm90_loop and max_clusters are not read: one main loop, one-CTA
 * kernel), and max_tiles ≤ FP8MOE_GEMM1_PAIR_MAX_TILES, E_local ≤ FP8MOE_GEMM1_PAIR_MAX_EXPERTS (the pair
 * list's bounds, shared with the 128-row GEMM1). */
int fp8moe_launch_gemm2_sm90_pairs(const fp8moe_gemm2_args* a, cudaStream_t stream);
/* Compute capability 9.0 only, at context creation: raises the sm90 GEMMs' shared-memory limits and looks up
 * the driver's cuTensorMapEncodeTiled through cudart (no link-time libcuda dependency); *tma_encode stays
 * NULL when the driver lacks it or the device refuses the kernels' shared memory (the plan then keeps the
 * mma.sync rows). */
int fp8moe_prepare_gemm_sm90(void** tma_encode);
/* Compute capability 9.0, after fp8moe_prepare_gemm_sm90: the most 2-CTA clusters of the GEMM2 cluster
 * kernel resident at once on the current device, 0 when none fit or the query fails (never an error). */
int fp8moe_prepare_gemm2_sm90_clusters(int32_t sm_count, int32_t* clusters);
int fp8moe_prepare_gemm1_sm90_clusters(int32_t sm_count, int32_t* clusters); /* the same for GEMM1 */
/* The same for the 128-row GEMM1's cluster kernel (pair items in 2-CTA clusters, opt-in "e"). */
int fp8moe_prepare_gemm1_sm90_pair_clusters(int32_t sm_count, int32_t* clusters);

/* ---- combine.cu: out[t] = Σ_k w[t,k]·y[row(t,k)] in slot order ---- */
typedef struct fp8moe_combine_args {
  const uint16_t* y;           /* [T*K, H] bf16 bits by slot, written by GEMM2 for the local slots */
  const int32_t* slot_row;
  const float* weights;        /* [T*K], or NULL when the weight was applied to the input */
  int32_t T, H, K;
  fp8moe_kout out;             /* [T,H], row stride s[0] */
} fp8moe_combine_args;
int fp8moe_launch_combine(const fp8moe_combine_args* a, cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FP8MOE_KERNELS_INTERNAL_H */
