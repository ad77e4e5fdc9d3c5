/* bench_problem.h — one benchmark problem: a model's weights (host copies for the CPU oracle, device
 * copies for the timed runs), the per-point inputs, the fp8moe_moe_args describing them, and the check of a
 * GPU result against the CPU backend on sampled tokens (docs/PERFORMANCE.md "Protocol", "Checked"; a point
 * whose numbers are wrong is never timed). */
#ifndef FP8MOE_BENCH_PROBLEM_H
#define FP8MOE_BENCH_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "bench_core.h"
#include "fp8moe.h"

typedef struct bench_weights {
  const bench_model* model;
  int32_t format;
  uint8_t *h13, *h2;   /* host e4m3 codes [E,2I,H], [E,H,I] */
  float *hs13, *hs2;   /* host scales of the current format */
  void *d13, *d2, *ds13, *ds2;
  size_t n13, n2, ns13, ns2;
  int64_t shape13[3], shape2[3], sshape13[3], sshape2[3];
  int32_t sndim;
} bench_weights;

/* Random e4m3 codes for model m on host and device. Returns 0, or -1 (out of memory / device error). */
int bench_weights_make(const bench_model* m, uint64_t seed, bench_weights* w);
/* Scales for format (host and device); with plant_wrong the device copy of the W2 scales is ×1.25. */
int bench_weights_set_format(bench_weights* w, int32_t format, uint64_t seed, int plant_wrong);
void bench_weights_free(bench_weights* w);

/* Tensors and descriptors of one call over given buffers (host or device). */
typedef struct bench_call {
  fp8moe_moe_args a;
  fp8moe_tensor hidden, logits, bias, w13, s13, w2, s2, a1, a2, out, ids_out, w_out;
  int64_t sh_hidden[2], sh_logits[2], sh_bias[1], sh_out[2], sh_routing[2], sh_scalar[1];
} bench_call;

typedef struct bench_buffers {
  void *hidden, *logits, *bias, *a1, *a2, *out, *ids_out, *w_out;
} bench_buffers;

void bench_call_describe(bench_call* c, const bench_weights* w, const bench_buffers* b, int64_t T, int on_device);

/* Host inputs of one point. */
typedef struct bench_inputs {
  int64_t T;
  uint16_t* hidden; /* bf16 [T,H] */
  float* logits;    /* fp32 [T,E] */
  float bias[2048];
  float a_scales[2]; /* static a1, a2 (per-tensor) */
} bench_inputs;

int bench_inputs_make(const bench_model* m, int64_t T, uint64_t seed, bench_inputs* in);
/* (Re)draws the logits for a routing distribution. */
void bench_inputs_route(const bench_model* m, int routing, uint64_t seed, bench_inputs* in);
void bench_inputs_free(bench_inputs* in);

/* The sampled tokens the oracle recomputes: all when T ≤ n, else the first, the last and random others. */
int64_t bench_sample_rows(int64_t T, int n, uint64_t seed, int64_t* rows);

typedef struct bench_check {
  double rel_err;
  int64_t unwritten, nonfinite_bad, ids_mismatch;
  int ok;
} bench_check;

/* Runs the CPU backend on the sampled rows and compares the GPU's output (gpu_out bf16 [T,H], gpu_ids [T,K]).
 * Returns the CPU run's status. */
int32_t bench_check_against_cpu(const fp8moe_api* api, fp8moe_context* cpu, const bench_weights* w,
                                const bench_inputs* in, const int64_t* rows, int64_t S, const uint16_t* gpu_out,
                                const int32_t* gpu_ids, bench_check* r);

#endif /* FP8MOE_BENCH_PROBLEM_H */
