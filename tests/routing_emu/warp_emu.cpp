/* warp_emu.cpp — the scheduler of warp_emu.h's emulated warp. */
#include "warp_emu.h"

emu_dim3 threadIdx;

namespace emu {
Warp* warp;
namespace {
Warp g_warp;
char g_stacks[32][128 * 1024];
void (*g_body)(unsigned, void*);
void* g_ctx;
void lane_entry(int l) {
  g_body(static_cast<unsigned>(l), g_ctx);
  g_warp.lane[l].done = true;
}
}  // namespace

const char* run(void (*body)(unsigned lane, void* ctx), void* ctx) {
  warp = &g_warp;
  g_body = body;
  g_ctx = ctx;
  g_warp.error = nullptr;
  for (int l = 0; l < 32; ++l) {
    Lane& ln = g_warp.lane[l];
    getcontext(&ln.ctx);
    ln.ctx.uc_stack.ss_sp = g_stacks[l];
    ln.ctx.uc_stack.ss_size = sizeof g_stacks[l];
    ln.ctx.uc_link = &g_warp.scheduler;
    makecontext(&ln.ctx, reinterpret_cast<void (*)()>(lane_entry), 1, l);
    ln.done = false;
    ln.op = kNone;
  }
  for (;;) {
    for (int l = 0; l < 32; ++l) {
      if (g_warp.lane[l].done) continue;
      threadIdx.x = static_cast<unsigned>(l);
      swapcontext(&g_warp.scheduler, &g_warp.lane[l].ctx);
    }
    int done = 0;
    for (int l = 0; l < 32; ++l) done += g_warp.lane[l].done;
    if (done == 32) return g_warp.error;
    if (done > 0) return g_warp.error = "divergent warp: some lanes returned while others wait at a collective";
    const Op op = g_warp.lane[0].op;
    for (int l = 1; l < 32; ++l)
      if (g_warp.lane[l].op != op) return g_warp.error = "divergent warp: lanes wait at different collectives";
    uint64_t all = 0;
    for (int l = 0; l < 32; ++l) {
      const uint64_t v = g_warp.lane[l].value;
      if (op == kBallot) all |= (v & 1u) << l;
      if (op == kMax) all = (l == 0 || static_cast<uint32_t>(v) > all) ? static_cast<uint32_t>(v) : all;
      if (op == kMin) all = (l == 0 || static_cast<uint32_t>(v) < all) ? static_cast<uint32_t>(v) : all;
    }
    for (int l = 0; l < 32; ++l) {
      Lane& ln = g_warp.lane[l];
      if (op == kShfl) ln.result = g_warp.lane[ln.arg].value;
      else if (op == kShflXor) ln.result = g_warp.lane[static_cast<unsigned>(l) ^ ln.arg].value;
      else if (op == kMatch) { /* the lanes whose value equals this lane's */
        ln.result = 0;
        for (int k = 0; k < 32; ++k)
          if (static_cast<uint32_t>(g_warp.lane[k].value) == static_cast<uint32_t>(ln.value)) ln.result |= 1ull << k;
      } else ln.result = all;
      ln.op = kNone;
    }
    ++g_warp.collectives;
  }
}
}  // namespace emu
