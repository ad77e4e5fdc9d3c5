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
#include "bench_problem.h"
#include "bench_report.h"

typedef struct bench {
  bench_args args;
  void* so;
  const fp8moe_api* api;
  fp8moe_context *cpu, *gpu;
  bench_timer timer;
  bench_run run;
  struct timespec t0;
  int failures;
} bench;

static double since(const struct timespec* t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static int open_plugin(bench* b) {
  const char* path = b->args.library ? b->args.library : getenv("FP8MOE_LIBRARY");
  b->so = dlopen(path ? path : "libfp8moe.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!b->so) {
    fprintf(stderr, "fp8moe-bench: dlopen(%s): %s\n", path ? path : "libfp8moe.so.1", dlerror());
    return -1;
  }
  fp8moe_get_api_fn get_api = (fp8moe_get_api_fn)(uintptr_t)dlsym(b->so, "fp8moe_get_api");
  fp8moe_negotiation n;
  memset(&n, 0, sizeof n);
  n.struct_size = sizeof n;
  n.host_abi_major = FP8MOE_ABI_VERSION_MAJOR;
  n.host_max_minor = FP8MOE_ABI_VERSION_MINOR;
  if (!get_api || get_api(&n, &b->api) != FP8MOE_STATUS_OK) {
    fprintf(stderr, "fp8moe-bench: negotiation failed: %s\n", get_api ? n.message : "no fp8moe_get_api");
    return -1;
  }
  return 0;
}

/* 0 with both contexts, 77 when the CUDA backend is unavailable, -1 on other errors. */
static int open_contexts(bench* b) {
  fp8moe_backend_info bi;
  memset(&bi, 0, sizeof bi);
  bi.struct_size = sizeof bi;
  bi.backend = FP8MOE_BACKEND_CUDA;
  int dev_count = 0;
  if (b->api->backend_info(&bi) != FP8MOE_STATUS_OK || !bi.available || cudaGetDeviceCount(&dev_count) != cudaSuccess ||
      dev_count == 0) {
    printf("fp8moe-bench: skipped, no usable CUDA device (%s)\n", bi.reason[0] ? bi.reason : "cudaGetDeviceCount");
    return 77;
  }
  char msg[512];
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.error_message = msg;
  ca.error_message_size = sizeof msg;
  ca.backend = FP8MOE_BACKEND_CUDA;
  if (b->api->context_create(&ca, &b->gpu) != FP8MOE_STATUS_OK) {
    fprintf(stderr, "fp8moe-bench: CUDA context: %s\n", msg);
    return -1;
  }
  ca.backend = FP8MOE_BACKEND_CPU;
  if (b->api->context_create(&ca, &b->cpu) != FP8MOE_STATUS_OK) {
    fprintf(stderr, "fp8moe-bench: CPU context: %s\n", msg);
    return -1;
  }
  return 0;
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

/* Everything device-side of one point; the caller owns inputs and weights. */
static void run_point(bench* b, int ci, const bench_weights* w, const bench_inputs* in, bench_point* p) {
  const bench_model* m = w->model;
  const int64_t T = in->T, H = m->H, E = m->E, K = m->K;
  const fp8moe_api* api = b->api;
  bench_buffers d;
  memset(&d, 0, sizeof d);
  void* ws = NULL;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  uint16_t* out = malloc((size_t)(T * H) * 2);
  int32_t* ids = malloc((size_t)(T * K) * 4);
  int64_t* rows = malloc(sizeof(int64_t) * (size_t)(b->args.check_tokens > 0 ? b->args.check_tokens : 1));
  cudaStream_t s = b->timer.stream;
  p->replay_us = calloc((size_t)b->args.replays, sizeof(double));
  double* scratch = calloc((size_t)b->args.replays, sizeof(double));
#define FAIL(...)                                                       \
  do {                                                                  \
    p->status = 2;                                                      \
    snprintf(p->note, sizeof p->note, __VA_ARGS__);                     \
    goto done;                                                          \
  } while (0)
  if (!out || !ids || !rows || !p->replay_us || !scratch) FAIL("host memory");
  if (cudaMalloc(&d.hidden, (size_t)(T * H) * 2) != cudaSuccess || cudaMalloc(&d.logits, (size_t)(T * E) * 4) ||
      cudaMalloc(&d.bias, (size_t)E * 4) || cudaMalloc(&d.a1, 8) || cudaMalloc(&d.out, (size_t)(T * H) * 2) ||
      cudaMalloc(&d.ids_out, (size_t)(T * K) * 4) || cudaMalloc(&d.w_out, (size_t)(T * K) * 4))
    FAIL("device memory: %s", cudaGetErrorString(cudaGetLastError()));
  d.a2 = (char*)d.a1 + 4;
  if (cudaMemcpy(d.hidden, in->hidden, (size_t)(T * H) * 2, cudaMemcpyHostToDevice) ||
      cudaMemcpy(d.logits, in->logits, (size_t)(T * E) * 4, cudaMemcpyHostToDevice) ||
      cudaMemcpy(d.bias, in->bias, (size_t)E * 4, cudaMemcpyHostToDevice) ||
      cudaMemcpy(d.a1, in->a_scales, 8, cudaMemcpyHostToDevice))
    FAIL("copy to device: %s", cudaGetErrorString(cudaGetLastError()));
  bench_call c;
  bench_call_describe(&c, w, &d, T, 1);
  char msg[512] = "";
  c.a.error_message = msg;
  c.a.error_message_size = sizeof msg;
  size_t ws_bytes = 0;
  int32_t st = api->query_workspace(b->gpu, &c.a, &ws_bytes);
  if (st != FP8MOE_STATUS_OK) FAIL("query_workspace: %s", msg);
  if (ws_bytes && cudaMalloc(&ws, ws_bytes) != cudaSuccess) FAIL("workspace of %zu bytes", ws_bytes);
  c.a.workspace = ws;
  c.a.workspace_size = ws_bytes;
  c.a.stream = s;

  /* Capture one run. */
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) FAIL("begin capture");
  st = api->run(b->gpu, &c.a);
  const cudaError_t ce = cudaStreamEndCapture(s, &graph);
  if (st != FP8MOE_STATUS_OK) FAIL("run: %s", msg);
  if (ce != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
    FAIL("graph capture: %s", cudaGetErrorString(cudaGetLastError()));

  /* Check the replayed result: poisoned outputs, one replay, then the CPU oracle on sampled tokens. */
  if (cudaMemsetAsync(d.out, 0xFF, (size_t)(T * H) * 2, s) || cudaMemsetAsync(d.ids_out, 0xFF, (size_t)(T * K) * 4, s) ||
      cudaGraphLaunch(exec, s) || cudaStreamSynchronize(s) ||
      cudaMemcpy(out, d.out, (size_t)(T * H) * 2, cudaMemcpyDeviceToHost) ||
      cudaMemcpy(ids, d.ids_out, (size_t)(T * K) * 4, cudaMemcpyDeviceToHost))
    FAIL("checked replay: %s", cudaGetErrorString(cudaGetLastError()));
  uint8_t hit[2048] = {0};
  for (int64_t i = 0; i < T * K; ++i)
    if (ids[i] >= 0 && ids[i] < E) {
      p->experts_hit += !hit[ids[i]];
      hit[ids[i]] = 1;
      ++p->slots;
    }
  if (b->args.check_tokens > 0) {
    const int64_t S = bench_sample_rows(T, b->args.check_tokens, 0xBE7C4ull + (uint64_t)T, rows);
    bench_check chk;
    st = bench_check_against_cpu(api, b->cpu, w, in, rows, S, out, ids, &chk);
    if (st != FP8MOE_STATUS_OK) FAIL("CPU oracle: status %d", (int)st);
    p->check_tokens = (int)S;
    p->rel_err = chk.rel_err;
    p->ids_mismatch = chk.ids_mismatch;
    if (!chk.ok) {
      p->status = 1;
      snprintf(p->note, sizeof p->note, "differs from the CPU backend: rel err %.3e, %lld unwritten, %lld non-finite",
               chk.rel_err, (long long)chk.unwritten, (long long)chk.nonfinite_bad);
      goto done; /* a wrong result is never timed or reported as a speed */
    }
    if (chk.ids_mismatch) snprintf(p->note, sizeof p->note, "%lld sampled ids differ (near-ties)", (long long)chk.ids_mismatch);
  }

  /* Time it. */
  if (bench_time_graph(&b->timer, exec, b->args.warmup, b->args.warmup_ms, b->args.replays, p->replay_us) != 0)
    FAIL("timed replays: %s", cudaGetErrorString(cudaGetLastError()));
  p->n_replays = b->args.replays;
  bench_stats(p->replay_us, p->n_replays, &p->median_us, &p->p90_us);

  bench_chain chain;
  if (bench_chain_of(graph, &chain) == 0) {
    const int last = route_prefix(&chain);
    if (last >= 0) p->route_us = prefix_median(b, graph, &chain, last + 1, scratch);
    if (b->args.stages) {
      p->stage_us = calloc((size_t)chain.n, sizeof(double));
      p->stage_name = calloc((size_t)chain.n, sizeof *p->stage_name);
      double prev = 0;
      for (int k = 0; p->stage_us && p->stage_name && k < chain.n; ++k) {
        const double t = prefix_median(b, graph, &chain, k + 1, scratch);
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
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  cudaFree(ws);
  cudaFree(d.hidden);
  cudaFree(d.logits);
  cudaFree(d.bias);
  cudaFree(d.a1);
  cudaFree(d.out);
  cudaFree(d.ids_out);
  cudaFree(d.w_out);
  cudaGetLastError();
  free(out);
  free(ids);
  free(rows);
  free(scratch);
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
         "%.2f of roofline  rel err %.1e\n",
         c->model->name, bench_format_short(c->format), bench_routing_name(p->routing), (long long)p->T, p->median_us,
         p->p90_us, p->route_us, p->tflops, p->weight_gbs, p->fraction, p->rel_err);
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
  if (open_plugin(&b) != 0) return 3;
  int rc = open_contexts(&b);
  if (rc != 0) return rc == 77 ? 77 : 3;
  read_metadata(&b, argc, argv);
  printf("fp8moe-bench on %s, driver %s, %s; commit %s\n", b.run.gpu, b.run.driver, b.run.clocks, b.run.commit);
  if (b.args.rooflines) {
    if (bench_measure_rooflines(&b.run.roof, b.args.case_mask, err, sizeof err) != 0) {
      fprintf(stderr, "fp8moe-bench: %s\n", err);
      return 3;
    }
  } else {
    bench_default_rooflines(&b.run.roof);
  }
  printf("rooflines (%.1f s): read %.0f GB/s, copy %.0f GB/s, FP8 8192^3 %.0f TFLOP/s per-tensor, %.0f block\n",
         since(&b.t0), b.run.roof.read_gbs, b.run.roof.copy_gbs, b.run.roof.dense.tensor_tflops,
         b.run.roof.dense.block_tflops);
  if (bench_timer_init(&b.timer, b.args.flush_bytes, b.args.replays) != 0) {
    fprintf(stderr, "fp8moe-bench: timer setup: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 3;
  }
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
  }
  free(b.run.points);
  bench_timer_free(&b.timer);
  b.api->context_destroy(b.gpu);
  b.api->context_destroy(b.cpu);
  if (rc == 3) return 3;
  return b.failures ? 1 : 0;
}
