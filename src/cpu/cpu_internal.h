/* cpu_internal.h — the CPU backend's private state, its workspace layout and the pieces each phase of a
 * run uses (routing, quantization, expert FFN). All scratch lives in the caller's workspace, carved into
 * 64-byte aligned slices by fp8moe_cpu_layout_make, so run never allocates. */
#ifndef FP8MOE_CPU_INTERNAL_H
#define FP8MOE_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend_internal.h"
#include "error_internal.h"
#include "fp8moe.h"
#include "problem_internal.h"
#include "thread_pool.h"

#define FP8MOE_CPU_ALIGN 64
#define FP8MOE_CPU_MAX_THREADS 1024

typedef struct fp8moe_cpu_impl {
  fp8moe_pool* pool;
  int32_t num_threads;
  float e4m3_lut[256]; /* every e4m3fn code decoded, so GEMM inner loops are a load and a multiply */
  char device_name[FP8MOE_NAME_CAPACITY];
} fp8moe_cpu_impl;

/* Byte offsets into the workspace; every slice starts 64-byte aligned relative to the workspace start. */
typedef struct fp8moe_cpu_layout {
  size_t ids;          /* int32 [T,K]: selected global expert ids */
  size_t weights;      /* fp32 [T,K]: final routing weights (× routed_scaling_factor) */
  size_t xq;           /* e4m3 [T,H]: quantized input */
  size_t xscale;       /* fp32 [T,xscale_per_token] (or [1] per-tensor): its scales */
  size_t partial;      /* fp32 [num_threads]: per-thread amax of a reduction phase */
  size_t inter;        /* fp32 [T,K,I]: activations of every slot (dynamic per-tensor a2 only) */
  size_t scratch;      /* num_threads slices of scratch_stride bytes */
  size_t scratch_stride;
  size_t total;
  int64_t xscale_per_token; /* H/act_k (BLOCK), 1 (ROW), 0 (TENSOR: one scale at xscale) */
  int32_t two_phase;        /* GEMM2 needs the amax of all local intermediates first */
  /* offsets inside one thread's scratch slice */
  size_t s_logit, s_key, s_aux, s_group, s_valid; /* routing: E fp32 ×4, E int32 (K ≤ E) */
  size_t s_picked, s_gpicked;                       /* routing: E bytes ×2 */
  size_t s_xf;     /* fp32 [H]: the token's input row (fp32 before quantization, decoded fp8 after) */
  size_t s_h;      /* fp32 [2I]: GEMM1 output */
  size_t s_act;    /* fp32 [I]: activation (single-phase formats) */
  size_t s_aq;     /* e4m3 [I] */
  size_t s_ascale; /* fp32 [max(I/act_k,1)] */
  size_t s_af;     /* fp32 [I]: decoded a_q */
  size_t s_y;      /* fp32 [H]: GEMM2 output */
  size_t s_acc;    /* fp32 [H]: combine accumulator */
} fp8moe_cpu_layout;

void fp8moe_cpu_layout_make(const fp8moe_problem* p, int32_t num_threads, fp8moe_cpu_layout* l);

/* One thread's scratch, resolved to pointers. */
typedef struct fp8moe_cpu_scratch {
  float* logit;
  float* key;
  float* aux;
  float* group;
  int32_t* valid;
  uint8_t* picked;
  uint8_t* gpicked;
  float* xf;
  float* h;
  float* act;
  uint8_t* aq;
  float* ascale;
  float* af;
  float* y;
  float* acc;
} fp8moe_cpu_scratch;

void fp8moe_cpu_scratch_at(const fp8moe_cpu_layout* l, void* workspace, int32_t thread_index,
                           fp8moe_cpu_scratch* s);

/* ---- routing (cpu_routing.c) ---- */
/* PRECOMPUTED only: DATA_ERROR naming the first (in t, k order) id outside [0, E). Reads, never writes. */
int32_t fp8moe_cpu_check_topk_ids(const fp8moe_problem* p, fp8moe_err* err);
/* Routes token t: K global ids and final weights (× routed_scaling_factor) into ids/weights. */
void fp8moe_cpu_route_token(const fp8moe_problem* p, int64_t t, fp8moe_cpu_scratch* s, int32_t* ids,
                            float* weights);

/* ---- quantization (cpu_quant.c) ---- */
/* Max of |x| over the finite elements; 0 when there are none. */
float fp8moe_cpu_amax(const float* x, int64_t n);
/* max(amax / 448, FLT_MIN): the dynamic scale of a group. */
float fp8moe_cpu_dynamic_scale(float amax);
/* Quantizes one row of n values per the activation geometry: TENSOR with the given scale (scales[0] = it);
 * BLOCK one dynamic scale per act_k values; ROW one dynamic scale for the row. */
void fp8moe_cpu_quant_row(const fp8moe_quant_geometry* g, const float* x, int64_t n, float tensor_scale, uint8_t* q,
                          float* scales);
/* Reads n elements of a bf16/fp16/fp32 (or e4m3) view starting at element offset off, step stride. */
void fp8moe_cpu_read_row(const fp8moe_view* v, int64_t off, int64_t stride, int64_t n, float* dst);
/* Rounds n fp32 values once into out's dtype at element offset off, step stride. */
void fp8moe_cpu_write_row(const fp8moe_view* out, int64_t off, int64_t stride, int64_t n, const float* src);

/* ---- expert FFN (cpu_expert.c) ---- */
/* y[n] = dequantized Σ_k x[k]·W[e,n,k] for n in [0,N) per the format's geometry, where x holds fp8
 * values (decoded, unscaled) of length K and xs their scales (1, K/act_k or 1 entries). W is the e4m3 view
 * [E_l,N,K] with scales ws per the weight geometry; e is the local expert. */
void fp8moe_cpu_gemm(const fp8moe_quant_geometry* g, const float* lut, const float* x, const float* xs, int64_t K,
                     const fp8moe_view* w, const fp8moe_view* ws, int32_t e, int64_t N, float* y);
/* a[i] = act(gate[i]) · up[i] for i in [0,I), gate/up halves of h per gate_up_order. */
void fp8moe_cpu_activate(int32_t activation, int32_t gate_up_order, const float* h, int64_t I, float* a);

#endif /* FP8MOE_CPU_INTERNAL_H */
