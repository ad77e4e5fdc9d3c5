/* gemm_stream.h — launchers of the weight-streaming decode GEMMs for sm_90a (gemm/gemm_stream_sm90.cu): the
 * grouped GEMM1/GEMM2 for tiles of 16 expert-sorted rows holding 1–16 real tokens, one persistent CTA per SM
 * streaming the weights by TMA through a deep shared-memory ring into swap-AB wgmma (weights as A, tokens
 * as B, N = 8 or 16, or 32 where a unit takes two tiles of one expert: stream_pairs), the (unit, K block) iterations split evenly over the grid (stream-K) with a
 * deterministic fixup of split units through a workspace slice. Same argument structs, buffers and
 * semantics as the register path (gemm_decode.h), including that rows 8..15 of a tile with at most 8 real
 * rows are neither computed nor written. Chosen by the kernel plan's stream rows (src/cuda/cuda_plan.c) on
 * compute capability 9.0 only. */
#ifndef FP8MOE_KERNELS_GEMM_STREAM_H
#define FP8MOE_KERNELS_GEMM_STREAM_H

#include "kernels_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Once per device at context creation: raises the kernels' shared-memory limit and sets *ctas to the grid of
 * both kernels (one CTA per SM, at most FP8MOE_STREAM_MAX_CTAS), 0 when they do not fit (never an error). */
int fp8moe_prepare_gemm_stream(int32_t sm_count, int32_t* ctas);

/* Both need tile_m FP8MOE_GEMM_TILE_M_SMALL, a->tma_encode, TMA-able weights (16-byte aligned, strides
 * multiples of 16), 16-byte aligned x rows (GEMM1), 1 ≤ max_ctas ≤ FP8MOE_STREAM_MAX_CTAS, and the fixup's
 * workspace (stream_partials, stream_counters: the counters zero when the kernel starts; each kernel leaves
 * them zero). Otherwise cudaErrorInvalidValue, nothing launched. */
int fp8moe_launch_gemm1_stream(const fp8moe_gemm1_args* a, cudaStream_t stream);
int fp8moe_launch_gemm2_stream(const fp8moe_gemm2_args* a, cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FP8MOE_KERNELS_GEMM_STREAM_H */
