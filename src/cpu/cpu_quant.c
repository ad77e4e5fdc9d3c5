/* cpu_quant.c — dynamic/static fp8 quantization of rows (DESIGN.md "Dynamic scales") and the strided
 * element conversions between views and fp32 rows. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "numeric_internal.h"

float fp8moe_cpu_amax(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float a = fabsf(x[i]);
    if (a > m && a <= FLT_MAX) m = a; /* NaN fails both tests, Inf the second */
  }
  return m;
}

float fp8moe_cpu_dynamic_scale(float amax) {
  float s = amax / 448.0f;
  return s > FLT_MIN ? s : FLT_MIN;
}

static void quant_group(const float* x, int64_t n, float s, uint8_t* q) {
  for (int64_t i = 0; i < n; ++i) q[i] = fp8moe_f32_to_e4m3(x[i] / s);
}

void fp8moe_cpu_quant_row(const fp8moe_quant_geometry* g, const float* x, int64_t n, float tensor_scale, uint8_t* q,
                          float* scales) {
  switch (g->act) {
    case FP8MOE_GRAN_BLOCK:
      for (int64_t b = 0; b * g->act_k < n; ++b) {
        const float* xb = x + b * g->act_k;
        int64_t len = n - b * g->act_k < g->act_k ? n - b * g->act_k : g->act_k;
        scales[b] = fp8moe_cpu_dynamic_scale(fp8moe_cpu_amax(xb, len));
        quant_group(xb, len, scales[b], q + b * g->act_k);
      }
      break;
    case FP8MOE_GRAN_ROW:
      scales[0] = fp8moe_cpu_dynamic_scale(fp8moe_cpu_amax(x, n));
      quant_group(x, n, scales[0], q);
      break;
    default:
      scales[0] = tensor_scale;
      quant_group(x, n, tensor_scale, q);
      break;
  }
}

void fp8moe_cpu_read_row(const fp8moe_view* v, int64_t off, int64_t stride, int64_t n, float* dst) {
  const unsigned char* base = (const unsigned char*)v->data;
  switch (v->dt) {
    case FP8MOE_DT_F32:
      if (stride == 1) {
        memcpy(dst, base + off * 4, (size_t)n * sizeof(float));
        return;
      }
      for (int64_t i = 0; i < n; ++i) memcpy(&dst[i], base + (off + i * stride) * 4, sizeof(float));
      return;
    case FP8MOE_DT_BF16:
    case FP8MOE_DT_F16: {
      int bf16 = v->dt == FP8MOE_DT_BF16;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        memcpy(&h, base + (off + i * stride) * 2, sizeof h);
        dst[i] = bf16 ? fp8moe_bf16_to_f32(h) : fp8moe_f16_to_f32(h);
      }
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp8moe_view_read_f32(v, off + i * stride);
      return;
  }
}

void fp8moe_cpu_write_row(const fp8moe_view* out, int64_t off, int64_t stride, int64_t n, const float* src) {
  unsigned char* base = (unsigned char*)out->data;
  switch (out->dt) {
    case FP8MOE_DT_F32:
      for (int64_t i = 0; i < n; ++i) memcpy(base + (off + i * stride) * 4, &src[i], sizeof(float));
      return;
    case FP8MOE_DT_BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = fp8moe_f32_to_bf16(src[i]);
        memcpy(base + (off + i * stride) * 2, &h, sizeof h);
      }
      return;
    case FP8MOE_DT_F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = fp8moe_f32_to_f16(src[i]);
        memcpy(base + (off + i * stride) * 2, &h, sizeof h);
      }
      return;
    default:
      return; /* validation admits only bf16/fp16/fp32 outputs */
  }
}
