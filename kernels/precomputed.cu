/* precomputed.cu — PRECOMPUTED routing: the host's topk_ids (int32/int64) and topk_weights
 * (fp32/bf16/fp16), any strides, become the internal ids [T*K] and fp32 weights × routed_scaling_factor.
 * An id outside [0,E) is skipped (internal id −1, reported id −1, weight 0) and counted in device_status
 * (docs/DESIGN.md, PRECOMPUTED). Launch: one thread per (t,k), 256 per block. */
#include "common.cuh"

namespace fp8moe {
namespace {

__global__ void precomputed_kernel(fp8moe_precomputed_args a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = static_cast<int64_t>(a.T) * a.K;
  if (i >= total) return;
  const int64_t t = i / a.K, k = i % a.K;
  const int64_t off = t * a.ids_in.s[0] + k * a.ids_in.s[1];
  const int64_t id = a.ids_in.dt == FP8MOE_DT_I64 ? static_cast<const int64_t*>(a.ids_in.data)[off]
                                                  : static_cast<const int32_t*>(a.ids_in.data)[off];
  const bool ok = id >= 0 && id < a.E;
  const int32_t e = ok ? static_cast<int32_t>(id) : -1;
  const float w = ok ? kref_at(a.weights_in, t, k) * a.scale : 0.0f;
  if (!ok && a.device_status) atomicAdd(a.device_status, 1);
  a.ids[i] = e;
  a.weights[i] = w;
  if (a.ids_out.data) static_cast<int32_t*>(a.ids_out.data)[t * a.ids_out.s[0] + k * a.ids_out.s[1]] = e;
  if (a.weights_out.data)
    static_cast<float*>(a.weights_out.data)[t * a.weights_out.s[0] + k * a.weights_out.s[1]] = w;
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_precomputed(const fp8moe_precomputed_args* a, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(a->T) * a->K;
  if (total == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((total + 255) / 256);
  fp8moe::precomputed_kernel<<<blocks, 256, 0, stream>>>(*a);
  return static_cast<int>(cudaGetLastError());
}
