/* cold_read_probe — what one kernel that reads a decode step's weights costs on its own, under the bench's
 * protocol (docs/PERFORMANCE.md: a 512 MiB memset before each replay), against the streaming rate the bench's
 * roofline reads from 8 GiB. docs/GPU.md "Fixed costs at decode" fits the decode GEMM1s as ≈ 20 µs +
 * bytes / 4.3 TB/s and GEMM2 as ≈ 4 µs + bytes / 3.9 TB/s; this probe says how much of such an intercept a
 * plain read of the same bytes pays (launch, ramp, tail, TLB, the flush's dirty lines), so the GEMMs are judged
 * against what a kernel can reach at that size.
 *
 * The "weights" are one tensor of 256 experts × 29,360,128 bytes (deepseek-v3's W13); a read of S bytes takes
 * S/8 from each of 8 experts spread over the tensor (as T = 1 selects 8), or S contiguous bytes where S is
 * larger than 8 experts. Conditions before each timed read (outside the events):
 *   memset   the bench's flush: a 512 MiB memset (leaves the L2 full of dirty lines)
 *   clean    a read of another 512 MiB buffer (the L2 holds clean lines of other data)
 *   tlb      the memset, then one 4-byte load per 2 MiB page of the whole 7.5 GB tensor (page-table walks done)
 *   touch8   the memset, then one 4-byte load per 2 MiB page of the 8 experts read (the ones a GEMM knows after
 *            routing)
 *   warm     nothing (the same bytes read just before: L2 hits where S fits)
 * Kernels: "stride" = the bench's roofline read (2 CTAs × 1,024 threads per SM, 4 loads of 16 B in flight per
 * thread, grid-stride); "chunk" = each CTA reads one contiguous share, as a stream GEMM CTA reads its unit.
 * Printed: median µs of 15 (events around the read kernel only; an empty kernel's median is printed for the
 * event overhead), GB/s, and from %globaltimer the median delay from a CTA's start to its first load's return.
 *   cold_read_probe                (no arguments)
 *   cold_read_probe idle           the 235 MB read (deepseek-v3 T = 1 GEMM1's bytes, "chunk") after the memset and
 *                                  a one-thread kernel that idles D µs (0 … 32): whether the L2 writes its dirty lines
 *                                  back while DRAM is idle, so that a shorter stage before GEMM1 leaves it more
 *                                  to write back under the weight read (docs/GPU.md "Team routing") */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_check.h"

enum { kThreads = 1024, kExperts = 256, kReps = 15 };
static const int64_t kExpertBytes = 29360128; /* deepseek-v3 W13 per expert: 2 × 2048 × 7168 */
static const int64_t kPage = 2 << 20;

struct Slices {
  int64_t offset[8]; /* byte offset of each slice in the tensor */
  int64_t bytes;     /* per slice, multiple of 16 */
  int n;
};

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ const uint4* slice_ptr(const uint8_t* base, const Slices& s, int64_t i) {
  const int64_t per = s.bytes / 16, k = i / per;
  return (const uint4*)(base + s.offset[k]) + (i - k * per);
}

/* times[3·b + 0/1/2]: CTA start, thread 0's first load back, CTA end (ns). kChunk: CTA b reads elements
 * [b·n/grid, (b+1)·n/grid) of the slice order; else the grid strides over all of them (the bench's roofline
 * read). 4 loads of 16 B in flight per thread either way. */
template <bool kChunk>
__global__ void __launch_bounds__(kThreads) read_kernel(const uint8_t* __restrict__ base, Slices s,
                                                        unsigned long long* sink, uint64_t* times) {
  const uint64_t t0 = now_ns();
  const int64_t n = s.bytes / 16 * s.n;
  const int64_t lo = kChunk ? n * blockIdx.x / gridDim.x : 0, hi = kChunk ? n * (blockIdx.x + 1) / gridDim.x : n;
  const int64_t stride = kChunk ? kThreads : (int64_t)gridDim.x * kThreads;
  int64_t i = kChunk ? lo + threadIdx.x : (int64_t)blockIdx.x * kThreads + threadIdx.x;
  uint32_t acc = 0;
  bool first = true;
  while (i < hi) {
    const bool four = i + 3 * stride < hi;
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = u == 0 || four ? __ldcs(slice_ptr(base, s, i + u * stride)) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    if (first && threadIdx.x == 0) times[3 * blockIdx.x + 1] = now_ns() + (acc == 0x12345u);
    first = false;
    i += four ? 4 * stride : stride;
  }
  for (int o = 16; o; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc == 0x9E3779B9u) atomicXor(sink, (unsigned long long)acc);
  __syncthreads();
  if (threadIdx.x == 0) {
    times[3 * blockIdx.x] = t0;
    times[3 * blockIdx.x + 2] = now_ns();
  }
}

/* One 4-byte load per page of [base, base + bytes) for each of n regions. */
__global__ void touch_pages(const uint8_t* __restrict__ base, Slices s, unsigned long long* sink) {
  const int64_t pages = (s.bytes + kPage - 1) / kPage;
  uint32_t acc = 0;
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < pages * s.n;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int64_t k = p / pages;
    acc ^= __ldcg((const uint32_t*)(base + s.offset[k] + (p - k * pages) * kPage));
  }
  if (acc == 0x9E3779B9u) atomicXor(sink, (unsigned long long)acc);
}

__global__ void empty_kernel() {}

/* One thread idles until ns have passed on %globaltimer. */
__global__ void idle_kernel(uint64_t ns) {
  const uint64_t t0 = now_ns();
  while (now_ns() - t0 < ns) {
  }
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  return v[n / 2];
}

/* One read of s between two events (the conditions before it are already enqueued on st): *us. Returns 1 where a
 * CUDA call failed (printed), else 0. */
static int timed_read(bool chunk, const uint8_t* w, const Slices& s, unsigned long long* sink, uint64_t* times,
                      int grid, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, double* us) {
  float ms = 0;
  CHECK_CUDA(cudaEventRecord(e0, st));
  if (chunk)
    read_kernel<true><<<grid, kThreads, 0, st>>>(w, s, sink, times);
  else
    read_kernel<false><<<grid, kThreads, 0, st>>>(w, s, sink, times);
  CHECK_CUDA(cudaEventRecord(e1, st));
  CHECK_CUDA(cudaEventSynchronize(e1));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  *us = ms * 1e3;
  return 0;
}

/* The idle study (see the file comment): read µs by idle µs after the bench's flush, and without the flush. */
static int idle_study(uint8_t* w, uint8_t* flush, int64_t flush_bytes, unsigned long long* sink, uint64_t* times,
                      int grid, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1) {
  static const int idle_us[] = {0, 1, 2, 4, 8, 16, 32};
  Slices s;
  s.n = 8;
  s.bytes = 234881024 / 8;
  for (int k = 0; k < 8; ++k) s.offset[k] = (int64_t)(17 + 31 * k) * kExpertBytes;
  printf("| idle after the memset, us | read us (median of %d) | GB/s |\n|---|---|---|\n", kReps);
  for (size_t ii = 0; ii < sizeof idle_us / sizeof idle_us[0]; ++ii) {
    double us[kReps];
    for (int r = -1; r < kReps; ++r) {
      CHECK_CUDA(cudaMemsetAsync(flush, r & 0xFF, (size_t)flush_bytes, st));
      idle_kernel<<<1, 1, 0, st>>>((uint64_t)idle_us[ii] * 1000u);
      double t = 0;
      if (timed_read(true, w, s, sink, times, grid, st, e0, e1, &t)) return 1;
      if (r >= 0) us[r] = t;
    }
    const double m = median(us, kReps);
    printf("| %d | %.1f | %.0f |\n", idle_us[ii], m, 234881024.0 / (m * 1e3));
  }
  return 0;
}

int main(int argc, char** argv) {
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t tensor_bytes = kExperts * kExpertBytes, flush_bytes = (int64_t)512 << 20;
  uint8_t *w = NULL, *flush = NULL, *clean = NULL;
  unsigned long long* sink = NULL;
  uint64_t* times = NULL;
  const int grid = 2 * sms;
  CHECK_CUDA(cudaMalloc((void**)&w, (size_t)tensor_bytes));
  CHECK_CUDA(cudaMalloc((void**)&flush, (size_t)flush_bytes));
  CHECK_CUDA(cudaMalloc((void**)&clean, (size_t)flush_bytes));
  CHECK_CUDA(cudaMalloc((void**)&sink, sizeof *sink));
  CHECK_CUDA(cudaMalloc((void**)&times, sizeof(uint64_t) * 3 * grid));
  CHECK_CUDA(cudaMemset(w, 0x5A, (size_t)tensor_bytes));
  CHECK_CUDA(cudaMemset(clean, 0x3C, (size_t)flush_bytes));
  cudaStream_t st;
  CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  uint64_t* ht = (uint64_t*)malloc(sizeof(uint64_t) * 3 * grid);
  if (!ht) return 1;

  double ev[kReps];
  for (int r = 0; r < kReps; ++r) {
    float ms = 0;
    CHECK_CUDA(cudaEventRecord(e0, st));
    empty_kernel<<<grid, kThreads, 0, st>>>();
    CHECK_CUDA(cudaEventRecord(e1, st));
    CHECK_CUDA(cudaEventSynchronize(e1));
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    ev[r] = ms * 1e3;
  }
  printf("%d SMs, grid %d x %d threads; empty kernel between events: %.1f us (median of %d)\n", sms, grid, kThreads,
         median(ev, kReps), kReps);
  if (argc > 1 && strcmp(argv[1], "idle") == 0) return idle_study(w, flush, flush_bytes, sink, times, grid, st, e0, e1);

  static const int64_t sizes[] = {12582912, 25165824, 117440512, 234881024, 1073741824, 4294967296LL};
  static const char* conds[] = {"memset", "clean", "tlb", "touch8", "warm"};
  static const char* kernels[] = {"stride", "chunk"};
  printf("| bytes (MB) | kernel | condition | us median | GB/s | first load back after start, us (median CTA) |\n");
  printf("|---|---|---|---|---|---|\n");
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; ++si) {
    Slices s;
    if (sizes[si] <= 8 * kExpertBytes) {
      s.n = 8;
      s.bytes = sizes[si] / 8;
      for (int k = 0; k < 8; ++k) s.offset[k] = (int64_t)(17 + 31 * k) * kExpertBytes; /* experts 17, 48, …, 234 */
    } else {
      s.n = 1;
      s.bytes = sizes[si];
      s.offset[0] = 0;
      for (int k = 1; k < 8; ++k) s.offset[k] = 0;
    }
    Slices whole = {{0}, tensor_bytes, 1};
    for (int ki = 0; ki < 2; ++ki)
      for (int ci = 0; ci < 5; ++ci) {
        double us[kReps], first[kReps];
        for (int r = -1; r < kReps; ++r) {
          if (ci == 0 || ci == 2 || ci == 3) CHECK_CUDA(cudaMemsetAsync(flush, r & 0xFF, (size_t)flush_bytes, st));
          if (ci == 1) {
            Slices c = {{0}, flush_bytes, 1};
            read_kernel<false><<<grid, kThreads, 0, st>>>(clean, c, sink, times);
          }
          if (ci == 2) touch_pages<<<64, 256, 0, st>>>(w, whole, sink);
          if (ci == 3) touch_pages<<<8, 32, 0, st>>>(w, s, sink);
          if (ci == 4) read_kernel<false><<<grid, kThreads, 0, st>>>(w, s, sink, times);
          double t = 0;
          if (timed_read(ki == 1, w, s, sink, times, grid, st, e0, e1, &t)) return 1;
          if (r < 0) continue;
          us[r] = t;
          CHECK_CUDA(cudaMemcpy(ht, times, sizeof(uint64_t) * 3 * grid, cudaMemcpyDeviceToHost));
          double d[4096];
          int nd = 0;
          for (int b = 0; b < grid && nd < 4096; ++b)
            if (ht[3 * b + 1] >= ht[3 * b]) d[nd++] = (double)(ht[3 * b + 1] - ht[3 * b]) / 1e3;
          first[r] = nd ? median(d, nd) : -1;
        }
        const double m = median(us, kReps);
        printf("| %.1f | %s | %s | %.1f | %.0f | %.2f |\n", sizes[si] / 1e6, kernels[ki], conds[ci], m,
               (double)sizes[si] / (m * 1e3), median(first, kReps));
      }
  }
  free(ht);
  return 0;
}
