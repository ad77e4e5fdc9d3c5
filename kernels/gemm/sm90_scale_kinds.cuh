/* sm90_scale_kinds.cuh — host side of the four sm90 wgmma GEMM files (gemm{1,2}_wgmma{,128}_sm90.cu): which
 * of their five (scale mode, fp32 scales) instantiations a call takes, and the list of all five for the
 * shared-memory limits raised at context creation. Each kernel is a template on SCALE (FP8MOE_SCALE_*) and
 * F32: fp32 scales read as fp32 without the per-element dtype switch. F32 holds for BLOCK when both the
 * activation-side scale (x_scale for GEMM1, a2_scale for GEMM2) and the weight scale are fp32, for ROW when
 * the weight scale is (the activation row scale is read once per item); TENSOR reads two scalars and has
 * only the generic form. One table here instead of a switch and a five-line limit chain in each file. */
#ifndef FP8MOE_KERNELS_SM90_SCALE_KINDS_CUH
#define FP8MOE_KERNELS_SM90_SCALE_KINDS_CUH

#include <cuda_runtime.h>

#include "kernels_internal.h"
#include "tensor_internal.h" /* FP8MOE_DT_F32: fp8moe_kref::dt */

namespace fp8moe {
namespace sm90 {

/* One instantiation, as a type: f(ScaleKind<S, F>{}) lets a generic lambda name launch<S, F>. */
template <int SCALE, bool F32>
struct ScaleKind {
  static constexpr int scale = SCALE;
  static constexpr bool f32 = F32;
};

/* f(the kind for scale_mode and the scales' dtypes, fp8moe_kref::dt); f returns cudaError_t. */
template <class F>
cudaError_t with_scale_kind(int32_t scale_mode, int32_t act_scale_dt, int32_t w_scale_dt, F&& f) {
  switch (scale_mode) {
    case FP8MOE_SCALE_BLOCK:
      if (act_scale_dt == FP8MOE_DT_F32 && w_scale_dt == FP8MOE_DT_F32) return f(ScaleKind<FP8MOE_SCALE_BLOCK, true>{});
      return f(ScaleKind<FP8MOE_SCALE_BLOCK, false>{});
    case FP8MOE_SCALE_ROW:
      if (w_scale_dt == FP8MOE_DT_F32) return f(ScaleKind<FP8MOE_SCALE_ROW, true>{});
      return f(ScaleKind<FP8MOE_SCALE_ROW, false>{});
    default: return f(ScaleKind<FP8MOE_SCALE_TENSOR, false>{});
  }
}

/* f on each of the five kinds in turn, up to the first error. */
template <class F>
cudaError_t for_each_scale_kind(F&& f) {
  cudaError_t e = f(ScaleKind<FP8MOE_SCALE_BLOCK, true>{});
  if (e == cudaSuccess) e = f(ScaleKind<FP8MOE_SCALE_BLOCK, false>{});
  if (e == cudaSuccess) e = f(ScaleKind<FP8MOE_SCALE_ROW, false>{});
  if (e == cudaSuccess) e = f(ScaleKind<FP8MOE_SCALE_ROW, true>{});
  if (e == cudaSuccess) e = f(ScaleKind<FP8MOE_SCALE_TENSOR, false>{});
  return e;
}

}  // namespace sm90
}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_SM90_SCALE_KINDS_CUH */
