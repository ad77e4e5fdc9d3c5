/* wgmma_sm90.cuh — the Hopper (sm_90a) grouped-GEMM machinery shared by gemm1_wgmma_sm90.cu and
 * gemm2_wgmma_sm90.cu: a warp-specialized CTA of 384 threads (one producer warpgroup, two consumer
 * warpgroups), a kStages-deep ring of shared-memory stages guarded by mbarriers (full: data landed; empty:
 * both consumers are done with it), TMA loads of 128×128-byte weight boxes with the 128-byte swizzle, and
 * `wgmma.mma_async m64n128k32 e4m3` reading both operands from shared memory (K-major, swizzled).
 * One stage holds A (64 rows × 128 K) and two B tiles (2 × 128 rows × 128 K); consumer warpgroup w
 * multiplies A by B tile w, so a CTA computes 64 × 256 outputs per stage (GEMM1: 128 gate + 128 up columns
 * of the same 128 intermediate columns; GEMM2: 256 output columns). A comes by TMA where rows are contiguous
 * (GEMM2's expert-sorted a2q) or by cp.async gathers written in the same swizzled layout (GEMM1's token rows
 * through sorted_slots). Every 128 of K (one stage) the tensor cores' partial sum is promoted into an
 * fp32 accumulator (with the block scales for FP8_BLOCK128), as the mma.sync kernels do for block scales.
 * Everything that needs sm_90a is compiled only under __CUDA_ARCH_FEAT_SM90_ALL; the compute_90 PTX build
 * gets a trapping body, and the kernel plan (src/cuda/cuda_plan.c) selects these
 * kernels only on compute capability 9.0, where the sm_90a SASS is the one that loads. */
#ifndef FP8MOE_KERNELS_WGMMA_SM90_CUH
#define FP8MOE_KERNELS_WGMMA_SM90_CUH

#include <cuda.h> /* CUtensorMap (a type only: no libcuda symbol is referenced) */

#include "common.cuh"
#include "sm90_items.h"
#include "sm90_scale_kinds.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FP8MOE_SM90A 1
#else
#define FP8MOE_SM90A 0
#endif

extern "C" {
/* Shared-memory limits of each file's kernels (called by fp8moe_prepare_gemm_sm90). */
int fp8moe_prepare_gemm1_sm90_smem(void);
int fp8moe_prepare_gemm2_sm90_smem(void);
int fp8moe_prepare_gemm1_sm90_pairs_smem(void); /* gemm1_wgmma128_sm90.cu */
int fp8moe_prepare_gemm2_sm90_pairs_smem(void); /* gemm2_wgmma128_sm90.cu */
/* Host: a tiled e4m3 tensor map with the 128-byte swizzle: dims[0] = K (bytes, contiguous), box
 * box0 × box1 (× 1). rank 2 or 3; strides in bytes for dims 1.. */
int fp8moe_sm90_encode(void* encode_fn, CUtensorMap* map, const void* base, int rank, const uint64_t* dims,
                       const uint64_t* strides, uint32_t box0, uint32_t box1);
/* Host: GEMM2's two tensor maps (tma_sm90.cu), shared by its 64-row and 128-row kernels: a2q as a 2-D map of
 * max_tiles · 64 rows × I bytes with 64-row boxes (a 128-row item loads two), W2 as [E_local, H, I] with
 * 128 × 128 boxes. 0 or a cudaError_t. */
int fp8moe_sm90_encode_gemm2(const fp8moe_gemm2_args* a, CUtensorMap* map_a, CUtensorMap* map_w);
}

namespace fp8moe {
namespace sm90 {

constexpr int kBM = 64;   /* rows per tile: FP8MOE_GEMM_TILE_M_LARGE */
constexpr int kBN = 128;  /* columns per B tile (one per consumer warpgroup) */
constexpr int kBK = 128;  /* K per stage: one scale block, one 128-byte swizzle row */
constexpr int kStages = 4;
constexpr int kThreads = 384;
constexpr int kConsumers = 256;
constexpr int kATileBytes = kBM * kBK;
constexpr int kBTileBytes = kBN * kBK;
constexpr int kEpiPitch = kBN + 4;
constexpr int kGemm2Cols = 2 * kBN; /* GEMM2 output columns per work item */
constexpr int kProducerRegs = 40, kConsumerRegs = 232; /* 128·40 + 256·232 ≤ 64K registers */

static_assert(kBM == FP8MOE_GEMM_TILE_M_LARGE, "the plan's tile_m for these kernels");
static_assert(kBK == FP8MOE_GEMM_TILE_K, "one stage is one 128-wide scale block");

struct Stage {
  uint8_t a[kATileBytes];
  uint8_t b[2][kBTileBytes];
};
static_assert(sizeof(Stage) % 1024 == 0, "the 128-byte swizzle repeats every 1024 bytes: tiles stay aligned");

struct Smem {
  Stage st[kStages];
  float epi[kBM][kEpiPitch]; /* GEMM1's epilogue: the handed-over gate/up halves, then the activated tile */
  uint64_t full[kStages];
  uint64_t empty[kStages];
  float w_scale[kStages][2]; /* GEMM2, fp32 block scales: each stage's weight-block scale per consumer warpgroup */
  int32_t group_edge[FP8MOE_SM90_MAX_GROUP_EDGES]; /* GEMM2, expert-aligned groups: the group edges (sm90_items.h) */
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024; /* + slack to align the dynamic buffer to 1024 */

__device__ __forceinline__ uint32_t saddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

/* The layout T at the first 1024-byte boundary of the dynamic shared memory `raw` (the kernel's extern
 * __shared__ array), rounded as a 32-bit shared address (as pair_addr_of) and converted back with
 * __cvta_shared_to_generic: the compiler then knows the pointer is shared and 1024-aligned, so accesses
 * through it compile to LDS/STS (vectorized where adjacent). Rounding the generic address as a uintptr_t
 * instead loses the state space, and every access became a generic LD/ST (GEMM1's epilogue: docs/GPU.md
 * "Shared-memory epilogue accesses"). Both round to the same byte: the shared window's generic base has zero
 * low 32 bits (SR_SWINHI). */
template <class T>
__device__ __forceinline__ T& aligned_smem(uint8_t* raw) {
  return *static_cast<T*>(__cvta_shared_to_generic((saddr(raw) + 1023u) & ~1023u));
}

/* The same boundary through a uintptr_t (generic accesses). GEMM2 keeps it (as pair_smem_of, sm90_pairs.cuh):
 * it reaches only barriers and descriptors through it, and aligned_smem there grew the stack of two opt-in
 * instantiations (8 → 32 and 0 → 16 bytes; docs/GPU.md "Shared-memory epilogue accesses"). */
__device__ __forceinline__ Smem& smem_of(uint8_t* raw) {
  return *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~static_cast<uintptr_t>(1023));
}

#if FP8MOE_SM90A
__device__ __forceinline__ void mbar_init(uint64_t* b, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(saddr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
/* The mbarrier operations take the barrier's 32-bit shared-memory address (the uint64_t* forms convert a
 * generic pointer): kernels that keep their shared-memory layout as 32-bit addresses (gemm1_wgmma128_sm90.cu)
 * save the registers of 64-bit generic pointers. */
__device__ __forceinline__ void mbar_arrive(uint32_t b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(b) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) { mbar_arrive(saddr(b)); }
/* count arrivals at once (count ≥ 1) */
__device__ __forceinline__ void mbar_arrive_count(uint32_t b, uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* b, uint32_t bytes) {
  mbar_arrive_expect_tx(saddr(b), bytes);
}
/* Waits until the phase with the given parity has completed (a fresh barrier counts parity 1 as done). */
__device__ __forceinline__ void mbar_wait(uint32_t b, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(b),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) { mbar_wait(saddr(b), parity); }
/* The 2-CTA cluster variant (docs/GPU.md "2-CTA clusters"): this CTA's rank in its cluster, a whole-cluster
 * barrier (every thread of both CTAs; release/acquire at cluster scope), an arrive on the mbarrier at the same
 * shared-memory offset in CTA `rank`, and the producer's wait on its own empty barrier. The ring's only
 * cross-CTA hazard is write-after-read: a peer's multicast refilling a stage this CTA's wgmmas have read. Those
 * reads are complete when wgmma.wait_group returns, before the arrive is issued, so the arrive and the wait
 * keep the default .cta-scope release/acquire (as CUTLASS's TMA pipeline does). Cluster scope cost a fence per
 * arrive (SASS ERRBAR, ~17 % of warp samples) and an L1 invalidation per wait (CCTL.IVALL, 24 % in GEMM1) by
 * ncu at deepseek-v3 T = 8192 (2026-12-03). */
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
/* Predicated inside the asm rather than branched around in C: a divergent branch between a wgmma's issue and
 * its wait makes ptxas serialize every wgmma of the loop (C7514, docs/GPU.md "2-CTA clusters"). */
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* b, uint32_t rank, uint32_t on = 1u) {
  asm volatile(
      "{\n.reg .b32 ra;\n.reg .pred p;\n"
      "setp.ne.u32 p, %2, 0;\n"
      "mapa.shared::cluster.u32 ra, %0, %1;\n"
      "@p mbarrier.arrive.shared::cluster.b64 _, [ra];\n"
      "}\n" ::"r"(saddr(b)),
      "r"(rank), "r"(on)
      : "memory");
}
/* The producer's wait for both CTAs' releases: the plain wait (the name says whose arrivals it counts). */
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* b, uint32_t parity) { mbar_wait(b, parity); }

__device__ __forceinline__ float ld_shared_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ int32_t ld_shared_s32(uint32_t addr) {
  int32_t v;
  asm volatile("ld.shared.s32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_f32(uint32_t addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}
__device__ __forceinline__ void st_shared_s32(uint32_t addr, int32_t v) {
  asm volatile("st.shared.s32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
/* A 4-byte fp32 scale into shared memory by cp.async (bytes = 0 writes 0). */
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

/* Generic-proxy writes (cp.async) made visible to the async proxy (wgmma reads). */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* A gathering producer thread's share of a stage's full barrier (GEMM1; docs/GPU.md "The gathering producers'
 * publication"): two arrivals per thread and stage, so a full barrier counts kGatherArrivals per gathering
 * thread. cp.async.mbarrier.arrive.noinc arrives when every cp.async this thread has issued lands, and the
 * plain arrive's release orders the thread's st.shared stores (scales, the claimed item) before the phase
 * completes. The form without .noinc (one counted arrival, the copies tracked through a count raised at
 * issue) is equivalent by the PTX ISA, but compute-sanitizer synccheck reports "Missing wait" for it and
 * aborts the kernel (docs/GPU.md "The gathering producers' publication"). The thread never waits for its own
 * copies, so all kStages stages can be in flight; the consumers fence the proxies after their full wait
 * (GATHERED in consume() and consume_pair()), the first point where the copies are known to have landed. */
constexpr uint32_t kGatherArrivals = 2;
__device__ __forceinline__ void publish_gathered(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
  mbar_arrive(bar);
}
__device__ __forceinline__ void publish_gathered(uint64_t* bar) { publish_gathered(saddr(bar)); }

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t c0, int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int32_t c0, int32_t c1) {
  tma_load_2d(saddr(dst), map, saddr(bar), c0, c1);
}
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t c0, int32_t c1,
                                            int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int32_t c0, int32_t c1,
                                            int32_t c2) {
  tma_load_3d(saddr(dst), map, saddr(bar), c0, c1, c2);
}

/* One 3-D box written to the same shared-memory offset of every CTA in cta_mask (bit i: cluster rank i); the
 * bytes complete the transaction count of the mbarrier at the same offset in each of those CTAs. */
__device__ __forceinline__ void tma_load_3d_multicast(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t c0,
                                                      int32_t c1, int32_t c2, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, "
      "%4, %5}], [%2], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(cta_mask)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, int32_t c0,
                                                      int32_t c1, int32_t c2, uint16_t cta_mask) {
  tma_load_3d_multicast(saddr(dst), map, saddr(bar), c0, c1, c2, cta_mask);
}

template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

/* The thread's consumer warpgroup (0 or 1; threads 128..383), broadcast from lane 0: the compiler then knows it
 * is warp-uniform, so the ring position, the shared-memory descriptors and the barrier addresses derived from it
 * live in uniform registers, and the wgmmas take their descriptors without the R2UR moves (and their latency)
 * that a thread-index expression costs before every wgmma (docs/GPU.md "The pair kernels' consumer chain"). */
__device__ __forceinline__ int consumer_wg() {
  return __shfl_sync(0xffffffffu, (static_cast<int>(threadIdx.x) - 128) / 128, 0);
}

/* Named barrier among the two consumer warpgroups (id 1; 0 is __syncthreads). */
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory"); }

/* Shared-memory matrix descriptor: K-major tile with 128-byte rows and the 128-byte swizzle; 8-row core
 * groups are 1024 bytes apart (stride byte offset); the leading byte offset is unused (0) for this layout. */
__device__ __forceinline__ uint64_t desc_sw128(uint32_t tile) {
  const uint64_t addr = tile;
  return ((addr & 0x3FFFF) >> 4) | ((1024ull >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ uint64_t desc_sw128(const void* tile) { return desc_sw128(saddr(tile)); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/* Waits until at most N committed wgmma groups of this warpgroup are still pending. */
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving accumulator reads or writes across wgmma issue and wait. */
__device__ __forceinline__ void fence_regs(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/* d (+)= A(64×32, desc_a) · B(128×32, desc_b)ᵀ; accumulate = 0 overwrites d. Accumulator layout per thread
 * (warp q of the warpgroup, lane = 4g + t): d[4j + h] is row 16q + g + 8·(h ≥ 2), column 8j + 2t + (h & 1). */
__device__ __forceinline__ void wgmma_m64n128k32(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                 uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n}\n"
      :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
/* fence_regs for an accumulator of any size. */
template <int R>
__device__ __forceinline__ void fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/* The narrow shapes of the swap-AB stream GEMMs (gemm_stream_sm90.cu): d (+)= A(64×32, desc_a) · B(N×32,
 * desc_b)ᵀ for N = 8 (d[4]), 16 (d[8]) or 32 (d[16], a unit of two tiles); accumulate = 0 overwrites d.
 * Same accumulator layout as wgmma_m64n128k32: d[4j + h] is row 16q + g + 8·(h ≥ 2), column 8j + 2t + (h & 1). */
__device__ __forceinline__ void wgmma_e4m3(float (&d)[4], uint64_t desc_a, uint64_t desc_b, uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_e4m3(float (&d)[8], uint64_t desc_a, uint64_t desc_b, uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_e4m3(float (&d)[16], uint64_t desc_a, uint64_t desc_b, uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
#endif /* FP8MOE_SM90A */

/* A scale read in the main loop (block scales) or per element in the epilogue (per-channel weight scales).
 * F32: the tensor is fp32 (the launcher checked its dtype), one read-only load; otherwise the generic dtype
 * switch of kref_at. The switch costs ~140 instructions per stage and warp for the three block-scale reads
 * (SASS), more issue slots than the stage's wgmmas leave the consumer warps, and ~20 per element in the
 * per-channel epilogue. */
template <bool F32>
__device__ __forceinline__ float scale_at(const fp8moe_kref& r, int64_t i0, int64_t i1, int64_t i2) {
  const int64_t off = i0 * r.s[0] + i1 * r.s[1] + i2 * r.s[2];
  return F32 ? __ldg(static_cast<const float*>(r.data) + off) : load_f32(r.data, r.dt, off);
}

/* scale_at at a precomputed element offset (the 128-row GEMM2 keeps offsets, not indices, across its loop). */
template <bool F32>
__device__ __forceinline__ float scale_off(const fp8moe_kref& r, int64_t off) {
  return F32 ? __ldg(static_cast<const float*>(r.data) + off) : load_f32(r.data, r.dt, off);
}

/* Row of accumulator element i for this thread (rows r0 = 16q + g and r0 + 8), column offset. */
__device__ __forceinline__ int acc_half(int i) { return (i >> 1) & 1; }
__device__ __forceinline__ int acc_col(int i, int t) { return (i >> 2) * 8 + 2 * t + (i & 1); }

/* GEMM2's epilogue scales for the thread's two expert-sorted rows row_lo and row_hi (8 apart) of expert e: TENSOR
 * the a2 scale × the expert's weight scale (st), ROW the rows' a2 scales (sr); BLOCK none (in the promotion). */
struct YScales {
  float st, sr[2];
};
template <int SCALE>
__device__ __forceinline__ YScales y_scales(const fp8moe_gemm2_args& a, int32_t e, int64_t row_lo, int64_t row_hi) {
  YScales y = {0.0f, {0.0f, 0.0f}};
  if (SCALE == FP8MOE_SCALE_TENSOR) y.st = kref_at(a.a2_scale, 0) * kref_at(a.w_scale, e);
  if (SCALE == FP8MOE_SCALE_ROW) {
    y.sr[0] = kref_at(a.a2_scale, row_lo);
    y.sr[1] = kref_at(a.a2_scale, row_hi);
  }
  return y;
}

/* The thread's accumulator pair i, i + 1 (output columns col, col + 1 of row half acc_half(i)) dequantized for
 * y: TENSOR × the expert's scale product, ROW × the row's a2 scale × each column's weight scale, BLOCK as
 * promoted. Both store paths below use it (and y_bf16x2), so they write the same bits. */
template <int SCALE, bool F32>
__device__ __forceinline__ void y_dequant(const fp8moe_gemm2_args& a, const float (&acc)[64], int i, int32_t e,
                                          int32_t col, const YScales& y, float& v0, float& v1) {
  const int h = acc_half(i);
  v0 = acc[i];
  v1 = acc[i + 1];
  if (SCALE == FP8MOE_SCALE_TENSOR) {
    v0 *= y.st;
    v1 *= y.st;
  } else if (SCALE == FP8MOE_SCALE_ROW) {
    v0 = v0 * y.sr[h] * scale_at<F32>(a.w_scale, e, col, 0);
    v1 = v1 * y.sr[h] * scale_at<F32>(a.w_scale, e, col + 1, 0);
  }
}
/* GEMM2's epilogue for the thread's accumulators of one 128-column W2 box from column n: dequantized per
 * element (y_dequant) and stored as bf16 pairs into the y rows slot[h] of its two rows, one 4-byte store per
 * pair; padding rows (slot < 0) are not stored. The 128-row GEMM2 ends this way; the 64-row one stages the
 * same values through shared memory (store_y_box_staged, below). */
template <int SCALE, bool F32>
__device__ __forceinline__ void store_y_box(const fp8moe_gemm2_args& a, const float (&acc)[64], int32_t e, int32_t n,
                                            int t, const YScales& y, const int32_t (&slot)[2]) {
#pragma unroll
  for (int i = 0; i < 64; i += 2) {
    const int h = acc_half(i), col = n + acc_col(i, t);
    float v0, v1;
    y_dequant<SCALE, F32>(a, acc, i, e, col, y, v0, v1);
    if (slot[h] >= 0) *reinterpret_cast<uint32_t*>(a.y + static_cast<int64_t>(slot[h]) * a.H + col) = y_bf16x2(v0, v1);
  }
}

/* store_y_box through shared memory: the same values (the same dequantization and bf16 conversion per pair),
 * but written to global memory as whole 256-byte half-rows with 16-byte stores instead of one 4-byte store per
 * pair (8 rows × 16 bytes per warp instruction, and the source register of each store held until the LSU
 * takes it): in the 64-row GEMM2 at deepseek-v3 T = 8192 the epilogue was ~24 % of all warp samples (ncu,
 * docs/GPU.md "GEMM2's staged epilogue"). Each consumer warpgroup stages its 64 rows × 128 columns (16 KB of
 * bf16 pairs) in its half of the epilogue buffer, 128-byte-swizzled (16-byte chunk c of row r at chunk
 * c ⊕ (r mod 8): the fragment writes and the row reads are both free of bank conflicts), synchronized by a
 * named barrier of its own (2 + wg, 128 threads); then warp q stores rows 16q..16q+15, two half-rows per
 * instruction, each row to y's row of its slot (padding rows: none). */
constexpr uint32_t kYStageBytes = static_cast<uint32_t>(kBM) * kBN * 2; /* one warpgroup's bf16 tile */
static_assert(2 * kYStageBytes <= sizeof(float) * kBM * kEpiPitch, "GEMM2's staged y tiles fit the epilogue buffer");
/* GEMM2's block-scale row scales, staged per stage by the producer warpgroup (gemm2_wgmma_sm90.cu): stage s's 64
 * fp32 values in the 1 KB of the epilogue buffer past the two staged y tiles, so the kernel keeps its shared-memory
 * size (and carveout: docs/GPU.md "GEMM2's fold test"). */
constexpr uint32_t kRowScaleStageBytes = static_cast<uint32_t>(kBM * sizeof(float));
static_assert(2 * kYStageBytes + kStages * kRowScaleStageBytes <= sizeof(float) * kBM * kEpiPitch,
              "GEMM2's staged row scales fit the epilogue buffer after the y tiles");
__device__ __forceinline__ uint32_t gemm2_row_scale(Smem& sm, int s, int r) {
  return saddr(&sm.epi[0][0]) + 2u * kYStageBytes + static_cast<uint32_t>(s) * kRowScaleStageBytes +
         static_cast<uint32_t>(r) * 4u;
}
__device__ __forceinline__ void wg_sync(int wg) { /* immediate barrier ids: a register id makes ptxas reserve all 16 */
  if (wg == 0) asm volatile("bar.sync 2, 128;\n" ::: "memory");
  else asm volatile("bar.sync 3, 128;\n" ::: "memory");
}
template <int SCALE, bool F32>
__device__ __forceinline__ void store_y_box_staged(const fp8moe_gemm2_args& a, const float (&acc)[64], int32_t e,
                                                   int32_t n, int t, const YScales& y, const int32_t (&slot)[2],
                                                   uint32_t stage, int wg, int q, int lane) {
  const int g = lane / 4;
  /* Row r0 + 8h of the tile (r mod 8 = g for both), the thread's word t of a chunk: chunk j of the row is at
   * base[h] ^ (j << 4) (the tile is 1024-aligned, so the XOR only touches the chunk bits) — one LOP3 per store,
   * nothing for the compiler to precompute and keep across the main loop. */
  const uint32_t base0 = stage + static_cast<uint32_t>(16 * q + g) * 256u + (static_cast<uint32_t>(g) << 4) +
                         (static_cast<uint32_t>(t) << 2);
  wg_sync(wg); /* this warpgroup's previous item is done reading the tile */
  /* Each pair by the one-instruction conversion for values neither ±Inf nor NaN (y_bf16x2_finite); a thread that met
   * one converts its values again by y_bf16x2, which keeps them (docs/GPU.md "The y conversion"). Not for per-channel
   * scales (ROW), whose epilogue loads a weight scale per element: there the two loops measured +2 % at llama4-scout
   * T = 8192, so ROW keeps the single loop by y_bf16x2. */
  auto stage_pairs = [&](auto convert) {
    bool special = false;
#pragma unroll
    for (int i = 0; i < 64; i += 2) {
      float v0, v1;
      y_dequant<SCALE, F32>(a, acc, i, e, n + acc_col(i, t), y, v0, v1);
      special |= !(fabsf(v0) < INFINITY) | !(fabsf(v1) < INFINITY);
      const uint32_t addr = (base0 + (acc_half(i) ? 8u * 256u : 0u)) ^ (static_cast<uint32_t>(i >> 2) << 4); /* chunk i / 4 */
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(convert(v0, v1)) : "memory");
    }
    return special;
  };
  auto general = [](float v0, float v1) { return y_bf16x2(v0, v1); };
  if (SCALE == FP8MOE_SCALE_ROW) (void)stage_pairs(general);
  else if (stage_pairs([](float v0, float v1) { return y_bf16x2_finite(v0, v1); })) (void)stage_pairs(general);
  wg_sync(wg); /* the tile is complete */
  const uint32_t c = static_cast<uint32_t>(lane & 15);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int m = 2 * k + (lane >> 4); /* row 16q + m of the tile: its slot is held by lane 4·(m mod 8), half m / 8 */
    const int32_t sl = __shfl_sync(0xffffffffu, k < 4 ? slot[0] : slot[1], 4 * (m & 7));
    const uint32_t r = static_cast<uint32_t>(16 * q + m);
    uint32_t v0, v1, v2, v3;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3)
                 : "r"(stage + r * 256u + ((c ^ (r & 7u)) << 4))
                 : "memory");
    if (sl >= 0) *reinterpret_cast<uint4*>(a.y + static_cast<int64_t>(sl) * a.H + n + 8 * static_cast<int>(c)) = make_uint4(v0, v1, v2, v3);
  }
}

/* One stage's partial p promoted into the fp32 accumulator (consume() below says why every stage is): BLOCK
 * acc += (p·s_row)·s_w with the thread's row scales c0 (row r0) and c1 (r0 + 8) and the B tile's weight-block
 * scale cw (the CPU backend's association; the kernels call promote_stage_fold_if, which uses this form only
 * where folding the scales could change an overflow by more than a rounding), otherwise acc += p. */
template <bool BLOCK>
__device__ __forceinline__ void promote_stage(float (&acc)[64], const float (&p)[64], float c0, float c1, float cw) {
  if (BLOCK) {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] += p[i] * (acc_half(i) ? c1 : c0) * cw;
  } else {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] += p[i];
  }
}

/* promote_stage for BLOCK with the two scales folded into one factor per row: acc = fma(p, s_row·s_w, acc), one
 * FFMA per element instead of FMUL + FFMA (the pair kernels' promotion is on the consumer's serial chain:
 * docs/GPU.md "The pair kernels' consumer chain"). It rounds once where the CPU backend's (p·s_row)·s_w rounds
 * twice, so the sums differ in the last bits (the wgmma sums already do: ~2^-12, docs/GPU.md "Accuracy"). It
 * moves the overflow threshold by at most a rounding (either form can overflow where the other just does not,
 * as any reassociation): a 128-K partial is below 2^25 in magnitude (4 k32 steps of 32 products
 * of two e4m3 values ≤ 448), so with |s_row| ≤ 2^100 p·s_row is finite, and a product s_row·s_w that is a
 * finite normal number leaves p·(s_row·s_w) within rounding of (p·s_row)·s_w; s_row = 0 (padding rows: their
 * staged scale is 0) with a finite s_w gives ±0 both ways. Any other scale (huge, a subnormal product, Inf
 * or NaN) takes promote_stage's association, and so does |s_row| < 2^-108 (an activation row whose amax is below
 * ~1e-30): a nonzero partial is at least 2^-18 (a multiple of the smallest product of two e4m3 values), so
 * p·s_row could be subnormal there, and the CPU form loses bits (or flushes to 0) that the folded form would
 * keep (a 35M-sample search of both SASS sequences found no other difference beyond a rounding). Without the
 * s_row = 0 case every warp holding a padding row ran both paths: 11 % of the stages at deepseek-v3 T = 8192
 * (ncu, 2026-12-03). tests/test_gpu_sweep.c (regression_block_scales) runs scales outside the fold's range. */
constexpr float kFoldRowScaleMax = 0x1p100f;
constexpr float kFoldRowScaleMin = 0x1p-108f; /* a nonzero partial is ≥ 2^-18: p·s_row stays normal (2^-126) */
/* Whether promote_stage_fold_if may fold the thread's row scales c0, c1 with the weight-block scale cw (above);
 * written so that NaN fails every comparison (fmaxf/fminf would drop it), and with & / | rather than && / || so it
 * compiles to predicates without branches (the pair kernels evaluate it while a wgmma group is in flight, where a
 * branch would make ptxas serialize the wgmmas). */
__device__ __forceinline__ bool fold_allowed(float c0, float c1, float cw) {
  const float fa0 = fabsf(c0 * cw), fa1 = fabsf(c1 * cw);
  return (fabsf(c0) <= kFoldRowScaleMax) & (fabsf(c1) <= kFoldRowScaleMax) &
         ((fabsf(c0) >= kFoldRowScaleMin) | (c0 == 0.0f)) & ((fabsf(c1) >= kFoldRowScaleMin) | (c1 == 0.0f)) &
         ((fa0 >= 0x1p-126f) | (c0 == 0.0f)) & ((fa1 >= 0x1p-126f) | (c1 == 0.0f)) & (fa0 <= 0x1.fffffep127f) &
         (fa1 <= 0x1.fffffep127f); /* FLT_MIN, FLT_MAX */
}
/* promote_stage for BLOCK, folded where `fold` (fold_allowed, or a stricter caller's decision: the unfolded form is
 * the CPU backend's association, right everywhere), with the folded factors f0 = c0·cw and f1 = c1·cw computed by
 * the caller (consume() computes them early). */
template <bool BLOCK>
__device__ __forceinline__ void promote_stage_factors(float (&acc)[64], const float (&p)[64], float c0, float c1,
                                                      float cw, float f0, float f1, bool fold) {
  if (BLOCK && fold) {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = fmaf(p[i], acc_half(i) ? f1 : f0, acc[i]);
  } else {
    promote_stage<BLOCK>(acc, p, c0, c1, cw);
  }
}
template <bool BLOCK>
__device__ __forceinline__ void promote_stage_fold_if(float (&acc)[64], const float (&p)[64], float c0, float c1,
                                                      float cw, bool fold) {
  promote_stage_factors<BLOCK>(acc, p, c0, c1, cw, c0 * cw, c1 * cw, fold);
}

/* 2-CTA clusters: whether the item pair of unit u (fp8moe_sm90_unit_item) needs the same B boxes, i.e. both
 * items are of one column block and one expert (a shadow pair always is). Then each CTA loads one of the two
 * B boxes and multicasts it to both; otherwise each loads its own. Both CTAs (producers and consumers) decide
 * it from the same tile_expert words, so identically. */
__device__ __forceinline__ bool pair_shares_b(int32_t u, int32_t items, int32_t tiles, int32_t col_blocks,
                                              int32_t order, int32_t group, const int32_t* tile_expert) {
  const fp8moe_sm90_item i0 = fp8moe_sm90_item_of(fp8moe_sm90_unit_item(u, items, 2, 0).item, tiles, col_blocks, order, group);
  const fp8moe_sm90_item i1 = fp8moe_sm90_item_of(fp8moe_sm90_unit_item(u, items, 2, 1).item, tiles, col_blocks, order, group);
  return i0.col_block == i1.col_block && tile_expert[i0.tile] == tile_expert[i1.tile];
}

/* The launch configuration of the cluster kernels: clusters of 2 CTAs along x, the ring's shared memory. */
struct ClusterConfig {
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg;
  ClusterConfig(dim3 grid, cudaStream_t stream, size_t smem_bytes = kSmemBytes) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg = cudaLaunchConfig_t{};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem_bytes;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
};

/* The most clusters of the cluster kernel `kernel` that can be resident at once on the current device, in
 * *clusters (called at context creation after the shared-memory limits are raised); 0 when none fit or the
 * query fails: the plan then keeps the one-CTA kernel, and a failed query does not fail the context. */
template <class Kernel>
inline int resident_clusters(Kernel kernel, int32_t sm_count, int32_t* clusters, size_t smem_bytes = kSmemBytes) {
  *clusters = 0;
  const ClusterConfig c(dim3(static_cast<unsigned>(2 * (sm_count > 0 ? sm_count : 1))), nullptr, smem_bytes);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &c.cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  *clusters = n > 0 ? n : 0;
  return 0;
}

/* Consumer arrivals per empty barrier phase: one per consumer thread (PEERS = 1), or in a 2-CTA cluster one
 * per consumer warp of each of the two CTAs (every warp releases a stage in both CTAs). */
template <int PEERS>
__host__ __device__ constexpr uint32_t empty_arrivals() {
  return PEERS == 1 ? static_cast<uint32_t>(kConsumers) : static_cast<uint32_t>(PEERS * (kConsumers / 32));
}

/* Barrier setup by one thread, then a CTA barrier (a cluster barrier for PEERS = 2: no peer may multicast
 * into this CTA or arrive on its barriers before they exist). full: 1 arrival (the TMA issuer's expect_tx)
 * plus, for a gathering producer, one per producer thread; empty: empty_arrivals<PEERS>(). */
template <int PEERS = 1>
__device__ __forceinline__ void init_barriers(Smem& sm, uint32_t full_count) {
#if FP8MOE_SM90A
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&sm.full[s], full_count);
      mbar_init(&sm.empty[s], empty_arrivals<PEERS>());
    }
    mbar_init_fence();
  }
  if (PEERS > 1) cluster_sync_all();
  else __syncthreads();
#else
  (void)sm;
  (void)full_count;
  __syncthreads();
#endif
}

/* Consumer main loop for one work item: kblocks stages starting at ring position `it`. Hopper's fp8 wgmma
 * keeps a narrower-than-fp32 accumulator (~14 bits of mantissa in the additions), so every stage's 128-K sum
 * starts from zero in a partial accumulator and is promoted into the fp32 `acc` by ordinary FMUL/FFMA/FADD,
 * for every format: BLOCK acc += part·(sa(h, kb, s)·sb(kb, s)) (the thread's two rows, its B tile; one FFMA,
 * promote_stage_fold_if where fold_allowed, else the CPU backend's (part·sa)·sb, for scales where folding could
 * move an overflow by more than a rounding; its comment has the one remaining underflow difference), otherwise
 * acc += part (the scales apply once, in the epilogue). Stages are promoted in order in every LOOP variant
 * (FP8MOE_SM90_LOOP_*, kernels_internal.h), so all three give the same bits; they differ in timing:
 * - OVERLAP: two partial accumulators alternate; stage kb+1's wgmmas are issued (their own group) before
 *   stage kb is promoted, `wgmma.wait_group 1` retires only kb's group, and kb's shared-memory stage is
 *   released right after that wait. The tensor cores never wait for a promotion, but kb's release waits for
 *   kb+1's full barrier: when loads are late, one stage of the ring is held by a stage already computed, so
 *   at most kStages − 2 loads are in flight instead of kStages − 1 (docs/GPU.md).
 * - SERIAL: one partial accumulator; issue kb, wait_group 0, release, promote, then wait for kb+1.
 * - EARLY_RELEASE: two partial accumulators; wait_group 0 retires kb, its stage is released at once, then
 *   kb+1 is waited for and issued, and kb is promoted while kb+1's wgmmas run.
 * The two-accumulator loops are unrolled by two so each partial accumulator stays a fixed register array.
 * kblocks ≥ 1. */
template <int LOOP, bool BLOCK, int PEERS, bool GATHERED, bool STAGED = false, class RowScale, class BScale>
__device__ __forceinline__ void consume(Smem& sm, int wg, int kblocks, uint32_t& it, float (&acc)[64],
                                        RowScale sa, BScale sb) {
  static_assert(LOOP == FP8MOE_SM90_LOOP_OVERLAP || LOOP == FP8MOE_SM90_LOOP_SERIAL ||
                    LOOP == FP8MOE_SM90_LOOP_EARLY_RELEASE,
                "a main-loop variant of kernels_internal.h");
#if FP8MOE_SM90A
  float pa[64], pb[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  /* Issues stage kb's four wgmmas into p as one group; the block scales (c0, c1: the row scales of the
   * thread's rows r0 and r0 + 8; cw: the weight-block scale) are loaded before the barrier wait, so they
   * overlap it and the wgmmas, except STAGED scales: sa(h, kb, s) and sb(kb, s) read them from stage s, after its
   * wait. */
  auto issue = [&](float (&p)[64], int kb, float& c0, float& c1, float& cw) {
    const uint32_t pos = it + static_cast<uint32_t>(kb);
    const int s = static_cast<int>(pos % kStages);
    if (BLOCK && !STAGED) {
      cw = sb(kb, s);
      c0 = sa(0, kb, s);
      c1 = sa(1, kb, s);
    }
    mbar_wait(&sm.full[s], (pos / kStages) & 1u);
    if (GATHERED) fence_proxy_async(); /* A came by cp.async (generic proxy): publish_gathered */
    if (BLOCK && STAGED) {
      cw = sb(kb, s);
      c0 = sa(0, kb, s);
      c1 = sa(1, kb, s);
    }
    const uint64_t da = desc_sw128(sm.st[s].a), db = desc_sw128(sm.st[s].b[wg]);
    wgmma_fence();
    fence_regs(p);
#pragma unroll
    for (int kk = 0; kk < kBK / 32; ++kk) wgmma_m64n128k32(p, da + 2 * kk, db + 2 * kk, kk > 0);
    wgmma_commit();
  };
  /* After the wait that completed stage kb's group: p is final; its shared-memory stage may be refilled.
   * PEERS = 2: lane r of each warp releases it in cluster CTA r (the wait is warp-synchronous, so the whole
   * warp's wgmmas on the stage are done), since either CTA's producer may multicast into both. */
  auto release = [&](float (&p)[64], int kb) {
    fence_regs(p);
    uint64_t* e = &sm.empty[(it + static_cast<uint32_t>(kb)) % kStages];
    if constexpr (PEERS == 1) {
      mbar_arrive(e);
    } else {
      const uint32_t lane = threadIdx.x % 32;
      mbar_arrive_cluster(e, lane % PEERS, lane < static_cast<uint32_t>(PEERS) ? 1u : 0u);
    }
  };
  /* BLOCK: a stage's fold decision (fold_allowed) and folded factors, taken before the next stage's scales are
   * loaded. Where those are global loads (the unstaged forms), consecutive stages' loads share one scoreboard, and a
   * test placed after the next stage's loads waited for them, a whole global load, between that stage's wgmmas
   * (docs/GPU.md "GEMM2's fold test"); the empty asm pins the values, and by its memory clobber the next loads, on
   * this side of that point. */
  struct Decided {
    float f0, f1; /* s_row·s_w of the thread's rows r0 and r0 + 8 */
    uint32_t fold;
  };
  auto decide = [&](float c0, float c1, float cw) {
    Decided d{0.0f, 0.0f, 0u};
    if (BLOCK) {
      d = Decided{c0 * cw, c1 * cw, fold_allowed(c0, c1, cw) ? 1u : 0u};
      asm volatile("" : "+f"(d.f0), "+f"(d.f1), "+r"(d.fold)::"memory");
    }
    return d;
  };
  auto promote = [&](const float (&p)[64], float c0, float c1, float cw, const Decided& d) {
    promote_stage_factors<BLOCK>(acc, p, c0, c1, cw, d.f0, d.f1, d.fold != 0u);
  };
  float ca0 = 0.0f, ca1 = 0.0f, caw = 0.0f, cb0 = 0.0f, cb1 = 0.0f, cbw = 0.0f;
  if constexpr (LOOP == FP8MOE_SM90_LOOP_SERIAL) {
    (void)pb;
    for (int kb = 0; kb < kblocks; ++kb) {
      issue(pa, kb, ca0, ca1, caw);
      const Decided da = decide(ca0, ca1, caw);
      wgmma_wait<0>();
      release(pa, kb);
      promote(pa, ca0, ca1, caw, da);
    }
  } else if constexpr (LOOP == FP8MOE_SM90_LOOP_EARLY_RELEASE) {
    /* Every point where control flow merges has pa's stage in flight (loop head) or none (after the tail),
     * so ptxas tracks the accumulators without serializing the wgmmas (no C7514 warning). */
    issue(pa, 0, ca0, ca1, caw);
    int kb = 0;
    for (; kb + 2 < kblocks; kb += 2) {
      const Decided da = decide(ca0, ca1, caw);
      wgmma_wait<0>();
      release(pa, kb);
      issue(pb, kb + 1, cb0, cb1, cbw);
      promote(pa, ca0, ca1, caw, da);
      const Decided db = decide(cb0, cb1, cbw);
      wgmma_wait<0>();
      release(pb, kb + 1);
      issue(pa, kb + 2, ca0, ca1, caw);
      promote(pb, cb0, cb1, cbw, db);
    }
    const Decided da = decide(ca0, ca1, caw);
    wgmma_wait<0>();
    release(pa, kb);
    if (kb + 1 < kblocks) { /* two stages left: kb (retired, in pa) and kb + 1 */
      issue(pb, kb + 1, cb0, cb1, cbw);
      promote(pa, ca0, ca1, caw, da);
      const Decided db = decide(cb0, cb1, cbw);
      wgmma_wait<0>();
      release(pb, kb + 1);
      promote(pb, cb0, cb1, cbw, db);
    } else {
      promote(pa, ca0, ca1, caw, da);
    }
  } else {
    /* OVERLAP. Every point where control flow merges has the same groups in flight (pa's stage at the loop
     * head, none after the tail), so ptxas tracks the accumulators without serializing the wgmmas. */
    issue(pa, 0, ca0, ca1, caw);
    int kb = 0;
    for (; kb + 2 < kblocks; kb += 2) {
      const Decided da = decide(ca0, ca1, caw);
      issue(pb, kb + 1, cb0, cb1, cbw);
      wgmma_wait<1>();
      release(pa, kb);
      promote(pa, ca0, ca1, caw, da);
      const Decided db = decide(cb0, cb1, cbw);
      issue(pa, kb + 2, ca0, ca1, caw);
      wgmma_wait<1>();
      release(pb, kb + 1);
      promote(pb, cb0, cb1, cbw, db);
    }
    const Decided da = decide(ca0, ca1, caw);
    if (kb + 1 < kblocks) { /* two stages left: kb (in pa) and kb + 1 */
      issue(pb, kb + 1, cb0, cb1, cbw);
      wgmma_wait<1>();
      release(pa, kb);
      promote(pa, ca0, ca1, caw, da);
      const Decided db = decide(cb0, cb1, cbw);
      wgmma_wait<0>();
      release(pb, kb + 1);
      promote(pb, cb0, cb1, cbw, db);
    } else {
      wgmma_wait<0>();
      release(pa, kb);
      promote(pa, ca0, ca1, caw, da);
    }
  }
  it += static_cast<uint32_t>(kblocks);
#else
  (void)sm; (void)wg; (void)kblocks; (void)it; (void)acc; (void)sa; (void)sb;
#endif
}

}  // namespace sm90
}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_WGMMA_SM90_CUH */
