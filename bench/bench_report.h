/* bench_report.h — what one fp8moe-bench run measured, and its two renderings: a Markdown table for
 * people (docs/PERFORMANCE.md pastes it) and a JSON document with every raw number for tools
 * (bench/bench_report.py validates it and draws the roofline chart). Pure C: no GPU needed. */
#ifndef FP8MOE_BENCH_REPORT_H
#define FP8MOE_BENCH_REPORT_H

#include <stdio.h>

#include "bench_core.h"

#define BENCH_JSON_SCHEMA "fp8moe-bench/1"

typedef struct bench_gemm_rate { /* a cuBLASLt FP8 GEMM timed in the same process */
  int64_t m, n, k;
  double tensor_tflops; /* per-tensor scales; ≤ 0 = not available */
  double block_tflops;  /* 1×128 activation × 128×128 weight block scales; ≤ 0 = not available */
  double tensor_sm_mhz, block_sm_mhz; /* median SM clock over each one's timed runs; ≤ 0 = not sampled */
} bench_gemm_rate;

typedef struct bench_rooflines {
  int measured;           /* 0: the defaults of docs/PERFORMANCE.md were used */
  double read_gbs;        /* HBM streaming read, own kernel */
  double copy_gbs;        /* device-to-device copy, read + write bytes */
  double read_bytes;      /* size of the read test */
  int warmup_ms;          /* device time each ceiling ran before it was timed (0: boost clocks, or not measured) */
  bench_gemm_rate dense;  /* 8192³ */
  bench_gemm_rate per_case[BENCH_MAX_CASES]; /* m = 8192 tokens, n = 2I, k = H of the case's model */
  char gemm_note[160];    /* why a cuBLASLt rate is missing, when one is */
} bench_rooflines;

typedef struct bench_point {
  int case_index;
  int routing;            /* BENCH_ROUTING_* */
  int64_t T;
  int status;             /* 0 measured; 1 check failed; 2 error; 3 skipped (budget) */
  char note[200];
  double* replay_us;      /* [n_replays], owned */
  int n_replays;
  double median_us, p90_us;
  double route_us;        /* routing + permutation stages alone (prefix graph); < 0 = not measured */
  double* stage_us;       /* [n_stages] with --stages, owned */
  char (*stage_name)[48];
  int n_stages;
  int32_t experts_hit;
  int64_t slots;
  bench_floor floor;
  double fraction;        /* floor / median */
  double tflops, weight_gbs;
  double peer_us;         /* < 0 = no published figure */
  int check_tokens;
  double rel_err;
  int64_t ids_mismatch;   /* sampled (token, slot) ids that differ from the CPU backend */
  /* Paired A/B (bench_run.ab): B's replays, each paired with replay_us[i] of A (interleaved, order alternating). */
  double* ab_replay_us;   /* [n_ab_replays], owned; n_ab_replays = 0 when B was not timed */
  int n_ab_replays;
  double ab_median_us;
  double ab_ratio;        /* median over pairs of B/A */
  int ab_wins;            /* pairs in which B was faster */
  double ab_rel_err;      /* B's check against the CPU backend; < 0 = not checked */
  /* B's routing + permutation prefix, timed in pairs with A's (route_us is then A's half of those pairs). */
  double ab_route_us;     /* B's median; < 0 = not measured */
  double ab_route_ratio;  /* median over pairs of B/A */
  int ab_route_wins;      /* pairs in which B's prefix was faster */
  bench_clock_summary clock; /* SM clock and board power over the timed replays (A's and B's together in an A/B) */
} bench_point;

typedef struct bench_run {
  char date[32], commit[64], gpu[128], driver[64], clocks[192], command[1024];
  char clock_note[160];   /* how the clocks beside each point were read, or why they were not */
  int sm_count;
  double l2_mib;
  bench_rooflines roof;
  int ab;                 /* 1: a second plugin B was timed in pairs with this one (--ab-library, --ab-env) */
  char ab_library[512];   /* B's path */
  char ab_env[128];       /* FP8MOE_CUDA_GEMM_FALLBACK while B's context was created ... */
  int ab_env_set;         /* ... or 0: unset */
  bench_point* points;
  int n_points;
  double elapsed_s;
} bench_run;

/* The peak rate the floor of a point uses: the matching scaling's dense rate at this case's GEMM1 shape
 * when measured, else at 8192³ (block scales fall back to per-tensor when cuBLASLt lacks them). */
double bench_peak_flops(const bench_rooflines* r, int case_index);

void bench_write_markdown(FILE* f, const bench_run* run);
void bench_write_rooflines_markdown(FILE* f, const bench_run* run);
/* Returns 0 on success. */
int bench_write_json(FILE* f, const bench_run* run);

#endif /* FP8MOE_BENCH_REPORT_H */
