/* pdl.cuh — programmatic dependent launch between the pipeline's kernels (docs/GPU.md). A kernel launched
 * by launch_pdl may be scheduled while the kernel before it on the stream is still draining, which hides
 * the launch latency between stages; it must call wait_prior() before it reads anything an earlier stage
 * wrote (that blocks until the previous kernel has completed and its writes are visible; for an ordinary
 * launch it returns at once). allow_next() lets the next PDL-launched kernel be scheduled; it is called only
 * after wait_prior(), so a kernel that starts early can rely on everything before its predecessor being
 * complete. One exception: the decode GEMM2 (gemm_decode.cu) calls it first, so that the combine, its only
 * dependent, is resident before GEMM2's short tail ends; the combine reads early only what the routing and
 * the permutation wrote, which completed before GEMM1 let GEMM2 start (docs/GPU.md "Decode GEMMs").
 * Capturable in CUDA graphs (programmatic edges). Included by kernels/<op>.cu only. */
#ifndef FP8MOE_KERNELS_PDL_CUH
#define FP8MOE_KERNELS_PDL_CUH

#include <cuda_runtime.h>

namespace fp8moe {

__device__ __forceinline__ void wait_prior() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization; returns the launch
 * status (cudaGetLastError included). */
template <class... Params, class... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                       Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
#ifdef FP8MOE_NO_PDL /* bisecting build: ordinary stream order (the waits return at once) */
  cfg.numAttrs = 0;
#else
  cfg.numAttrs = 1;
#endif
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args...);
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_PDL_CUH */
