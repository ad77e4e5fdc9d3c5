/* warp_emu.cpp — the scheduler of warp_emu.h's emulated block. */
#include "warp_emu.h"

#include <vector>

emu_dim3 threadIdx;

namespace emu {
Block* block;
bool reverse_warps;
namespace {
Block g_block;
constexpr size_t kStackBytes = 64 * 1024;
std::vector<char> g_stacks; /* kStackBytes per thread, grown on demand */
void (*g_body)(unsigned, void*);
void* g_ctx;
void thread_entry(int t) {
  g_body(static_cast<unsigned>(t), g_ctx);
  g_block.lane[t].done = true;
}

bool is_warp_op(Op op) { return op != kNone && op != kBar; }

/* Resolves warp w's collective if all its lanes wait at one; returns whether it did. */
bool resolve_warp(int w) {
  Lane* l = g_block.lane + 32 * w;
  int done = 0, at_warp_op = 0;
  for (int i = 0; i < 32; ++i) {
    done += l[i].done;
    at_warp_op += !l[i].done && is_warp_op(l[i].op);
  }
  if (at_warp_op == 0) return false;
  if (done > 0) {
    g_block.error = "divergent warp: some lanes returned while others wait at a collective";
    return false;
  }
  if (at_warp_op < 32) return false; /* the others wait at a barrier: a deadlock unless something else moves */
  const Op op = l[0].op;
  for (int i = 1; i < 32; ++i)
    if (l[i].op != op) {
      g_block.error = "divergent warp: lanes wait at different collectives";
      return false;
    }
  uint64_t all = 0;
  for (int i = 0; i < 32; ++i) {
    const uint32_t v = static_cast<uint32_t>(l[i].value);
    if (op == kBallot) all |= static_cast<uint64_t>(v & 1u) << i;
    if (op == kMax) all = (i == 0 || v > all) ? v : all;
    if (op == kMin) all = (i == 0 || v < all) ? v : all;
    if (op == kAdd) all = static_cast<uint32_t>(all + v);
  }
  for (int i = 0; i < 32; ++i) {
    Lane& ln = l[i];
    if (op == kShfl) ln.result = l[ln.arg].value;
    else if (op == kShflXor) ln.result = l[static_cast<unsigned>(i) ^ ln.arg].value;
    else if (op == kShflUp) /* lanes below the offset keep their own value */
      ln.result = static_cast<unsigned>(i) >= ln.arg ? l[static_cast<unsigned>(i) - ln.arg].value : ln.value;
    else if (op == kMatch) { /* the lanes whose value equals this lane's */
      ln.result = 0;
      for (int k = 0; k < 32; ++k)
        if (static_cast<uint32_t>(l[k].value) == static_cast<uint32_t>(ln.value)) ln.result |= 1ull << k;
    } else ln.result = all;
    ln.op = kNone;
  }
  ++g_block.collectives;
  return true;
}

/* Counts one thread in at barrier id (expecting `threads`); sets the block's error on a mismatch. */
void count_in(unsigned id, unsigned threads) {
  if (id >= static_cast<unsigned>(kBarriers) || threads == 0 || threads % 32u != 0 ||
      threads > static_cast<unsigned>(g_block.threads)) {
    g_block.error = "barrier: id or thread count out of range";
    return;
  }
  if (g_block.arrived[id] > 0 && g_block.expected[id] != static_cast<int>(threads)) {
    g_block.error = "barrier: threads disagree on its thread count";
    return;
  }
  g_block.expected[id] = static_cast<int>(threads);
  if (++g_block.arrived[id] > g_block.expected[id]) g_block.error = "barrier: more threads than it expects";
}

/* Releases the threads waiting at every barrier whose count is complete; returns whether any was. */
bool resolve_barriers() {
  bool any = false;
  for (int id = 0; id < kBarriers; ++id) {
    if (g_block.arrived[id] == 0 || g_block.arrived[id] < g_block.expected[id]) continue;
    for (int t = 0; t < g_block.threads; ++t) {
      Lane& ln = g_block.lane[t];
      if (!ln.done && ln.op == kBar && ln.arg == static_cast<unsigned>(id)) ln.op = kNone;
    }
    g_block.arrived[id] = 0;
    ++g_block.collectives;
    any = true;
  }
  return any;
}
}  // namespace

void arrive(unsigned id, unsigned threads) { count_in(id, threads); }

const char* run_block(int threads, void (*body)(unsigned thread, void* ctx), void* ctx) {
  block = &g_block;
  g_body = body;
  g_ctx = ctx;
  g_block.error = nullptr;
  if (threads <= 0 || threads % 32 != 0 || threads > kMaxThreads) return g_block.error = "block: bad thread count";
  g_block.threads = threads;
  for (int id = 0; id < kBarriers; ++id) g_block.arrived[id] = g_block.expected[id] = 0;
  const size_t stacks = static_cast<size_t>(threads) * kStackBytes;
  if (g_stacks.size() < stacks) g_stacks.resize(stacks);
  for (int t = 0; t < threads; ++t) {
    Lane& ln = g_block.lane[t];
    getcontext(&ln.ctx);
    ln.ctx.uc_stack.ss_sp = g_stacks.data() + static_cast<size_t>(t) * kStackBytes;
    ln.ctx.uc_stack.ss_size = kStackBytes;
    ln.ctx.uc_link = &g_block.scheduler;
    makecontext(&ln.ctx, reinterpret_cast<void (*)()>(thread_entry), 1, t);
    ln.done = false;
    ln.op = kNone;
  }
  const int warps = threads / 32;
  for (;;) {
    /* Each warp in turn runs as far as it can — its lanes until they wait or return, its collectives resolved —
     * before the next one starts; a barrier wait counts the thread in. Warps meet only at barriers, so the order
     * (forward or reverse) exposes a missing barrier between a writing and a reading warp in one of the two. */
    bool moved = false;
    for (int k = 0; k < warps; ++k) {
      const int w = reverse_warps ? warps - 1 - k : k;
      for (;;) {
        for (int t = 32 * w; t < 32 * w + 32; ++t) {
          Lane& ln = g_block.lane[t];
          if (ln.done || ln.op != kNone) continue;
          threadIdx.x = static_cast<unsigned>(t);
          swapcontext(&g_block.scheduler, &ln.ctx);
          moved = true;
          if (!ln.done && ln.op == kBar) count_in(ln.arg, static_cast<unsigned>(ln.value));
          if (g_block.error) return g_block.error;
        }
        if (!resolve_warp(w)) break;
      }
      if (g_block.error) return g_block.error;
    }
    int done = 0;
    for (int t = 0; t < threads; ++t) done += g_block.lane[t].done;
    if (done == threads) {
      for (int id = 0; id < kBarriers; ++id)
        if (g_block.arrived[id] != 0) return g_block.error = "barrier: arrivals left when the block ended";
      return nullptr;
    }
    moved |= resolve_barriers();
    if (!moved) return g_block.error = "deadlock: every live thread waits and no collective or barrier completes";
  }
}
}  // namespace emu
