/* precomputed.cu — PRECOMPUTED routing: the host's topk_ids (int32/int64) and topk_weights
 * (fp32/bf16/fp16), any strides, become the internal ids [T*K] and fp32 weights × routed_scaling_factor.
 * An id outside [0,E) is skipped (internal id −1, reported id −1, weight 0) and counted in device_status
 * (docs/DESIGN.md, PRECOMPUTED); the per-slot work is precomputed_slot.cuh. Launch: one thread per (t,k), 256 per block. */
#include "common.cuh"
#include "pdl.cuh"
#include "precomputed_slot.cuh"

namespace fp8moe {
namespace {

__global__ void precomputed_kernel(fp8moe_precomputed_args a) {
  wait_prior(); /* plain launch: returns at once */
  allow_next(); /* the permutation (PDL) may be scheduled now; it waits for this grid before reading ids */
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = static_cast<int64_t>(a.T) * a.K;
  if (i >= total) return;
  const int64_t t = i / a.K, k = i % a.K;
  int32_t e;
  float w;
  if (!precomputed_slot(a, t, k, &e, &w) && a.device_status) atomicAdd(a.device_status, 1);
  store_precomputed(a, t, k, e, w);
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
