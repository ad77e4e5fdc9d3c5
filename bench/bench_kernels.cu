/* bench_kernels.cu — the bench's own device code: the streaming-read roofline and operand fills. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "bench_gpu.h"

namespace {

/* Each thread keeps 4 independent 16-byte loads in flight; the xor of everything read goes to one word
 * per block, so the compiler cannot drop the loads. */
__global__ void __launch_bounds__(1024) read_kernel(const uint4* __restrict__ p, size_t n, unsigned long long* sink) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
                d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  for (int o = 16; o; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc == 0x9E3779B9u) atomicXor(sink, (unsigned long long)acc);
}

__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Bit 3 of every byte cleared: no code is 0x7F/0xFF (NaN). */
__global__ void fill_e4m3_kernel(uint64_t* p, size_t n8, uint64_t seed) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x)
    p[i] = mix(seed ^ (i * 0xD1B54A32D192ED03ull)) & ~0x0808080808080808ull;
}

__global__ void fill_f32_kernel(float* p, size_t n, float v) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = v;
}

}  // namespace

extern "C" int bench_launch_read(const void* p, size_t bytes, unsigned long long* sink, int blocks, cudaStream_t s) {
  read_kernel<<<blocks, 1024, 0, s>>>(static_cast<const uint4*>(p), bytes / 16, sink);
  return static_cast<int>(cudaGetLastError());
}

extern "C" int bench_launch_fill_e4m3(void* p, size_t n, uint64_t seed, cudaStream_t s) {
  fill_e4m3_kernel<<<1024, 256, 0, s>>>(static_cast<uint64_t*>(p), n / 8, seed);
  return static_cast<int>(cudaGetLastError());
}

extern "C" int bench_launch_fill_f32(float* p, size_t n, float v, cudaStream_t s) {
  fill_f32_kernel<<<256, 256, 0, s>>>(p, n, v);
  return static_cast<int>(cudaGetLastError());
}
