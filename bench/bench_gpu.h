/* bench_gpu.h — the device side of fp8moe-bench: its own kernels (bench_kernels.cu), the rooflines
 * (bench_roofline.c: streaming read, copy, cuBLASLt FP8 GEMMs loaded lazily), and timing CUDA-graph
 * replays with the L2 flushed between them (bench_graph.c). */
#ifndef FP8MOE_BENCH_GPU_H
#define FP8MOE_BENCH_GPU_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_report.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- bench_kernels.cu ---- */
/* Reads bytes (a multiple of 16) at p with 16-byte loads; folds them into *sink so nothing is elided. */
int bench_launch_read(const void* p, size_t bytes, unsigned long long* sink, int blocks, cudaStream_t s);
/* Random e4m3 codes (never NaN) at p. */
int bench_launch_fill_e4m3(void* p, size_t n, uint64_t seed, cudaStream_t s);
/* n floats of value v. */
int bench_launch_fill_f32(float* p, size_t n, float v, cudaStream_t s);

/* ---- bench_clocks.c ---- */
/* NVML sampling of the SM clock, its event reasons and the board energy (docs/PERFORMANCE.md "Protocol"). */
typedef struct bench_clocks bench_clocks;
/* NULL (note says why) where NVML is missing or cannot read this device's clock; every call below takes NULL. */
bench_clocks* bench_clocks_open(int cuda_device, char* note, size_t note_size);
void bench_clocks_close(bench_clocks* c);
/* Opens a window: the samples taken until bench_clocks_stop are summarized there (c = NULL: an empty summary). */
void bench_clocks_start(bench_clocks* c);
void bench_clocks_stop(bench_clocks* c, bench_clock_summary* out);

/* ---- bench_roofline.c ---- */
/* Measures read and copy bandwidth and the cuBLASLt FP8 rates (8192³ and each selected case's GEMM1
 * shape), each after warmup_ms of device time running it (the points' --warmup-ms: the same sustained clocks),
 * with the SM clock of each rate's timed runs where clocks is not NULL.
 * Returns 0, or -1 with err set on a device error (a missing cuBLASLt is a note, not an error). */
int bench_measure_rooflines(bench_rooflines* r, uint32_t case_mask, int warmup_ms, bench_clocks* clocks, char* err,
                            size_t err_size);
/* docs/PERFORMANCE.md's readings, for --no-rooflines. */
void bench_default_rooflines(bench_rooflines* r);

/* ---- bench_graph.c ---- */
/* Queues run i (0, 1, …) of what is being warmed up on s; 0 on success. */
typedef int (*bench_enqueue_fn)(void* ctx, int i, cudaStream_t s);
/* Runs fn `first` times (at least once), then in batches sized from the measured run time until warmup_ms of
 * device time are behind (docs/PERFORMANCE.md "Protocol": the sustained clocks), timing each batch between e0
 * and e1. The graph replays and the ceilings (bench_roofline.c) both warm up through it. Returns 0 or -1. */
int bench_warm_up(bench_enqueue_fn fn, void* ctx, cudaStream_t s, int first, int warmup_ms, cudaEvent_t e0,
                  cudaEvent_t e1);
typedef struct bench_timer {
  cudaStream_t stream;
  void* flush;          /* device buffer memset between replays */
  size_t flush_bytes;
  cudaEvent_t* ev;      /* 2 per replay */
  int max_replays;      /* replays one call can time (a pair counts 2) */
  bench_clocks* clocks; /* NULL: not sampled */
  bench_clock_summary clock; /* the last timed call's window: from its first timed replay's enqueue to the sync */
} bench_timer;

int bench_timer_init(bench_timer* t, size_t flush_bytes, int max_replays);
void bench_timer_free(bench_timer* t);
/* Replays exec (each after an L2 flush) `warmup` times and then until warmup_ms of device time have passed,
 * then `n` timed times; us[i] = event time of timed replay i. */
int bench_time_graph(bench_timer* t, cudaGraphExec_t exec, int warmup, int warmup_ms, int n, double* us);
/* Paired A/B: warms up a, then b (as bench_time_graph does), then times n pairs, each replay after its own L2
 * flush: pair i replays a then b when i is even, b then a when odd. a_us[i], b_us[i] = the two times of pair i.
 * Needs a timer of at least 2n replays. */
int bench_time_pairs(bench_timer* t, cudaGraphExec_t a, cudaGraphExec_t b, int warmup, int warmup_ms, int n,
                     double* a_us, double* b_us);

/* The kernel nodes of a captured single-stream graph in launch order, with their names. */
#define BENCH_MAX_NODES 32
typedef struct bench_chain {
  int n;
  cudaGraphNode_t node[BENCH_MAX_NODES]; /* every node of the chain (memsets too) */
  char name[BENCH_MAX_NODES][48];        /* kernel name, or "memset"/"other" */
} bench_chain;
/* Returns 0 when g is a single chain of at most BENCH_MAX_NODES nodes. */
int bench_chain_of(cudaGraph_t g, bench_chain* c);
/* Instantiates a copy of g holding only the first `keep` nodes of its chain. */
int bench_prefix_exec(cudaGraph_t g, const bench_chain* c, int keep, cudaGraphExec_t* exec);

#ifdef __cplusplus
}
#endif

#endif /* FP8MOE_BENCH_GPU_H */
