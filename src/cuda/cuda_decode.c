/* cuda_decode.c — when the grouped GEMMs run as the decode kernels (kernels/gemm_decode.cu): weight
 * streaming with swap-AB, for few rows per expert. The choice follows the tile height the layout picked
 * from the rows per expert (16-row tiles: experts average fewer than 32 rows, docs/GPU.md), never T by
 * itself, plus the shapes those kernels take: 16-byte aligned weight rows, and with block scaling at most
 * FP8MOE_DECODE_MAX_KBLOCKS scale blocks along either K, on a device where their grids fit. */
#include <stdint.h>

#include "cuda_internal.h"
#include "gemm_decode.h"

static int aligned16(const fp8moe_view* w) {
  return ((uintptr_t)w->data % 16) == 0 && w->strides[0] % 16 == 0 && w->strides[1] % 16 == 0;
}

int fp8moe_cuda_use_decode_gemm(const fp8moe_cuda_impl* impl, const fp8moe_problem* p, const fp8moe_cuda_layout* l) {
#ifdef FP8MOE_NO_DECODE_GEMM /* bisecting build: the tile GEMMs everywhere */
  return 0;
#endif
  if (l->tile_m != FP8MOE_GEMM_TILE_M_SMALL) return 0;
  if (impl->decode_ctas1 <= 0 || impl->decode_ctas2 <= 0) return 0;
  if (!aligned16(&p->w13) || !aligned16(&p->w2)) return 0;
  if (p->hidden_is_fp8 && (((uintptr_t)p->hidden_states.data % 16) != 0 || p->hidden_states.strides[0] % 16 != 0))
    return 0;
  if (p->quant_format == FP8MOE_QUANT_FP8_BLOCK128 &&
      (p->H / 128 > FP8MOE_DECODE_MAX_KBLOCKS || p->I / 128 > FP8MOE_DECODE_MAX_KBLOCKS))
    return 0;
  return 1;
}
