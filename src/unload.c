/* unload.c — what happens when the library is unloaded (dlclose, or the end of the process): contexts the
 * host left alive are shut down, so that no CPU worker thread stays parked in code about to be unmapped, and
 * the C++ runtime's emergency exception pool (static libstdc++, CUDA builds) is freed, so that each
 * dlopen/dlclose cycle leaves nothing behind (docs/RELIABILITY.md, "Unloading").
 *
 * The list of live contexts is the one piece of process-wide mutable state in the library: it exists only for
 * the destructor, is guarded by its own mutex, and is touched only by context_create and context_destroy. */
#include <pthread.h>
#include <stddef.h>

#include "backend_internal.h"

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fp8moe_context* live_head;

void fp8moe_live_add(struct fp8moe_context* ctx) {
  pthread_mutex_lock(&live_lock);
  ctx->live_prev = NULL;
  ctx->live_next = live_head;
  if (live_head) live_head->live_prev = ctx;
  live_head = ctx;
  pthread_mutex_unlock(&live_lock);
}

void fp8moe_live_remove(struct fp8moe_context* ctx) {
  pthread_mutex_lock(&live_lock);
  if (ctx->live_prev) ctx->live_prev->live_next = ctx->live_next;
  else if (live_head == ctx) live_head = ctx->live_next;
  if (ctx->live_next) ctx->live_next->live_prev = ctx->live_prev;
  ctx->live_prev = ctx->live_next = NULL;
  pthread_mutex_unlock(&live_lock);
}

#ifdef FP8MOE_WITH_CUDA
/* libstdc++'s own hook for freeing its emergency exception pool (72 KiB malloc'd by a static constructor and
 * otherwise never freed). Hidden and weak: it binds only to the copy linked into this library, never to a
 * libstdc++.so of the host process, and is NULL when no C++ runtime was linked in. */
extern void _ZN9__gnu_cxx9__freeresEv(void) __attribute__((weak, visibility("hidden")));
#endif

/* CPU contexts are destroyed (their workers joined, memory freed). A CUDA context has no thread of ours; it
 * is left alone, because CUDA calls from a destructor at process exit may find the driver already gone: a
 * host must destroy CUDA contexts before dlclose (docs/ABI.md). */
__attribute__((destructor)) static void fp8moe_unload(void) {
  pthread_mutex_lock(&live_lock);
  struct fp8moe_context* c = live_head;
  live_head = NULL;
  pthread_mutex_unlock(&live_lock);
  while (c != NULL) {
    struct fp8moe_context* next = c->live_next;
    if (c->backend == FP8MOE_BACKEND_CPU) fp8moe_context_free(c);
    c = next;
  }
#ifdef FP8MOE_WITH_CUDA
  if (_ZN9__gnu_cxx9__freeresEv != NULL) _ZN9__gnu_cxx9__freeresEv();
#endif
}
