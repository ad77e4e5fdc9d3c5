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
  EXPECT(parse(&a, "") == 0 && !a.ab_library && !a.ab_env && !bench_args_ab(&a), "no B by default");
  EXPECT(parse(&a, "--ab-library /tmp/b/libfp8moe.so.1 --replays 40") == 0 && a.ab_library &&
             strcmp(a.ab_library, "/tmp/b/libfp8moe.so.1") == 0 && !a.ab_env && bench_args_ab(&a) && a.replays == 40,
         "--ab-library");
  EXPECT(parse(&a, "--ab-env lw --shape qwen3-30b-a3b") == 0 && a.ab_env && strcmp(a.ab_env, "lw") == 0 &&
             !a.ab_library && bench_args_ab(&a) && popcount(a.case_mask) == 2,
         "--ab-env alone: B is A's library");
  EXPECT(parse(&a, "--ab-env - --ab-library x.so") == 0 && strcmp(a.ab_env, "-") == 0 &&
             strcmp(a.ab_library, "x.so") == 0 && bench_args_ab(&a),
         "--ab-env - (unset for B) with --ab-library");
  const char* bad[] = {"--ab-library", "--ab-env", "--ab-env --replays 5", "--ab-env l,w", "--ab-env l=1","--tokens 0", "--tokens 16385", "--tokens 1,x", "--replays 4", "--format fp4", "--shape gpt",
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

static void test_paired_stats(void) {
  double ratio;
  int wins;
  /* Per-pair ratios 1.1, 0.95, 1.1: median 1.1, although the ratio of the medians is 190 / 200 = 0.95. */
  const double a3[] = {100, 200, 300}, b3[] = {110, 190, 330};
  bench_paired_stats(a3, b3, 3, &ratio, &wins);
  EXPECT(fabs(ratio - 1.1) < 1e-12 && wins == 1, "n = 3: ratio %.17g, B faster in %d", ratio, wins);
  /* Ratios 1.2, 0.9, 1.0, 0.9 (unsorted): median (0.9 + 1.0) / 2; a tie (40, 40) is no win. */
  const double a4[] = {10, 20, 40, 50}, b4[] = {12, 18, 40, 45};
  bench_paired_stats(a4, b4, 4, &ratio, &wins);
  EXPECT(fabs(ratio - 0.95) < 1e-12 && wins == 2, "n = 4: ratio %.17g, B faster in %d", ratio, wins);
  EXPECT(a4[0] == 10 && b4[0] == 12, "inputs untouched");
  const double a1 = 80, b1 = 60;
  bench_paired_stats(&a1, &b1, 1, &ratio, &wins);
  EXPECT(ratio == 0.75 && wins == 1, "n = 1: ratio %g, B faster in %d", ratio, wins);
  /* B faster in every pair: the count is n, whatever the order of the pairs. */
  double a30[30], b30[30];
  for (int i = 0; i < 30; ++i) a30[i] = 100 + (i * 7) % 30, b30[i] = 0.98 * a30[i];
  bench_paired_stats(a30, b30, 30, &ratio, &wins);
  EXPECT(fabs(ratio - 0.98) < 1e-12 && wins == 30, "n = 30: ratio %.17g, B faster in %d", ratio, wins);
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
  r->roof.per_case[0] = (bench_gemm_rate){4096, 8192, 7168, 1400, 1100, 0, 1395};
  snprintf(r->clock_note, sizeof r->clock_note, "NVML every 1 ms");
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
  pts[0].ab_route_us = -1; /* not paired (add_point's default) */
  bench_clock_none(&pts[0].clock);
  pts[0].clock.samples = 80;
  pts[0].clock.window_ms = 160;
  pts[0].clock.sm_mhz_median = 1395;
  pts[0].clock.sm_mhz_min = 1350;
  pts[0].clock.sm_mhz_max = 1980;
  pts[0].clock.power_w = 698.4;
  pts[0].clock.power_cap_share = 0.9;
  pts[0].clock.slowdown_share = 0;
  pts[1] = pts[0];
  bench_clock_none(&pts[1].clock);
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
  EXPECT(strstr(buf, "\"clock\":{\"samples\":80,\"window_ms\":160,\"sm_mhz_median\":1395,\"sm_mhz_min\":1350,"
                     "\"sm_mhz_max\":1980,\"power_w\":698.4,\"power_cap_share\":0.9,\"slowdown_share\":0},") != NULL,
         "point's clock: %s", buf);
  EXPECT(strstr(buf, "\"clock\":{\"samples\":0,\"window_ms\":0,\"sm_mhz_median\":null,") != NULL, "unsampled clock");
  EXPECT(strstr(buf, "\"block_tflops\":1100,\"tensor_sm_mhz\":null,\"block_sm_mhz\":1395}") != NULL,
         "ceiling's clock");
  EXPECT(strstr(buf, "\"clock_note\":\"NVML every 1 ms\"") != NULL, "clock note");
  f = fmemopen(buf, sizeof buf, "w");
  if (f) {
    bench_write_markdown(f, &r);
    fclose(f);
  }
  EXPECT(strstr(buf, "| deepseek-v3 | block | uniform | 1 | 114.5 | 126.0 |") != NULL, "markdown row: %s", buf);
  EXPECT(strstr(buf, "| 120.0 | 1.05 |") != NULL, "peer ratio column");
  EXPECT(strstr(buf, "skipped: time budget spent") != NULL, "skipped point shown");
  EXPECT(strstr(buf, "| 1395 | 698 | 90 % | ok |") != NULL, "clock columns: %s", buf);
  EXPECT(strstr(buf, "| – | – | – | skipped") != NULL, "unsampled clock columns");
  EXPECT(strstr(buf, "A/B") == NULL, "no A/B table without B");
  f = fmemopen(buf, sizeof buf, "w");
  EXPECT(f && bench_write_json(f, &r) == 0, "json written");
  if (f) fclose(f);
  EXPECT(strstr(buf, ",\"ab\":null,\"points\":[") != NULL && strstr(buf, "\"ab_") == NULL,
         "without B: \"ab\" is null, no per-point B keys");
  if (json_path) {
    FILE* out = fopen(json_path, "w");
    EXPECT(out && bench_write_json(out, &r) == 0, "sample json to %s", json_path);
    if (out) fclose(out);
  }
}

/* The same run with a B: its table, line by line, and its JSON keys. */
static void test_ab_writers(void) {
  bench_run r;
  bench_point pts[2];
  double replays[30], ab[30];
  sample_run(&r, pts, replays);
  for (int i = 0; i < 30; ++i) ab[i] = i % 3 ? 0.9 * replays[i] : 1.2 * replays[i]; /* B wins 20 of 30 */
  r.ab = 1;
  snprintf(r.ab_library, sizeof r.ab_library, "/b/libfp8moe.so.1");
  snprintf(r.ab_env, sizeof r.ab_env, "l");
  r.ab_env_set = 1;
  pts[0].ab_replay_us = ab;
  pts[0].n_ab_replays = 30;
  bench_paired_stats(replays, ab, 30, &pts[0].ab_ratio, &pts[0].ab_wins);
  double p90;
  bench_stats(ab, 30, &pts[0].ab_median_us, &p90);
  pts[0].ab_rel_err = 3.2e-3;
  pts[1].ab_rel_err = -1;
  pts[0].route_us = 12.5; /* the paired routing + permutation prefix: A's half, B's median, ratio, wins */
  pts[0].ab_route_us = 10.0;
  pts[0].ab_route_ratio = 0.8;
  pts[0].ab_route_wins = 29;
  EXPECT(pts[0].ab_wins == 20 && pts[0].ab_ratio == 0.9, "sample pairs: %d wins, ratio %g", pts[0].ab_wins,
         pts[0].ab_ratio);
  char buf[16384];
  FILE* f = fmemopen(buf, sizeof buf, "w");
  if (f) {
    bench_write_markdown(f, &r);
    fclose(f);
  }
  EXPECT(strstr(buf, "A/B (B = /b/libfp8moe.so.1 with FP8MOE_CUDA_GEMM_FALLBACK=l;") != NULL, "A/B header: %s", buf);
  EXPECT(strstr(buf, "| shape | format | routing | T | A µs | B µs | B/A (paired median) | B faster in | B rel err "
                     "| route+perm A µs | B µs | B/A | B faster in |") != NULL,
         "A/B table header");
  EXPECT(strstr(buf, "| deepseek-v3 | block | uniform | 1 | 114.5 | 110.2 | 0.9000 | 20 of 30 | 3.2e-03 | 12.5 | 10.0 "
                     "| 0.8000 | 29 of 30 |") != NULL,
         "A/B row: %s", buf);
  EXPECT(strstr(buf, "| deepseek-v3 | block | skewed | 1 | – | – | – | – | – | – | – | – | – |") != NULL,
         "untimed A/B row");
  EXPECT(strstr(buf, "| 120.0 | 1.05 |") != NULL, "the main table stays");
  f = fmemopen(buf, sizeof buf, "w");
  EXPECT(f && bench_write_json(f, &r) == 0, "A/B json written");
  if (f) fclose(f);
  EXPECT(strstr(buf, "\"ab\":{\"library\":\"/b/libfp8moe.so.1\",\"env\":\"l\"}") != NULL, "run's ab: %s", buf);
  EXPECT(strstr(buf, "\"ab_median_us\":110.25,") != NULL && strstr(buf, "\"ab_ratio\":0.9,") != NULL &&
             strstr(buf, "\"ab_wins\":20,") != NULL && strstr(buf, "\"ab_rel_err\":0.0032,") != NULL &&
             strstr(buf, "\"ab_replay_us\":[120,90.9") != NULL &&
             strstr(buf, "\"ab_route_us\":10,\"ab_route_ratio\":0.8,\"ab_route_wins\":29,") != NULL,
         "point's ab keys: %s", buf);
  EXPECT(strstr(buf, "\"ab_median_us\":null,\"ab_ratio\":null,\"ab_wins\":0,\"ab_rel_err\":null,\"ab_replay_us\":[],"
                     "\"ab_route_us\":null,\"ab_route_ratio\":null,\"ab_route_wins\":0,") != NULL,
         "untimed point's ab keys are null");
  r.ab_env_set = 0;
  f = fmemopen(buf, sizeof buf, "w");
  EXPECT(f && bench_write_json(f, &r) == 0, "A/B json written");
  if (f) fclose(f);
  EXPECT(strstr(buf, "\"env\":null}") != NULL, "env unset for B is null");
}

/* The clock window's summary: median and range of the SM clock, shares of the reasons, and the power from the energy
 * counter's first to last step (it steps at its own period, not at every reading). */
static void test_clocks(void) {
  bench_clock_sample s[8];
  for (int i = 0; i < 8; ++i) {
    s[i].t_ms = 40.0 * i;
    s[i].sm_mhz = (unsigned)(1400 + (i % 3) * 10); /* 1400 1410 1420 1400 1410 1420 1400 1410 */
    s[i].reasons = i < 6 ? (long long)BENCH_CLOCK_REASON_SW_POWER_CAP : 0;
    s[i].energy_mj = 1000 + 7000 * (i / 3); /* steps at samples 3 and 6: 7,000 mJ over 120 ms */
  }
  s[7].reasons = (long long)BENCH_CLOCK_REASON_HW_THERMAL;
  bench_clock_summary c;
  bench_clock_summarize(s, 8, 75, &c);
  EXPECT(c.samples == 8 && c.window_ms == 75 && c.sm_mhz_median == 1410 && c.sm_mhz_min == 1400 &&
             c.sm_mhz_max == 1420,
         "clock: %d samples, median %g, %g-%g", c.samples, c.sm_mhz_median, c.sm_mhz_min, c.sm_mhz_max);
  EXPECT(fabs(c.power_w - 7000.0 / 120.0) < 1e-9, "power between the counter's steps: %g W", c.power_w);
  for (int i = 0; i < 8; ++i) s[i].t_ms = 10.0 * i; /* the same steps 30 ms apart: under BENCH_POWER_MIN_MS */
  bench_clock_summarize(s, 8, 75, &c);
  EXPECT(c.power_w < 0, "steps too close: power %g", c.power_w);
  EXPECT(c.power_cap_share == 0.75 && c.slowdown_share == 0.125, "shares %g, %g", c.power_cap_share, c.slowdown_share);
  bench_clock_summarize(s, 5, 45, &c); /* one step only: the power is unknown */
  EXPECT(c.samples == 5 && c.power_w < 0, "one step: power %g", c.power_w);
  for (int i = 0; i < 8; ++i) s[i].reasons = s[i].energy_mj = -1;
  bench_clock_summarize(s, 8, 75, &c);
  EXPECT(c.power_w < 0 && c.power_cap_share < 0 && c.slowdown_share < 0, "nothing but the clock read");
  bench_clock_summarize(s, 0, 12, &c);
  EXPECT(c.samples == 0 && c.window_ms == 12 && c.sm_mhz_median < 0 && c.power_w < 0, "no samples");
}

int main(int argc, char** argv) {
  const char* json_path = argc > 2 && strcmp(argv[1], "--json") == 0 ? argv[2] : NULL;
  test_args();
  test_stats();
  test_paired_stats();
  test_floor();
  test_clocks();
  test_writers(json_path);
  test_ab_writers();
  printf("test_bench_units: %d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
