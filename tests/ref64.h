/* ref64.h — the independent float64 reference of one MoE layer (docs/DESIGN.md "The computation" and
 * "Routing"), written from the documents alone: it includes nothing from src/ and shares no code with the
 * library. It mirrors every fp8 rounding step (scales computed in fp32 as DESIGN.md says, so the same fp8
 * codes result) and does everything else — sums, activation, routing, combine — in double.
 * Used by the CPU end-to-end suites and, through the fp8moe_test_ref library, by the GPU suites. */
#ifndef FP8MOE_TEST_REF64_H
#define FP8MOE_TEST_REF64_H

#include <stddef.h>
#include <stdint.h>

/* ---- number formats, rounded in double from first principles ---- */
typedef enum ref_dt { REF_NONE = 0, REF_F32, REF_BF16, REF_F16, REF_E4M3, REF_I32, REF_I64 } ref_dt;

int ref_dt_size(ref_dt dt);
const char* ref_dt_name(ref_dt dt);

/* x rounded to nearest-even e4m3fn: saturates to ±448 (±Inf too), NaN → 0x7F, -0 and tiny negatives keep
 * the sign bit. */
uint8_t ref_encode_e4m3(double x);
double ref_decode_e4m3(uint8_t code); /* 0x7F/0xFF → NaN */
/* x rounded to nearest-even bf16 / binary16; overflow → ±Inf; NaN → 0x7FFF. */
uint16_t ref_encode_bf16(double x);
double ref_decode_bf16(uint16_t bits);
uint16_t ref_encode_f16(double x);
double ref_decode_f16(uint16_t bits);
/* Stores x (rounded to dt) at element i of data / reads element i as double. */
void ref_store(void* data, ref_dt dt, int64_t i, double x);
double ref_load(const void* data, ref_dt dt, int64_t i);

/* ---- a problem, as the host describes it ---- */
typedef struct ref_array {
  const void* data; /* NULL when absent */
  ref_dt dt;
  int32_t ndim;
  int64_t shape[4];
  int64_t strides[4]; /* in elements, always explicit */
} ref_array;

/* Element (i0, i1, i2) of a (indices past ndim are ignored), as double. */
double ref_get(const ref_array* a, int64_t i0, int64_t i1, int64_t i2);

/* Routing method / format / activation / gate-up ids are the ABI's values (FP8MOE_ROUTING_* …). */
typedef struct ref_problem {
  int64_t T, H, I;
  int32_t E, E_local, local_offset, K;
  int32_t routing_method, quant_format, activation, gate_up_order;
  int32_t n_group, topk_group;
  double routed_scaling_factor; /* default already applied */
  int32_t weight_on_input;      /* LLAMA4, or FLAG_WEIGHT_ON_INPUT with K = 1 */
  ref_array hidden;             /* [T,H] bf16/fp16, or e4m3 with hidden_scale */
  ref_array hidden_scale;
  ref_array logits;        /* [T,E] */
  ref_array bias;          /* [E] or absent */
  ref_array topk_ids;      /* PRECOMPUTED [T,K] */
  ref_array topk_weights;  /* PRECOMPUTED [T,K] */
  ref_array w13, w13_scale, w2, w2_scale;
  ref_array a1_scale, a2_scale; /* absent = dynamic */
} ref_problem;

/* Aggregates a forward pass can report (used to choose static scales that fit the data). */
typedef struct ref_stats {
  double a1_amax; /* over the finite fp32 GEMM1 inputs that are quantized by the plugin */
  double a2_amax; /* over the finite fp32 intermediates of all local rows */
} ref_stats;

/* Returns 0, or -1 with a reason in why when the reference has no model of the problem (an unknown
 * routing method, format or activation: a new table row needs its reference before it can pass). */
int ref_supported(const ref_problem* p, char* why, size_t why_size);

/* Selection key of expert e for token t, in double (−Inf when unselectable or masked by its group). */
double ref_key(const ref_problem* p, int64_t t, int32_t e);
/* DEEPSEEK_V3 group score of group g for token t (sum of its two largest keys). */
double ref_group_score(const ref_problem* p, int64_t t, int32_t g);
/* Selects token t's K experts (ids[K], descending key, ties → lower index, unselectable fillers last). */
void ref_select(const ref_problem* p, int64_t t, int32_t* ids);
/* Final weights of the selection ids[K] of token t (scaling factor applied; 0 for unselectable ids). */
void ref_weigh(const ref_problem* p, int64_t t, const int32_t* ids, double* w);
/* All tokens: ids[T*K], w[T*K]. */
void ref_route(const ref_problem* p, int32_t* ids, double* w);

/* 1 when ids[K] is an acceptable selection for token t up to near-ties: every selected key is within
 * tol_ulps fp32 ulps of (or above) every key left out, slots descend within the same tolerance, and for
 * DEEPSEEK_V3 the groups used are a best-topk_group set within that tolerance. */
int ref_selection_acceptable(const ref_problem* p, int64_t t, const int32_t* ids, double tol_ulps);

/* The layer output out[T*H] for the given routing (ids/w as from ref_route, or the plugin's after a
 * near-tie). Returns 0, or -1 when out of memory. stats may be NULL. */
int ref_forward(const ref_problem* p, const int32_t* ids, const double* w, double* out, ref_stats* stats);

#endif /* FP8MOE_TEST_REF64_H */
