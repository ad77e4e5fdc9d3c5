/* gemm_decode.h — launchers of the decode GEMMs (gemm_decode.cu): the grouped GEMM1/GEMM2 for few rows per
 * expert (16-row tiles), which stream the weights straight from HBM into MMA fragments (swap-AB: weight rows
 * are the MMA's M, the tile's tokens its N). They take the same argument structs as gemm1.cu / gemm2.cu and
 * produce the same buffers with the same dequantization, activation and requantization semantics, except
 * that rows of a tile's upper half (rows 8..15) are neither computed nor written when the tile holds at most
 * 8 real rows (those rows are padding; nothing downstream reads them). Chosen by the kernel plan's TINY
 * rows (src/cuda/cuda_plan.c). */
#ifndef FP8MOE_KERNELS_GEMM_DECODE_H
#define FP8MOE_KERNELS_GEMM_DECODE_H

#include "kernels_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CTAs per SM the decode kernels are built for (128 threads each, __launch_bounds__); the grids come from
 * fp8moe_prepare_gemm_decode. GEMM1 has a dense variant at 4 (128 registers) for the problems where the more
 * resident clusters save a round (fp8moe_cuda_plan_decode_dense; docs/GPU.md "Denser decode GEMM1"): its clusters
 * of 8 pack by GPC, so at 3 per SM a 132-SM H100 holds ~45 and qwen3-30b-a3b T = 1's 48 items ran in two rounds. */
#define FP8MOE_DECODE_GEMM1_CTAS_PER_SM 3
#define FP8MOE_DECODE_GEMM1_DENSE_CTAS_PER_SM 4
#define FP8MOE_DECODE_GEMM2_CTAS_PER_SM 3
/* GEMM1 CTAs form clusters of this many, one 128-column requantization group per cluster (16 columns per
 * CTA), so max_ctas is rounded down to a multiple of it. */
#define FP8MOE_DECODE_CLUSTER 8

/* Block scaling: the K dimension of either GEMM (H, I) may hold at most this many 128-wide blocks (the item's
 * scales are staged in shared memory). */
#define FP8MOE_DECODE_MAX_KBLOCKS 128

/* Once per device at context creation (not a stream operation): the persistent grid sizes, in CTAs, that
 * are resident all at once (ctas1 for GEMM1 and ctas1_dense for its dense variant, multiples of
 * FP8MOE_DECODE_CLUSTER; ctas2 for GEMM2); 0 when none fits. The host passes them as max_ctas. */
int fp8moe_prepare_gemm_decode(int32_t sm_count, int32_t* ctas1, int32_t* ctas1_dense, int32_t* ctas2);

/* a->tile_m must be FP8MOE_GEMM_TILE_M_SMALL; a->decode_dense picks the dense variant (max_ctas then its grid). */
int fp8moe_launch_gemm1_decode(const fp8moe_gemm1_args* a, cudaStream_t stream);
/* sorted_slots as permute.cu wrote them (the kernel skips the padding half of a tile, as GEMM1 did). */
int fp8moe_launch_gemm2_decode(const fp8moe_gemm2_args* a, const int32_t* sorted_slots, cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FP8MOE_KERNELS_GEMM_DECODE_H */
