/* cpu_expert.c — one expert's dequantized FP8 GEMM rows and the gated activation, per the three formulas
 * of DESIGN.md "The computation". The fp8 products are exact in fp32; every sum runs in a fixed order that
 * depends only on K, so results do not depend on the thread that computes them. */
#include <math.h>

#include "cpu_internal.h"
#include "numeric_internal.h"

/* Σ x[i]·W[i] with eight independent accumulators (a fixed order: lane i mod 8, then a pairwise tree). */
static float dot_fp8(const float* x, const uint8_t* w, int64_t n, const float* lut) {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
  int64_t body = n - (n & 7); /* a tail count gcc -O3 can bound (a shared index trips a false UB warning) */
  int64_t i = 0;
  for (; i < body; i += 8) {
    a0 += x[i + 0] * lut[w[i + 0]];
    a1 += x[i + 1] * lut[w[i + 1]];
    a2 += x[i + 2] * lut[w[i + 2]];
    a3 += x[i + 3] * lut[w[i + 3]];
    a4 += x[i + 4] * lut[w[i + 4]];
    a5 += x[i + 5] * lut[w[i + 5]];
    a6 += x[i + 6] * lut[w[i + 6]];
    a7 += x[i + 7] * lut[w[i + 7]];
  }
  for (int64_t j = 0; j < (n & 7); ++j) a0 += x[body + j] * lut[w[body + j]];
  return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

void fp8moe_cpu_gemm(const fp8moe_quant_geometry* g, const float* lut, const float* x, const float* xs, int64_t K,
                     const fp8moe_view* w, const fp8moe_view* ws, int32_t e, int64_t N, float* y) {
  const uint8_t* base = (const uint8_t*)w->data + (int64_t)e * w->strides[0];
  int64_t row = w->strides[1];
  int64_t se = (int64_t)e * ws->strides[0];
  switch (g->weight) {
    case FP8MOE_GRAN_BLOCK: {
      /* Activation groups and weight blocks share the K step (validation pairs them: act_k == w_k). */
      int64_t kblocks = K / g->w_k;
      for (int64_t n = 0; n < N; ++n) {
        const uint8_t* wr = base + n * row;
        int64_t srow = se + (n / g->w_n) * ws->strides[1];
        float acc = 0.0f;
        for (int64_t kb = 0; kb < kblocks; ++kb) {
          float d = dot_fp8(x + kb * g->w_k, wr + kb * g->w_k, g->w_k, lut);
          acc += d * xs[kb] * fp8moe_view_read_f32(ws, srow + kb * ws->strides[2]);
        }
        y[n] = acc;
      }
      return;
    }
    case FP8MOE_GRAN_ROW:
      for (int64_t n = 0; n < N; ++n)
        y[n] = dot_fp8(x, base + n * row, K, lut) * xs[0] * fp8moe_view_read_f32(ws, se + n * ws->strides[1]);
      return;
    default: {
      float scale = xs[0] * fp8moe_view_read_f32(ws, se);
      for (int64_t n = 0; n < N; ++n) y[n] = dot_fp8(x, base + n * row, K, lut) * scale;
      return;
    }
  }
}

void fp8moe_cpu_activate(int32_t activation, int32_t gate_up_order, const float* h, int64_t I, float* a) {
  const float* gate = gate_up_order == FP8MOE_GATE_UP_UP_FIRST ? h + I : h;
  const float* up = gate_up_order == FP8MOE_GATE_UP_UP_FIRST ? h : h + I;
  if (activation == FP8MOE_ACTIVATION_GEGLU) {
    for (int64_t i = 0; i < I; ++i) {
      float g = gate[i];
      a[i] = 0.5f * g * (1.0f + erff(g / 1.41421356237309505f)) * up[i];
    }
    return;
  }
  for (int64_t i = 0; i < I; ++i) {
    float g = gate[i];
    a[i] = g / (1.0f + expf(-g)) * up[i];
  }
}
