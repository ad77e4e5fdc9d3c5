/* quant_geometry_internal.h — what a quantization format means for the arithmetic: which elements share a
 * scale, for the activations and for the weights, and how GEMM1's output is requantized for GEMM2.
 * contract.c holds one geometry row per format (beside its public row); validation resolves it once into
 * fp8moe_problem.geom, and the CPU backend, the CUDA host and the workspace layouts read the geometry
 * instead of decoding the format id in each stage (docs/DESIGN.md, "Quantization geometry"). */
#ifndef FP8MOE_QUANT_GEOMETRY_INTERNAL_H
#define FP8MOE_QUANT_GEOMETRY_INTERNAL_H

#include <stdint.h>

/* Which elements share one scale. */
typedef enum fp8moe_scale_gran {
  FP8MOE_GRAN_TENSOR = 0, /* one scale for the whole tensor (weights: per expert matrix) */
  FP8MOE_GRAN_ROW = 1,    /* activations: one per token row; weights: one per output row */
  FP8MOE_GRAN_BLOCK = 2   /* activations: 1 x act_k groups; weights: w_n x w_k blocks */
} fp8moe_scale_gran;

/* How GEMM1's activated output becomes GEMM2's e4m3 input. */
typedef enum fp8moe_requant {
  FP8MOE_REQUANT_GROUP = 0,   /* dynamic scale per 1 x act_k group: tile-local, fused into GEMM1 */
  FP8MOE_REQUANT_STATIC = 1,  /* the caller's a2_scale: fused into GEMM1 */
  FP8MOE_REQUANT_TENSOR = 2,  /* dynamic per-tensor scale: needs the amax of every row (second pass) */
  FP8MOE_REQUANT_ROW = 3      /* dynamic per-row scale: the amax spans all of a row's column tiles */
} fp8moe_requant;

typedef struct fp8moe_quant_geometry {
  int32_t act;      /* fp8moe_scale_gran of the activations (hidden states and the intermediate) */
  int32_t act_k;    /* BLOCK: columns of one activation group; else 0 */
  int32_t weight;   /* fp8moe_scale_gran of the weights */
  int32_t w_n, w_k; /* BLOCK: output rows x input columns one weight scale covers; else 0 */
} fp8moe_quant_geometry;

/* The geometry of a format id of the contract table; NULL when the id is not in it. */
const fp8moe_quant_geometry* fp8moe_contract_quant_geometry(int32_t format_id);

/* Scales per row of `cols` activation columns: cols / act_k for BLOCK, 1 for ROW, 0 for TENSOR. */
static inline int64_t fp8moe_act_scales_per_row(const fp8moe_quant_geometry* g, int64_t cols) {
  return g->act == FP8MOE_GRAN_BLOCK ? cols / g->act_k : g->act == FP8MOE_GRAN_ROW ? 1 : 0;
}

/* The requantization of the intermediate: tile-local groups, the caller's static scale, or a dynamic scale
 * whose amax spans tiles. */
static inline int32_t fp8moe_requant_of(const fp8moe_quant_geometry* g, int32_t a2_static) {
  if (g->act == FP8MOE_GRAN_BLOCK) return FP8MOE_REQUANT_GROUP;
  if (g->act == FP8MOE_GRAN_ROW) return FP8MOE_REQUANT_ROW;
  return a2_static ? FP8MOE_REQUANT_STATIC : FP8MOE_REQUANT_TENSOR;
}

#endif /* FP8MOE_QUANT_GEOMETRY_INTERNAL_H */
