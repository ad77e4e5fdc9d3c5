/* gemm_decode_tma.h — launchers of the bulk-copy decode GEMMs (gemm_decode_tma.cu): the same grouped
 * GEMM1/GEMM2 for few rows per expert as gemm_decode.h (16-row tiles, swap-AB, same argument structs, same
 * buffers, same semantics, rows 8..15 of a tile with at most 8 real rows neither computed nor written), but
 * the weights reach the tensor cores through a shared-memory ring that one producer warp per CTA fills with
 * cp.async.bulk row copies. Chosen by the kernel plan's first TINY rows (src/cuda/cuda_plan.c); the
 * register-path kernels of gemm_decode.h stay as the next rows (FP8MOE_CUDA_GEMM_FALLBACK "t"). */
#ifndef FP8MOE_KERNELS_GEMM_DECODE_TMA_H
#define FP8MOE_KERNELS_GEMM_DECODE_TMA_H

#include "kernels_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CTAs per SM the kernels are built for (192 threads and ~101 KB of shared memory each). */
#define FP8MOE_DECODE_TMA_CTAS_PER_SM 2
/* Ring depth: slots of 32 weight rows × 512 K bytes (16 KB of weights each). Overridable at build time
 * (-DFP8MOE_DECODE_TMA_STAGES=3) for tuning on a GPU; more than 4 does not fit two CTAs per SM. */
#ifndef FP8MOE_DECODE_TMA_STAGES
#define FP8MOE_DECODE_TMA_STAGES 4
#endif

/* Once per device at context creation (not a stream operation): raises the kernels' shared-memory limit and
 * sizes the persistent grids so every CTA is resident (ctas1 a multiple of FP8MOE_DECODE_CLUSTER); 0 when a
 * query fails or nothing fits (the plan then keeps the register-path decode rows). */
int fp8moe_prepare_gemm_decode_tma(int32_t sm_count, int32_t* ctas1, int32_t* ctas2);

/* a->tile_m must be FP8MOE_GEMM_TILE_M_SMALL; a->max_ctas from fp8moe_prepare_gemm_decode_tma. */
int fp8moe_launch_gemm1_decode_tma(const fp8moe_gemm1_args* a, cudaStream_t stream);
/* a->sorted_slots as permute.cu wrote them (the kernel skips the padding half of a tile, as GEMM1 did). */
int fp8moe_launch_gemm2_decode_tma(const fp8moe_gemm2_args* a, cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FP8MOE_KERNELS_GEMM_DECODE_TMA_H */
