/* cuda_layout.c — the CUDA backend's workspace layout, a pure function of the problem's sizes and
 * formats (never of tensor data), so query_workspace and run agree. The row count bounds the padded
 * expert-sorted rows for any routing: Σ_e ceil(n_e / tile_m)·tile_m ≤ T·K + E_local·(tile_m − 1). The tile
 * height follows the average rows per expert, T·K/E: below 16 (below 32 without the wgmma kernels), 64-row
 * tiles would be mostly padding (and the MMAs on it are the cost at decode), so 16-row tiles are used; the
 * kernel plan (cuda_plan.c) owns that choice, and the chunk size of the permutation at large T·K (its
 * per-chunk counters). y is per slot (T·K rows of H bf16), not per padded row. */
#include "cuda_internal.h"
#include "cuda_plan.h"
#include "kernels_internal.h"

_Static_assert(FP8MOE_CUDA_S_WORDS <= FP8MOE_PROLOGUE_BLOCK_THREADS,
               "the prologue's block 0 zeroes the scalar words with one store per thread");

static size_t take(size_t* cursor, size_t bytes) {
  size_t at = *cursor;
  *cursor += (bytes + FP8MOE_CUDA_ALIGN - 1) / FP8MOE_CUDA_ALIGN * FP8MOE_CUDA_ALIGN;
  return at;
}

void fp8moe_cuda_layout_make(const fp8moe_problem* p, int32_t cc, fp8moe_cuda_layout* l) {
  const size_t TK = (size_t)p->T * (size_t)p->K;
  const size_t H = (size_t)p->H, I = (size_t)p->I;
  l->tile_m = fp8moe_cuda_plan_tile_m(cc, p);
  l->max_tiles = (int64_t)((TK + (size_t)l->tile_m - 1) / (size_t)l->tile_m) + p->E_local;
  l->rows = l->max_tiles * l->tile_m;
  const size_t rows = (size_t)l->rows;
  /* Scale arrays per the format's geometry (quant_geometry_internal.h); per-tensor scales live in the scalars. */
  const size_t xs_per_row = (size_t)fp8moe_act_scales_per_row(&p->geom, p->H);
  const size_t a2s_per_row = (size_t)fp8moe_act_scales_per_row(&p->geom, p->I);
  size_t c = 0;
  l->scalars = take(&c, FP8MOE_CUDA_S_WORDS * 4);
  l->ids = take(&c, TK * 4);
  l->weights = take(&c, TK * 4);
  l->slot_row = take(&c, TK * 4);
  l->sorted_slots = take(&c, rows * 4);
  l->tile_expert = take(&c, (size_t)l->max_tiles * 4);
  l->permute_chunk = fp8moe_cuda_plan_permute_chunk(p);
  l->chunk_counts = 0;
  if (l->permute_chunk > 0)
    l->chunk_counts = take(&c, ((TK + (size_t)l->permute_chunk - 1) / (size_t)l->permute_chunk + 1) * (size_t)p->E_local * 4);
  l->xq = p->hidden_is_fp8 ? 0 : take(&c, (size_t)p->T * H);
  l->xs = 0;
  if (!p->hidden_is_fp8 && xs_per_row) l->xs = take(&c, (size_t)p->T * xs_per_row * 4);
  l->a2q = take(&c, rows * I);
  l->a2s = 0;
  if (a2s_per_row) l->a2s = take(&c, rows * a2s_per_row * 4);
  const int deferred = p->requant == FP8MOE_REQUANT_TENSOR || p->requant == FP8MOE_REQUANT_ROW;
  l->inter = deferred ? take(&c, rows * I * 4) : 0;
  l->row_amax_bytes = p->requant == FP8MOE_REQUANT_ROW ? rows * 4 : 0;
  l->row_amax = l->row_amax_bytes ? take(&c, l->row_amax_bytes) : 0;
  l->y = take(&c, TK * H * 2); /* bf16 slot outputs, one row per slot (docs/GPU.md "Workspace") */
  /* GEMM1's expert-sorted activations share y's bytes where they fit (rows ≤ 2·T·K: from ~64 rows per expert) */
  l->xq_sorted = !p->hidden_is_fp8 && rows * H <= TK * H * 2 ? l->y : 0;
  /* The stream GEMMs' split units: two partial tiles per CTA (docs/GPU.md "Weight-streaming decode GEMMs"). */
  l->stream_partials = fp8moe_cuda_plan_stream_workspace(cc, p)
                           ? take(&c, (size_t)FP8MOE_STREAM_MAX_CTAS * 2 * FP8MOE_STREAM_PARTIAL_FLOATS * 4)
                           : 0;
  l->total = c;
}
