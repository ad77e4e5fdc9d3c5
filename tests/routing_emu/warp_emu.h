/* warp_emu.h — one warp of 32 lanes on the host, for running device code from kernels/ without a GPU
 * (tests/test_routing_emu.cpp, tests/test_permute_emu.cpp; the scheduler is warp_emu.cpp). Each lane is a coroutine
 * (ucontext) with its own stack, all on one host thread: a lane runs until it reaches a warp-collective intrinsic
 * (__shfl_sync, __shfl_xor_sync, __ballot_sync, __any_sync, __reduce_max_sync, __reduce_min_sync,
 * __match_any_sync, __syncwarp), leaves its operand there and yields; when all 32 lanes wait at a collective, the
 * scheduler checks that it is the same one (a divergent warp is reported, not emulated), computes every lane's result
 * and resumes them in lane order. So the lanes run in lockstep at every collective, as the converged warp the code
 * assumes; shared memory is ordinary memory, ordered by the single host thread. */
#ifndef FP8MOE_TESTS_WARP_EMU_H
#define FP8MOE_TESTS_WARP_EMU_H

#include <cstdint>
#include <cstring>
#include <ucontext.h>

struct emu_dim3 {
  unsigned x, y, z;
};
extern emu_dim3 threadIdx; /* x: the running lane (the scheduler sets it before resuming one) */

namespace emu {

enum Op { kNone, kShfl, kShflXor, kBallot, kMax, kMin, kSync, kMatch };

struct Lane {
  ucontext_t ctx;
  Op op;
  uint64_t value;
  unsigned arg;
  uint64_t result;
  bool done;
};

struct Warp {
  ucontext_t scheduler;
  Lane lane[32];
  long collectives;
  const char* error; /* set by the scheduler: a divergent warp */
};
extern Warp* warp;

/* A lane's side of a collective: leave the operand, yield, take the result. */
inline uint64_t collective(Op op, uint64_t value, unsigned arg) {
  Lane& me = warp->lane[threadIdx.x % 32u];
  me.op = op;
  me.value = value;
  me.arg = arg;
  swapcontext(&me.ctx, &warp->scheduler);
  return me.result;
}

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

/* Runs body(lane) on 32 lanes to completion; returns the warp's error, or nullptr. */
const char* run(void (*body)(unsigned lane, void* ctx), void* ctx);

}  // namespace emu

template <class T>
inline T __shfl_sync(unsigned, T v, int src) {
  return emu::from_bits<T>(emu::collective(emu::kShfl, emu::bits(v), static_cast<unsigned>(src) % 32u));
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask) {
  return emu::from_bits<T>(emu::collective(emu::kShflXor, emu::bits(v), static_cast<unsigned>(mask) % 32u));
}
inline unsigned __ballot_sync(unsigned, int p) {
  return static_cast<unsigned>(emu::collective(emu::kBallot, p != 0, 0));
}
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
inline unsigned __reduce_max_sync(unsigned, unsigned v) {
  return static_cast<unsigned>(emu::collective(emu::kMax, v, 0));
}
inline unsigned __reduce_min_sync(unsigned, unsigned v) {
  return static_cast<unsigned>(emu::collective(emu::kMin, v, 0));
}
inline void __syncwarp(unsigned = 0xFFFFFFFFu) { emu::collective(emu::kSync, 0, 0); }
inline unsigned __match_any_sync(unsigned, int v) {
  return static_cast<unsigned>(emu::collective(emu::kMatch, static_cast<uint32_t>(v), 0));
}
/* Memory: one host thread runs the lanes one after another between collectives, so loads are loads and atomics plain
 * read-modify-writes. */
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

#endif /* FP8MOE_TESTS_WARP_EMU_H */
