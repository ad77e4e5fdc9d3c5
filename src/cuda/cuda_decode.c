/* cuda_decode.c — when the grouped GEMMs run as the decode kernels (kernels/gemm_decode.cu): weight
 * streaming with swap-AB, for few rows per expert. The choice follows the rows per expert (T·K/E), never
 * T by itself, plus the shapes those kernels take: 16-byte aligned weight rows, and with block scaling at most
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
  /* At most half a row per expert on average (2·T·K ≤ E). Measured on an H200 (fp8moe-bench, cold L2,
   * uniform routing): the decode kernels win at 0.03–0.5 rows per expert (deepseek-v3 T=8 592 µs against
   * 653, qwen3-30b-a3b T=1/8 49.5/122 against 56.5/132, mixtral-8x7b T=1 129 against 163) and lose from
   * about one row per expert (deepseek-v3 T=32 1595 against 1296, T=128 2590 against 1847; mixtral-8x7b
   * T=8, two rows, was a 4 % win). Why GEMM1 slows from 3.5 to 2.5 TB/s there is not measured yet
   * (docs/GPU.md, decode GEMMs). */
  if (2 * p->T * (int64_t)p->K > (int64_t)p->E) return 0;
  if (impl->decode_ctas1 <= 0 || impl->decode_ctas2 <= 0) return 0;
  if (!aligned16(&p->w13) || !aligned16(&p->w2)) return 0;
  if (p->hidden_is_fp8 && (((uintptr_t)p->hidden_states.data % 16) != 0 || p->hidden_states.strides[0] % 16 != 0))
    return 0;
  if (p->quant_format == FP8MOE_QUANT_FP8_BLOCK128 &&
      (p->H / 128 > FP8MOE_DECODE_MAX_KBLOCKS || p->I / 128 > FP8MOE_DECODE_MAX_KBLOCKS))
    return 0;
  return 1;
}
