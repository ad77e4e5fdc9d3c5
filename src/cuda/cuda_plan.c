/* cuda_plan.c — the kernel plan rows (cuda_plan.h) and their lookup. Rows are data: to change which kernel
 * runs where, edit the table. The wgmma rows are limited to compute capability 9.0 exactly: their code exists
 * only as sm_90a SASS (the compute_90 PTX fallback, JIT-compiled on newer chips, has no wgmma); the decode
 * rows need sm_90's clusters and programmatic dependent launch, which newer chips keep. The mma.sync rows
 * after them need nothing, so every problem has a row. */
#include "cuda_plan.h"

#include <stddef.h>

#include "gemm_decode.h"
#include "kernels_internal.h"
#include <stdlib.h>
#include <string.h>

#define TMA_W13 FP8MOE_PLAN_NEEDS_TMA_W13
#define TMA_W2 FP8MOE_PLAN_NEEDS_TMA_W2
#define H256 FP8MOE_PLAN_NEEDS_H256
#define TMA_ENC FP8MOE_PLAN_NEEDS_TMA_ENC
#define ON1 FP8MOE_PLAN_NEEDS_SM90_GEMM1
#define ON2 FP8MOE_PLAN_NEEDS_SM90_GEMM2
#define DEC (FP8MOE_PLAN_NEEDS_DECODE_GRIDS | FP8MOE_PLAN_NEEDS_DECODE_SHAPES)
/* The stream pair: its grid, both weights by TMA (the encoder), 16-byte aligned e4m3 hidden rows (the
 * cp.async gather; DECODE_SHAPES, whose block-scale bound the stream kernels do not need but is far above
 * every model's). */
#define STR (FP8MOE_PLAN_NEEDS_STREAM | TMA_W13 | TMA_W2 | TMA_ENC | FP8MOE_PLAN_NEEDS_DECODE_SHAPES)
/* At ≤ ½ row per expert the stream pair only where the size rule says it beats the register pair. */
#define PAYS FP8MOE_PLAN_NEEDS_STREAM_PAYS

static const fp8moe_plan_row k_rows[] = {
    /* gemm, cc range, regime, kernel, tile_m, stages, needs, why */
    /* Each pair of decode rows has the same needs, so a pair is always picked together (GEMM2 skips the
     * padding half of a tile that only a decode GEMM1 leaves unwritten). Measured on an H200
     * (docs/PERFORMANCE.md): ahead of mma.sync at 0.03–0.5 rows per expert, behind from about one row per
     * expert. A bulk-copy (cp.async.bulk ring) kind was slower and racecheck flagged it: removed (docs/GPU.md). */
    /* The stream pair (docs/GPU.md "Weight-streaming decode GEMMs"): one persistent CTA per SM keeps 192 KB
     * of weight boxes in flight (Little's law asks ~70 KB per SM at the H200's loaded latency), stream-K
     * removes the register path's wave quantization. Measured on an H200 (docs/PERFORMANCE.md): ahead of the
     * register pair where experts are large and active enough (the size rule, PAYS), behind on small or few
     * experts, where the register pair, next, takes over ("k" switches to it everywhere). */
    {FP8MOE_GEMM1, 90, 90, FP8MOE_M_TINY, FP8MOE_GEMM_STREAM_SM90, 16, FP8MOE_STREAM_STAGES, STR | PAYS,
     "decode on Hopper: TMA weight ring → swap-AB wgmma, stream-K; 128 gate + 128 up rows per unit"},
    {FP8MOE_GEMM2, 90, 90, FP8MOE_M_TINY, FP8MOE_GEMM_STREAM_SM90, 16, FP8MOE_STREAM_STAGES, STR | PAYS,
     "decode on Hopper: TMA weight ring → swap-AB wgmma, stream-K; 256 output columns per unit"},
    {FP8MOE_GEMM1, 90, 999, FP8MOE_M_TINY, FP8MOE_GEMM_DECODE, 16, 0, DEC,
     "decode, ≤ ½ row/expert: swap-AB weight streaming, 16 gate + 16 up rows per CTA, clusters of 8"},
    {FP8MOE_GEMM2, 90, 999, FP8MOE_M_TINY, FP8MOE_GEMM_DECODE, 16, 0, DEC,
     "decode, ≤ ½ row/expert: swap-AB weight streaming, 32 output columns per CTA"},
    {FP8MOE_GEMM1, 89, 999, FP8MOE_M_TINY, FP8MOE_GEMM_MMA_SYNC, 16, 4, 0,
     "fallback for decode: mma.sync 16-row tiles"},
    {FP8MOE_GEMM2, 89, 999, FP8MOE_M_TINY, FP8MOE_GEMM_MMA_SYNC, 16, 4, 0,
     "fallback for decode: mma.sync 16-row tiles"},
    /* 128-row items halve the W13 bytes per tensor-core cycle that the L2 must feed (48 KB per 1,024
     * cycles instead of 40 KB per 512; docs/GPU.md "128-row GEMM1 items"). Same tile_m (pairs of the
     * layout's 64-row tiles). Measured on an H200 (docs/PERFORMANCE.md, 2026-12-03): GEMM1 12–21 % faster
     * than the 64-row kernel at T = 2048 and 8192 on deepseek-v3 and mixtral-8x7b; "v" switches it off. */
    {FP8MOE_GEMM1, 90, 90, FP8MOE_M_LARGE, FP8MOE_GEMM_WGMMA128_SM90, 64, 4,
     TMA_W13 | TMA_ENC | ON1 | FP8MOE_PLAN_NEEDS_GEMM1_PAIRS | FP8MOE_PLAN_NEEDS_PAIR_TILES | FP8MOE_PLAN_NEEDS_PAIRS_PAY,
     "Hopper, ≥256 rows/expert (≥128 at H ≥ 7168 or I ≥ 8192): wgmma 128×(128 gate + 128 up) on pairs of 64-row tiles"},
    /* 64-row items: by default on the pair kernel with its consumer warpgroups alternating items (one's
     * epilogue under the other's main loop; docs/GPU.md "Alternating 64-row items"), "g" the 64-row kernel. */
    {FP8MOE_GEMM1, 90, 90, FP8MOE_M_LARGE, FP8MOE_GEMM_WGMMA_SM90, 64, 4, TMA_W13 | TMA_ENC | ON1,
     "Hopper, ≥32 rows/expert: wgmma 64×(128 gate + 128 up) items (warpgroups alternating unless g), TMA "
     "weights, cp.async row gather"},
    /* The 128-row GEMM2 (docs/GPU.md "128-row GEMM2 items"): the GEMM1 pairs' arithmetic for W2, 48 KB per
     * 1,024 tensor-core cycles instead of 40 KB per 512. Opt-in ("i") until measured on an H200; the pair
     * list's bounds are PAIR_TILES (its e4m3-row-stride part is GEMM1's, harmless here). */
    {FP8MOE_GEMM2, 90, 90, FP8MOE_M_LARGE, FP8MOE_GEMM_WGMMA128_SM90, 64, 4,
     TMA_W2 | H256 | TMA_ENC | ON2 | FP8MOE_PLAN_NEEDS_GEMM2_PAIRS | FP8MOE_PLAN_NEEDS_PAIR_TILES,
     "Hopper, ≥32 rows/expert, opt-in: wgmma 128×256 on pairs of 64-row tiles"},
    {FP8MOE_GEMM2, 90, 90, FP8MOE_M_LARGE, FP8MOE_GEMM_WGMMA_SM90, 64, 4, TMA_W2 | H256 | TMA_ENC | ON2,
     "Hopper, ≥32 rows/expert: wgmma 64×256, TMA activations and weights"},
    {FP8MOE_GEMM1, 89, 999, FP8MOE_M_LARGE, FP8MOE_GEMM_MMA_SYNC, 64, 4, 0,
     "fallback: mma.sync 64×(2×128), any layout, any sm_89+"},
    {FP8MOE_GEMM2, 89, 999, FP8MOE_M_LARGE, FP8MOE_GEMM_MMA_SYNC, 64, 4, 0,
     "fallback: mma.sync 64×128, any layout, any sm_89+"},
    /* 16 to 32 rows per expert (deepseek-v3 / kimi-k2 at T = 512): on Hopper the 64-row wgmma tiles, 2 to 4
     * times padding, still beat 16-row mma.sync tiles (docs/GPU.md "Kernel plan" has the arithmetic); the
     * Hopper fallback keeps the same tile height (one tile_m per device and regime), other devices keep 16
     * (their rows skip cc 9.0 for that reason). */
    {FP8MOE_GEMM1, 90, 90, FP8MOE_M_MEDIUM, FP8MOE_GEMM_WGMMA_SM90, 64, 4, TMA_W13 | TMA_ENC | ON1,
     "Hopper, 16–32 rows/expert: the LARGE wgmma GEMM1"},
    {FP8MOE_GEMM2, 90, 90, FP8MOE_M_MEDIUM, FP8MOE_GEMM_WGMMA_SM90, 64, 4, TMA_W2 | H256 | TMA_ENC | ON2,
     "Hopper, 16–32 rows/expert: the LARGE wgmma GEMM2"},
    {FP8MOE_GEMM1, 90, 90, FP8MOE_M_MEDIUM, FP8MOE_GEMM_MMA_SYNC, 64, 4, 0,
     "Hopper fallback at 16–32 rows/expert: mma.sync at the layout's 64-row tiles"},
    {FP8MOE_GEMM2, 90, 90, FP8MOE_M_MEDIUM, FP8MOE_GEMM_MMA_SYNC, 64, 4, 0,
     "Hopper fallback at 16–32 rows/expert: mma.sync at the layout's 64-row tiles"},
    {FP8MOE_GEMM1, 89, 89, FP8MOE_M_MEDIUM, FP8MOE_GEMM_MMA_SYNC, 16, 4, 0,
     "16–32 rows/expert without wgmma (8.9): 16-row mma.sync tiles"},
    {FP8MOE_GEMM2, 89, 89, FP8MOE_M_MEDIUM, FP8MOE_GEMM_MMA_SYNC, 16, 4, 0,
     "16–32 rows/expert without wgmma (8.9): 16-row mma.sync tiles"},
    {FP8MOE_GEMM1, 91, 999, FP8MOE_M_MEDIUM, FP8MOE_GEMM_MMA_SYNC, 16, 4, 0,
     "16–32 rows/expert without wgmma (after 9.0): 16-row mma.sync tiles"},
    {FP8MOE_GEMM2, 91, 999, FP8MOE_M_MEDIUM, FP8MOE_GEMM_MMA_SYNC, 16, 4, 0,
     "16–32 rows/expert without wgmma (after 9.0): 16-row mma.sync tiles"},
    /* The stream pair at 1–16 rows per expert too, 16-row tiles with N = 16: measured on an H200
     * (docs/PERFORMANCE.md, 2026-12-03) GEMM1 9–25 % faster than mma.sync at T = 8–32 on deepseek-v3,
     * qwen3-30b-a3b and mixtral-8x7b, GEMM2 equal or faster; "j" switches it off (mma.sync as before). */
    {FP8MOE_GEMM1, 90, 90, FP8MOE_M_SMALL, FP8MOE_GEMM_STREAM_SM90, 16, FP8MOE_STREAM_STAGES,
     STR | FP8MOE_PLAN_NEEDS_STREAM_SMALL, "Hopper, 1–16 rows/expert: the stream GEMM1 (N = 16 per wgmma)"},
    {FP8MOE_GEMM2, 90, 90, FP8MOE_M_SMALL, FP8MOE_GEMM_STREAM_SM90, 16, FP8MOE_STREAM_STAGES,
     STR | FP8MOE_PLAN_NEEDS_STREAM_SMALL, "Hopper, 1–16 rows/expert: the stream GEMM2 (N = 16 per wgmma)"},
    {FP8MOE_GEMM1, 89, 999, FP8MOE_M_SMALL, FP8MOE_GEMM_MMA_SYNC, 16, 4, 0,
     "decode: 16-row tiles waste least on padding"},
    {FP8MOE_GEMM2, 89, 999, FP8MOE_M_SMALL, FP8MOE_GEMM_MMA_SYNC, 16, 4, 0,
     "decode: 16-row tiles waste least on padding"},
};

const fp8moe_plan_row* fp8moe_cuda_plan_rows(int32_t* count) {
  *count = (int32_t)(sizeof k_rows / sizeof k_rows[0]);
  return k_rows;
}

/* The first T·K of SMALL, MEDIUM and LARGE (below the first: TINY). Below 16 rows per expert on average, 64-row
 * tiles would be mostly padding; 16 to 32 is MEDIUM, where only the wgmma kernels make 64-row tiles pay
 * (docs/GPU.md). */
static void regime_starts(const fp8moe_problem* p, size_t start[3]) {
  const size_t e = (size_t)p->E;
  start[0] = e / 2 + 1; /* at most E/2 rows: TINY */
  start[1] = 16 * e;
  start[2] = 32 * e;
}

static fp8moe_m_regime regime_of(int64_t T, const fp8moe_problem* p) {
  size_t start[3];
  regime_starts(p, start);
  const size_t rows = (size_t)T * (size_t)p->K;
  if (rows < start[0]) return FP8MOE_M_TINY;
  if (rows < start[1]) return FP8MOE_M_SMALL;
  return rows < start[2] ? FP8MOE_M_MEDIUM : FP8MOE_M_LARGE;
}

fp8moe_m_regime fp8moe_cuda_plan_regime(const fp8moe_problem* p) { return regime_of(p->T, p); }

static int row_matches(const fp8moe_plan_row* r, int32_t gemm, int32_t cc, int32_t regime) {
  return r->gemm == gemm && cc >= r->cc_min && cc <= r->cc_max && r->regime == regime;
}

int32_t fp8moe_cuda_plan_tile_m(int32_t cc, const fp8moe_problem* p) {
  const int32_t regime = fp8moe_cuda_plan_regime(p);
  for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; ++i)
    if (row_matches(&k_rows[i], FP8MOE_GEMM1, cc, regime)) return k_rows[i].tile_m;
  return regime == FP8MOE_M_LARGE ? 64 : 16; /* cc below every row: the backend refuses such devices */
}

static int tma_ok(const fp8moe_view* w) {
  /* A 3-D tiled tensor map [E, N, K] of bytes: 16-byte aligned base, strides multiples of 16, rows that
   * do not overlap (the box reads 128 contiguous bytes of a row). */
  const int64_t n = w->shape[1], k = w->shape[2];
  return ((uintptr_t)w->data % 16) == 0 && w->strides[2] == 1 && w->strides[1] % 16 == 0 &&
         w->strides[0] % 16 == 0 && w->strides[1] >= k && w->strides[0] >= n * w->strides[1];
}

uint32_t fp8moe_cuda_plan_context_offers(int have_tma_encoder, int have_decode_grids, int have_stream_grid) {
  uint32_t o = have_tma_encoder ? FP8MOE_PLAN_NEEDS_TMA_ENC : 0u;
  const char* off = getenv("FP8MOE_CUDA_GEMM_FALLBACK");
  const int decode_off = off != NULL && strchr(off, 'd') != NULL;
  const int stream_off = off != NULL && strchr(off, 'k') != NULL;
  if (off == NULL || strchr(off, '1') == NULL) o |= FP8MOE_PLAN_NEEDS_SM90_GEMM1;
  if (off == NULL || strchr(off, '2') == NULL) o |= FP8MOE_PLAN_NEEDS_SM90_GEMM2;
  if (have_decode_grids && !decode_off) o |= FP8MOE_PLAN_NEEDS_DECODE_GRIDS;
  if (have_stream_grid && !stream_off) o |= FP8MOE_PLAN_NEEDS_STREAM;
  if (have_stream_grid && (off == NULL || strchr(off, 'j') == NULL)) o |= FP8MOE_PLAN_NEEDS_STREAM_SMALL;
  if (off == NULL || strchr(off, 'v') == NULL) o |= FP8MOE_PLAN_NEEDS_GEMM1_PAIRS;
  if (off != NULL && strchr(off, 'i') != NULL) o |= FP8MOE_PLAN_NEEDS_GEMM2_PAIRS;
  if (off != NULL && strchr(off, 'l') != NULL) o |= FP8MOE_PLAN_NEEDS_STREAM_PAYS | FP8MOE_PLAN_NEEDS_PAIRS_PAY;
  return o;
}

/* The regime is constant in T between regime_starts, so T = 1 and the first T of each later regime meet every
 * regime of a T' ≤ T. */
int fp8moe_cuda_plan_stream_workspace(int32_t cc, const fp8moe_problem* p) {
  const size_t K = (size_t)(p->K > 0 ? p->K : 1);
  size_t start[3];
  regime_starts(p, start);
  const int64_t at[4] = {1, (int64_t)((start[0] + K - 1) / K), (int64_t)((start[1] + K - 1) / K),
                         (int64_t)((start[2] + K - 1) / K)};
  for (int j = 0; j < 4; ++j) {
    if (at[j] < 1 || at[j] > p->T) continue;
    const int32_t regime = regime_of(at[j], p);
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; ++i)
      if (k_rows[i].kernel == FP8MOE_GEMM_STREAM_SM90 && row_matches(&k_rows[i], k_rows[i].gemm, cc, regime)) return 1;
  }
  return 0;
}

/* The sm90 GEMMs' default variant: the two-accumulator main loop (promotion overlapped with the next stage's
 * wgmmas, 9390648) and both GEMMs in the grouped item order (docs/GPU.md "Item order": DRAM reads A about
 * once and each B slice about once per group; the old orders re-read GEMM1's gathered rows once per column
 * block, 16× at deepseek-v3 and 112× at mixtral-8x7b, and re-stream a mixtral expert's W2 per wave). The
 * letters below measure each choice against its predecessor on one build (docs/GPU.md "Main-loop and
 * item-order switches" has the candidates and their arithmetic). */
/* The 2-CTA cluster kernels (TMA multicast of the weights shared by a pair of items; docs/GPU.md "2-CTA
 * clusters") are off by default until they have run on a GPU: "m" takes them. */
/* The 64-row GEMM1 items run on the pair kernel with the consumer warpgroups alternating items (docs/GPU.md
 * "Alternating 64-row items": GEMM1 −6 to −13 % against gemm1_wgmma_sm90.cu at every point measured); "g" takes
 * gemm1_wgmma_sm90.cu (also what the cluster variant "m" runs). */
/* The pair kernel's CTAs (both item shapes) claim their items in order from a counter, so the CTAs that share
 * an item group's B slices and A rows stay within a few µs of each other and meet in L2 (docs/GPU.md "Claimed
 * items": GEMM1 DRAM bytes at deepseek-v3 block T = 8192 14.9 → 9.5 GB, layers −2.5 to −5.5 % at T ≥ 2048);
 * "y" keeps the static walk b, b + grid, …. */
/* The 128-row GEMM1's 2-CTA clusters ("e": W13 boxes multicast to the two pair items of one column block and
 * expert, docs/GPU.md "2-CTA pair clusters") are off until they have run on a GPU. */
/* The pair items' A from expert-sorted rows where fp8moe_cuda_plan_sorted_x says so (docs/GPU.md "Expert-sorted
 * activations"). The pair kernel's claims split by L2 partition ("P", docs/GPU.md "L2 partitions") are off: on an
 * H100 they cut GEMM1's L2 fabric traffic by 28 % and moved layers by −1.5 % to +1.5 %. */
/* The stream GEMMs' rounds run balanced: the last round spread over the whole grid by stream-K (docs/GPU.md "Balanced
 * rounds": kimi-k2 block skewed T = 512 −8 % on an H100), also where the entries are at least 1.35 an expert
 * (deepseek-v3 skewed T = 256 −10 to −12 %); "V" balances only by the rounds' rule, "W" keeps the rounds whole. */
static const fp8moe_sm90_variant k_sm90_default = {
    FP8MOE_SM90_LOOP_OVERLAP, FP8MOE_SM90_ORDER_GROUPED, FP8MOE_SM90_ORDER_GROUPED, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1,
    1, 1, 1, 1, 0, 2, 2};

fp8moe_sm90_variant fp8moe_cuda_plan_context_sm90_variant(void) {
  fp8moe_sm90_variant v = k_sm90_default;
  const char* sw = getenv("FP8MOE_CUDA_GEMM_FALLBACK");
  if (sw == NULL) return v;
  if (strchr(sw, 'q') != NULL) v.loop = FP8MOE_SM90_LOOP_SERIAL;
  else if (strchr(sw, 'r') != NULL) v.loop = FP8MOE_SM90_LOOP_EARLY_RELEASE;
  if (strchr(sw, 'u') != NULL) {
    v.gemm1_order = FP8MOE_SM90_ORDER_COLUMN_MAJOR;
    v.gemm2_order = FP8MOE_SM90_ORDER_TILE_MAJOR;
  }
  if (strchr(sw, 'o') != NULL) v.gemm2_order = FP8MOE_SM90_ORDER_COLUMN_MAJOR;
  if (strchr(sw, 'm') != NULL) v.gemm1_cluster = v.gemm2_cluster = 1;
  if (strchr(sw, 'e') != NULL) v.gemm1_pair_cluster = 1;
  if (strchr(sw, 'n') != NULL) v.gemm1_cluster = v.gemm2_cluster = v.gemm1_pair_cluster = 0;
  if (strchr(sw, 'g') != NULL) v.gemm1_alternate = 0;
  if (strchr(sw, 'y') != NULL) v.gemm1_claim = 0;
  if (strchr(sw, 'h') != NULL) v.stream_handoff = 0;
  if (strchr(sw, 'l') != NULL) v.stream_pairs = 2; /* the size rules off: wherever an expert can hold two tiles */
  if (strchr(sw, 'b') != NULL) v.stream_pairs = 0;
  if (strchr(sw, '3') != NULL) v.stream_align = 0;
  if (strchr(sw, '7') != NULL) v.gemm1_sorted_x = 2;
  if (strchr(sw, '8') != NULL) v.gemm1_sorted_x = 0;
  if (strchr(sw, '5') != NULL) v.gemm2_group = 0;
  if (strchr(sw, '6') != NULL) v.gemm2_aligned = 0;
  if (strchr(sw, '9') != NULL) v.gemm1_aligned = 0;
  if (strchr(sw, 'A') != NULL) v.gemm1_pair_aligned = 0;
  if (strchr(sw, '4') != NULL) v.gemm1_sparse_group = 0;
  if (strchr(sw, '0') != NULL) v.gemm2_sparse_group = 0;
  if (strchr(sw, 'P') != NULL) v.gemm1_partitioned = 1;
  if (strchr(sw, 'B') != NULL) v.stream_rounds = 1;
  if (strchr(sw, 'R') != NULL) v.stream_rounds = 0;
  if (strchr(sw, 'V') != NULL) v.stream_balanced = 1;
  if (strchr(sw, 'W') != NULL) v.stream_balanced = 0;
  return v;
}

/* The grouped order's group size (docs/GPU.md "Item order"). A group's A rows (G tiles × 64 rows × K bytes)
 * are read by every column block of the group, G·col_blocks/132 waves of persistent CTAs on an H200, so they
 * must stay in L2 (50 MB) beside the B slices the waves stream: 8 MiB, a sixth of it. Within a group every
 * B slice (expert, column block) is read once by all of that expert's tiles in the group, so DRAM reads each
 * expert's weights about max(1, tiles per expert / G) times, plus once more per expert cut by a group
 * boundary; larger G reads them fewer times, at more A bytes in L2. The 8 MiB give:
 * - deepseek-v3 GEMM1 (K = H = 7,168: 448 KiB per tile): G = 18 (4 tiles per expert at T = 8192: W13 about
 *   1.2× of 7.5 GB, gathered rows once, 0.47 GB; column-block major read those rows 16×: ~15 GB in all);
 * - deepseek-v3 GEMM2 (K = I = 2,048: 128 KiB): 64, the cap (a wave covers 64 tiles × 2 column blocks);
 * - mixtral-8x7b GEMM1 (K = 4,096: 256 KiB): 32 = one expert's tiles at T = 8192 (W13 once, 0.94 GB, rows
 *   once; column-block major: 112 × 67 MB of rows);
 * - mixtral-8x7b GEMM2 (K = 14,336: 896 KiB): 9 → 8 (W2 4× of 0.47 GB at T = 8192; tile major ~31 waves ×
 *   one 59 MB expert).
 * The floor of 8 keeps every wave (132 items) on at most ~17 column blocks; the cap of 64 keeps the groups
 * of small-K GEMMs from spanning so many experts that a wave's B slices stop being shared. G is even, so the
 * item pairs (2u, 2u + 1) of GEMM2's 2-CTA cluster kernel are two tiles of one column block everywhere but
 * in a short last group. */
static const fp8moe_sm90_group_rule k_sm90_group = {
    8 << 20, 8, 64, 0, "grouped item order: one group's A rows within a sixth of the H200's 50 MB L2"};

const fp8moe_sm90_group_rule* fp8moe_cuda_plan_sm90_group_rule(void) { return &k_sm90_group; }

static int32_t group_of(const fp8moe_sm90_group_rule* r, int64_t k_bytes) {
  const int64_t per_tile = (int64_t)FP8MOE_GEMM_TILE_M_LARGE * (k_bytes > 0 ? k_bytes : 1);
  const int64_t g = r->a_bytes / per_tile / 2 * 2; /* even */
  return (int32_t)(g < r->min_group ? r->min_group : g > r->max_group ? r->max_group : g);
}

int32_t fp8moe_cuda_plan_sm90_group(int64_t k_bytes) { return group_of(&k_sm90_group, k_bytes); }

/* The 64-row GEMM2 (docs/GPU.md "GEMM2's group size"): within a group its items go column-block major, so a tile's
 * A rows come back once per column block, after the W2 slices of the group's other tiles have streamed by. With
 * one or two tiles per expert and GEMM1's rule (deepseek-v3 T = 2048: G = 64, ~32 experts' 512 KB slices per
 * column block) that is ~24 MB between two reads of a row, and ncu counted 3.1–3.3 GB of DRAM reads for 2.53 GB of
 * W2 and a2q; with a quarter of the budget (G = 16) 2.8 GB, GEMM2 1.10 → 1.01 ms and the layer 2–5 % faster at
 * T ≤ 2048 on the shapes with I ≤ 2,048 (session 46, H100, paired A/B). Where experts hold many tiles a small group
 * cuts more of them at its boundaries, and each cut expert's W2 is read twice: deepseek-v3 T = 8192 (4 tiles per
 * expert) read 3.87 GB against 3.54 and the layer lost 0.7 %, llama4-scout T = 8192 1.4 %; so the rule holds up to
 * 128 rows (two tiles) per expert. The floor stays 8 (mixtral-8x7b's 896 KiB tiles keep G = 8). GEMM1 keeps its
 * rule at every size: its 1.8 MB W13 slices must meet the group's tiles in L2 (a quarter budget there: +7 % GEMM1). */
static const fp8moe_sm90_group_rule k_sm90_gemm2_group = {
    2 << 20, 8, 64, 128, "64-row GEMM2 with few tiles per expert: a group's a2q rows outlive the W2 between reads"};

const fp8moe_sm90_group_rule* fp8moe_cuda_plan_sm90_gemm2_group_rule(void) { return &k_sm90_gemm2_group; }

/* Whether experts hold few enough rows for the rule (T·K ≤ max_rows · E). */
static int rule_holds(const fp8moe_sm90_group_rule* r, int64_t routed_rows, int64_t experts) {
  return routed_rows <= (int64_t)r->max_rows * (experts > 0 ? experts : 1);
}

/* own's group where it is on and holds, GEMM1's rule otherwise */
static int32_t group_by_rows(const fp8moe_sm90_group_rule* own, int64_t k_bytes, int64_t routed_rows, int64_t experts,
                             int32_t on) {
  return group_of(on && rule_holds(own, routed_rows, experts) ? own : &k_sm90_group, k_bytes);
}

/* The 64-row GEMM2 below one tile per expert (docs/GPU.md "GEMM1's groups below a tile per expert", its last
 * paragraph): a quarter of its own budget (G = 4 at I = 2,048) measured −1.0 to −1.8 % on the layer at deepseek-v3
 * T = 512–1024, kimi-k2 T = 1024 and glm-4.5-air T = 512 (session 48, H100, paired A/B in both orders; kimi-k2
 * T = 512 +0.45 %); the floor 4 keeps the cluster kernel's item pairs in one column block. */
static const fp8moe_sm90_group_rule k_sm90_gemm2_sparse_group = {
    512 << 10, 4, 64, 63, "64-row GEMM2 below one tile per expert: fewer experts per wave"};

const fp8moe_sm90_group_rule* fp8moe_cuda_plan_sm90_gemm2_sparse_group_rule(void) { return &k_sm90_gemm2_sparse_group; }

int32_t fp8moe_cuda_plan_sm90_gemm2_group(int64_t k_bytes, int64_t routed_rows, int64_t experts, int32_t gemm2_group,
                                          int32_t sparse) {
  if (gemm2_group && sparse && rule_holds(&k_sm90_gemm2_sparse_group, routed_rows, experts))
    return group_of(&k_sm90_gemm2_sparse_group, k_bytes);
  return group_by_rows(&k_sm90_gemm2_group, k_bytes, routed_rows, experts, gemm2_group);
}

/* GEMM1's alternating 64-row items below one tile per expert (docs/GPU.md "GEMM1's groups below a tile per expert"):
 * there every tile is its own expert, no W13 slice is shared inside a group, and a group only sets how many experts a
 * wave's column blocks spread over. Half GEMM1's budget (G = 8 at H = 7,168, 16 at H = 4,096) put twice the
 * adjacent column blocks of half the experts in a wave and measured 0.6–1.7 % faster on the layer (session 47,
 * H100, paired A/B: deepseek-v3 and qwen3-235b-a22b and glm-4.5-air T = 512, kimi-k2 T = 2048), while at one tile per
 * expert (deepseek-v3 T = 2048) it lost 1 %: so up to 63 rows per expert. */
static const fp8moe_sm90_group_rule k_sm90_gemm1_sparse_group = {
    4 << 20, 8, 64, 63, "GEMM1 alternating items below one tile per expert: fewer experts per wave"};

const fp8moe_sm90_group_rule* fp8moe_cuda_plan_sm90_gemm1_sparse_group_rule(void) { return &k_sm90_gemm1_sparse_group; }

int32_t fp8moe_cuda_plan_sm90_gemm1_alt_group(int64_t k_bytes, int64_t routed_rows, int64_t experts, int32_t sparse) {
  return group_by_rows(&k_sm90_gemm1_sparse_group, k_bytes, routed_rows, experts, sparse);
}

int32_t fp8moe_cuda_plan_sm90_pair_group(int64_t k_bytes) { return fp8moe_cuda_plan_sm90_group(k_bytes) / 2; }

int32_t fp8moe_cuda_plan_sm90_cluster_pair_group(int64_t k_bytes) {
  const int32_t g = fp8moe_cuda_plan_sm90_pair_group(k_bytes) / 2 * 2;
  return g < 2 ? 2 : g;
}

/* The 128-row GEMM1's limits (kernels_internal.h): its pair list lives in shared memory, at most
 * FP8MOE_GEMM1_PAIR_MAX_TILES tiles of the 64-row layout (ceil(T·K / 64) + E_local: T·K ≤ ~508,000 routed rows
 * at E_local = 256) and FP8MOE_GEMM1_PAIR_MAX_EXPERTS experts. */
static int pair_tiles_ok(const fp8moe_problem* p) {
  const int64_t tk = p->T * (int64_t)p->K;
  const int64_t max_tiles = (tk + FP8MOE_GEMM_TILE_M_LARGE - 1) / FP8MOE_GEMM_TILE_M_LARGE + p->E_local;
  /* its gather addresses token rows with 32-bit row strides (quantized inputs: H) */
  const int stride_ok = !p->hidden_is_fp8 || p->hidden_states.strides[0] <= (int64_t)UINT32_MAX;
  return max_tiles <= FP8MOE_GEMM1_PAIR_MAX_TILES && p->E_local <= FP8MOE_GEMM1_PAIR_MAX_EXPERTS && stride_ok;
}

static int rows_aligned16(const fp8moe_view* v) {
  return ((uintptr_t)v->data % 16) == 0 && v->strides[0] % 16 == 0 && (v->ndim < 3 || v->strides[1] % 16 == 0);
}

/* The decode GEMMs load 16-byte pieces of weight rows (and of e4m3 hidden rows) straight into MMA fragments,
 * and stage one item's block scales in shared memory. */
static int decode_shapes_ok(const fp8moe_problem* p) {
  if (!rows_aligned16(&p->w13) || !rows_aligned16(&p->w2)) return 0;
  if (p->hidden_is_fp8 && !rows_aligned16(&p->hidden_states)) return 0;
  return p->geom.weight != FP8MOE_GRAN_BLOCK ||
         (p->H / p->geom.w_k <= FP8MOE_DECODE_MAX_KBLOCKS && p->I / p->geom.w_k <= FP8MOE_DECODE_MAX_KBLOCKS);
}

/* Measured on an H200 at T = 1–8 (docs/GPU.md "Size rules" has the numbers; "none" against "k"): the stream
 * pair wins on deepseek-v3, kimi-k2 and qwen3-235b-a22b (I ≥ 1,536, ≥ 128 GEMM2 units), ties on glm-4.5-air
 * T=1 (I = 1,408, 128 units: 1.3 µs behind) and mixtral-8x7b T ≤ 2 (32–64 units), and loses on qwen3-30b-a3b
 * (I = 768: 0.3–7.5 µs at every T ≤ 8) and llama4-scout T ≤ 4 (20–80 units: 22 µs at T = 1, its GEMM2 35
 * against 18 µs). The 128-row GEMM1 (none against "v" at T = 512–1536): wins from 64 rows per expert on every
 * shape, loses 3–14 % at 32 rows and on qwen3 at 48 on qwen3-30b-a3b, qwen3-235b-a22b and glm-4.5-air
 * (H ≤ 4,096; glm at 48 rows a tie), wins 8 % there on deepseek-v3 (H = 7,168). Against the alternating 64-row
 * items (2026-12-03, "v" against none; docs/GPU.md "Alternating 64-row items") the pairs lose up to 256 rows
 * per expert on qwen3-30b-a3b and glm-4.5-air (64 and 128 rows: layer +5 to +15 %), tie on mixtral-8x7b at 128,
 * and win from 256 (1–8 %); at H = 7,168 they lose at 32 and 64 rows (deepseek-v3 per-tensor +13 % and +7 %,
 * block +6 % and 0) and win at 128 in block scales (layer −3 %, GEMM1 −7 %; per-tensor +2 %). Session 33 (paired
 * A/B, "l" against none, 20 pairs, uniform, layer): at 128 rows per expert the pairs win where I is large —
 * mixtral-8x7b (I = 14,336) T = 512 −8.1 %, llama4-scout (I = 8,192) T = 2048 −7.9 %, both 20 of 20 pairs — and
 * not where it is small (qwen3-30b-a3b block +3.0 %, per-tensor −3.9 %; glm-4.5-air −0.8 %), so pairs_min_I.
 * Session 24 (2026-12-04, qwen3-30b-a3b, I = 768, none against "k", both routings): with 1×128 group
 * requantization the stream pair wins from T = 4 (256 GEMM2 units by the estimate; uniform T = 4 81.6 against
 * 85.2 µs, T = 8 109.1 against 114.9; skewed T = 4 52.4 against 53.2, T = 8 55.2 against 59.3), where the register
 * GEMM1 spends a fifth of its samples at its cluster barriers (ncu); at T = 2 (128 units) it wins uniform (53.8
 * against 58.5) but loses skewed (53.0 against 45.8: fewer experts hit, GEMM2 18 against 10 µs), so it needs 1.5×
 * the SMs in units there; per-tensor it ties or loses (T = 8 99.6 against 99.9, earlier 104 against 100), so the
 * I threshold stays 1,024 for the other requantizations. */
static const fp8moe_size_rule k_size_rule = {
    1024, 768, 6, 3, 256, 7168, 128, 8192,
    "the faster kernel of two that fit: stream pair and 128-row GEMM1 where they measured faster"};

const fp8moe_size_rule* fp8moe_cuda_plan_size_rule(void) { return &k_size_rule; }

/* The shard's expected share of the routed rows (T·K·E_local/E), each on its own expert at best: the experts
 * (16-row tiles) the stream GEMMs expect. */
static int64_t expected_active_experts(const fp8moe_problem* p) {
  const int64_t tk = p->T * (int64_t)p->K, local = (tk * p->E_local + p->E - 1) / p->E;
  return local < p->E_local ? local : p->E_local;
}

/* A stream GEMM's units per tile, as gemm_stream_sm90.cu cuts them: GEMM1 a 128-column group of I (its 128 gate
 * and 128 up rows: FP8MOE_STREAM_UNIT_ROWS weight rows), GEMM2 FP8MOE_STREAM_UNIT_ROWS output columns of H. */
static int64_t stream_units_per_tile(const fp8moe_problem* p, fp8moe_gemm_which gemm) {
  if (gemm == FP8MOE_GEMM1) return p->I / (FP8MOE_STREAM_UNIT_ROWS / 2);
  return (p->H + FP8MOE_STREAM_UNIT_ROWS - 1) / FP8MOE_STREAM_UNIT_ROWS;
}

static int stream_pays(const fp8moe_problem* p, int32_t sm_count) {
  const int64_t units = expected_active_experts(p) * stream_units_per_tile(p, FP8MOE_GEMM2);
  if (p->I >= k_size_rule.stream_min_I) return 4 * units >= (int64_t)k_size_rule.stream_units_per_4_sms * sm_count;
  return p->requant == FP8MOE_REQUANT_GROUP && p->I >= k_size_rule.stream_min_I_group &&
         4 * units >= (int64_t)k_size_rule.stream_units_per_4_sms_group * sm_count;
}

int32_t fp8moe_cuda_plan_stream_pairs(const fp8moe_problem* p, int32_t mode) {
  if (mode == 0 || p->T <= FP8MOE_GEMM_TILE_M_SMALL) return 0;
  return mode == 2 || (p->H >= FP8MOE_STREAM_PAIRS_MIN_H && p->E >= FP8MOE_STREAM_PAIRS_MIN_EXPERTS);
}

int32_t fp8moe_cuda_plan_stream_align(const fp8moe_problem* p, int32_t mode) {
  return mode != 0 && p->T > FP8MOE_GEMM_TILE_M_SMALL;
}

/* The split in rounds (kernels/gemm/stream_split.h, fp8moe_split_rounds) gives each taking CTA R whole entries, so
 * its time is about R entries' weights at one CTA's stream rate, whatever the device's DRAM bandwidth; stream-K over
 * the grid spreads the entries' units evenly and rides the bandwidth. On an H100 SXM (3.35 TB/s, 132 SMs: 25 GB/s per
 * SM) rounds won at kimi-k2 skewed T = 512 (−13 %, session 40); on an H200 (4.9 TB/s: 37 GB/s per SM) that point
 * went 2,606 → 3,039 µs from 7211a06 (no split) to 550d928 (rounds), while the H100 went 3,592 → 3,115 (session 59;
 * docs/GPU.md "Rounds and bandwidth"). Mode 1 ("B") keeps rounds up to 30 GB/s per SM (unknown bandwidth keeps
 * them); it stays opt-in until an H200 measures it against rounds everywhere (mode 2, the default). */
static const double k_stream_rounds_max_bytes_per_sm = 30e9;

int32_t fp8moe_cuda_plan_stream_rounds(int32_t mode, int32_t balanced, double dram_bytes_per_s, int32_t sm_count) {
  const int allowed = mode == 1 ? sm_count <= 0 || dram_bytes_per_s <= 0.0 ||
                                      dram_bytes_per_s <= k_stream_rounds_max_bytes_per_sm * sm_count
                                : mode != 0;
  return allowed ? 1 + (balanced < 0 ? 0 : balanced > 2 ? 2 : balanced) : 0;
}

int32_t fp8moe_cuda_plan_decode_dense(const fp8moe_problem* p, int32_t clusters, int32_t dense_clusters, int32_t mode) {
  if (mode == 0 || dense_clusters <= 0 || clusters <= 0) return 0;
  if (mode == 2) return 1;
  const int64_t items = expected_active_experts(p) * (p->I / FP8MOE_GEMM_TILE_N);
  const int64_t rounds = (items + clusters - 1) / clusters, dense = (items + dense_clusters - 1) / dense_clusters;
  return dense < rounds && dense <= FP8MOE_DECODE_DENSE_MAX_ROUNDS;
}

int32_t fp8moe_cuda_plan_sorted_x(const fp8moe_problem* p, int32_t mode) {
  return mode == 2 || (mode == 1 && p->K <= FP8MOE_SORTED_X_MAX_K &&
                       p->T * (int64_t)p->K >= (int64_t)FP8MOE_SORTED_X_MIN_ROWS * p->E);
}

int32_t fp8moe_cuda_plan_stream_handoff(const fp8moe_problem* p, fp8moe_gemm_which gemm, int32_t ctas) {
  const int64_t tk = p->T * (int64_t)p->K;
  return ctas > 0 && tk < (int64_t)FP8MOE_STREAM_HANDOFF_ROWS * p->E &&
         expected_active_experts(p) * stream_units_per_tile(p, gemm) >= (int64_t)FP8MOE_STREAM_HANDOFF_UNITS * ctas;
}

static int pairs_pay(const fp8moe_problem* p) {
  const int64_t tk = p->T * (int64_t)p->K;
  return tk >= k_size_rule.pairs_min_rows * p->E ||
         ((p->H >= k_size_rule.pairs_min_H || p->I >= k_size_rule.pairs_min_I) &&
          tk >= k_size_rule.pairs_min_rows_wide * p->E);
}

uint32_t fp8moe_cuda_plan_offers(const fp8moe_problem* p, uint32_t context_offers, int32_t sm_count) {
  uint32_t o = context_offers;
  const uint32_t register_pair = FP8MOE_PLAN_NEEDS_DECODE_GRIDS | FP8MOE_PLAN_NEEDS_DECODE_SHAPES;
  if (tma_ok(&p->w13)) o |= FP8MOE_PLAN_NEEDS_TMA_W13;
  if (tma_ok(&p->w2)) o |= FP8MOE_PLAN_NEEDS_TMA_W2;
  if (p->H % 256 == 0) o |= FP8MOE_PLAN_NEEDS_H256;
  if (decode_shapes_ok(p)) o |= FP8MOE_PLAN_NEEDS_DECODE_SHAPES;
  if (pair_tiles_ok(p)) o |= FP8MOE_PLAN_NEEDS_PAIR_TILES;
  /* without the register pair the next TINY row is mma.sync, slower than either */
  if (stream_pays(p, sm_count) || (o & register_pair) != register_pair) o |= FP8MOE_PLAN_NEEDS_STREAM_PAYS;
  if (pairs_pay(p)) o |= FP8MOE_PLAN_NEEDS_PAIRS_PAY;
  return o;
}

const fp8moe_plan_row* fp8moe_cuda_plan_pick(int32_t gemm, int32_t cc, const fp8moe_problem* p, uint32_t offers) {
  const int32_t regime = fp8moe_cuda_plan_regime(p), tile_m = fp8moe_cuda_plan_tile_m(cc, p);
  for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; ++i) {
    const fp8moe_plan_row* r = &k_rows[i];
    if (row_matches(r, gemm, cc, regime) && r->tile_m == tile_m && (r->needs & ~offers) == 0) return r;
  }
  return NULL;
}

/* The fused prologue's bounds, from its arithmetic (kernels/prologue.cu; docs/GPU.md "Small-T prologue"):
 * the routing cluster has 8 × 32 warps; at T ≤ 64 each routes at most one token on 8 warps per SM, so routing
 * costs one token's latency (~1 µs at E = 256: one memory round trip, ~1,100 warp instructions) instead of
 * T/4 tokens of issue time on one SM; block 0's warp 0 places T·K ≤ 512 slots in ≤ 16 steps of 32 (~0.05 µs
 * each, one dependent shared-memory read-modify-write per step); E ≤ 256 keeps 8 experts per lane in the 64
 * registers of a 1024-thread block. Past these the separate launches (one warp per token for routing, 1024
 * threads for the permutation, a block per token for the quantization) cost about the same and scale. */
/* The one-block variant up to T = 8, T·K = 64 (docs/GPU.md "Small-T prologue" has the arithmetic): there the
 * cluster's fixed cost (co-scheduling 8 blocks of 1024 threads, two cluster barriers, 256 warps started for
 * ≤ 8 tokens) buys nothing, since one SM routes 8 tokens about as fast as one: 8 routing warps, 2 per
 * scheduler, issue ~1,100 instructions each in ~1.1 µs, which hides under one warp's own dependent chain
 * (~2 µs) and the cold memory and instruction fetches; 64 slots are placed in 2 steps. */
/* The team (docs/GPU.md "Team routing"; H200, docs/PERFORMANCE.md session 25): past 256 experts it replaces the
 * separate launches (kimi-k2 T = 1 138.5 → 124.7 µs). At 33–256 experts the layer got longer (deepseek-v3 +2.5 µs,
 * qwen3-30b-a3b +0.5 to +1.5, glm-4.5-air +0.4): in place, with GEMM1 launched beside it, the team's prologue
 * completes ~2.8 µs after route_token's (a %globaltimer trace of GEMM1's wait), although alone it is faster; so
 * route_token keeps those, and FALLBACK 'a' (team_any_min_experts) measures them. One warp (E ≤ 32): the team's
 * ranks and barriers measured 0.4 µs slower than route_token's K rounds at mixtral-8x7b (E = 8, K = 2). */
static const fp8moe_prologue_rule k_prologue = {
    64, 512, 256, 8, 64, 512, 257, 512, 33,
    "small T: routing, slot list and input quantization in one launch, memsets folded in; one block at T ≤ 8 "
    "(up to 512 experts); one token of 257+ experts routed by a team of warps"};
_Static_assert(64 <= FP8MOE_PROLOGUE_MAX_TOKENS && 512 <= FP8MOE_PROLOGUE_MAX_ROWS &&
                   256 <= FP8MOE_PROLOGUE_MAX_EXPERTS && 8 <= FP8MOE_PROLOGUE_BLOCK_MAX_TOKENS &&
                   512 <= FP8MOE_PROLOGUE_BLOCK_MAX_EXPERTS && 512 <= FP8MOE_PROLOGUE_TEAM_MAX_EXPERTS,
               "the prologue rule stays inside the kernel's limits (kernels_internal.h)");

const fp8moe_prologue_rule* fp8moe_cuda_plan_prologue_rule(void) { return &k_prologue; }

uint32_t fp8moe_cuda_plan_context_prologue(void) {
  const char* off = getenv("FP8MOE_CUDA_GEMM_FALLBACK");
  if (off != NULL && strchr(off, 'p') != NULL) return FP8MOE_PROLOGUE_SEPARATE;
  if (off != NULL && strchr(off, 'c') != NULL) return FP8MOE_PROLOGUE_CLUSTER;
  const int team_off = off != NULL && (strchr(off, 't') != NULL || strchr(off, 'w') != NULL);
  const int team_any = off != NULL && strchr(off, 'a') != NULL;
  return FP8MOE_PROLOGUE_CLUSTER | FP8MOE_PROLOGUE_BLOCK |
         (team_off ? 0u : FP8MOE_PROLOGUE_TEAM | (team_any ? FP8MOE_PROLOGUE_TEAM_ANY : 0u));
}

/* FALLBACK 'w': the routing and slot-list instruction sequences before the critical-path rework (docs/GPU.md
 * "Routing's critical path"), the A/B switch; the same bits either way. */
int32_t fp8moe_cuda_plan_context_route_v1(void) {
  const char* off = getenv("FP8MOE_CUDA_GEMM_FALLBACK");
  return off != NULL && strchr(off, 'w') != NULL;
}

/* The filtered selection of DeepSeek-V3 routing (kernels/routing_filter.h; docs/GPU.md "Routing's critical path"): on
 * unless FALLBACK has 'f' (the A/B switch) or 'w' (the previous sequences); the same bits either way. */
int32_t fp8moe_cuda_plan_context_route_filtered(void) {
  const char* off = getenv("FP8MOE_CUDA_GEMM_FALLBACK");
  return off == NULL || (strchr(off, 'f') == NULL && strchr(off, 'w') == NULL);
}

/* The prologue's code warming (idle routing warps run route_token's later phases early; docs/GPU.md "Routing's
 * critical path"): on unless FALLBACK has 'x' (the A/B switch) or 'w' (the previous sequences, which had none). */
int32_t fp8moe_cuda_plan_context_route_warm(void) {
  const char* off = getenv("FP8MOE_CUDA_GEMM_FALLBACK");
  return off == NULL || (strchr(off, 'x') == NULL && strchr(off, 'w') == NULL);
}

int32_t fp8moe_cuda_plan_context_decode_dense(void) {
  const char* sw = getenv("FP8MOE_CUDA_GEMM_FALLBACK");
  if (sw == NULL) return 1;
  return strchr(sw, 'E') != NULL ? 0 : strchr(sw, 'D') != NULL ? 2 : 1;
}

int32_t fp8moe_cuda_plan_prologue_team(const fp8moe_problem* p, uint32_t context_prologue) {
  const fp8moe_prologue_rule* r = &k_prologue;
  const uint32_t need = FP8MOE_PROLOGUE_BLOCK | FP8MOE_PROLOGUE_TEAM;
  const int grouped = p->routing_method == FP8MOE_ROUTING_DEEPSEEK_V3 && p->n_group > 1 && p->topk_group < p->n_group;
  const int32_t min_experts = (context_prologue & FP8MOE_PROLOGUE_TEAM_ANY) ? r->team_any_min_experts
                                                                            : r->team_min_experts;
  return p->T == 1 && (context_prologue & need) == need && p->routing_method != FP8MOE_ROUTING_PRECOMPUTED &&
         p->E >= min_experts && p->E <= r->team_max_experts && p->K >= 1 && p->K <= 32 &&
         (!grouped || p->E == 32 * p->n_group);
}

uint32_t fp8moe_cuda_plan_prologue(const fp8moe_problem* p, uint32_t context_prologue) {
  const fp8moe_prologue_rule* r = &k_prologue;
  const int64_t rows = p->T * (int64_t)p->K;
  if (p->T < 1 || p->T > r->max_tokens || rows > r->max_rows) return FP8MOE_PROLOGUE_SEPARATE;
  const int block = (context_prologue & FP8MOE_PROLOGUE_BLOCK) && p->T <= r->block_max_tokens && rows <= r->block_max_rows;
  if (p->E > r->max_experts)
    return block && p->E <= r->block_max_experts && p->routing_method != FP8MOE_ROUTING_PRECOMPUTED
               ? FP8MOE_PROLOGUE_BLOCK
               : FP8MOE_PROLOGUE_SEPARATE;
  if (block) return FP8MOE_PROLOGUE_BLOCK;
  return context_prologue & FP8MOE_PROLOGUE_CLUSTER;
}

/* The chunked permutation's rule (kernels/permute_chunks.cu; docs/GPU.md "Permutation"). The one-block kernel
 * measured 30.6 µs at T·K = 16,384 (docs/PERFORMANCE.md), about 7 µs + 1.5 µs per 1,000 slots from
 * T·K = 1,024 up: every scattered store leaves one SM. The chunked path costs three launch boundaries
 * (≈ 1 µs each under programmatic dependent launch) plus ≈ 1.5 µs per launch at a few hundred slots per
 * block, about 7–8 µs at any T·K up to ~10^5: equal near T·K = 2,048, ahead from 4,096 (≈ 12 µs one-block).
 * 128 chunks is about one block per SM of an H200 (132 SMs), and at most 4 chunks per thread of the scan
 * blocks (one batch of loads); 65,536 counters (256 KiB) bound the counter slice and the scan's traffic at
 * large E_local. The scan measured 10.8–17 µs in its first, one-block form (docs/GPU.md "Permutation"). */
static const fp8moe_permute_rule k_permute = {
    4096, 128, 65536, "large T·K: many blocks count, scan and place chunks of slots"};

const fp8moe_permute_rule* fp8moe_cuda_plan_permute_rule(void) { return &k_permute; }

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

int32_t fp8moe_cuda_plan_permute_chunk(const fp8moe_problem* p) {
  const fp8moe_permute_rule* r = &k_permute;
  const int64_t tk = p->T * (int64_t)p->K, e = p->E_local > 0 ? p->E_local : 1;
  if (tk < r->min_rows) return 0;
  int64_t chunk = round_up((tk + r->target_chunks - 1) / r->target_chunks, FP8MOE_PERMUTE_CHUNK_ALIGN);
  const int64_t by_counters = round_up((tk * e + r->max_counters - 1) / r->max_counters, FP8MOE_PERMUTE_CHUNK_ALIGN);
  if (by_counters > chunk) chunk = by_counters;
  return (int32_t)(chunk < tk ? chunk : tk); /* below T·K for every E_local ≤ 2048; one chunk otherwise */
}

int fp8moe_cuda_plan_context_permute_chunks(void) {
  const char* off = getenv("FP8MOE_CUDA_GEMM_FALLBACK");
  return off == NULL || strchr(off, 's') == NULL;
}
