/* problem_internal.h — one MoE call after validation: every size resolved, every tensor a view, every
 * default applied. Validation (validate.c) is the only producer; backends are the consumers and may
 * assume everything here was checked against the contract table. */
#ifndef FP8MOE_PROBLEM_INTERNAL_H
#define FP8MOE_PROBLEM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "quant_geometry_internal.h"
#include "tensor_internal.h"

typedef struct fp8moe_problem {
  /* sizes */
  int64_t T;              /* tokens (0 is valid) */
  int64_t H;              /* hidden */
  int64_t I;              /* intermediate (W13 has 2I rows) */
  int32_t E;              /* experts in the model */
  int32_t E_local;        /* experts this call owns */
  int32_t local_offset;   /* first owned global expert id */
  int32_t K;              /* experts per token */

  /* what to compute */
  int32_t routing_method; /* FP8MOE_ROUTING_* */
  int32_t quant_format;   /* FP8MOE_QUANT_* (backends read geom and requant instead) */
  fp8moe_quant_geometry geom; /* the format's scale geometry */
  int32_t requant;        /* fp8moe_requant: how the intermediate is requantized for GEMM2 */
  int32_t activation;     /* FP8MOE_ACTIVATION_* */
  int32_t gate_up_order;  /* FP8MOE_GATE_UP_* */
  int32_t n_group;        /* DEEPSEEK_V3 only; 1 for other methods */
  int32_t topk_group;     /* DEEPSEEK_V3 only; 1 for other methods */
  float routed_scaling_factor; /* default applied (never 0) */
  int32_t weight_on_input;     /* 1: weight multiplies the input (LLAMA4, or FLAG_WEIGHT_ON_INPUT with K=1) */
  int32_t hidden_is_fp8;       /* 1: hidden_states are e4m3fn with hidden_scale; no input quantization */
  int32_t a1_static;           /* PER_TENSOR with a1_scale given */
  int32_t a2_static;           /* PER_TENSOR with a2_scale given */

  /* tensors (dt == FP8MOE_DT_NONE when absent) */
  fp8moe_view hidden_states;   /* [T,H] */
  fp8moe_view hidden_scale;    /* see fp8moe.h */
  fp8moe_view router_logits;   /* [T,E] */
  fp8moe_view routing_bias;    /* [E] */
  fp8moe_view topk_ids;        /* [T,K] */
  fp8moe_view topk_weights;    /* [T,K] */
  fp8moe_view w13;             /* [E_l,2I,H] */
  fp8moe_view w13_scale;
  fp8moe_view w2;              /* [E_l,H,I] */
  fp8moe_view w2_scale;
  fp8moe_view a1_scale;        /* scalar, ndim 0 or [1] */
  fp8moe_view a2_scale;
  fp8moe_view output;          /* [T,H] */
  fp8moe_view routing_ids_out;     /* [T,K] int32 */
  fp8moe_view routing_weights_out; /* [T,K] fp32 */
  fp8moe_view device_status;       /* [1] int32 */

  void* workspace;
  size_t workspace_size;
  void* stream;
} fp8moe_problem;

#endif /* FP8MOE_PROBLEM_INTERNAL_H */
