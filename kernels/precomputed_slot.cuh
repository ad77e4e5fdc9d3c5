/* precomputed_slot.cuh — one (t,k) slot of PRECOMPUTED routing: the host's id (int32/int64) and weight
 * (fp32/bf16/fp16), any strides, as the internal id (−1 when outside [0,E): skipped, weight 0) and the fp32
 * weight × routed_scaling_factor. The one implementation behind precomputed.cu and prologue.cu. */
#ifndef FP8MOE_KERNELS_PRECOMPUTED_SLOT_CUH
#define FP8MOE_KERNELS_PRECOMPUTED_SLOT_CUH

#include "common.cuh"

namespace fp8moe {

/* Returns false when the id was out of range (skipped). */
__device__ __forceinline__ bool precomputed_slot(const fp8moe_precomputed_args& a, int64_t t, int64_t k, int32_t* e,
                                                 float* w) {
  const int64_t off = t * a.ids_in.s[0] + k * a.ids_in.s[1];
  const int64_t id = a.ids_in.dt == FP8MOE_DT_I64 ? static_cast<const int64_t*>(a.ids_in.data)[off]
                                                  : static_cast<const int32_t*>(a.ids_in.data)[off];
  const bool ok = id >= 0 && id < a.E;
  *e = ok ? static_cast<int32_t>(id) : -1;
  *w = ok ? kref_at(a.weights_in, t, k) * a.scale : 0.0f;
  return ok;
}

/* Writes slot i = t*K+k: the workspace ids/weights and the optional host outputs. */
__device__ __forceinline__ void store_precomputed(const fp8moe_precomputed_args& a, int64_t t, int64_t k, int32_t e,
                                                  float w) {
  const int64_t i = t * a.K + k;
  a.ids[i] = e;
  a.weights[i] = w;
  if (a.ids_out.data) static_cast<int32_t*>(a.ids_out.data)[t * a.ids_out.s[0] + k * a.ids_out.s[1]] = e;
  if (a.weights_out.data)
    static_cast<float*>(a.weights_out.data)[t * a.weights_out.s[0] + k * a.weights_out.s[1]] = w;
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_PRECOMPUTED_SLOT_CUH */
