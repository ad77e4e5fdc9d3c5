/* l2_partition_probe — which SMs share an L2 partition. Hopper's L2 is two partitions joined by a fabric; an SM's
 * read of a line that SMs of the other partition brought in crosses that fabric, and ncu puts the pair GEMM1 at
 * deepseek-v3 T = 8192 at 85 % of the fabric's cycles (docs/GPU.md "Next" 12). Scheduling each expert's items on
 * one partition's SMs needs the SM → partition map; this probe measures it by latency:
 *   one CTA per SM (shared memory sized so no SM holds two); the CTA on SM `ref` reads every SM's own 32 KB buffer
 *   (ld.global.cg: L2 only), all CTAs meet at a global barrier, then each CTA's thread 0 chases a random cycle through
 *   its own buffer and records the mean cycles per load. SMs in ref's partition find the lines in their partition;
 *   the others fetch them across the fabric. A third pass with no reference read gives the DRAM latency.
 * Prints, per reference, each SM's cycles per load, the split at the widest gap and its two groups' sizes, and
 * whether the split agrees between the two references (the second is the first pass's slowest SM).
 *   l2_partition_probe [ref SM, default 0] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe_check.h"

enum { kLines = 256, kWordsPerLine = 32, kThreads = 128 };

__device__ __forceinline__ uint32_t smid() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

__device__ __forceinline__ uint32_t ld_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* ref < 0: nobody reads first (every chase misses to DRAM). */
__global__ void probe_kernel(const uint32_t* buf, int nsm, int ref, unsigned* arrive, unsigned* cycles,
                             unsigned* sink) {
  extern __shared__ uint32_t pad[]; /* only its size matters: one CTA per SM */
  const uint32_t me = smid();
  uint32_t x = 0;
  if (static_cast<int>(me) == ref)
    for (int i = threadIdx.x; i < nsm * kLines; i += blockDim.x)
      x ^= ld_cg(buf + static_cast<size_t>(i) * kWordsPerLine);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(arrive, 1u);
    while (atomicAdd(arrive, 0u) < gridDim.x) {
    }
    uint32_t p = me * kLines * kWordsPerLine; /* the first line of this SM's buffer */
    const long long t0 = clock64();
    for (int i = 0; i < kLines; ++i) p = ld_cg(buf + p);
    const long long t1 = clock64();
    cycles[me] = static_cast<unsigned>((t1 - t0) / kLines);
    x ^= p;
  }
  if (x == 0x12345678u) sink[0] = x + pad[0];
}

static int run(const uint32_t* d_buf, int nsm, int ref, size_t smem, unsigned* d_arrive, unsigned* d_cycles,
               unsigned* d_sink, void* d_flush, size_t flush_bytes, unsigned* cycles) {
  CHECK_CUDA(cudaMemset(d_flush, ref & 0xFF, flush_bytes)); /* evict the buffers from both partitions */
  CHECK_CUDA(cudaMemset(d_arrive, 0, sizeof(unsigned)));
  CHECK_CUDA(cudaMemset(d_cycles, 0, sizeof(unsigned) * 1024));
  probe_kernel<<<nsm, kThreads, smem>>>(d_buf, nsm, ref, d_arrive, d_cycles, d_sink);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(cycles, d_cycles, sizeof(unsigned) * 1024, cudaMemcpyDeviceToHost));
  return 0;
}

/* The split of SMs 0..n-1 by cycles at the widest gap between sorted values: in[s] = 1 for the upper group. */
static unsigned split(const unsigned* cycles, int n, unsigned char* upper) {
  unsigned sorted[1024];
  for (int i = 0; i < n; ++i) sorted[i] = cycles[i];
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; --j) {
      const unsigned t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  unsigned gap = 0, cut = sorted[n - 1];
  for (int i = 1; i < n; ++i)
    if (sorted[i] - sorted[i - 1] > gap) gap = sorted[i] - sorted[i - 1], cut = sorted[i];
  for (int i = 0; i < n; ++i) upper[i] = cycles[i] >= cut;
  return gap;
}

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int nsm = prop.multiProcessorCount;
  const size_t smem = prop.sharedMemPerMultiprocessor / 2 + 1024;
  CHECK_CUDA(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const size_t words = static_cast<size_t>(nsm) * kLines * kWordsPerLine;
  uint32_t* h = static_cast<uint32_t*>(calloc(words, 4));
  srand(12345);
  for (int s = 0; s < nsm; ++s) { /* a random cycle through SM s's lines */
    int order[kLines];
    for (int i = 0; i < kLines; ++i) order[i] = i;
    for (int i = kLines - 1; i > 0; --i) {
      const int j = rand() % (i + 1), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    int pos0 = 0;
    for (int i = 0; i < kLines; ++i)
      if (order[i] == 0) pos0 = i;
    for (int i = 0; i < kLines; ++i) {
      const int from = order[(pos0 + i) % kLines], to = order[(pos0 + i + 1) % kLines];
      h[(static_cast<size_t>(s) * kLines + from) * kWordsPerLine] = (s * kLines + to) * kWordsPerLine;
    }
  }
  uint32_t* d_buf;
  unsigned *d_arrive, *d_cycles, *d_sink;
  void* d_flush;
  const size_t flush_bytes = 256u << 20;
  CHECK_CUDA(cudaMalloc(&d_buf, words * 4));
  CHECK_CUDA(cudaMalloc(&d_arrive, 4));
  CHECK_CUDA(cudaMalloc(&d_cycles, 4 * 1024));
  CHECK_CUDA(cudaMalloc(&d_sink, 4));
  CHECK_CUDA(cudaMalloc(&d_flush, flush_bytes));
  CHECK_CUDA(cudaMemcpy(d_buf, h, words * 4, cudaMemcpyHostToDevice));
  unsigned cold[1024], a[1024], b[1024];
  unsigned char ua[1024], ub[1024];
  if (run(d_buf, nsm, -1, smem, d_arrive, d_cycles, d_sink, d_flush, flush_bytes, cold)) return 1;
  const int ref0 = argc > 1 ? atoi(argv[1]) : 0;
  if (run(d_buf, nsm, ref0, smem, d_arrive, d_cycles, d_sink, d_flush, flush_bytes, a)) return 1;
  int ref1 = 0;
  for (int s = 0; s < nsm; ++s)
    if (a[s] > a[ref1]) ref1 = s;
  if (run(d_buf, nsm, ref1, smem, d_arrive, d_cycles, d_sink, d_flush, flush_bytes, b)) return 1;
  const unsigned gap_a = split(a, nsm, ua), gap_b = split(b, nsm, ub);
  printf("%s, %d SMs; cycles per dependent L2 load (ld.global.cg), by SM:\n", prop.name, nsm);
  printf("  sm  cold  ref%-3d ref%-3d\n", ref0, ref1);
  for (int s = 0; s < nsm; ++s)
    printf("  %3d %5u  %5u%c  %5u%c\n", s, cold[s], a[s], ua[s] ? '+' : ' ', b[s], ub[s] ? '+' : ' ');
  int na = 0, nb = 0, agree = 0;
  for (int s = 0; s < nsm; ++s) {
    na += ua[s];
    nb += ub[s];
    agree += ua[s] != ub[s]; /* the far group of one reference is the near group of the other */
  }
  printf("ref %d: widest gap %u cycles, %d SMs far (+); ref %d: gap %u, %d far; the two splits are complementary "
         "on %d of %d SMs\n",
         ref0, gap_a, na, ref1, gap_b, nb, agree, nsm);
  printf("partition map (ref %d's near group = 0):", ref0);
  for (int s = 0; s < nsm; ++s) printf("%s%d", s % 32 ? "" : "\n  ", ua[s]);
  printf("\n");
  free(h);
  return 0;
}
