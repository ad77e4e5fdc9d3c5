/* wgmma_rate_probe — how fast the tensor cores run the GEMM1 pair kernel's consumer loop when nothing else limits
 * it: two consumer warpgroups per CTA (one CTA per SM) multiply operands already in shared memory (A 64 × 128 K
 * per warpgroup, B 256 × 128 K shared, the 128-byte swizzle of the real ring), with no loads and no barriers, so
 * the rate is the wgmma issue/execute chain alone (docs/GPU.md "The activation's cost" reads it against the kernel).
 * Loops per CTA (each iteration = one 128-K stage of a pair item: 2 warpgroups × 64 × 256 × 128 MACs):
 *   promote   the kernel's loop: per warpgroup 4 m64n128k32 (gate) into a partial, wait, acc += partial; the same
 *             for up (gemm1_wgmma128_sm90.cu, consume_pair)
 *   fold      as promote with acc = fma(partial, scale, acc) (the block-scale promotion)
 *   n256      4 m64n256k32 into the accumulators themselves, the group of the previous stage awaited (wait 1)
 *   n128      as n256 with two m64n128k32 per 32 of K (gate, up)
 *   nowait    4 m64n256k32 per stage, one wait at the end (the issue-only bound)
 * and each again with a third warpgroup that writes shared memory as fast as it can (16-byte cp.async from an
 * L2-resident buffer into a 48 KB region of its own: the producer's write traffic, at its maximum).
 * Prints TFLOP/s (events around the kernel, median of 5) and the SM clock it ran at (clock64 over the same span).
 * Measured on the H200 (session 28): docs/GPU.md "The activation's cost".
 * Then the narrow products (docs/GPU.md "Narrow tails"): the library's wgmma m64nNk32 shapes (N = 8, 16, 32 of the
 * stream GEMMs, 128 of the pair kernels), 1–3 warpgroups, each with two 64-row A tiles of its own against one
 * shared N-row B tile, 4 k32 steps per stage and one wait; multiply-adds per cycle and SM and cycles per wgmma
 * (clock64).
 *   wgmma_rate_probe [stages per CTA, default 4000] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemm/wgmma_sm90.cuh"

namespace {
using namespace fp8moe::sm90;

constexpr int kA = 64 * 128, kB = 256 * 128; /* bytes per warpgroup A tile, shared B (two 128-row boxes) */
constexpr int kWriteBytes = 48 * 1024;
constexpr int kSmem = 2 * kA + kB + kWriteBytes + 1024;

#if FP8MOE_SM90A
/* The probe's own wide shape (the GEMM kernels do not use it): g, u (+)= A(64×32, desc_a) · B(256×32,
 * desc_b)ᵀ in one wgmma: B's rows 0..127 into g, 128..255 into u (the two
 * 128-row boxes of a stage lie back to back, 16 KB apart = 16 core groups of 1024 bytes, so one descriptor spans
 * both); accumulate = 0 overwrites. g and u each have wgmma_m64n128k32's layout (the n256 accumulator's registers
 * 0..63 are columns 0..127, 64..127 columns 128..255). */
__device__ __forceinline__ void wgmma_m64n256k32(float (&g)[64], float (&u)[64], uint64_t desc_a, uint64_t desc_b,
                                                 uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1;\n}\n"
      :
        "+f"(g[0]), "+f"(g[1]), "+f"(g[2]), "+f"(g[3]), "+f"(g[4]), "+f"(g[5]), "+f"(g[6]), "+f"(g[7]),
        "+f"(g[8]), "+f"(g[9]), "+f"(g[10]), "+f"(g[11]), "+f"(g[12]), "+f"(g[13]), "+f"(g[14]), "+f"(g[15]),
        "+f"(g[16]), "+f"(g[17]), "+f"(g[18]), "+f"(g[19]), "+f"(g[20]), "+f"(g[21]), "+f"(g[22]), "+f"(g[23]),
        "+f"(g[24]), "+f"(g[25]), "+f"(g[26]), "+f"(g[27]), "+f"(g[28]), "+f"(g[29]), "+f"(g[30]), "+f"(g[31]),
        "+f"(g[32]), "+f"(g[33]), "+f"(g[34]), "+f"(g[35]), "+f"(g[36]), "+f"(g[37]), "+f"(g[38]), "+f"(g[39]),
        "+f"(g[40]), "+f"(g[41]), "+f"(g[42]), "+f"(g[43]), "+f"(g[44]), "+f"(g[45]), "+f"(g[46]), "+f"(g[47]),
        "+f"(g[48]), "+f"(g[49]), "+f"(g[50]), "+f"(g[51]), "+f"(g[52]), "+f"(g[53]), "+f"(g[54]), "+f"(g[55]),
        "+f"(g[56]), "+f"(g[57]), "+f"(g[58]), "+f"(g[59]), "+f"(g[60]), "+f"(g[61]), "+f"(g[62]), "+f"(g[63]),
        "+f"(u[0]), "+f"(u[1]), "+f"(u[2]), "+f"(u[3]), "+f"(u[4]), "+f"(u[5]), "+f"(u[6]), "+f"(u[7]),
        "+f"(u[8]), "+f"(u[9]), "+f"(u[10]), "+f"(u[11]), "+f"(u[12]), "+f"(u[13]), "+f"(u[14]), "+f"(u[15]),
        "+f"(u[16]), "+f"(u[17]), "+f"(u[18]), "+f"(u[19]), "+f"(u[20]), "+f"(u[21]), "+f"(u[22]), "+f"(u[23]),
        "+f"(u[24]), "+f"(u[25]), "+f"(u[26]), "+f"(u[27]), "+f"(u[28]), "+f"(u[29]), "+f"(u[30]), "+f"(u[31]),
        "+f"(u[32]), "+f"(u[33]), "+f"(u[34]), "+f"(u[35]), "+f"(u[36]), "+f"(u[37]), "+f"(u[38]), "+f"(u[39]),
        "+f"(u[40]), "+f"(u[41]), "+f"(u[42]), "+f"(u[43]), "+f"(u[44]), "+f"(u[45]), "+f"(u[46]), "+f"(u[47]),
        "+f"(u[48]), "+f"(u[49]), "+f"(u[50]), "+f"(u[51]), "+f"(u[52]), "+f"(u[53]), "+f"(u[54]), "+f"(u[55]),
        "+f"(u[56]), "+f"(u[57]), "+f"(u[58]), "+f"(u[59]), "+f"(u[60]), "+f"(u[61]), "+f"(u[62]), "+f"(u[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
#endif

enum Loop { kPromote, kFold, kN256, kN128, kNoWait, kLoops };
const char* const kNames[kLoops] = {"promote", "fold", "n256", "n128", "nowait"};

template <int LOOP, bool WRITER>
__global__ void __launch_bounds__(384, 1) rate_kernel(const uint8_t* src, const uint8_t* noise, int stages, float* out,
                                                      long long* cycles) {
#if FP8MOE_SM90A
  extern __shared__ uint8_t raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~static_cast<uintptr_t>(1023));
  for (int i = threadIdx.x * 16; i < 2 * kA + kB; i += blockDim.x * 16)
    *reinterpret_cast<uint4*>(base + i) = *reinterpret_cast<const uint4*>(src + i);
  __syncthreads();
  const long long t0 = clock64();
  if (threadIdx.x < 128) { /* the writer: 16-byte copies into its own region, 8 groups in flight */
    setmaxnreg_dec<kProducerRegs>();
    if (WRITER) {
      const uint32_t dst0 = saddr(base + 2 * kA + kB);
      const int p = threadIdx.x;
      for (int k = 0; k < stages * 4; ++k) {
        const uint32_t off = static_cast<uint32_t>(((k * 128 + p) * 16) % kWriteBytes);
        const uint8_t* g = noise + ((static_cast<size_t>(blockIdx.x) * 7919u * 16u + k * 2048u + p * 16u) % (8u << 20));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst0 + off), "l"(g) : "memory");
        asm volatile("cp.async.commit_group;\n" ::: "memory");
        asm volatile("cp.async.wait_group 8;\n" ::: "memory");
      }
      asm volatile("cp.async.wait_all;\n" ::: "memory");
    }
    return;
  }
  setmaxnreg_inc<kConsumerRegs>(); /* as the GEMM kernels: the consumers' 192 accumulator registers fit */
  const int wg = consumer_wg();
  const uint64_t da = desc_sw128(base + wg * kA);
  const uint64_t db0 = desc_sw128(base + 2 * kA), db1 = desc_sw128(base + 2 * kA + kB / 2);
  float acc0[64], acc1[64], p[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc0[i] = acc1[i] = 0.0f;
  const float sc = 1.0f + 1e-3f * static_cast<float>(threadIdx.x % 7);
  if (LOOP == kPromote || LOOP == kFold) {
    /* One product of the kernel's loop: 4 wgmmas of B box db into the partial, wait, promote into acc. */
    auto product = [&](uint64_t db, float (&acc)[64]) {
      wgmma_fence();
      fence_regs(p);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) wgmma_m64n128k32(p, da + 2 * kk, db + 2 * kk, kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(p);
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = LOOP == kFold ? fmaf(p[i], sc, acc[i]) : acc[i] + p[i];
    };
#pragma unroll 1
    for (int s = 0; s < stages; ++s) {
      product(db0, acc0); /* gate */
      product(db1, acc1); /* up */
    }
  } else {
#pragma unroll 1
    for (int s = 0; s < stages; ++s) {
      wgmma_fence();
      fence_regs(acc0);
      fence_regs(acc1);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if (LOOP == kN128) {
          wgmma_m64n128k32(acc0, da + 2 * kk, db0 + 2 * kk, 1u);
          wgmma_m64n128k32(acc1, da + 2 * kk, db1 + 2 * kk, 1u);
        } else {
          wgmma_m64n256k32(acc0, acc1, da + 2 * kk, db0 + 2 * kk, 1u);
        }
      }
      wgmma_commit();
      if (LOOP != kNoWait) wgmma_wait<1>();
      fence_regs(acc0);
      fence_regs(acc1);
    }
    wgmma_wait<0>();
    fence_regs(acc0);
    fence_regs(acc1);
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) sum += acc0[i] + acc1[i];
  out[blockIdx.x * 256 + threadIdx.x - 128] = sum;
  if (threadIdx.x == 128) cycles[blockIdx.x] = clock64() - t0;
#else
  (void)src;
  (void)noise;
  (void)stages;
  (void)out;
  (void)cycles;
#endif
}

/* The narrow products: warpgroup wg (< warpgroups) multiplies its two 64-row A tiles (at 2·wg, 2·wg + 1 of
 * kA bytes each) by the N-row B tile after the six A tiles, 4 k32 steps each per stage, then waits for the group.
 * Its clock64 span goes to cycles[3 · block + wg]. */
constexpr int kNarrowBytes = 6 * kA + 128 * 128; /* six A tiles, B up to 128 rows */

#if FP8MOE_SM90A
__device__ __forceinline__ void narrow_mma(float (&d)[64], uint64_t da, uint64_t db) {
  wgmma_m64n128k32(d, da, db, 1u);
}
template <int R>
__device__ __forceinline__ void narrow_mma(float (&d)[R], uint64_t da, uint64_t db) { wgmma_e4m3(d, da, db, 1u); }
#endif

template <int N>
__global__ void __launch_bounds__(384, 1) narrow_kernel(const uint8_t* src, int stages, int warpgroups, float* out,
                                                        long long* cycles) {
#if FP8MOE_SM90A
  extern __shared__ uint8_t raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~static_cast<uintptr_t>(1023));
  for (int i = threadIdx.x * 16; i < kNarrowBytes; i += blockDim.x * 16)
    *reinterpret_cast<uint4*>(base + i) = *reinterpret_cast<const uint4*>(src + i);
  __syncthreads();
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  if (wg >= warpgroups) return;
  const uint64_t da0 = desc_sw128(base + 2 * wg * kA), da1 = desc_sw128(base + (2 * wg + 1) * kA);
  const uint64_t db = desc_sw128(base + 6 * kA);
  float d0[N / 2], d1[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d0[i] = d1[i] = 0.0f;
  const long long t0 = clock64();
#pragma unroll 1
  for (int s = 0; s < stages; ++s) {
    wgmma_fence();
    fence_acc(d0);
    fence_acc(d1);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      narrow_mma(d0, da0 + 2 * kk, db + 2 * kk);
      narrow_mma(d1, da1 + 2 * kk, db + 2 * kk);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_acc(d0);
    fence_acc(d1);
  }
  const long long t1 = clock64();
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) sum += d0[i] + d1[i];
  out[blockIdx.x * 384 + threadIdx.x] = sum;
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 3 + wg] = t1 - t0;
#else
  (void)src;
  (void)stages;
  (void)warpgroups;
  (void)out;
  (void)cycles;
#endif
}

/* One line per warpgroup count: the mean span over the SMs' warpgroups gives cycles per stage; each stage is
 * 8 · warpgroups wgmmas of 64 · N · 32 multiply-adds on one SM's tensor cores. */
template <int N>
void narrow(int sms, int stages, const uint8_t* src, float* out, long long* cycles) {
  const int smem = kNarrowBytes + 1024;
  cudaFuncSetAttribute(narrow_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  long long* h = static_cast<long long*>(malloc(static_cast<size_t>(sms) * 3 * sizeof(long long)));
  for (int wgs = 1; wgs <= 3; ++wgs) {
    narrow_kernel<N><<<sms, 384, smem>>>(src, stages / 8, wgs, out, cycles); /* warm-up */
    narrow_kernel<N><<<sms, 384, smem>>>(src, stages, wgs, out, cycles);
    const cudaError_t err = cudaMemcpy(h, cycles, static_cast<size_t>(sms) * 3 * sizeof(long long),
                                       cudaMemcpyDeviceToHost);
    double span = 0.0;
    for (int b = 0; b < sms; ++b)
      for (int w = 0; w < wgs; ++w) span += static_cast<double>(h[b * 3 + w]);
    span /= static_cast<double>(sms) * wgs;
    const double per_stage = span / stages, macs = 8.0 * wgs * 64 * N * 32;
    printf("m64n%dk32 %3d  warpgroups %d  %7.1f MAC per cycle and SM  %5.1f cycles per wgmma  %s\n", N, N, wgs,
           macs / per_stage, per_stage / (8.0 * wgs), err == cudaSuccess ? "ok" : cudaGetErrorString(err));
  }
  free(h);
}

using KernelFn = void (*)(const uint8_t*, const uint8_t*, int, float*, long long*);

template <int LOOP, bool WRITER>
void run(const char* name, int sms, int stages, const uint8_t* src, const uint8_t* noise, float* out,
         long long* cycles) {
  const KernelFn k = rate_kernel<LOOP, WRITER>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float ms[5];
  long long cyc = 0;
  for (int r = 0; r < 6; ++r) {
    cudaEventRecord(e0);
    k<<<sms, 384, kSmem>>>(src, noise, stages, out, cycles);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t = 0.0f;
    cudaEventElapsedTime(&t, e0, e1);
    if (r > 0) ms[r - 1] = t;
    if (r == 5) cudaMemcpy(&cyc, cycles, sizeof cyc, cudaMemcpyDeviceToHost);
  }
  for (int i = 0; i < 5; ++i)
    for (int j = i + 1; j < 5; ++j)
      if (ms[j] < ms[i]) {
        const float t = ms[i];
        ms[i] = ms[j];
        ms[j] = t;
      }
  const double flop = 2.0 * 2 * 64 * 256 * 128 * static_cast<double>(stages) * sms;
  const cudaError_t err = cudaGetLastError();
  printf("%-8s writer %d  %8.3f ms  %7.1f TFLOP/s  SM %4.0f MHz  %5.1f cycles per stage  %s\n", name, WRITER ? 1 : 0,
         ms[2], flop / (ms[2] * 1e-3) / 1e12, cyc / (ms[2] * 1e3), static_cast<double>(cyc) / stages,
         err == cudaSuccess ? "ok" : cudaGetErrorString(err));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

template <int LOOP>
void both(int sms, int stages, const uint8_t* src, const uint8_t* noise, float* out, long long* cycles) {
  run<LOOP, false>(kNames[LOOP], sms, stages, src, noise, out, cycles);
  run<LOOP, true>(kNames[LOOP], sms, stages, src, noise, out, cycles);
}
}  // namespace

int main(int argc, char** argv) {
  const int stages = argc > 1 ? atoi(argv[1]) : 4000;
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms == 0) {
    printf("wgmma_rate_probe: no usable GPU\n");
    return 77;
  }
  uint8_t *src = nullptr, *noise = nullptr;
  float* out = nullptr;
  long long* cycles = nullptr;
  const size_t n = kNarrowBytes; /* ≥ the rate kernels' 2 · kA + kB */
  uint8_t* h = static_cast<uint8_t*>(malloc(n));
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    uint8_t c = static_cast<uint8_t>(x >> 24);
    if ((c & 0x7F) == 0x7F) c ^= 0x01; /* no NaN codes */
    h[i] = c;
  }
  cudaMalloc(&src, n);
  cudaMalloc(&noise, 8u << 20);
  cudaMalloc(&out, static_cast<size_t>(sms) * 384 * sizeof(float));
  cudaMalloc(&cycles, static_cast<size_t>(sms) * 3 * sizeof(long long));
  cudaMemcpy(src, h, n, cudaMemcpyHostToDevice);
  cudaMemset(noise, 0x3C, 8u << 20);
  free(h);
  printf("wgmma_rate_probe: %d SMs, %d stages per CTA, 2 consumer warpgroups (+ a writer warpgroup)\n", sms, stages);
  both<kPromote>(sms, stages, src, noise, out, cycles);
  both<kFold>(sms, stages, src, noise, out, cycles);
  both<kN256>(sms, stages, src, noise, out, cycles);
  both<kN128>(sms, stages, src, noise, out, cycles);
  both<kNoWait>(sms, stages, src, noise, out, cycles);
  printf("narrow products (each warpgroup: two 64-row A tiles against one N-row B tile per k32 step)\n");
  narrow<8>(sms, stages, src, out, cycles);
  narrow<16>(sms, stages, src, out, cycles);
  narrow<32>(sms, stages, src, out, cycles);
  narrow<128>(sms, stages, src, out, cycles);
  return 0;
}
