/* mbarrier.cuh — sm_90 (not sm_90a) asynchronous-copy primitives for kernels that run a shared-memory ring
 * (gemm_decode_tma.cu): mbarrier init / arrive / expect_tx / parity wait (CTA and cluster scope), arrivals and
 * stores into a peer CTA's shared memory (distributed shared memory), and cp.async.bulk global → shared copies
 * counted on an mbarrier, with an L2 evict-first policy. Header-only; included by kernels/<op>.cu only. */
#ifndef FP8MOE_KERNELS_MBARRIER_CUH
#define FP8MOE_KERNELS_MBARRIER_CUH

#include <stdint.h>

namespace fp8moe {
namespace async {

__device__ __forceinline__ uint32_t saddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* b, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(saddr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(saddr(b)) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(saddr(b)), "r"(bytes) : "memory");
}
/* Spins until the phase of the given parity has completed (a fresh barrier counts parity 1 as complete). */
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(saddr(b)), "r"(parity)
        : "memory");
  } while (!done);
}
/* The same with cluster-scope acquire: the arrivals came from other CTAs of the cluster with their stores. */
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* b, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(saddr(b)), "r"(parity)
        : "memory");
  } while (!done);
}
/* The address of the same shared-memory object in cluster CTA `rank`. */
__device__ __forceinline__ uint32_t peer_addr(const void* p, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(saddr(p)), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_peer_v4(uint32_t addr, float4 v) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
}
/* Arrival on a peer CTA's mbarrier that releases this thread's earlier stores at cluster scope. */
__device__ __forceinline__ void mbar_arrive_peer(uint32_t addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
/* L2 policy for weights, read once per tile: evicted first, so the token rows and scales every CTA rereads
 * stay in L2 (an expert's other tiles run at about the same time and still hit). */
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
/* `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory into this CTA's shared memory,
 * counted on `bar` as they land. */
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::
          "r"(saddr(dst)),
      "l"(src), "r"(bytes), "r"(saddr(bar)), "l"(policy)
      : "memory");
}

}  // namespace async
}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_MBARRIER_CUH */
