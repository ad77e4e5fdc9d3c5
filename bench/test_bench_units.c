/* test_bench_units.c — fp8moe-bench's GPU-free parts: argument parsing, replay statistics, the floor
 * arithmetic (checked against docs/PERFORMANCE.md's published floors) and the report writers. With
 * `--json FILE` it also writes a sample report for bench_report.py's schema check. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"

static int checks, failures;
#define EXPECT(cond, ...)                                          \
  do {                                                             \
    ++checks;                                                      \
    if (!(cond)) {                                                 \
      ++failures;                                                  \
      fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);   \
      fprintf(stderr, __VA_ARGS__);                                \
      fputc('\n', stderr);                                         \
    }                                                              \
  } while (0)

static int parse(bench_args* a, const char* line) {
  char buf[512], err[256];
  char* argv[32] = {"fp8moe-bench"};
  int argc = 1;
  snprintf(buf, sizeof buf, "%s", line);
  for (char* save = NULL, *t = strtok_r(buf, " ", &save); t && argc < 32; t = strtok_r(NULL, " ", &save)) argv[argc++] = t;
  return bench_parse_args(argc, argv, a, err, sizeof err);
}

static int popcount(uint32_t x) {
  int n = 0;
  for (; x; x &= x - 1) ++n;
  return n;
}

static void test_args(void) {
  bench_args a;
  EXPECT(parse(&a, "") == 0 && popcount(a.case_mask) == (int)bench_case_count(), "default selects every case");
  EXPECT(bench_case_count() == 9, "7 models + 2 per-tensor variants, got %zu", bench_case_count());
  EXPECT(a.n_tokens == 7 && a.tokens[0] == 1 && a.tokens[6] == 8192, "default T list");
  EXPECT(a.replays == 30 && a.routing_mask == (BENCH_ROUTING_UNIFORM | BENCH_ROUTING_SKEWED), "default protocol");
  EXPECT(a.flush_bytes >= ((size_t)256 << 20), "flush ≥ 256 MiB");
  EXPECT(a.warmup == 3 && a.warmup_ms >= 200, "warm-up past the boost-clock step by default");
  EXPECT(parse(&a, "--warmup 0 --warmup-ms 0") == 0 && a.warmup == 0 && a.warmup_ms == 0, "no warm-up on request");
  EXPECT(parse(&a, "--shape deepseek-v3") == 0 && popcount(a.case_mask) == 2, "deepseek-v3: block + per-tensor");
  EXPECT(parse(&a, "--shape deepseek-v3 --format block") == 0 && popcount(a.case_mask) == 1, "one case");
  EXPECT(parse(&a, "--shape qwen3-30b-a3b,mixtral-8x7b --format FP8_PER_TENSOR") == 0 && popcount(a.case_mask) == 2,
         "two per-tensor cases");
  EXPECT(parse(&a, "--tokens 1,16384 --routing skewed") == 0 && a.n_tokens == 2 && a.tokens[1] == 16384 &&
             a.routing_mask == BENCH_ROUTING_SKEWED,
         "16384 on request");
  EXPECT(parse(&a, "--stages --no-rooflines --plant-wrong-scale --budget-s 60") == 0 && a.stages && !a.rooflines &&
             a.plant_wrong_scale && a.budget_s == 60,
         "flags");
  const char* bad[] = {"--tokens 0", "--tokens 16385", "--tokens 1,x", "--replays 4", "--format fp4", "--shape gpt",
                       "--routing zipf", "--flush-mib 100", "--warmup-ms -1", "--warmup-ms 60001", "--bogus", "--json", "--shape mixtral-8x7b --format block",
                       "--tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) EXPECT(parse(&a, bad[i]) != 0, "'%s' must be refused", bad[i]);
  EXPECT(bench_format_parse("block128") == FP8MOE_QUANT_FP8_BLOCK128 && bench_format_parse("channel") == 2 &&
             bench_format_parse("FP8_PER_TENSOR") == 0 && bench_format_parse("int4") == -1,
         "format names");
}

static void test_stats(void) {
  double v[30], med, p90;
  for (int i = 0; i < 30; ++i) v[i] = 30 - i; /* unsorted on purpose */
  bench_stats(v, 30, &med, &p90);
  EXPECT(med == 15.5 && p90 == 27, "1..30: median %g p90 %g", med, p90);
  EXPECT(v[0] == 30, "input untouched");
  const double one = 7;
  bench_stats(&one, 1, &med, &p90);
  EXPECT(med == 7 && p90 == 7, "n = 1");
  const double odd[] = {5, 1, 3};
  bench_stats(odd, 3, &med, &p90);
  EXPECT(med == 3 && p90 == 5, "n = 3: median %g p90 %g", med, p90);
}

static void test_floor(void) {
  /* deepseek-v3 expert: 3·H·I bytes + 128×128 block scales of W13 [32×56] and W2 [56×16]. */
  EXPECT(bench_expert_bytes(7168, 2048, FP8MOE_QUANT_FP8_BLOCK128) == 44040192.0 + 4.0 * (32 * 56 + 56 * 16),
         "block bytes");
  EXPECT(bench_expert_bytes(4096, 14336, FP8MOE_QUANT_FP8_PER_TENSOR) == 3.0 * 4096 * 14336 + 8, "tensor bytes");
  EXPECT(bench_expert_bytes(5120, 8192, FP8MOE_QUANT_FP8_PER_CHANNEL) == 3.0 * 5120 * 8192 + 4.0 * (2 * 8192 + 5120),
         "channel bytes");
  /* docs/PERFORMANCE.md's published floors (copy rate 4,257 GB/s, 1,521 TFLOP/s): deepseek-v3 83 µs at T=1
   * (8 experts), 3,796 µs at T=8192 (compute); mixtral 949 µs at T=2048 (compute), 83 µs at T=1. */
  bench_floor f;
  bench_floor_in in = {1, 7168, 2048, 256, 8, FP8MOE_QUANT_FP8_BLOCK128, 8, 8, 4257e9, 1521e12};
  bench_floor_eval(&in, &f);
  EXPECT(!f.compute_bound && fabs(f.floor_s * 1e6 - 83) < 1, "deepseek T=1 floor %.1f us", f.floor_s * 1e6);
  in = (bench_floor_in){8192, 7168, 2048, 256, 8, FP8MOE_QUANT_FP8_BLOCK128, 256, 8192 * 8, 4257e9, 1521e12};
  bench_floor_eval(&in, &f);
  EXPECT(f.compute_bound && fabs(f.floor_s * 1e6 - 3796) < 2, "deepseek T=8192 floor %.1f us", f.floor_s * 1e6);
  EXPECT(f.flops == 6.0 * 8192 * 8 * 7168 * 2048, "gated FLOPs");
  in = (bench_floor_in){2048, 4096, 14336, 8, 2, FP8MOE_QUANT_FP8_PER_TENSOR, 8, 2048 * 2, 4257e9, 1521e12};
  bench_floor_eval(&in, &f);
  EXPECT(f.compute_bound && fabs(f.floor_s * 1e6 - 949) < 2, "mixtral T=2048 floor %.1f us", f.floor_s * 1e6);
  in = (bench_floor_in){1, 4096, 14336, 8, 2, FP8MOE_QUANT_FP8_PER_TENSOR, 2, 2, 4257e9, 1521e12};
  bench_floor_eval(&in, &f);
  EXPECT(!f.compute_bound && fabs(f.floor_s * 1e6 - 83) < 1, "mixtral T=1 floor %.1f us", f.floor_s * 1e6);
  in.peak_flops = 0; /* unknown compute rate: memory floor only */
  bench_floor_eval(&in, &f);
  EXPECT(!f.compute_bound && f.compute_s == 0 && f.floor_s == f.memory_s, "memory-only floor");
  EXPECT(bench_peer_us("deepseek-v3", FP8MOE_QUANT_FP8_BLOCK128, 8192) == 12477 &&
             bench_peer_us("mixtral-8x7b", FP8MOE_QUANT_FP8_PER_TENSOR, 1) == 129 &&
             bench_peer_us("kimi-k2", FP8MOE_QUANT_FP8_BLOCK128, 1) < 0 &&
             bench_peer_us("deepseek-v3", FP8MOE_QUANT_FP8_BLOCK128, 7) < 0,
         "peer table");
}

/* A two-point run with one of everything, including a non-finite number (JSON has no NaN). */
static void sample_run(bench_run* r, bench_point* pts, double* replays) {
  memset(r, 0, sizeof *r);
  snprintf(r->date, sizeof r->date, "2026-12-02T00:00:00Z");
  snprintf(r->commit, sizeof r->commit, "abc1234");
  snprintf(r->gpu, sizeof r->gpu, "Test \"GPU\"\\1");
  snprintf(r->command, sizeof r->command, "fp8moe-bench --shape deepseek-v3");
  r->roof.read_gbs = 4560;
  r->roof.dense.m = r->roof.dense.n = r->roof.dense.k = 8192;
  r->roof.dense.tensor_tflops = 1500;
  r->roof.dense.block_tflops = -1;
  r->roof.per_case[0] = (bench_gemm_rate){4096, 8192, 7168, 1400, 1100};
  memset(pts, 0, 2 * sizeof *pts);
  for (int i = 0; i < 30; ++i) replays[i] = 100 + i;
  pts[0].case_index = 0;
  pts[0].routing = BENCH_ROUTING_UNIFORM;
  pts[0].T = 1;
  pts[0].replay_us = replays;
  pts[0].n_replays = 30;
  pts[0].median_us = 114.5;
  pts[0].p90_us = 126;
  pts[0].route_us = NAN;
  pts[0].peer_us = 120;
  pts[1] = pts[0];
  pts[1].routing = BENCH_ROUTING_SKEWED;
  pts[1].status = 3;
  pts[1].n_replays = 0;
  snprintf(pts[1].note, sizeof pts[1].note, "time budget spent");
  r->points = pts;
  r->n_points = 2;
}

static void test_writers(const char* json_path) {
  bench_run r;
  bench_point pts[2];
  double replays[30];
  sample_run(&r, pts, replays);
  EXPECT(bench_peak_flops(&r.roof, 0) == 1100e12, "block case uses its own block rate");
  EXPECT(bench_peak_flops(&r.roof, 1) == 1500e12, "per-tensor case without its own rate uses 8192^3");
  char buf[16384];
  FILE* f = fmemopen(buf, sizeof buf, "w");
  EXPECT(f && bench_write_json(f, &r) == 0, "json written");
  if (f) fclose(f);
  EXPECT(strstr(buf, "\"schema\":\"fp8moe-bench/1\"") != NULL, "schema tag");
  EXPECT(strstr(buf, "\"route_permute_us\":null") != NULL, "NaN becomes null");
  EXPECT(strstr(buf, "Test \\\"GPU\\\"\\\\1") != NULL, "strings escaped");
  EXPECT(strstr(buf, "\"replay_us\":[100,101,") != NULL, "raw replay times");
  f = fmemopen(buf, sizeof buf, "w");
  if (f) {
    bench_write_markdown(f, &r);
    fclose(f);
  }
  EXPECT(strstr(buf, "| deepseek-v3 | block | uniform | 1 | 114.5 | 126.0 |") != NULL, "markdown row: %s", buf);
  EXPECT(strstr(buf, "| 120.0 | 1.05 |") != NULL, "peer ratio column");
  EXPECT(strstr(buf, "skipped: time budget spent") != NULL, "skipped point shown");
  if (json_path) {
    FILE* out = fopen(json_path, "w");
    EXPECT(out && bench_write_json(out, &r) == 0, "sample json to %s", json_path);
    if (out) fclose(out);
  }
}

int main(int argc, char** argv) {
  const char* json_path = argc > 2 && strcmp(argv[1], "--json") == 0 ? argv[2] : NULL;
  test_args();
  test_stats();
  test_floor();
  test_writers(json_path);
  printf("test_bench_units: %d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
