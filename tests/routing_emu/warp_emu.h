/* warp_emu.h — one thread block of up to 1,024 threads (one warp or several) on the host, for running device code
 * from kernels/ without a GPU (tests/test_routing_emu.cpp, tests/test_permute_emu.cpp,
 * tests/test_slot_list_emu.cpp, tests/test_stream_experts_emu.cpp; the scheduler is warp_emu.cpp). Each thread is a
 * coroutine (ucontext) with its own stack, all on one host thread: a thread runs until it reaches a warp-collective
 * intrinsic (__shfl_sync, __shfl_xor_sync, __shfl_up_sync, __ballot_sync, __any_sync, __all_sync,
 * __reduce_{max,min,add}_sync, __match_any_sync, __syncwarp) or a block barrier (__syncthreads,
 * __syncthreads_count, or a named barrier's emu_bar_sync; emu_bar_arrive counts without waiting), leaves its
 * operand there and yields. When all 32 lanes of a warp wait at a collective, the scheduler checks that it is the
 * same one (a divergent warp is reported, not emulated), computes every lane's result and resumes them; a barrier
 * releases its waiting threads once as many threads as it expects have arrived; a block in which nothing can move
 * is reported as a deadlock. So each warp runs in lockstep at every collective, as the converged warp the code
 * assumes; each warp runs as far as it can before the next (in forward or reverse order: emu::reverse_warps), so a
 * missing barrier shows as a warp reading what another has not yet written; shared memory is ordinary memory (a
 * function-local __shared__ variable is a static), ordered by the single host thread. */
#ifndef FP8MOE_TESTS_WARP_EMU_H
#define FP8MOE_TESTS_WARP_EMU_H

#include <cstdint>
#include <cstring>
#include <ucontext.h>

struct emu_dim3 {
  unsigned x, y, z;
};
extern emu_dim3 threadIdx; /* x: the running thread (the scheduler sets it before resuming one) */

/* Shared memory is the block's: one host thread runs one block at a time. */
#ifdef __shared__
#undef __shared__
#endif
#define __shared__ static

namespace emu {

enum Op { kNone, kShfl, kShflXor, kShflUp, kBallot, kMax, kMin, kAdd, kSync, kMatch, kBar };

constexpr int kMaxThreads = 1024;
constexpr int kBarriers = 16; /* bar.sync ids 0 … 15; 0 is __syncthreads */

struct Lane {
  ucontext_t ctx;
  Op op;
  uint64_t value;
  unsigned arg;
  uint64_t result;
  bool done;
};

struct Block {
  ucontext_t scheduler;
  Lane lane[kMaxThreads]; /* thread i: lane i % 32 of warp i / 32 */
  int threads;
  int arrived[kBarriers], expected[kBarriers];
  long collectives;
  const char* error; /* set by the scheduler: a divergent warp, a barrier miscount, a deadlock */
};
extern Block* block;

/* A thread's side of a collective or a barrier wait: leave the operand, yield, take the result. */
inline uint64_t collective(Op op, uint64_t value, unsigned arg) {
  Lane& me = block->lane[threadIdx.x];
  me.op = op;
  me.value = value;
  me.arg = arg;
  swapcontext(&me.ctx, &block->scheduler);
  return me.result;
}

/* bar.arrive: counted at once, no wait (the scheduler completes the barrier). */
void arrive(unsigned id, unsigned threads);

template <class T>
inline uint64_t bits(T v) {
  static_assert(sizeof(T) <= 8, "one 64-bit slot per lane");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}
template <class T>
inline T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

/* false: warp 0 runs first, as far as it can, then warp 1, …; true: the last warp first (warp_emu.cpp). */
extern bool reverse_warps;

/* Runs body(thread, ctx) on `threads` threads (a multiple of 32, ≤ kMaxThreads) to completion; returns the block's
 * error, or nullptr. run(): one warp. */
const char* run_block(int threads, void (*body)(unsigned thread, void* ctx), void* ctx);
inline const char* run(void (*body)(unsigned lane, void* ctx), void* ctx) { return run_block(32, body, ctx); }

}  // namespace emu

template <class T>
inline T __shfl_sync(unsigned, T v, int src) {
  return emu::from_bits<T>(emu::collective(emu::kShfl, emu::bits(v), static_cast<unsigned>(src) % 32u));
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask) {
  return emu::from_bits<T>(emu::collective(emu::kShflXor, emu::bits(v), static_cast<unsigned>(mask) % 32u));
}
template <class T>
inline T __shfl_up_sync(unsigned, T v, unsigned delta) {
  return emu::from_bits<T>(emu::collective(emu::kShflUp, emu::bits(v), delta));
}
inline unsigned __ballot_sync(unsigned, int p) {
  return static_cast<unsigned>(emu::collective(emu::kBallot, p != 0, 0));
}
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
inline int __all_sync(unsigned m, int p) { return __ballot_sync(m, p) == 0xFFFFFFFFu; }
inline unsigned __reduce_max_sync(unsigned, unsigned v) {
  return static_cast<unsigned>(emu::collective(emu::kMax, v, 0));
}
inline unsigned __reduce_min_sync(unsigned, unsigned v) {
  return static_cast<unsigned>(emu::collective(emu::kMin, v, 0));
}
inline unsigned __reduce_add_sync(unsigned, unsigned v) {
  return static_cast<unsigned>(emu::collective(emu::kAdd, v, 0));
}
inline void __syncwarp(unsigned = 0xFFFFFFFFu) { emu::collective(emu::kSync, 0, 0); }
inline unsigned __match_any_sync(unsigned, int v) {
  return static_cast<unsigned>(emu::collective(emu::kMatch, static_cast<uint32_t>(v), 0));
}
/* Block barriers: __syncthreads is barrier 0 over the whole block. */
inline void __syncthreads() { emu::collective(emu::kBar, static_cast<unsigned>(emu::block->threads), 0); }
/* __syncthreads_count on barrier 0: three barriers around a block-shared count (every reader of the previous call's
 * count has passed the first before thread 0 clears it; every thread has added before any reads). */
inline int __syncthreads_count(int predicate) {
  static int count; /* the block's: one host thread runs one block at a time */
  __syncthreads();
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  count += predicate != 0;
  __syncthreads();
  return count;
}
inline void emu_bar_sync(unsigned id, unsigned threads) { emu::collective(emu::kBar, threads, id); }
inline void emu_bar_arrive(unsigned id, unsigned threads) { emu::arrive(id, threads); }

/* Memory: one host thread runs the threads one after another between collectives, so loads are loads and atomics
 * plain read-modify-writes. */
template <class T>
inline T __ldcg(const T* p) {
  return *p;
}
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}

inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<uint64_t>(a) * b) >> 32);
}
inline float __uint_as_float(unsigned u) { return emu::from_bits<float>(u); }
inline unsigned __float_as_uint(float f) { return static_cast<unsigned>(emu::bits(f)); }
inline int min(int a, int b) { return a < b ? a : b; }

#endif /* FP8MOE_TESTS_WARP_EMU_H */
