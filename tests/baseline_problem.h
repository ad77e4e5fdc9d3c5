/* baseline_problem.h — the valid moe_args the contract tests start from and break one field at a time: a
 * configuration, the tensor descriptors it implies (DESIGN "Arguments and defaults"), and the CPU context and
 * 256-aligned buffers those tests run against. Where the tensor data comes from is the caller's: real,
 * filled buffers for run, dummy pointers for query_support. */
#ifndef FP8MOE_TEST_BASELINE_PROBLEM_H
#define FP8MOE_TEST_BASELINE_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "fp8moe.h"
#include "plugin_host.h"

typedef struct baseline_config {
  int32_t method, format, activation;
  int64_t T, H, I;
  int32_t E, K, E_local, n_group, topk_group; /* E_local 0: all E experts are local */
  fp8moe_dtype hidden_dt;
  int32_t hidden_scale_ndim; /* -1: the format's first form; PER_CHANNEL 2: [T,1]; PER_TENSOR 1: [1] */
  int32_t with_bias, with_static_scales;
  int32_t with_outputs; /* routing_ids_out, routing_weights_out and device_status (output is always there) */
} baseline_config;

typedef struct baseline_problem {
  baseline_config c; /* what it was built from */
  fp8moe_moe_args args;
  char message[512];
  test_tensor t[FP8MOE_ARG_COUNT_V1_0]; /* indexed by FP8MOE_ARG_* */
} baseline_problem;

/* Gives the data pointer for argument `arg`, about to be described as n elements of dt (p->c is set). */
typedef void* (*baseline_data_fn)(const baseline_problem* p, int32_t arg, fp8moe_dtype dt, int64_t n);

/* RENORMALIZE, FP8_BLOCK128, SWIGLU; T 4, H 256, I 128, E 8, K 2, one group; bf16 hidden; all outputs. */
baseline_config baseline_config_default(void);

/* Describes argument `arg` as compact [shape] of dt over data(p, arg, dt, elements), without attaching it
 * to p->args. */
void baseline_set(baseline_problem* p, int32_t arg, fp8moe_dtype dt, int32_t ndim, const int64_t* shape,
                  baseline_data_fn data);

/* Zeroes p and builds the valid call c describes; every tensor gets its data from data(). Arguments the
 * call must not have stay NULL in p->args, though hidden_scale is described for every format. No workspace. */
void baseline_build(baseline_problem* p, const baseline_config* c, baseline_data_fn data);

/* context_create for the CPU backend with num_threads; returns its status. */
int32_t baseline_cpu_context(const fp8moe_api* api, int32_t num_threads, fp8moe_context** ctx);

/* aligned_alloc(256, ...) of at least `bytes`, the size rounded up to 256 as aligned_alloc requires. */
void* baseline_alloc256(size_t bytes);

/* A 256-aligned workspace for a call that needs `need` bytes: `need` rounded up to 256, plus 256 bytes of
 * slack. *size (when not NULL) gets the allocated size. NULL when out of memory. */
void* baseline_workspace(size_t need, size_t* size);

/* The call p describes, run on ctx with a workspace of query_workspace's size attached to p->args (*ws gets it; the
 * caller frees it, also where a call fails). Returns query_workspace's status where that fails, else run's. */
int32_t baseline_run_with_workspace(const fp8moe_api* api, fp8moe_context* ctx, baseline_problem* p, void** ws);

#endif /* FP8MOE_TEST_BASELINE_PROBLEM_H */
