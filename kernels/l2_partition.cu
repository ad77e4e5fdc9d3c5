/* l2_partition.cu — which SMs share an L2 partition, measured once at context creation (docs/GPU.md "L2
 * partitions"). Hopper's L2 is two partitions joined by a fabric: a line that SMs of one partition read is kept in
 * that partition, and an SM of the other reads it across the fabric. ncu puts the pair GEMM1 at deepseek-v3
 * T = 8192 at 85 % of the fabric's cycles, so its claimed items are split by partition (gemm1_wgmma128_sm90.cu,
 * "Partitioned claims"), which needs the map this file measures: by latency, since no register names a
 * partition (tools/l2_partition_probe prints the readings). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "kernels_internal.h"

namespace {

constexpr int kLines = 256;     /* 128-byte lines per CTA: 32 KB, every one a dependent load */
constexpr int kLineWords = 32;
constexpr int kThreads = 128;
constexpr int kMaxSms = 32 * FP8MOE_SM_PARTITION_WORDS;
constexpr unsigned kMinGap = 20; /* cycles per load between the groups (an H100 measured ~60; ~22 within a group) */

__device__ __forceinline__ uint32_t ld_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void discard_l2(const uint32_t* p) {
  asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(p) : "memory");
}

/* Global barrier number `round` (1, 2, …) of the grid: all CTAs are resident (the launch is cooperative). */
__device__ __forceinline__ void grid_barrier(unsigned* arrive, unsigned round) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(arrive, 1u);
    while (atomicAdd(arrive, 0u) < round * gridDim.x) {
    }
  }
  __syncthreads();
}

/* The lines' values are never read as data: each load's value masked by `zero` (0, unknown to the compiler) is added
 * to the next address, so the timed loads form one dependent chain. The lines start out of every L2 partition
 * (discarded, never written: a line the memset or another SM left in one partition would be near for some readers
 * and far for others), CTA 0 brings them all into its own partition, then each CTA times its chain. */
__global__ void __launch_bounds__(kThreads) l2_partition_kernel(const uint32_t* buf, uint32_t zero, unsigned* arrive,
                                                                unsigned* sm_of, unsigned* cycles) {
  const uint32_t* mine = buf + static_cast<size_t>(blockIdx.x) * kLines * kLineWords;
  for (int i = threadIdx.x; i < kLines; i += blockDim.x) discard_l2(mine + i * kLineWords);
  grid_barrier(arrive, 1u);
  uint32_t x = 0;
  if (blockIdx.x == 0)
    for (uint32_t i = threadIdx.x; i < gridDim.x * kLines; i += blockDim.x) x += ld_cg(buf + i * kLineWords);
  grid_barrier(arrive, 2u);
  if (threadIdx.x != 0) return;
  uint32_t v = x & zero;
  const long long t0 = clock64();
  for (int i = 0; i < kLines; ++i) v = ld_cg(mine + ((i * 97) % kLines) * kLineWords + (v & zero));
  const long long t1 = clock64();
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(s));
  sm_of[blockIdx.x] = s;
  cycles[blockIdx.x] = static_cast<unsigned>((t1 - t0) / kLines) + (v & zero);
}

/* The widest gap between the sorted values: the groups below and from it. 1 where it is at least kMinGap cycles
 * and the smaller group holds at least a quarter of the CTAs; *cut = the lowest value of the upper group. */
int split_at_gap(const unsigned* cycles, int n, unsigned* cut, unsigned* gap) {
  unsigned v[kMaxSms];
  for (int i = 0; i < n; ++i) v[i] = cycles[i];
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && v[j - 1] > v[j]; --j) {
      const unsigned t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  *gap = 0;
  int at = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] - v[i - 1] > *gap) *gap = v[i] - v[i - 1], at = i;
  *cut = v[at];
  return *gap >= kMinGap && 4 * at >= n && 4 * (n - at) >= n;
}

}  // namespace

int fp8moe_l2_partition_map(uint32_t map[FP8MOE_SM_PARTITION_WORDS], int32_t* found,
                            fp8moe_l2_partition_readings* readings) {
  memset(map, 0, sizeof(uint32_t) * FP8MOE_SM_PARTITION_WORDS);
  *found = 0;
  if (readings) memset(readings, 0, sizeof *readings);
  int dev = 0, sms = 0, coop = 0, smem_sm = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  if (e != cudaSuccess || !coop || sms < 4 || sms > kMaxSms) return e;
  /* dynamic shared memory the kernel never touches: two CTAs never fit one SM */
  const size_t smem = static_cast<size_t>(smem_sm) / 2 + 1024;
  e = cudaFuncSetAttribute(l2_partition_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  int per_sm = 0;
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, l2_partition_kernel, kThreads, smem);
  if (e != cudaSuccess || per_sm != 1) return e;
  const size_t line_bytes = static_cast<size_t>(sms) * kLines * kLineWords * 4;
  const size_t bytes = line_bytes + 256 + 2 * sizeof(unsigned) * kMaxSms;
  uint8_t* d = nullptr;
  cudaStream_t s = nullptr; /* its own stream: the legacy one would wait for the host's other work */
  e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return e;
  e = cudaMalloc(&d, bytes);
  const uint32_t* buf = reinterpret_cast<const uint32_t*>(d);
  unsigned* arrive = reinterpret_cast<unsigned*>(d + line_bytes);
  unsigned* sm_of = reinterpret_cast<unsigned*>(d + line_bytes + 256);
  unsigned* cycles = sm_of + kMaxSms;
  unsigned h_sm[kMaxSms], h_cycles[kMaxSms];
  if (e == cudaSuccess) e = cudaMemsetAsync(d + line_bytes, 0, bytes - line_bytes, s); /* the lines stay unwritten */
  uint32_t zero = 0;
  void* args[] = {&buf, &zero, &arrive, &sm_of, &cycles};
  if (e == cudaSuccess)
    e = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(l2_partition_kernel), dim3(sms), dim3(kThreads),
                                    args, smem, s);
  if (e == cudaSuccess) e = cudaMemcpyAsync(h_sm, sm_of, sizeof(unsigned) * sms, cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaMemcpyAsync(h_cycles, cycles, sizeof(unsigned) * sms, cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaFree(d);
  cudaStreamDestroy(s);
  if (e == cudaErrorCooperativeLaunchTooLarge) { /* a restricted set of SMs (MPS, green contexts): no map */
    (void)cudaGetLastError();
    return cudaSuccess;
  }
  if (e != cudaSuccess) return e;
  unsigned cut = 0, gap = 0;
  const int split = split_at_gap(h_cycles, sms, &cut, &gap);
  if (readings) {
    readings->ctas = sms;
    memcpy(readings->sm, h_sm, sizeof(unsigned) * sms);
    memcpy(readings->cycles, h_cycles, sizeof(unsigned) * sms);
    readings->gap = gap;
    readings->cut = cut;
  }
  if (!split) return cudaSuccess;
  for (int b = 0; b < sms; ++b)
    if (h_cycles[b] >= cut && h_sm[b] < static_cast<unsigned>(kMaxSms)) map[h_sm[b] >> 5] |= 1u << (h_sm[b] & 31u);
  *found = 1;
  return cudaSuccess;
}
