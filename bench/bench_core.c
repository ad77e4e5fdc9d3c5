/* bench_core.c — see bench_core.h. */
#define _POSIX_C_SOURCE 200809L
#include "bench_core.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model shapes of docs/PERFORMANCE.md. */
static const bench_model kModels[] = {
    {"deepseek-v3", 256, 8, 7168, 2048, FP8MOE_ROUTING_DEEPSEEK_V3, 8, 4, 2.5f},
    {"kimi-k2", 384, 8, 7168, 2048, FP8MOE_ROUTING_DEEPSEEK_V3, 1, 1, 2.827f},
    {"qwen3-30b-a3b", 128, 8, 2048, 768, FP8MOE_ROUTING_RENORMALIZE_NAIVE, 0, 0, 0.0f},
    {"qwen3-235b-a22b", 128, 8, 4096, 1536, FP8MOE_ROUTING_RENORMALIZE_NAIVE, 0, 0, 0.0f},
    {"glm-4.5-air", 128, 8, 4096, 1408, FP8MOE_ROUTING_DEEPSEEK_V3, 1, 1, 1.0f},
    {"mixtral-8x7b", 8, 2, 4096, 14336, FP8MOE_ROUTING_RENORMALIZE, 0, 0, 0.0f},
    {"llama4-scout", 16, 1, 5120, 8192, FP8MOE_ROUTING_LLAMA4, 0, 0, 0.0f},
};

/* Each model in the format it ships in, plus the per-tensor variants the peer comparison has. Cases of one
 * model are adjacent so the bench generates its weights once. */
static const bench_case kCases[] = {
    {&kModels[0], FP8MOE_QUANT_FP8_BLOCK128},   {&kModels[0], FP8MOE_QUANT_FP8_PER_TENSOR},
    {&kModels[1], FP8MOE_QUANT_FP8_BLOCK128},   {&kModels[2], FP8MOE_QUANT_FP8_BLOCK128},
    {&kModels[2], FP8MOE_QUANT_FP8_PER_TENSOR}, {&kModels[3], FP8MOE_QUANT_FP8_BLOCK128},
    {&kModels[4], FP8MOE_QUANT_FP8_BLOCK128},   {&kModels[5], FP8MOE_QUANT_FP8_PER_TENSOR},
    {&kModels[6], FP8MOE_QUANT_FP8_PER_CHANNEL},
};
#define N_CASES (sizeof kCases / sizeof kCases[0])
_Static_assert(N_CASES <= BENCH_MAX_CASES, "case mask width");

size_t bench_case_count(void) { return N_CASES; }
const bench_case* bench_case_at(size_t i) { return i < N_CASES ? &kCases[i] : NULL; }

static const char* const kFormatNames[] = {"FP8_PER_TENSOR", "FP8_BLOCK128", "FP8_PER_CHANNEL"};
static const char* const kFormatShort[] = {"tensor", "block", "channel"};

const char* bench_format_name(int32_t f) { return f >= 0 && f < 3 ? kFormatNames[f] : "?"; }
const char* bench_format_short(int32_t f) { return f >= 0 && f < 3 ? kFormatShort[f] : "?"; }

static int same_nocase(const char* a, const char* b) {
  for (; *a && *b; ++a, ++b)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
  return *a == *b;
}

int32_t bench_format_parse(const char* s) {
  static const char* const kAlias[] = {"per-tensor", "block128", "per-channel"};
  for (int32_t f = 0; f < 3; ++f)
    if (same_nocase(s, kFormatNames[f]) || same_nocase(s, kFormatShort[f]) || same_nocase(s, kAlias[f])) return f;
  return -1;
}

/* The peer: vLLM's Triton fused_moe with its shipped H200 configs, kernel time only (routing and
 * alignment excluded), median of 30 cold-L2 graph replays on one H200, 2026-12-02 (docs/PERFORMANCE.md). */
typedef struct peer_row {
  const char* model;
  int32_t format;
  double us[7];
} peer_row;
static const int64_t kPeerT[7] = {1, 8, 32, 128, 512, 2048, 8192};
static const peer_row kPeer[] = {
    {"deepseek-v3", FP8MOE_QUANT_FP8_BLOCK128, {120, 651, 1829, 2759, 3001, 4278, 12477}},
    {"deepseek-v3", FP8MOE_QUANT_FP8_PER_TENSOR, {147, 813, 2264, 3404, 4657, 7294, 23352}},
    {"qwen3-30b-a3b", FP8MOE_QUANT_FP8_BLOCK128, {40, 94, 156, 183, 236, 517, 1695}},
    {"qwen3-30b-a3b", FP8MOE_QUANT_FP8_PER_TENSOR, {49, 106, 190, 222, 314, 727, 2477}},
    {"mixtral-8x7b", FP8MOE_QUANT_FP8_PER_TENSOR, {129, 329, 364, 374, 549, 1560, 5660}},
};

double bench_peer_us(const char* model, int32_t format, int64_t T) {
  for (size_t r = 0; r < sizeof kPeer / sizeof kPeer[0]; ++r) {
    if (strcmp(kPeer[r].model, model) != 0 || kPeer[r].format != format) continue;
    for (int i = 0; i < 7; ++i)
      if (kPeerT[i] == T) return kPeer[r].us[i];
  }
  return -1.0;
}

const char* bench_routing_name(int routing) {
  return routing == BENCH_ROUTING_SKEWED ? "skewed" : routing == BENCH_ROUTING_UNIFORM ? "uniform" : "?";
}

/* ---- arguments ---- */
static const int64_t kDefaultTokens[] = {1, 8, 32, 128, 512, 2048, 8192};

void bench_print_usage(const char* prog) {
  printf("usage: %s [options]\n"
         "Times fp8moe's run through the C ABI (CUDA graph replays, L2 flushed between replays) against\n"
         "rooflines measured in the same process; checks every point against the CPU backend.\n"
         "  --shape a,b,...       models (default all): ",
         prog);
  for (size_t i = 0; i < N_CASES; ++i)
    if (i == 0 || kCases[i].model != kCases[i - 1].model) printf("%s%s", i ? "," : "", kCases[i].model->name);
  printf("\n"
         "  --format a,b,...      quant formats (default: each model's own): block, tensor, channel\n"
         "  --tokens 1,8,...      T values (default 1,8,32,128,512,2048,8192; at most %d)\n"
         "  --routing R           uniform, skewed or both (default both)\n"
         "  --replays N           timed replays per point (default 30, at least 5)\n"
         "  --warmup N            untimed replays first (default 3)\n"
         "  --warmup-ms M         ... and more until M ms of device time (default 300: sustained clocks; each\n"
         "                        ceiling is timed after as much of its own)\n"
         "  --check-tokens N      tokens the CPU oracle recomputes per point (default 16; 0 = no check)\n"
         "  --stages              also time each stage (prefix graphs; slower)\n"
         "  --no-rooflines        skip measuring rooflines (floors then use docs/PERFORMANCE.md's readings)\n"
         "  --budget-s S          start no new point after S seconds (default: no limit)\n"
         "  --flush-mib N         L2 flush memset between replays (default 512, at least 256)\n"
         "  --json FILE           write every number (raw replay times too) as JSON\n"
         "  --md FILE             write the Markdown table to FILE as well as stdout\n"
         "  --library PATH        plugin to dlopen (default $FP8MOE_LIBRARY, then libfp8moe.so.1)\n"
         "  --ab-library PATH     paired A/B: also load plugin B from PATH (own dlopen and CUDA context, checked\n"
         "                        like A) and time A and B in interleaved pairs; reports B's median, the median\n"
         "                        of per-pair ratios B/A and B's wins. route+perm and --stages stay A's alone\n"
         "  --ab-env LETTERS      FP8MOE_CUDA_GEMM_FALLBACK while B's context is created (\"-\": unset; default:\n"
         "                        the ambient value, which A gets); alone, B is a second context of A's library\n"
         "  --commit ID           commit recorded in the report (default $FP8MOE_COMMIT)\n"
         "  --plant-wrong-scale   self-test: corrupt the GPU's w2 scales; the check must fail (exit 1)\n"
         "exit status: 0 all points checked, 1 a point disagreed with the CPU backend, 2 usage,\n"
         "             3 setup or device error, 77 no usable GPU\n",
         BENCH_MAX_T);
}

static int fail(char* err, size_t n, const char* what, const char* got) {
  snprintf(err, n, "%s: got '%s'", what, got ? got : "(nothing)");
  return -1;
}

static int parse_int(const char* s, long long lo, long long hi, long long* v) {
  if (!s || !*s) return -1;
  char* end = NULL;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || *end || x < lo || x > hi) return -1;
  *v = x;
  return 0;
}

/* Splits a comma list into a scratch copy; calls fn on each item; stops at the first nonzero. */
static int each_item(const char* list, int (*fn)(const char* item, void* ctx), void* ctx) {
  char buf[512];
  if (!list || !*list || strlen(list) >= sizeof buf) return -1;
  strcpy(buf, list);
  for (char* save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    if (fn(tok, ctx) != 0) return -1;
  return 0;
}

static int add_shape(const char* item, void* ctx) {
  uint32_t* mask = ctx;
  int found = 0;
  for (size_t i = 0; i < N_CASES; ++i)
    if (strcmp(kCases[i].model->name, item) == 0) *mask |= 1u << i, found = 1;
  return found ? 0 : -1;
}

static int add_format(const char* item, void* ctx) {
  uint32_t* mask = ctx;
  int32_t f = bench_format_parse(item);
  if (f < 0) return -1;
  *mask |= 1u << f;
  return 0;
}

static int add_tokens(const char* item, void* ctx) {
  bench_args* a = ctx;
  long long v;
  if (a->n_tokens >= BENCH_MAX_TOKENS || parse_int(item, 1, BENCH_MAX_T, &v) != 0) return -1;
  a->tokens[a->n_tokens++] = v;
  return 0;
}

/* A switch list for FP8MOE_CUDA_GEMM_FALLBACK ("-" = unset). Only letters and digits, so that a forgotten
 * value ("--ab-env --replays 5") is refused instead of becoming B's setting. */
static int env_letters(const char* v) {
  if (strcmp(v, "-") == 0) return 1;
  if (!*v) return 0;
  for (; *v; ++v)
    if (!isalnum((unsigned char)*v)) return 0;
  return 1;
}

int bench_args_ab(const bench_args* a) { return a->ab_library != NULL || a->ab_env != NULL; }

int bench_parse_args(int argc, char** argv, bench_args* a, char* err, size_t err_size) {
  memset(a, 0, sizeof *a);
  a->routing_mask = BENCH_ROUTING_UNIFORM | BENCH_ROUTING_SKEWED;
  a->replays = 30;
  a->warmup = 3;
  a->warmup_ms = 300;
  a->check_tokens = 16;
  a->rooflines = 1;
  a->flush_bytes = (size_t)512 << 20;
  uint32_t shapes = 0, formats = 0;
  int formats_given = 0;
  for (int i = 1; i < argc; ++i) {
    const char* o = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    long long x;
    if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
      a->help = 1;
    } else if (strcmp(o, "--stages") == 0) {
      a->stages = 1;
    } else if (strcmp(o, "--no-rooflines") == 0) {
      a->rooflines = 0;
    } else if (strcmp(o, "--plant-wrong-scale") == 0) {
      a->plant_wrong_scale = 1;
    } else if (!v) {
      return fail(err, err_size, "unknown option or missing value", o);
    } else {
      ++i;
      if (strcmp(o, "--shape") == 0) {
        if (each_item(v, add_shape, &shapes) != 0) return fail(err, err_size, "--shape: unknown model", v);
      } else if (strcmp(o, "--format") == 0) {
        formats_given = 1;
        if (each_item(v, add_format, &formats) != 0) return fail(err, err_size, "--format: unknown format", v);
      } else if (strcmp(o, "--tokens") == 0) {
        a->n_tokens = 0;
        if (each_item(v, add_tokens, a) != 0)
          return fail(err, err_size, "--tokens: a comma list of 1..16384 (at most 16 values)", v);
      } else if (strcmp(o, "--routing") == 0) {
        if (strcmp(v, "uniform") == 0) a->routing_mask = BENCH_ROUTING_UNIFORM;
        else if (strcmp(v, "skewed") == 0) a->routing_mask = BENCH_ROUTING_SKEWED;
        else if (strcmp(v, "both") == 0) a->routing_mask = BENCH_ROUTING_UNIFORM | BENCH_ROUTING_SKEWED;
        else return fail(err, err_size, "--routing: uniform, skewed or both", v);
      } else if (strcmp(o, "--replays") == 0) {
        if (parse_int(v, 5, 100000, &x) != 0) return fail(err, err_size, "--replays: 5..100000", v);
        a->replays = (int)x;
      } else if (strcmp(o, "--warmup") == 0) {
        if (parse_int(v, 0, 1000, &x) != 0) return fail(err, err_size, "--warmup: 0..1000", v);
        a->warmup = (int)x;
      } else if (strcmp(o, "--warmup-ms") == 0) {
        if (parse_int(v, 0, 60000, &x) != 0) return fail(err, err_size, "--warmup-ms: 0..60000", v);
        a->warmup_ms = (int)x;
      } else if (strcmp(o, "--check-tokens") == 0) {
        if (parse_int(v, 0, 4096, &x) != 0) return fail(err, err_size, "--check-tokens: 0..4096", v);
        a->check_tokens = (int)x;
      } else if (strcmp(o, "--budget-s") == 0) {
        if (parse_int(v, 1, 86400, &x) != 0) return fail(err, err_size, "--budget-s: 1..86400", v);
        a->budget_s = (double)x;
      } else if (strcmp(o, "--flush-mib") == 0) {
        if (parse_int(v, 256, 65536, &x) != 0) return fail(err, err_size, "--flush-mib: 256..65536", v);
        a->flush_bytes = (size_t)x << 20;
      } else if (strcmp(o, "--json") == 0) {
        a->json_path = v;
      } else if (strcmp(o, "--md") == 0) {
        a->md_path = v;
      } else if (strcmp(o, "--library") == 0) {
        a->library = v;
      } else if (strcmp(o, "--ab-library") == 0) {
        if (!*v) return fail(err, err_size, "--ab-library: a path", v);
        a->ab_library = v;
      } else if (strcmp(o, "--ab-env") == 0) {
        if (!env_letters(v)) return fail(err, err_size, "--ab-env: letters and digits, or - for unset", v);
        a->ab_env = v;
      } else if (strcmp(o, "--commit") == 0) {
        a->commit = v;
      } else {
        return fail(err, err_size, "unknown option", o);
      }
    }
  }
  if (a->n_tokens == 0) {
    a->n_tokens = (int)(sizeof kDefaultTokens / sizeof kDefaultTokens[0]);
    memcpy(a->tokens, kDefaultTokens, sizeof kDefaultTokens);
  }
  if (!shapes) shapes = (1u << N_CASES) - 1;
  for (size_t i = 0; i < N_CASES; ++i) {
    if (!(shapes & (1u << i))) continue;
    if (formats_given && !(formats & (1u << kCases[i].format))) continue;
    a->case_mask |= 1u << i;
  }
  if (!a->case_mask) return fail(err, err_size, "no benchmark case matches --shape and --format", "");
  return 0;
}

/* ---- statistics ---- */
static int cmp_double(const void* x, const void* y) {
  const double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

void bench_stats(const double* v, int n, double* median, double* p90) {
  double* s = malloc(sizeof(double) * (size_t)n);
  if (!s) {
    *median = *p90 = -1.0;
    return;
  }
  memcpy(s, v, sizeof(double) * (size_t)n);
  qsort(s, (size_t)n, sizeof(double), cmp_double);
  *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  int r = (9 * n + 9) / 10; /* nearest rank: ceil(0.9·n) */
  *p90 = s[(r < 1 ? 1 : r) - 1];
  free(s);
}

void bench_paired_stats(const double* a, const double* b, int n, double* median_ratio, int* b_wins) {
  double* r = malloc(sizeof(double) * (size_t)n);
  *b_wins = 0;
  *median_ratio = -1.0;
  if (!r) return;
  for (int i = 0; i < n; ++i) {
    r[i] = b[i] / a[i];
    *b_wins += b[i] < a[i];
  }
  double p90;
  bench_stats(r, n, median_ratio, &p90);
  free(r);
}

/* ---- clocks ---- */
void bench_clock_none(bench_clock_summary* out) {
  memset(out, 0, sizeof *out);
  out->sm_mhz_median = out->sm_mhz_min = out->sm_mhz_max = -1;
  out->power_w = out->power_cap_share = out->slowdown_share = -1;
}

/* Energy over time between the counter's first and last steps in the window; -1 where that cannot be told. */
static double window_power_w(const bench_clock_sample* s, int n) {
  int first = -1, last = -1;
  long long prev = -1;
  for (int i = 0; i < n; ++i) {
    if (s[i].energy_mj < 0) continue;
    if (prev >= 0 && s[i].energy_mj != prev) {
      if (first < 0) first = i;
      last = i;
    }
    prev = s[i].energy_mj;
  }
  if (first < 0 || last == first) return -1;
  const double dt = s[last].t_ms - s[first].t_ms, de = (double)(s[last].energy_mj - s[first].energy_mj);
  return dt >= BENCH_POWER_MIN_MS && de >= 0 ? de / dt : -1; /* mJ per ms = W */
}

void bench_clock_summarize(const bench_clock_sample* s, int n, double window_ms, bench_clock_summary* out) {
  bench_clock_none(out);
  out->window_ms = window_ms;
  double* v = n > 0 ? malloc(sizeof(double) * (size_t)n) : NULL;
  if (!v) return;
  const long long slowdown = (long long)(BENCH_CLOCK_REASON_HW_SLOWDOWN | BENCH_CLOCK_REASON_SW_THERMAL |
                                         BENCH_CLOCK_REASON_HW_THERMAL | BENCH_CLOCK_REASON_HW_POWER_BRAKE);
  int with_reasons = 0, capped = 0, slowed = 0;
  out->sm_mhz_min = out->sm_mhz_max = s[0].sm_mhz;
  for (int i = 0; i < n; ++i) {
    v[i] = s[i].sm_mhz;
    if (v[i] < out->sm_mhz_min) out->sm_mhz_min = v[i];
    if (v[i] > out->sm_mhz_max) out->sm_mhz_max = v[i];
    if (s[i].reasons < 0) continue;
    ++with_reasons;
    capped += (s[i].reasons & (long long)BENCH_CLOCK_REASON_SW_POWER_CAP) != 0;
    slowed += (s[i].reasons & slowdown) != 0;
  }
  double p90;
  bench_stats(v, n, &out->sm_mhz_median, &p90);
  free(v);
  out->samples = n;
  out->power_w = window_power_w(s, n);
  if (with_reasons) {
    out->power_cap_share = (double)capped / with_reasons;
    out->slowdown_share = (double)slowed / with_reasons;
  }
}

/* ---- floor ---- */
double bench_expert_bytes(int64_t H, int64_t I, int32_t format) {
  const double w = 3.0 * (double)H * (double)I; /* W13 [2I,H] + W2 [H,I], one byte each */
  switch (format) {
    case FP8MOE_QUANT_FP8_BLOCK128: return w + 4.0 * (double)((2 * I / 128) * (H / 128) + (H / 128) * (I / 128));
    case FP8MOE_QUANT_FP8_PER_CHANNEL: return w + 4.0 * (double)(2 * I + H);
    default: return w + 8.0;
  }
}

void bench_floor_eval(const bench_floor_in* in, bench_floor* out) {
  memset(out, 0, sizeof *out);
  out->weight_bytes = (double)in->experts_hit * bench_expert_bytes(in->H, in->I, in->format);
  const double act = (double)in->T * ((double)in->H * 2.0 + (double)in->E * 4.0 + (double)in->H * 2.0);
  out->bytes = out->weight_bytes + act;
  out->flops = 6.0 * (double)in->slots * (double)in->H * (double)in->I;
  out->memory_s = in->read_bytes_per_s > 0 ? out->bytes / in->read_bytes_per_s : 0.0;
  out->compute_s = in->peak_flops > 0 ? out->flops / in->peak_flops : 0.0;
  out->compute_bound = out->compute_s > out->memory_s;
  out->floor_s = out->compute_bound ? out->compute_s : out->memory_s;
}
