/* test_unload.c — loading and unloading the library many times (docs/RELIABILITY.md, "Unloading"): across
 * N dlopen/dlclose cycles (each negotiating, probing both backends and running a CPU context with worker
 * threads) the process's resident memory, thread count and open file descriptors must not grow; and a host
 * that dlcloses the library while contexts are still alive must not be left with worker threads parked in
 * unmapped code: the library's destructor joins them.
 *
 * Usage: test_unload [cycles]   (the library from $FP8MOE_LIBRARY; default 1000 cycles) */
#define _DEFAULT_SOURCE

#include <dirent.h>
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp8moe.h"
#include "plugin_host.h"

/* Growth allowed over the measured cycles: allocator noise, not a per-cycle leak (the leak this guards
 * against was 72,704 bytes per cycle, 69 MiB over 1,000). */
#define RSS_SLACK_BYTES (4L << 20)
#define HEAP_SLACK_BYTES (64L << 10)
#define WARMUP_CYCLES 20

typedef struct usage {
  long heap_bytes; /* malloc'd and not freed (mallinfo2): sees leaks whose pages are never touched */
  long rss_bytes;
  long threads;
  long fds;
} usage;

static long status_field(const char* key) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0) v = strtol(line + n, NULL, 10);
  if (f) fclose(f);
  return v;
}

static usage measure(void) {
  usage u;
  u.heap_bytes = (long)mallinfo2().uordblks;
  u.rss_bytes = status_field("VmRSS:") * 1024;
  u.threads = status_field("Threads:");
  u.fds = 0;
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  while (d && (e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') ++u.fds;
  if (d) closedir(d);
  return u;
}

static const char* library;

/* One host's life: load, negotiate, probe, create a CPU context with 3 threads, run nothing heavy, destroy
 * (or not, when leave_context), unload. */
static int cycle(int leave_context) {
  test_plugin tp;
  if (test_plugin_open(library, &tp) != 0) return 0;
  const fp8moe_api* api = tp.api;
  int ok = 1;
  for (int32_t b = FP8MOE_BACKEND_CPU; b <= FP8MOE_BACKEND_CUDA; ++b) {
    fp8moe_backend_info bi;
    memset(&bi, 0, sizeof bi);
    bi.struct_size = sizeof bi;
    bi.backend = b;
    ok &= api->backend_info(&bi) == FP8MOE_STATUS_OK;
  }
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.backend = FP8MOE_BACKEND_CPU;
  ca.num_threads = 3;
  fp8moe_context* ctx = NULL;
  ok &= api->context_create(&ca, &ctx) == FP8MOE_STATUS_OK;
  fp8moe_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  ok &= api->query_capabilities(ctx, &caps) == FP8MOE_STATUS_OK;
  if (!leave_context) api->context_destroy(ctx);
  test_plugin_close(&tp);
  return ok;
}

static int still_loaded(void) {
  void* h = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != NULL;
}

int main(int argc, char** argv) {
  long cycles = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
  library = getenv("FP8MOE_LIBRARY");
  if (!library) {
    fprintf(stderr, "set FP8MOE_LIBRARY\n");
    return 1;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const usage start = measure();

  /* ---- plain cycles ---- */
  int ok = 1;
  for (int i = 0; i < WARMUP_CYCLES; ++i) ok &= cycle(0);
  const usage warm = measure();
  for (long i = 0; i < cycles; ++i) ok &= cycle(0);
  const usage end = measure();
  EXPECT(ok, "a cycle failed (open, negotiate, backend_info, context_create or query_capabilities)");
  EXPECT(!still_loaded(), "the library is still mapped after dlclose");
  long growth = end.rss_bytes - warm.rss_bytes, heap = end.heap_bytes - warm.heap_bytes;
  printf("%ld cycles: heap in use %+ld bytes (%+.1f per cycle), RSS %ld -> %ld KiB (%+ld bytes), threads %ld -> "
         "%ld, fds %ld -> %ld\n",
         cycles, heap, (double)heap / (double)cycles, warm.rss_bytes / 1024, end.rss_bytes / 1024, growth,
         warm.threads, end.threads, warm.fds, end.fds);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* ASan's and TSan's allocators keeps freed memory in quarantine and maps shadow for every load: memory is not
   * measurable here (the default build measures it; LeakSanitizer watches this one). */
  (void)growth;
  (void)heap;
  printf("sanitizer build: heap and RSS not checked\n");
#else
  EXPECT(heap <= HEAP_SLACK_BYTES, "heap in use grew by %ld bytes over %ld cycles (%.0f per cycle)", heap, cycles,
         (double)heap / (double)cycles);
  EXPECT(growth <= RSS_SLACK_BYTES, "RSS grew by %ld bytes over %ld cycles (%.0f per cycle)", growth, cycles,
         (double)growth / (double)cycles);
#endif
  /* against the warmed-up process: a sanitizer runtime may start its own thread during the first cycles */
  EXPECT(end.threads == warm.threads && warm.threads == start.threads + (warm.threads > start.threads),
         "threads %ld after the cycles, %ld after warm-up, %ld before", end.threads, warm.threads, start.threads);
  EXPECT(end.fds == warm.fds, "open fds %ld after the cycles, %ld after warm-up", end.fds, warm.fds);

  /* ---- contexts left alive at dlclose: their workers are joined by the library's destructor ---- */
  const long leave = cycles < 50 ? cycles : 50;
  ok = 1;
  for (long i = 0; i < leave; ++i) ok &= cycle(1);
  const usage after_leaks = measure();
  printf("%ld cycles leaving a 3-thread context alive: threads %ld -> %ld, fds %ld -> %ld\n", leave, warm.threads,
         after_leaks.threads, warm.fds, after_leaks.fds);
  EXPECT(ok, "a cycle that leaves its context failed");
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT(after_leaks.heap_bytes - end.heap_bytes <= HEAP_SLACK_BYTES,
         "heap in use grew by %ld bytes over %ld cycles that left a context alive",
         after_leaks.heap_bytes - end.heap_bytes, leave);
#endif
  EXPECT(after_leaks.threads == warm.threads,
         "threads %ld after unloading with live contexts, %ld before: workers left in unmapped code",
         after_leaks.threads, warm.threads);
  EXPECT(!still_loaded(), "the library is still mapped after dlclose with live contexts");
  return test_finish("test_unload", test_checks_run);
}
