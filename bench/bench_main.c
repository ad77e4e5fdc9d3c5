/* fp8moe-bench — the project's own benchmark (docs/PERFORMANCE.md is its report). It loads the plugin
 * through the C ABI exactly as a host does (dlopen + fp8moe_get_api), and for every selected (shape,
 * format, T, routing) point: captures one `run` in a CUDA graph, checks the replayed result against the CPU
 * backend on sampled tokens, then times ≥ 30 replays with the L2 flushed before each, and judges the median
 * against rooflines measured in the same process. Exit status: see --help. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_gpu.h"
#include "bench_plugin.h"
#include "bench_problem.h"
#include "bench_report.h"

/* One loaded plugin and its CUDA context: A, the plugin measured, and with --ab-library / --ab-env B, timed in
 * pairs with A. */
typedef struct bench_plugin {
  void* so;
  const fp8moe_api* api;
  fp8moe_context* gpu;
} bench_plugin;

typedef struct bench {
  bench_args args;
  bench_plugin plugin[2]; /* [0] A; [1] B when n_plugins == 2 */
  int n_plugins;
  fp8moe_context* cpu;    /* the CPU oracle, A's: B is checked against the same reference */
  bench_timer timer;
  bench_run run;
  struct timespec t0;
  int failures;
} bench;

#define FALLBACK_ENV "FP8MOE_CUDA_GEMM_FALLBACK"

static double since(const struct timespec* t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* 0 with both of A's contexts, 77 when the CUDA backend is unavailable, -1 on other errors. */
static int open_contexts(bench* b) {
  const bench_plugin* a = &b->plugin[0];
  fp8moe_backend_info bi;
  memset(&bi, 0, sizeof bi);
  bi.struct_size = sizeof bi;
  bi.backend = FP8MOE_BACKEND_CUDA;
  int dev_count = 0;
  if (a->api->backend_info(&bi) != FP8MOE_STATUS_OK || !bi.available || cudaGetDeviceCount(&dev_count) != cudaSuccess ||
      dev_count == 0) {
    printf("fp8moe-bench: skipped, no usable CUDA device (%s)\n", bi.reason[0] ? bi.reason : "cudaGetDeviceCount");
    return 77;
  }
  if (bench_context_create(a->api, FP8MOE_BACKEND_CUDA, "fp8moe-bench: CUDA context", &b->plugin[0].gpu) != 0)
    return -1;
  return bench_context_create(a->api, FP8MOE_BACKEND_CPU, "fp8moe-bench: CPU context", &b->cpu);
}

/* B's CUDA context, created while FP8MOE_CUDA_GEMM_FALLBACK is what --ab-env says (A's was created with the
 * ambient value). The plugin reads the variable once, at context creation, so B keeps its setting; the ambient
 * value is put back straight after, so nothing else in the process sees the change. */
static int open_ab_context(bench* b) {
  const char* ambient = getenv(FALLBACK_ENV);
  char* saved = ambient ? strdup(ambient) : NULL;
  if (ambient && !saved) return -1;
  const char* want = b->args.ab_env;
  int rc = !want ? 0 : strcmp(want, "-") == 0 ? unsetenv(FALLBACK_ENV) : setenv(FALLBACK_ENV, want, 1);
  const char* seen = getenv(FALLBACK_ENV);
  b->run.ab_env_set = seen != NULL;
  snprintf(b->run.ab_env, sizeof b->run.ab_env, "%s", seen ? seen : "");
  if (rc == 0)
    rc = bench_context_create(b->plugin[1].api, FP8MOE_BACKEND_CUDA, "fp8moe-bench: B's CUDA context",
                              &b->plugin[1].gpu);
  else fprintf(stderr, "fp8moe-bench: cannot set %s for B\n", FALLBACK_ENV);
  if ((saved ? setenv(FALLBACK_ENV, saved, 1) : unsetenv(FALLBACK_ENV)) != 0) {
    fprintf(stderr, "fp8moe-bench: cannot restore %s\n", FALLBACK_ENV);
    rc = -1;
  }
  free(saved);
  return rc;
}

static void read_metadata(bench* b, int argc, char** argv) {
  bench_run* r = &b->run;
  time_t now = time(NULL);
  strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  const char* commit = b->args.commit ? b->args.commit : getenv("FP8MOE_COMMIT");
  snprintf(r->commit, sizeof r->commit, "%s", commit ? commit : "unknown");
  size_t used = 0;
  for (int i = 0; i < argc && used + 2 < sizeof r->command; ++i)
    used += (size_t)snprintf(r->command + used, sizeof r->command - used, "%s%s", i ? " " : "", argv[i]);
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    snprintf(r->gpu, sizeof r->gpu, "%.100s (cc %d.%d)", prop.name, prop.major, prop.minor);
    r->sm_count = prop.multiProcessorCount;
    r->l2_mib = prop.l2CacheSize / 1048576.0;
  }
  FILE* p = popen("nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.mem "
                  "--format=csv,noheader 2>/dev/null",
                  "r");
  char line[160] = "";
  if (p) {
    if (!fgets(line, sizeof line, p)) line[0] = '\0';
    pclose(p);
  }
  line[strcspn(line, "\n")] = '\0';
  char* comma = strchr(line, ',');
  if (comma) {
    *comma = '\0';
    snprintf(r->driver, sizeof r->driver, "%s", line);
    snprintf(r->clocks, sizeof r->clocks, "sm, max sm, mem at start:%s", comma + 1);
  } else {
    int v = 0;
    cudaDriverGetVersion(&v);
    snprintf(r->driver, sizeof r->driver, "CUDA %d.%d, no nvidia-smi", v / 1000, (v % 1000) / 10);
    snprintf(r->clocks, sizeof r->clocks, "unknown");
  }
}

static int add_point(bench* b, bench_point** slot) {
  bench_point* grown = realloc(b->run.points, sizeof(bench_point) * (size_t)(b->run.n_points + 1));
  if (!grown) return -1;
  b->run.points = grown;
  *slot = &grown[b->run.n_points++];
  memset(*slot, 0, sizeof **slot);
  (*slot)->route_us = -1;
  (*slot)->peer_us = -1;
  (*slot)->ab_rel_err = -1;
  (*slot)->ab_route_us = -1;
  bench_clock_none(&(*slot)->clock);
  return 0;
}

/* Index of the last routing/permutation node of the chain (its prefix is "routing + permutation alone"). At
 * small T that node is the fused prologue (kernels/prologue.cu), which also quantizes the input: the prefix
 * then includes the quantization, an upper bound of routing + permutation. */
static int route_prefix(const bench_chain* c) {
  int last = -1;
  for (int i = 0; i < c->n; ++i)
    if (strstr(c->name[i], "rout") || strstr(c->name[i], "permute") || strstr(c->name[i], "precomputed") ||
        strstr(c->name[i], "prologue"))
      last = i;
  return last;
}

static double prefix_median(bench* b, cudaGraph_t g, const bench_chain* c, int keep, double* scratch) {
  cudaGraphExec_t ex = NULL;
  double med = -1, p90;
  if (bench_prefix_exec(g, c, keep, &ex) == 0 &&
      bench_time_graph(&b->timer, ex, b->args.warmup, b->args.warmup_ms, b->args.replays, scratch) == 0)
    bench_stats(scratch, b->args.replays, &med, &p90);
  if (ex) cudaGraphExecDestroy(ex);
  return med;
}

/* Paired A/B of the routing + permutation prefix: A's and B's prefixes (each its own chain's, by route_prefix) timed
 * in interleaved pairs like the whole runs, so a change to routing or permutation is read with the same pairing;
 * route_us gets A's median, ab_route_* B's and the ratio. Returns 0, or -1 where a prefix is missing or fails. */
static int route_pairs(bench* b, cudaGraph_t ga, const bench_chain* ca, int keep_a, cudaGraph_t gb, bench_point* p,
                       double* us_a, double* us_b) {
  bench_chain cb;
  cudaGraphExec_t ea = NULL, eb = NULL;
  int rc = -1;
  if (bench_chain_of(gb, &cb) == 0) {
    const int last_b = route_prefix(&cb);
    const int n = b->args.replays;
    if (last_b >= 0 && bench_prefix_exec(ga, ca, keep_a, &ea) == 0 &&
        bench_prefix_exec(gb, &cb, last_b + 1, &eb) == 0 &&
        bench_time_pairs(&b->timer, ea, eb, b->args.warmup, b->args.warmup_ms, n, us_a, us_b) == 0) {
      double p90;
      bench_stats(us_a, n, &p->route_us, &p90);
      bench_stats(us_b, n, &p->ab_route_us, &p90);
      bench_paired_stats(us_a, us_b, n, &p->ab_route_ratio, &p->ab_route_wins);
      rc = 0;
    }
  }
  if (ea) cudaGraphExecDestroy(ea);
  if (eb) cudaGraphExecDestroy(eb);
  return rc;
}

/* One plugin's captured run of a point. */
typedef struct bench_capture {
  void* ws;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
} bench_capture;

static void capture_free(bench_capture* cap) {
  if (cap->exec) cudaGraphExecDestroy(cap->exec);
  if (cap->graph) cudaGraphDestroy(cap->graph);
  cudaFree(cap->ws);
  memset(cap, 0, sizeof *cap);
}

/* describe, query_workspace, then one `run` captured on s and instantiated. Returns 0, or -1 with why set. */
static int capture_run(const bench_plugin* pl, const bench_weights* w, const bench_buffers* d, int64_t T,
                       cudaStream_t s, bench_capture* cap, char* why, size_t why_size) {
  bench_call c;
  bench_call_describe(&c, w, d, T, 1);
  char msg[512] = "";
  c.a.error_message = msg;
  c.a.error_message_size = sizeof msg;
  size_t ws_bytes = 0;
  int32_t st = pl->api->query_workspace(pl->gpu, &c.a, &ws_bytes);
  if (st != FP8MOE_STATUS_OK) {
    snprintf(why, why_size, "query_workspace: %s", msg);
    return -1;
  }
  if (ws_bytes && cudaMalloc(&cap->ws, ws_bytes) != cudaSuccess) {
    snprintf(why, why_size, "workspace of %zu bytes", ws_bytes);
    return -1;
  }
  c.a.workspace = cap->ws;
  c.a.workspace_size = ws_bytes;
  c.a.stream = s;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    snprintf(why, why_size, "begin capture");
    return -1;
  }
  st = pl->api->run(pl->gpu, &c.a);
  const cudaError_t ce = cudaStreamEndCapture(s, &cap->graph);
  if (st != FP8MOE_STATUS_OK) {
    snprintf(why, why_size, "run: %s", msg);
    return -1;
  }
  if (ce != cudaSuccess || cudaGraphInstantiate(&cap->exec, cap->graph, 0) != cudaSuccess) {
    snprintf(why, why_size, "graph capture: %s", cudaGetErrorString(cudaGetLastError()));
    return -1;
  }
  return 0;
}

/* The replay the check reads: poisoned outputs (so an element the run never wrote shows), one replay, the
 * outputs copied back. Nonzero on a CUDA error. */
static int checked_replay(cudaStream_t s, cudaGraphExec_t exec, const bench_buffers* d, int64_t T, int64_t H,
                          int64_t K, uint16_t* out, int32_t* ids) {
  return cudaMemsetAsync(d->out, 0xFF, (size_t)(T * H) * 2, s) ||
         cudaMemsetAsync(d->ids_out, 0xFF, (size_t)(T * K) * 4, s) || cudaGraphLaunch(exec, s) ||
         cudaStreamSynchronize(s) || cudaMemcpy(out, d->out, (size_t)(T * H) * 2, cudaMemcpyDeviceToHost) ||
         cudaMemcpy(ids, d->ids_out, (size_t)(T * K) * 4, cudaMemcpyDeviceToHost);
}

/* A run's outputs. B gets its own set, so that its check can never read what A's run wrote. */
static int alloc_outputs(bench_buffers* d, int64_t T, int64_t H, int64_t K) {
  return cudaMalloc(&d->out, (size_t)(T * H) * 2) || cudaMalloc(&d->ids_out, (size_t)(T * K) * 4) ||
         cudaMalloc(&d->w_out, (size_t)(T * K) * 4);
}

/* Paired timing's numbers for B; A's replays of the pairs are the point's own replay_us. */
static void ab_stats(bench_point* p) {
  double p90;
  bench_stats(p->ab_replay_us, p->n_ab_replays, &p->ab_median_us, &p90);
  bench_paired_stats(p->replay_us, p->ab_replay_us, p->n_ab_replays, &p->ab_ratio, &p->ab_wins);
}

/* A point whose result (A's, or B's: who = "B ") differs from the CPU backend: status 1, never timed. */
static void check_failed(bench_point* p, const char* who, const bench_check* chk) {
  p->status = 1;
  snprintf(p->note, sizeof p->note, "%sdiffers from the CPU backend: rel err %.3e, %lld unwritten, %lld non-finite",
           who, chk->rel_err, (long long)chk->unwritten, (long long)chk->nonfinite_bad);
}

/* The timed replays of a point: A's alone, or with B A's and B's in interleaved pairs. */
static int time_point(bench* b, const bench_capture* cap, bench_point* p) {
  const bench_args* a = &b->args;
  if (b->n_plugins == 2)
    return bench_time_pairs(&b->timer, cap[0].exec, cap[1].exec, a->warmup, a->warmup_ms, a->replays, p->replay_us,
                            p->ab_replay_us);
  return bench_time_graph(&b->timer, cap[0].exec, a->warmup, a->warmup_ms, a->replays, p->replay_us);
}

/* Everything device-side of one point; the caller owns inputs and weights. With B, B is captured and checked
 * exactly as A is (same inputs and input buffers, its own workspace and outputs, A's CPU oracle on the same
 * sampled rows), and then A and B are timed in interleaved pairs; route+perm and stages stay A's. */
static void run_point(bench* b, int ci, const bench_weights* w, const bench_inputs* in, bench_point* p) {
  const bench_model* m = w->model;
  const int64_t T = in->T, H = m->H, E = m->E, K = m->K;
  const fp8moe_api* api = b->plugin[0].api;
  const int ab = b->n_plugins == 2;
  bench_buffers d, db;
  memset(&d, 0, sizeof d);
  memset(&db, 0, sizeof db);
  bench_capture cap[2];
  memset(cap, 0, sizeof cap);
  char why[sizeof p->note]; /* a capture's failure, for the note (A's as it is, B's after "B: ") */
  uint16_t* out = malloc((size_t)(T * H) * 2);
  int32_t* ids = malloc((size_t)(T * K) * 4);
  int64_t* rows = malloc(sizeof(int64_t) * (size_t)(b->args.check_tokens > 0 ? b->args.check_tokens : 1));
  cudaStream_t s = b->timer.stream;
  p->replay_us = calloc((size_t)b->args.replays, sizeof(double));
  if (ab) p->ab_replay_us = calloc((size_t)b->args.replays, sizeof(double));
  double* scratch = calloc((size_t)b->args.replays, sizeof(double));
  double* scratch_b = ab ? calloc((size_t)b->args.replays, sizeof(double)) : NULL; /* B's half of paired prefixes */
#define FAIL(...)                                                       \
  do {                                                                  \
    p->status = 2;                                                      \
    snprintf(p->note, sizeof p->note, __VA_ARGS__);                     \
    goto done;                                                          \
  } while (0)
  if (!out || !ids || !rows || !p->replay_us || !scratch || (ab && (!p->ab_replay_us || !scratch_b)))
    FAIL("host memory");
  if (cudaMalloc(&d.hidden, (size_t)(T * H) * 2) != cudaSuccess || cudaMalloc(&d.logits, (size_t)(T * E) * 4) ||
      cudaMalloc(&d.bias, (size_t)E * 4) || cudaMalloc(&d.a1, 8) || alloc_outputs(&d, T, H, K) ||
      (ab && alloc_outputs(&db, T, H, K)))
    FAIL("device memory: %s", cudaGetErrorString(cudaGetLastError()));
  d.a2 = (char*)d.a1 + 4;
  if (cudaMemcpy(d.hidden, in->hidden, (size_t)(T * H) * 2, cudaMemcpyHostToDevice) ||
      cudaMemcpy(d.logits, in->logits, (size_t)(T * E) * 4, cudaMemcpyHostToDevice) ||
      cudaMemcpy(d.bias, in->bias, (size_t)E * 4, cudaMemcpyHostToDevice) ||
      cudaMemcpy(d.a1, in->a_scales, 8, cudaMemcpyHostToDevice))
    FAIL("copy to device: %s", cudaGetErrorString(cudaGetLastError()));
  db.hidden = d.hidden, db.logits = d.logits, db.bias = d.bias, db.a1 = d.a1, db.a2 = d.a2;

  /* Capture one run. */
  if (capture_run(&b->plugin[0], w, &d, T, s, &cap[0], why, sizeof why) != 0) FAIL("%s", why);

  /* Check the replayed result: poisoned outputs, one replay, then the CPU oracle on sampled tokens. */
  if (checked_replay(s, cap[0].exec, &d, T, H, K, out, ids))
    FAIL("checked replay: %s", cudaGetErrorString(cudaGetLastError()));
  uint8_t hit[2048] = {0};
  for (int64_t i = 0; i < T * K; ++i)
    if (ids[i] >= 0 && ids[i] < E) {
      p->experts_hit += !hit[ids[i]];
      hit[ids[i]] = 1;
      ++p->slots;
    }
  const int n_check = b->args.check_tokens;
  const int64_t S = n_check > 0 ? bench_sample_rows(T, n_check, 0xBE7C4ull + (uint64_t)T, rows) : 0;
  if (n_check > 0) {
    bench_check chk;
    int32_t st = bench_check_against_cpu(api, b->cpu, w, in, rows, S, out, ids, &chk);
    if (st != FP8MOE_STATUS_OK) FAIL("CPU oracle: status %d", (int)st);
    p->check_tokens = (int)S;
    p->rel_err = chk.rel_err;
    p->ids_mismatch = chk.ids_mismatch;
    if (!chk.ok) {
      check_failed(p, "", &chk);
      goto done; /* a wrong result is never timed or reported as a speed */
    }
    if (chk.ids_mismatch) snprintf(p->note, sizeof p->note, "%lld sampled ids differ (near-ties)", (long long)chk.ids_mismatch);
  }

  /* B: the same capture and check, into its own outputs; a wrong B fails the point just as a wrong A does. */
  if (ab) {
    if (capture_run(&b->plugin[1], w, &db, T, s, &cap[1], why, sizeof why) != 0) FAIL("B: %.196s", why);
    if (checked_replay(s, cap[1].exec, &db, T, H, K, out, ids))
      FAIL("B: checked replay: %s", cudaGetErrorString(cudaGetLastError()));
    if (n_check > 0) {
      bench_check chk;
      int32_t st = bench_check_against_cpu(api, b->cpu, w, in, rows, S, out, ids, &chk);
      if (st != FP8MOE_STATUS_OK) FAIL("B: CPU oracle: status %d", (int)st);
      p->ab_rel_err = chk.rel_err;
      if (!chk.ok) {
        check_failed(p, "B ", &chk);
        goto done; /* nor is a point whose B is wrong: its ratio would compare against a wrong result */
      }
      if (chk.ids_mismatch) {
        const size_t used = strlen(p->note);
        snprintf(p->note + used, sizeof p->note - used, "%sB: %lld sampled ids differ (near-ties)", used ? "; " : "",
                 (long long)chk.ids_mismatch);
      }
    }
  }

  /* Time it (with B: in pairs, A's half of each pair is A's replay). */
  if (time_point(b, cap, p) != 0) FAIL("timed replays: %s", cudaGetErrorString(cudaGetLastError()));
  p->clock = b->timer.clock; /* before the prefix graphs below reuse the timer */
  p->n_replays = b->args.replays;
  bench_stats(p->replay_us, p->n_replays, &p->median_us, &p->p90_us);
  if (ab) {
    p->n_ab_replays = b->args.replays;
    ab_stats(p);
  }

  bench_chain chain;
  if (bench_chain_of(cap[0].graph, &chain) == 0) {
    const int last = route_prefix(&chain);
    if (last >= 0 && !(ab && route_pairs(b, cap[0].graph, &chain, last + 1, cap[1].graph, p, scratch, scratch_b) == 0))
      p->route_us = prefix_median(b, cap[0].graph, &chain, last + 1, scratch);
    if (b->args.stages) {
      p->stage_us = calloc((size_t)chain.n, sizeof(double));
      p->stage_name = calloc((size_t)chain.n, sizeof *p->stage_name);
      double prev = 0;
      for (int k = 0; p->stage_us && p->stage_name && k < chain.n; ++k) {
        const double t = prefix_median(b, cap[0].graph, &chain, k + 1, scratch);
        p->stage_us[k] = t - prev;
        memcpy(p->stage_name[k], chain.name[k], sizeof p->stage_name[k]);
        prev = t;
        p->n_stages = k + 1;
      }
    }
  }

  bench_floor_in fi = {T, H, m->I, (int32_t)E, (int32_t)K, w->format, p->experts_hit, p->slots,
                       b->run.roof.read_gbs * 1e9, bench_peak_flops(&b->run.roof, ci)};
  bench_floor_eval(&fi, &p->floor);
  p->fraction = p->floor.floor_s * 1e6 / p->median_us;
  p->tflops = p->floor.flops / (p->median_us * 1e-6) / 1e12;
  p->weight_gbs = p->floor.weight_bytes / (p->median_us * 1e-6) / 1e9;
done:
#undef FAIL
  if (p->status == 1 || p->status == 2) ++b->failures;
  capture_free(&cap[0]);
  capture_free(&cap[1]);
  cudaFree(d.hidden);
  cudaFree(d.logits);
  cudaFree(d.bias);
  cudaFree(d.a1);
  cudaFree(d.out);
  cudaFree(d.ids_out);
  cudaFree(d.w_out);
  cudaFree(db.out);
  cudaFree(db.ids_out);
  cudaFree(db.w_out);
  cudaGetLastError();
  free(out);
  free(ids);
  free(rows);
  free(scratch);
  free(scratch_b);
}

static void print_point(const bench_point* p) {
  const bench_case* c = bench_case_at((size_t)p->case_index);
  if (p->status >= 2 && p->n_replays == 0) {
    printf("  %-16s %-7s %-7s T=%-5lld %s: %s\n", c->model->name, bench_format_short(c->format),
           bench_routing_name(p->routing), (long long)p->T, p->status == 3 ? "skipped" : "ERROR", p->note);
    return;
  }
  if (p->status == 1) {
    printf("  %-16s %-7s %-7s T=%-5lld CHECK FAILED: %s\n", c->model->name, bench_format_short(c->format),
           bench_routing_name(p->routing), (long long)p->T, p->note);
    return;
  }
  printf("  %-16s %-7s %-7s T=%-5lld %9.1f us (p90 %9.1f) route+perm %6.1f us  %7.1f TFLOP/s  %5.0f GB/s  "
         "%.2f of roofline  rel err %.1e",
         c->model->name, bench_format_short(c->format), bench_routing_name(p->routing), (long long)p->T, p->median_us,
         p->p90_us, p->route_us, p->tflops, p->weight_gbs, p->fraction, p->rel_err);
  if (p->n_ab_replays)
    printf("  B %.1f us  B/A %.4f (B faster in %d of %d)", p->ab_median_us, p->ab_ratio, p->ab_wins, p->n_ab_replays);
  if (p->ab_route_us >= 0)
    printf("  route+perm B %.1f us  B/A %.4f (%d of %d)", p->ab_route_us, p->ab_route_ratio, p->ab_route_wins,
           p->n_replays);
  if (p->clock.samples > 0)
    printf("  SM %.0f MHz (%.0f-%.0f), %.0f W, power-capped %.0f %%", p->clock.sm_mhz_median, p->clock.sm_mhz_min,
           p->clock.sm_mhz_max, p->clock.power_w, 100 * p->clock.power_cap_share);
  putchar('\n');
  if (p->n_stages) {
    printf("    stages (prefix-graph differences, µs):");
    for (int k = 0; k < p->n_stages; ++k) printf(" %s %.1f%s", p->stage_name[k], p->stage_us[k], k + 1 < p->n_stages ? "," : "\n");
  }
}

static void run_case_group(bench* b, size_t first, size_t last) {
  const bench_model* m = bench_case_at(first)->model;
  bench_weights w;
  const double t0 = since(&b->t0);
  if (bench_weights_make(m, 77 + first, &w) != 0) {
    fprintf(stderr, "fp8moe-bench: %s: cannot make weights (host or device memory)\n", m->name);
    ++b->failures;
    bench_weights_free(&w);
    return;
  }
  printf("%s: weights ready in %.1f s\n", m->name, since(&b->t0) - t0);
  for (size_t ci = first; ci <= last; ++ci) {
    if (!(b->args.case_mask & (1u << ci))) continue;
    const bench_case* c = bench_case_at(ci);
    if (bench_weights_set_format(&w, c->format, 1000 + ci, b->args.plant_wrong_scale) != 0) {
      fprintf(stderr, "fp8moe-bench: %s: cannot make scales\n", m->name);
      ++b->failures;
      continue;
    }
    for (int ti = 0; ti < b->args.n_tokens; ++ti) {
      const int64_t T = b->args.tokens[ti];
      bench_inputs in;
      int inputs_ok = -1;
      for (int routing = BENCH_ROUTING_UNIFORM; routing <= BENCH_ROUTING_SKEWED; routing <<= 1) {
        if (!(b->args.routing_mask & routing)) continue;
        bench_point* p;
        if (add_point(b, &p) != 0) return;
        p->case_index = (int)ci;
        p->routing = routing;
        p->T = T;
        p->peer_us = bench_peer_us(m->name, c->format, T);
        if (b->args.budget_s > 0 && since(&b->t0) > b->args.budget_s) {
          p->status = 3;
          snprintf(p->note, sizeof p->note, "time budget of %.0f s spent", b->args.budget_s);
          continue;
        }
        if (inputs_ok < 0) inputs_ok = bench_inputs_make(m, T, 31 * T + ci, &in) == 0;
        if (!inputs_ok) {
          p->status = 2;
          snprintf(p->note, sizeof p->note, "host memory for inputs");
          ++b->failures;
          continue;
        }
        bench_inputs_route(m, routing, 7 * T + (uint64_t)routing, &in);
        run_point(b, (int)ci, &w, &in, p);
        print_point(p);
      }
      if (inputs_ok >= 0) bench_inputs_free(&in);
    }
  }
  bench_weights_free(&w);
}

static int write_outputs(bench* b) {
  int rc = 0;
  printf("\n## Rooflines\n\n");
  bench_write_rooflines_markdown(stdout, &b->run);
  printf("\n## Points\n\n");
  bench_write_markdown(stdout, &b->run);
  if (b->args.md_path) {
    FILE* f = fopen(b->args.md_path, "w");
    if (!f) return -1;
    fprintf(f, "fp8moe-bench %s, commit %s, %s, driver %s; %s\n\n", b->run.date, b->run.commit, b->run.gpu,
            b->run.driver, b->run.clocks);
    fprintf(f, "Command: `%s`\n\n", b->run.command);
    bench_write_rooflines_markdown(f, &b->run);
    fputc('\n', f);
    bench_write_markdown(f, &b->run);
    rc |= fclose(f);
  }
  if (b->args.json_path) {
    FILE* f = fopen(b->args.json_path, "w");
    if (!f) return -1;
    rc |= bench_write_json(f, &b->run);
    rc |= fclose(f);
  }
  return rc ? -1 : 0;
}

int main(int argc, char** argv) {
  bench b;
  memset(&b, 0, sizeof b);
  setvbuf(stdout, NULL, _IOLBF, 0);
  clock_gettime(CLOCK_MONOTONIC, &b.t0);
  char err[256];
  if (bench_parse_args(argc, argv, &b.args, err, sizeof err) != 0) {
    fprintf(stderr, "fp8moe-bench: %s (see --help)\n", err);
    return 2;
  }
  if (b.args.help) {
    bench_print_usage(argv[0]);
    return 0;
  }
  b.n_plugins = bench_args_ab(&b.args) ? 2 : 1;
  const char* path_a = bench_plugin_path(b.args.library);
  const char* path_b = b.args.ab_library ? b.args.ab_library : path_a;
  if (bench_plugin_open(path_a, "fp8moe-bench: ", &b.plugin[0].so, &b.plugin[0].api) != 0) return 3;
  if (b.n_plugins == 2 && bench_plugin_open(path_b, "fp8moe-bench: B: ", &b.plugin[1].so, &b.plugin[1].api) != 0)
    return 3;
  int rc = open_contexts(&b);
  if (rc != 0) return rc == 77 ? 77 : 3;
  if (b.n_plugins == 2) {
    b.run.ab = 1;
    snprintf(b.run.ab_library, sizeof b.run.ab_library, "%s", path_b);
    if (open_ab_context(&b) != 0) return 3;
  }
  read_metadata(&b, argc, argv);
  printf("fp8moe-bench on %s, driver %s, %s; commit %s\n", b.run.gpu, b.run.driver, b.run.clocks, b.run.commit);
  if (b.run.ab) {
    const char* ambient = getenv(FALLBACK_ENV);
    printf("A/B: A = %s with %s%s%s, B = %s with %s%s%s; replays in interleaved pairs, order alternating\n", path_a,
           FALLBACK_ENV, ambient ? "=" : " unset", ambient ? ambient : "", b.run.ab_library, FALLBACK_ENV,
           b.run.ab_env_set ? "=" : " unset", b.run.ab_env);
  }
  int device = 0;
  cudaGetDevice(&device);
  bench_clocks* clocks = bench_clocks_open(device, b.run.clock_note, sizeof b.run.clock_note);
  printf("clocks: %s\n", b.run.clock_note);
  if (b.args.rooflines) {
    if (bench_measure_rooflines(&b.run.roof, b.args.case_mask, b.args.warmup_ms, clocks, err, sizeof err) != 0) {
      fprintf(stderr, "fp8moe-bench: %s\n", err);
      bench_clocks_close(clocks);
      return 3;
    }
  } else {
    bench_default_rooflines(&b.run.roof);
  }
  printf("rooflines (%.1f s, each after %d ms of warm-up): read %.0f GB/s, copy %.0f GB/s, FP8 8192^3 %.0f TFLOP/s "
         "per-tensor, %.0f block",
         since(&b.t0), b.run.roof.warmup_ms, b.run.roof.read_gbs, b.run.roof.copy_gbs, b.run.roof.dense.tensor_tflops,
         b.run.roof.dense.block_tflops);
  if (b.run.roof.dense.tensor_sm_mhz > 0 || b.run.roof.dense.block_sm_mhz > 0)
    printf(" (SM %.0f and %.0f MHz)", b.run.roof.dense.tensor_sm_mhz, b.run.roof.dense.block_sm_mhz);
  putchar('\n');
  /* A pair is two replays: the timer holds events for 2 · replays with B. */
  if (bench_timer_init(&b.timer, b.args.flush_bytes, b.n_plugins * b.args.replays) != 0) {
    fprintf(stderr, "fp8moe-bench: timer setup: %s\n", cudaGetErrorString(cudaGetLastError()));
    bench_clocks_close(clocks);
    return 3;
  }
  b.timer.clocks = clocks;
  /* Cases of one model are adjacent: one weight generation per model. */
  for (size_t i = 0; i < bench_case_count();) {
    size_t j = i;
    while (j + 1 < bench_case_count() && bench_case_at(j + 1)->model == bench_case_at(i)->model) ++j;
    uint32_t group = 0;
    for (size_t k = i; k <= j; ++k) group |= 1u << k;
    if (b.args.case_mask & group) run_case_group(&b, i, j);
    i = j + 1;
  }
  b.run.elapsed_s = since(&b.t0);
  FILE* p = popen("nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader 2>/dev/null", "r");
  char line[96] = "";
  if (p) {
    if (!fgets(line, sizeof line, p)) line[0] = '\0';
    pclose(p);
    line[strcspn(line, "\n")] = '\0';
    if (line[0]) {
      const size_t used = strlen(b.run.clocks);
      snprintf(b.run.clocks + used, sizeof b.run.clocks - used, "; at end: %s", line);
    }
  }
  if (write_outputs(&b) != 0) {
    fprintf(stderr, "fp8moe-bench: cannot write the report files\n");
    rc = 3;
  }
  int skipped = 0;
  for (int i = 0; i < b.run.n_points; ++i) skipped += b.run.points[i].status == 3;
  printf("\nfp8moe-bench: %d points, %d failed, %d skipped, %.0f s\n", b.run.n_points, b.failures, skipped,
         b.run.elapsed_s);
  for (int i = 0; i < b.run.n_points; ++i) {
    free(b.run.points[i].replay_us);
    free(b.run.points[i].stage_us);
    free(b.run.points[i].stage_name);
    free(b.run.points[i].ab_replay_us);
  }
  free(b.run.points);
  bench_timer_free(&b.timer);
  bench_clocks_close(clocks);
  b.plugin[0].api->context_destroy(b.plugin[0].gpu);
  b.plugin[0].api->context_destroy(b.cpu);
  if (b.n_plugins == 2) {
    b.plugin[1].api->context_destroy(b.plugin[1].gpu);
    dlclose(b.plugin[1].so); /* A's handle stays open to the end, as before: B's is the one this run added */
  }
  if (rc == 3) return 3;
  return b.failures ? 1 : 0;
}
