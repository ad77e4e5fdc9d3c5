/* dram_pattern_probe — how fast HBM serves weight rows read W contiguous bytes at a time (docs/GPU.md "The
 * steady-state rate": the stream GEMMs' stage reads 256 weight rows × 128 bytes of K and the next 128 bytes of
 * each row only a stage period later, ~1.3 µs; measured on an H200, 128-byte pieces cost ≤ 4 % against a
 * linear read, 64-byte ones ~30 %). The probe reads a [rows, row_bytes] byte matrix
 * in pieces of W bytes (one row, W contiguous bytes), all rows' piece c before any row's piece c + 1, so
 * requests to one row are rows × W bytes of issue apart (as a stream GEMM's stage period apart), and prints
 * GB/s per W; W = row_bytes is the linear read. Same loads, same bytes in flight for every W (each thread 8
 * independent 16-byte loads, the grid sized by the occupancy), so a rate that rises with W measures DRAM
 * page locality, not the load path.
 *   dram_pattern_probe [row_bytes [rows]]     (default 7168 × 32768: deepseek-v3's 8 experts' W13 at T=1) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe_check.h"

enum { kUnroll = 8, kThreads = 512 };

/* Warp-iteration g covers bytes [512 g, 512 g + 512) of the piece-major order; lane l its 16 bytes at
 * 512 g + 16 l: piece p = byte / W (chunk c = p / rows of row r = p % rows), offset byte % W. */
__global__ void __launch_bounds__(kThreads) piece_read(const uint8_t* __restrict__ base, int64_t rows,
                                                      int64_t row_bytes, int64_t w, int64_t iters,
                                                      unsigned long long* sink) {
  const int64_t warps = (int64_t)gridDim.x * (kThreads / 32);
  const int64_t warp = (int64_t)blockIdx.x * (kThreads / 32) + threadIdx.x / 32;
  const int64_t lane_byte = 16 * (int64_t)(threadIdx.x % 32);
  uint32_t acc = 0;
  for (int64_t g0 = warp; g0 < iters; g0 += kUnroll * warps) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t g = g0 + u * warps;
      if (g < iters) {
        const int64_t b = 512 * g + lane_byte, p = b / w, c = p / rows, r = p - c * rows;
        v[u] = __ldcs((const uint4*)(base + r * row_bytes + c * w + (b - p * w)));
      } else {
        v[u] = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (int o = 16; o; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc == 0x9E3779B9u) atomicXor(sink, (unsigned long long)acc);
}

static int cmp_float(const void* a, const void* b) {
  const float x = *(const float*)a, y = *(const float*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const int64_t row_bytes = argc > 1 ? atoll(argv[1]) : 7168, rows = argc > 2 ? atoll(argv[2]) : 32768;
  const int64_t bytes = row_bytes * rows;
  if (row_bytes <= 0 || rows <= 0 || row_bytes % 512 != 0) {
    fprintf(stderr, "row_bytes must be a positive multiple of 512\n");
    return 2;
  }
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint8_t* buf = NULL;
  unsigned long long* sink = NULL;
  CHECK_CUDA(cudaMalloc((void**)&buf, (size_t)bytes));
  CHECK_CUDA(cudaMalloc((void**)&sink, sizeof *sink));
  CHECK_CUDA(cudaMemset(buf, 0x5A, (size_t)bytes));
  cudaEvent_t t0, t1;
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));
  int per_sm = 0;
  CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, piece_read, kThreads, 0));
  if (per_sm < 1) per_sm = 1;
  /* the widths that divide the default 7,168-byte rows and the 2,048-byte ones, then the linear read (0) */
  static const int64_t widths[] = {64, 128, 256, 512, 1024, 1792, 2048, 3584, 4096, 0};
  printf("rows %lld x %lld B (%.1f MB), %d SMs x %d CTAs x %d threads x %d loads of 16 B in flight (%.0f KB per SM)\n",
         (long long)rows, (long long)row_bytes, bytes / 1e6, sms, per_sm, kThreads, kUnroll,
         per_sm * kThreads * kUnroll * 16 / 1024.0);
  printf("| W (contiguous bytes per row per piece) | GB/s median of 9 | best |\n|---|---|---|\n");
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; ++i) {
    const int64_t w = widths[i] ? widths[i] : row_bytes;
    if (row_bytes % w != 0 || (widths[i] && w == row_bytes)) continue; /* the linear read once, last */
    float gbs[9];
    for (int rep = -1; rep < 9; ++rep) { /* rep -1 warms up; the 235 MB read evicts the 50 MB L2 */
      CHECK_CUDA(cudaEventRecord(t0));
      piece_read<<<per_sm * sms, kThreads>>>(buf, rows, row_bytes, w, bytes / 512, sink);
      CHECK_CUDA(cudaEventRecord(t1));
      CHECK_CUDA(cudaEventSynchronize(t1));
      CHECK_CUDA(cudaGetLastError());
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
      if (rep >= 0) gbs[rep] = (float)(bytes / (ms * 1e6));
    }
    qsort(gbs, 9, sizeof gbs[0], cmp_float);
    printf("| %lld%s | %.0f | %.0f |\n", (long long)w, w == row_bytes ? " (linear)" : "", gbs[4], gbs[8]);
  }
  CHECK_CUDA(cudaFree(buf));
  CHECK_CUDA(cudaFree(sink));
  return 0;
}
