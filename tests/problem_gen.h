/* problem_gen.h — random MoE problems for the end-to-end suites: fresh, non-zero random data, weights,
 * scales and logits in the dtypes and layouts a configuration asks for, described twice from the same
 * buffers — as fp8moe_moe_args for the plugin and as a ref_problem for the float64 reference.
 * Poisoning lives here too, since it needs the buffers' layouts; running and checking are in e2e_check.h. */
#ifndef FP8MOE_TEST_PROBLEM_GEN_H
#define FP8MOE_TEST_PROBLEM_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "fp8moe.h"
#include "plugin_host.h"
#include "ref64.h"

/* Deterministic generator (splitmix64); state lives with its user, never in a global. */
typedef struct pg_rng {
  uint64_t s;
} pg_rng;
uint64_t pg_next(pg_rng* r);
double pg_uniform(pg_rng* r, double lo, double hi); /* [lo, hi) */

/* Router-logit layouts. */
#define PG_LOGITS_COMPACT 0    /* [T,E] row-major */
#define PG_LOGITS_PADDED 1     /* row stride E + pad (a slice of a wider buffer) */
#define PG_LOGITS_TRANSPOSED 2 /* stored [E,T]: strides {1, T} */

typedef struct pg_config {
  int32_t routing_method, quant_format, activation, gate_up_order;
  uint32_t flags;        /* FP8MOE_FLAG_* passed to run */
  int32_t weight_on_input; /* what the reference must do: LLAMA4, or FLAG_WEIGHT_ON_INPUT */
  int64_t T, H, I;
  int32_t E, K, n_group, topk_group;
  int32_t E_local, local_offset; /* E_local 0 = all */
  float routed_scaling_factor;   /* 0 = default (1.0) */
  fp8moe_dtype logits_dtype, bias_dtype, hidden_dtype, output_dtype, scale_dtype;
  fp8moe_dtype ids_dtype, topk_weights_dtype; /* PRECOMPUTED */
  int32_t uses_logits, uses_bias, uses_topk_input; /* from the routing method's flags */
  int32_t a1_static, a2_static;  /* PER_TENSOR: give a1_scale / a2_scale */
  int32_t logits_layout;         /* PG_LOGITS_* */
  int32_t hidden_scale_transposed; /* BLOCK128 with fp8 hidden: scales stored [H/128,T] */
  int32_t want_routing_out;      /* pass routing_ids_out / routing_weights_out */
  int32_t output_row_pad;        /* output row stride H + this (a slice of a wider buffer); 0: compact */
  int32_t alt_scale_shapes;      /* the other accepted scalar/row shapes: hidden_scale [] (PER_TENSOR) or
                                    [T,1] (PER_CHANNEL) instead of [1] / [T]; a1_scale [1], a2_scale [] */
  uint64_t seed;
} pg_config;

/* Every buffer and descriptor of one problem. Buffers are owned (pg_free). */
typedef struct pg_problem {
  pg_config cfg;
  void *hidden, *hidden_scale, *logits, *bias, *topk_ids, *topk_weights;
  void *w13, *w13_scale, *w2, *w2_scale, *a1_scale, *a2_scale;
  void* output;
  int32_t* ids_out;
  float* weights_out;
  size_t output_bytes;
  test_tensor t_hidden, t_hidden_scale, t_logits, t_bias, t_ids, t_tw, t_w13, t_w13s, t_w2, t_w2s, t_a1, t_a2;
  test_tensor t_out, t_ids_out, t_w_out;
  fp8moe_moe_args args;
  ref_problem ref;
  char error[512];
} pg_problem;

/* A configuration with the sizes given and every other field at its plain default (bf16 hidden, fp32
 * logits/scales/output, dynamic scales, gate first). The method's flags are derived from its id. */
void pg_config_init(pg_config* c, int32_t method, int32_t format, int64_t T, int64_t H, int64_t I, int32_t E,
                    int32_t K);
/* Generates random data for c into p (0 on success). Static a1/a2 scales are chosen from the data (a2 by a
 * reference pass), so some values land near the top of the fp8 range without most saturating. */
int pg_generate(pg_problem* p, const pg_config* c);
/* Rebuilds args/tensors/ref from p's buffers and cfg (call after editing buffers or cfg by hand). */
void pg_describe(pg_problem* p);
void pg_free(pg_problem* p);

/* Element access to p's own buffers (for edits by the suites). */
void pg_set(void* data, fp8moe_dtype dt, int64_t i, double x);
double pg_get(const void* data, fp8moe_dtype dt, int64_t i);
ref_dt pg_ref_dt(fp8moe_dtype dt);
const char* pg_dtype_name(fp8moe_dtype dt);

/* Fills output, ids_out and weights_out with poison (all-ones bytes: a NaN no computation produces). */
void pg_poison(pg_problem* p);
/* 1 when output still holds the poison everywhere (a refused call must leave it so). */
int pg_output_untouched(const pg_problem* p);
/* Output element i (row-major over [T,H], whatever the row stride) as double. */
double pg_output_at(const pg_problem* p, int64_t i);
/* 1 when output element i holds the poison bit pattern. */
int pg_output_is_poison(const pg_problem* p, int64_t i);
/* One line describing the configuration, for failure and progress messages. */
void pg_describe_config(const pg_config* c, char* buf, size_t size);

#endif /* FP8MOE_TEST_PROBLEM_GEN_H */
