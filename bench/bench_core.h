/* bench_core.h — the parts of fp8moe-bench that need no GPU, so CTest checks them everywhere: the table
 * of benchmark cases (the model shapes, each in the quant formats it ships in), the peer's
 * published kernel times, command-line parsing, replay statistics and the roofline floor arithmetic
 * (docs/PERFORMANCE.md, "Protocol" and "Floor"). */
#ifndef FP8MOE_BENCH_CORE_H
#define FP8MOE_BENCH_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "fp8moe.h"

/* ---- cases ---- */
typedef struct bench_model {
  const char* name;
  int32_t E, K;
  int64_t H, I;
  int32_t method, n_group, topk_group;
  float scale; /* routed_scaling_factor; 0 = default */
} bench_model;

typedef struct bench_case {
  const bench_model* model;
  int32_t format; /* FP8MOE_QUANT_* */
} bench_case;

#define BENCH_MAX_CASES 16
#define BENCH_MAX_TOKENS 16
#define BENCH_MAX_T 16384

size_t bench_case_count(void);
const bench_case* bench_case_at(size_t i);
const char* bench_format_name(int32_t format);  /* "FP8_BLOCK128", ... */
const char* bench_format_short(int32_t format); /* "block", "tensor", "channel" */
/* Parses a format as its enum name (case-insensitive) or short name; -1 when unknown. */
int32_t bench_format_parse(const char* s);

/* The peer's kernel time in µs (vLLM Triton fused_moe, routing excluded; docs/PERFORMANCE.md), or -1. */
double bench_peer_us(const char* model, int32_t format, int64_t T);

/* ---- routing distributions ---- */
#define BENCH_ROUTING_UNIFORM 1 /* random normal logits: near-uniform expert load */
#define BENCH_ROUTING_SKEWED 2  /* a few hot experts take most tokens */
const char* bench_routing_name(int routing);

/* ---- arguments ---- */
typedef struct bench_args {
  const char* library;   /* plugin path; NULL = $FP8MOE_LIBRARY, then the SONAME */
  const char* ab_library; /* --ab-library: plugin B, timed in pairs against A; NULL = A's path (with --ab-env) */
  const char* ab_env;     /* --ab-env: FP8MOE_CUDA_GEMM_FALLBACK for B's context, "-" = unset; NULL = ambient */
  const char* json_path; /* NULL = none */
  const char* md_path;   /* NULL = none (the table always goes to stdout) */
  const char* commit;    /* NULL = $FP8MOE_COMMIT, else "unknown" */
  uint32_t case_mask;    /* bit i = bench_case_at(i) selected */
  int64_t tokens[BENCH_MAX_TOKENS];
  int n_tokens;
  int routing_mask;      /* BENCH_ROUTING_* bits */
  int replays, warmup;
  int warmup_ms;          /* warm-up continues until this much device time, so clocks have settled */
  int check_tokens;      /* tokens the CPU oracle recomputes per point (first, last, random) */
  int stages;            /* also time every stage of the graph (prefix graphs) */
  int rooflines;         /* measure the rooflines (0: --no-rooflines, floors then use the defaults below) */
  int plant_wrong_scale; /* self-test: the GPU gets w2 scales ×1.25, so the guard must fail */
  double budget_s;       /* stop starting new points after this many seconds (0 = no limit) */
  size_t flush_bytes;    /* L2 flush memset between replays */
  int help;
} bench_args;

/* Fills a from argv (argv[0] ignored). Returns 0, or -1 with a one-line reason in err. */
int bench_parse_args(int argc, char** argv, bench_args* a, char* err, size_t err_size);
/* 1 when the arguments ask for a second plugin B (--ab-library or --ab-env). */
int bench_args_ab(const bench_args* a);
void bench_print_usage(const char* prog);

/* ---- statistics ---- */
/* Median and nearest-rank p90 of n values (n ≥ 1); v is not modified. */
void bench_stats(const double* v, int n, double* median, double* p90);
/* Paired A/B replays a[i], b[i] (n ≥ 1, times > 0): the median of the per-pair ratios b[i]/a[i], and in how
 * many pairs B was faster (b[i] < a[i]). A ratio per pair, not a ratio of medians: both replays of a pair ran
 * back to back, so the clock and power state they share cancels. *median_ratio = -1 when out of memory. */
void bench_paired_stats(const double* a, const double* b, int n, double* median_ratio, int* b_wins);

/* ---- clocks and power beside each timing (docs/PERFORMANCE.md "Protocol": at large T the layer runs at the board's
 * power cap, so a time means little without the SM clock it ran at) ---- */
/* NVML's clock event reason bits (nvmlClocksEventReason*; the same values as the older throttle reasons). */
#define BENCH_CLOCK_REASON_SW_POWER_CAP 0x4ull
#define BENCH_CLOCK_REASON_HW_SLOWDOWN 0x8ull
#define BENCH_CLOCK_REASON_SW_THERMAL 0x20ull
#define BENCH_CLOCK_REASON_HW_THERMAL 0x40ull
#define BENCH_CLOCK_REASON_HW_POWER_BRAKE 0x80ull

typedef struct bench_clock_sample {
  double t_ms;          /* host time of the reading */
  unsigned sm_mhz;
  long long reasons;    /* BENCH_CLOCK_REASON_* bits lowering the clock; < 0 = not read */
  long long energy_mj;  /* the board's energy counter; < 0 = not read */
} bench_clock_sample;

typedef struct bench_clock_summary {
  int samples;            /* SM clock samples in the window; 0 = not sampled (no NVML, or no sample fell in it) */
  double window_ms;       /* host time from the window's start to its end */
  double sm_mhz_median, sm_mhz_min, sm_mhz_max;
  double power_w;         /* mean board power between the energy counter's first and last steps; < 0 = unknown */
  double power_cap_share; /* share of the samples with the software power cap lowering the clock; < 0 = unknown */
  double slowdown_share;  /* share with a thermal or hardware slowdown (the other reasons above); < 0 = unknown */
} bench_clock_summary;

/* An empty summary: no samples, every number unknown (< 0). */
void bench_clock_none(bench_clock_summary* out);
/* The summary of a window's n samples in time order. The energy counter steps at its own period, so the power is
 * the energy between its first and last observed steps over the time between them (unknown with fewer than two
 * steps or under BENCH_POWER_MIN_MS between them). */
#define BENCH_POWER_MIN_MS 100.0
void bench_clock_summarize(const bench_clock_sample* s, int n, double window_ms, bench_clock_summary* out);

/* ---- floor ---- */
typedef struct bench_floor_in {
  int64_t T, H, I;
  int32_t E, K, format;
  int32_t experts_hit;  /* distinct local experts the routing selected */
  int64_t slots;        /* (token, slot) pairs routed to a local expert (≤ T·K) */
  double read_bytes_per_s;
  double peak_flops;    /* FP8 GEMM rate of the matching scaling; ≤ 0 = unknown (memory floor only) */
} bench_floor_in;

typedef struct bench_floor {
  double weight_bytes;  /* FP8 weights + scales of the experts hit */
  double bytes;         /* weight_bytes + activations in (bf16 hidden, fp32 logits) and out (bf16) */
  double flops;         /* 2·slots·H·(2I) + 2·slots·I·H */
  double memory_s, compute_s, floor_s;
  int compute_bound;    /* 1 when compute_s > memory_s */
} bench_floor;

/* Bytes of one expert's W13 + W2 and their scales in a format. */
double bench_expert_bytes(int64_t H, int64_t I, int32_t format);
void bench_floor_eval(const bench_floor_in* in, bench_floor* out);

#endif /* FP8MOE_BENCH_CORE_H */
