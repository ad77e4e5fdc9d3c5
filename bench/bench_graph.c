/* bench_graph.c — timing protocol of docs/PERFORMANCE.md: one `run` captured in a CUDA graph, replayed
 * with a large memset before each replay so the weights come from HBM (serving reads each layer's weights
 * once per step), CUDA events around each replay only. Stage times come from prefix graphs: copies of
 * the captured chain cut after its k-th node, timed the same way. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gpu.h"

int bench_timer_init(bench_timer* t, size_t flush_bytes, int max_replays) {
  memset(t, 0, sizeof *t);
  t->flush_bytes = flush_bytes;
  t->max_replays = max_replays;
  if (cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking) != cudaSuccess) return -1;
  if (cudaMalloc(&t->flush, flush_bytes) != cudaSuccess) return -1;
  t->ev = calloc((size_t)max_replays * 2, sizeof(cudaEvent_t));
  if (!t->ev) return -1;
  for (int i = 0; i < 2 * max_replays; ++i)
    if (cudaEventCreate(&t->ev[i]) != cudaSuccess) return -1;
  return 0;
}

void bench_timer_free(bench_timer* t) {
  if (t->ev)
    for (int i = 0; i < 2 * t->max_replays; ++i)
      if (t->ev[i]) cudaEventDestroy(t->ev[i]);
  free(t->ev);
  if (t->flush) cudaFree(t->flush);
  if (t->stream) cudaStreamDestroy(t->stream);
  memset(t, 0, sizeof *t);
}

static int flushed_replay(bench_timer* t, cudaGraphExec_t exec, int i) {
  /* A different byte each time, so no layer of the memory system can skip the write. */
  return cudaMemsetAsync(t->flush, i & 0xFF, t->flush_bytes, t->stream) != cudaSuccess ||
         cudaGraphLaunch(exec, t->stream) != cudaSuccess;
}

/* Warm-up until the clocks have settled: under sustained load the H200 leaves its boost state after a few
 * tens of milliseconds, and a point timed across that step is bimodal (docs/PERFORMANCE.md, run-to-run
 * spread). `first` runs first, then batches sized from the measured run time until warmup_ms of device time are
 * behind. */
int bench_warm_up(bench_enqueue_fn fn, void* ctx, cudaStream_t s, int first, int warmup_ms, cudaEvent_t e0,
                  cudaEvent_t e1) {
  double spent_ms = 0;
  int done = 0;
  for (int batch = first > 0 ? first : 1; batch > 0;) {
    if (cudaEventRecord(e0, s) != cudaSuccess) return -1;
    for (int i = 0; i < batch; ++i)
      if (fn(ctx, done + i, s) != 0) return -1;
    float ms = 0;
    if (cudaEventRecord(e1, s) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
      return -1;
    spent_ms += ms;
    done += batch;
    const double per_ms = ms > 0 ? ms / batch : 1e-3, left_ms = warmup_ms - spent_ms;
    const double more = left_ms > 0 ? left_ms / per_ms + 1 : 0;
    batch = more > 100000 ? 100000 : (int)more;
  }
  return 0;
}

/* The graph's warm-up: `warmup` flushed replays, then bench_warm_up's batches. */
typedef struct replay_ctx {
  bench_timer* t;
  cudaGraphExec_t exec;
} replay_ctx;
static int enqueue_replay(void* c, int i, cudaStream_t s) {
  (void)s; /* the timer's stream */
  const replay_ctx* r = c;
  return flushed_replay(r->t, r->exec, i);
}
static int warm_up(bench_timer* t, cudaGraphExec_t exec, int warmup, int warmup_ms) {
  replay_ctx r = {t, exec};
  return bench_warm_up(enqueue_replay, &r, t->stream, warmup, warmup_ms, t->ev[0], t->ev[1]);
}

/* Queues one timed replay: its own flush memset, then the graph between events ev[0] and ev[1]. */
static int timed_replay(bench_timer* t, cudaGraphExec_t exec, int flush_byte, cudaEvent_t* ev) {
  return cudaMemsetAsync(t->flush, flush_byte & 0xFF, t->flush_bytes, t->stream) != cudaSuccess ||
         cudaEventRecord(ev[0], t->stream) != cudaSuccess || cudaGraphLaunch(exec, t->stream) != cudaSuccess ||
         cudaEventRecord(ev[1], t->stream) != cudaSuccess;
}

int bench_time_graph(bench_timer* t, cudaGraphExec_t exec, int warmup, int warmup_ms, int n, double* us) {
  if (n > t->max_replays) return -1;
  if ((warmup > 0 || warmup_ms > 0) && warm_up(t, exec, warmup, warmup_ms) != 0) return -1;
  bench_clocks_start(t->clocks);
  int rc = 0;
  for (int i = 0; i < n && rc == 0; ++i)
    rc = timed_replay(t, exec, i, &t->ev[2 * i]);
  if (rc == 0 && cudaStreamSynchronize(t->stream) != cudaSuccess) rc = -1;
  bench_clocks_stop(t->clocks, &t->clock);
  if (rc != 0) return -1;
  for (int i = 0; i < n; ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, t->ev[2 * i], t->ev[2 * i + 1]) != cudaSuccess) return -1;
    us[i] = (double)ms * 1000.0;
  }
  return 0;
}

int bench_time_pairs(bench_timer* t, cudaGraphExec_t a, cudaGraphExec_t b, int warmup, int warmup_ms, int n,
                     double* a_us, double* b_us) {
  if (2 * n > t->max_replays) return -1;
  if ((warmup > 0 || warmup_ms > 0) && (warm_up(t, a, warmup, warmup_ms) != 0 || warm_up(t, b, warmup, warmup_ms) != 0))
    return -1;
  /* Events 4i, 4i+1 bracket pair i's first replay and 4i+2, 4i+3 its second. A goes first in even pairs and
   * B in odd ones, so whatever favours the first (or second) replay of a pair favours each side equally. */
  bench_clocks_start(t->clocks);
  int rc = 0;
  for (int i = 0; i < n && rc == 0; ++i) {
    const int a_first = i % 2 == 0;
    rc = timed_replay(t, a_first ? a : b, 2 * i, &t->ev[4 * i]) != 0 ||
         timed_replay(t, a_first ? b : a, 2 * i + 1, &t->ev[4 * i + 2]) != 0;
  }
  if (rc == 0 && cudaStreamSynchronize(t->stream) != cudaSuccess) rc = -1;
  bench_clocks_stop(t->clocks, &t->clock);
  if (rc != 0) return -1;
  for (int i = 0; i < n; ++i) {
    const int a_first = i % 2 == 0;
    float first = 0, second = 0;
    if (cudaEventElapsedTime(&first, t->ev[4 * i], t->ev[4 * i + 1]) != cudaSuccess ||
        cudaEventElapsedTime(&second, t->ev[4 * i + 2], t->ev[4 * i + 3]) != cudaSuccess)
      return -1;
    a_us[i] = (double)(a_first ? first : second) * 1000.0;
    b_us[i] = (double)(a_first ? second : first) * 1000.0;
  }
  return 0;
}

/* The readable part of a mangled kernel name: the identifier that contains "kernel", else the longest. */
static void short_name(const char* mangled, char* out, size_t n) {
  const char* best = NULL;
  size_t best_len = 0;
  for (const char* p = mangled; *p;) {
    if (!isdigit((unsigned char)*p)) {
      ++p;
      continue;
    }
    char* end = NULL;
    long len = strtol(p, &end, 10);
    if (len <= 0 || (size_t)len > strlen(end)) {
      p = end;
      continue;
    }
    const int has_kernel = strstr(end, "kernel") && strstr(end, "kernel") < end + len;
    if (has_kernel || (!best && (size_t)len > best_len)) {
      best = end;
      best_len = (size_t)len;
      if (has_kernel) break;
    }
    p = end + len;
  }
  if (!best) {
    best = mangled;
    best_len = strlen(mangled);
  }
  if (best_len >= n) best_len = n - 1;
  memcpy(out, best, best_len);
  out[best_len] = '\0';
}

static void node_name(cudaGraphNode_t node, char* out, size_t n) {
  enum cudaGraphNodeType type;
  snprintf(out, n, "other");
  if (cudaGraphNodeGetType(node, &type) != cudaSuccess) return;
  if (type == cudaGraphNodeTypeMemset) {
    snprintf(out, n, "memset");
    return;
  }
  if (type != cudaGraphNodeTypeKernel) return;
  /* Kernel names are driver facts; the entry points are looked up at run time so that the bench starts
   * (and skips cleanly) on machines without a driver. CUDA 12.3 is the first with both name queries. */
  CUresult (*get_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*) = NULL;
  CUresult (*func_name)(const char**, CUfunction) = NULL;
  CUresult (*kernel_name)(const char**, CUkernel) = NULL;
  enum cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPointByVersion("cuGraphKernelNodeGetParams", (void**)&get_params, 12030, cudaEnableDefault, &q);
  cudaGetDriverEntryPointByVersion("cuFuncGetName", (void**)&func_name, 12030, cudaEnableDefault, &q);
  cudaGetDriverEntryPointByVersion("cuKernelGetName", (void**)&kernel_name, 12030, cudaEnableDefault, &q);
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  if (!get_params || get_params((CUgraphNode)node, &p) != CUDA_SUCCESS) return;
  const char* name = NULL;
  if (p.func && func_name) func_name(&name, p.func);
  if (!name && p.kern && kernel_name) kernel_name(&name, p.kern);
  if (name) short_name(name, out, n);
  else snprintf(out, n, "kernel");
}

int bench_chain_of(cudaGraph_t g, bench_chain* c) {
  memset(c, 0, sizeof *c);
  size_t count = 0;
  if (cudaGraphGetNodes(g, NULL, &count) != cudaSuccess || count == 0 || count > BENCH_MAX_NODES) return -1;
  cudaGraphNode_t nodes[BENCH_MAX_NODES];
  if (cudaGraphGetNodes(g, nodes, &count) != cudaSuccess) return -1;
  cudaGraphNode_t cur = NULL;
  for (size_t i = 0; i < count; ++i) {
    size_t deps = 0;
    if (cudaGraphNodeGetDependencies(nodes[i], NULL, NULL, &deps) != cudaSuccess) return -1;
    if (deps == 0) {
      if (cur) return -1; /* two roots: not a chain */
      cur = nodes[i];
    }
  }
  while (cur) {
    c->node[c->n] = cur;
    node_name(cur, c->name[c->n], sizeof c->name[0]);
    ++c->n;
    size_t next = 0;
    if (cudaGraphNodeGetDependentNodes(cur, NULL, NULL, &next) != cudaSuccess || next > 1) return -1;
    cudaGraphNode_t nx = NULL;
    cudaGraphEdgeData edge; /* programmatic (PDL) edges carry edge data; querying without it is refused */
    memset(&edge, 0, sizeof edge);
    if (next == 1 && cudaGraphNodeGetDependentNodes(cur, &nx, &edge, &next) != cudaSuccess) return -1;
    cur = next == 1 ? nx : NULL;
    if (cur && c->n == BENCH_MAX_NODES) return -1;
  }
  return (size_t)c->n == count ? 0 : -1;
}

int bench_prefix_exec(cudaGraph_t g, const bench_chain* c, int keep, cudaGraphExec_t* exec) {
  cudaGraph_t clone = NULL;
  *exec = NULL;
  if (cudaGraphClone(&clone, g) != cudaSuccess) return -1;
  int rc = 0;
  for (int i = c->n - 1; i >= keep && rc == 0; --i) {
    cudaGraphNode_t copy = NULL;
    rc = cudaGraphNodeFindInClone(&copy, c->node[i], clone) == cudaSuccess && cudaGraphDestroyNode(copy) == cudaSuccess
             ? 0
             : -1;
  }
  if (rc == 0 && cudaGraphInstantiate(exec, clone, 0) != cudaSuccess) rc = -1;
  cudaGraphDestroy(clone);
  return rc;
}
