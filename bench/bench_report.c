/* bench_report.c — see bench_report.h. */
#define _POSIX_C_SOURCE 200809L
#include "bench_report.h"

#include <math.h>
#include <string.h>

double bench_peak_flops(const bench_rooflines* r, int ci) {
  const bench_case* c = bench_case_at((size_t)ci);
  const bench_gemm_rate* own = &r->per_case[ci];
  const int block = c && c->format == FP8MOE_QUANT_FP8_BLOCK128;
  double t = block ? own->block_tflops : own->tensor_tflops;
  if (t <= 0) t = block ? r->dense.block_tflops : r->dense.tensor_tflops;
  if (t <= 0) t = r->dense.tensor_tflops;
  return t > 0 ? t * 1e12 : 0.0;
}

static const char* status_name(int s) {
  static const char* const k[] = {"ok", "check-failed", "error", "skipped"};
  return s >= 0 && s < 4 ? k[s] : "?";
}

static void fmt_us(char* b, size_t n, double us) {
  if (us < 0) snprintf(b, n, "–");
  else if (us >= 1000) snprintf(b, n, "%.0f", us);
  else snprintf(b, n, "%.1f", us);
}

/* The end of a ceiling's row: the SM clock its timed runs read, where sampled. */
static void write_mhz(FILE* f, double mhz) {
  if (mhz > 0) fprintf(f, " at SM %.0f MHz", mhz);
  fprintf(f, " |\n");
}

/* A point's clock columns: median SM MHz, board W, share of samples power-capped ("–" where unknown). */
static void fmt_clock(const bench_clock_summary* c, char* mhz, char* watts, char* capped, size_t n) {
  snprintf(mhz, n, "–");
  snprintf(watts, n, "–");
  snprintf(capped, n, "–");
  if (c->samples <= 0) return;
  snprintf(mhz, n, "%.0f", c->sm_mhz_median);
  if (c->power_w >= 0) snprintf(watts, n, "%.0f", c->power_w);
  if (c->power_cap_share >= 0) snprintf(capped, n, "%.0f %%", 100 * c->power_cap_share);
}

void bench_write_rooflines_markdown(FILE* f, const bench_run* run) {
  const bench_rooflines* r = &run->roof;
  fprintf(f, "| ceiling | reading |\n|---|---|\n");
  if (r->measured)
    fprintf(f, "| HBM streaming read (own kernel, %.1f GiB) | %.0f GB/s |\n", r->read_bytes / 1073741824.0, r->read_gbs);
  else
    fprintf(f, "| HBM streaming read | %.0f GB/s (not measured: docs/PERFORMANCE.md's reading) |\n", r->read_gbs);
  fprintf(f, "| device-to-device copy (read + write) | %.0f GB/s |\n", r->copy_gbs);
  if (r->measured) fprintf(f, "| warm-up before each ceiling (as the points') | %d ms of device time |\n", r->warmup_ms);
  fprintf(f, "| cuBLASLt FP8 8192³, per-tensor | %.0f TFLOP/s", r->dense.tensor_tflops);
  write_mhz(f, r->dense.tensor_sm_mhz);
  fprintf(f, "| cuBLASLt FP8 8192³, 1×128 · 128×128 blocks | %.0f TFLOP/s", r->dense.block_tflops);
  write_mhz(f, r->dense.block_sm_mhz);
  for (size_t i = 0; i < bench_case_count(); ++i) {
    const bench_gemm_rate* g = &r->per_case[i];
    if (g->m == 0) continue;
    const bench_case* c = bench_case_at(i);
    const int block = c->format == FP8MOE_QUANT_FP8_BLOCK128;
    fprintf(f, "| cuBLASLt FP8 %s GEMM1 (%lld×%lld×%lld), %s | %.0f TFLOP/s", c->model->name, (long long)g->m,
            (long long)g->n, (long long)g->k, bench_format_short(c->format),
            block ? g->block_tflops : g->tensor_tflops);
    write_mhz(f, block ? g->block_sm_mhz : g->tensor_sm_mhz);
  }
  if (r->gemm_note[0]) fprintf(f, "\nNote: %s\n", r->gemm_note);
  if (run->clock_note[0]) fprintf(f, "\nClocks: %s\n", run->clock_note);
}

/* Per-stage times (--stages): one line per point, stages in launch order. */
static void write_stages_markdown(FILE* f, const bench_run* run) {
  int any = 0;
  for (int i = 0; i < run->n_points; ++i) any |= run->points[i].n_stages > 0;
  if (!any) return;
  fprintf(f, "\nStages (µs; each the difference of two prefix graphs of the captured run, cold L2):\n\n");
  fprintf(f, "| shape | format | routing | T | stages |\n|---|---|---|---|---|\n");
  for (int i = 0; i < run->n_points; ++i) {
    const bench_point* p = &run->points[i];
    if (!p->n_stages) continue;
    const bench_case* c = bench_case_at((size_t)p->case_index);
    fprintf(f, "| %s | %s | %s | %lld | ", c->model->name, bench_format_short(c->format), bench_routing_name(p->routing),
            (long long)p->T);
    for (int k = 0; k < p->n_stages; ++k) fprintf(f, "%s%s %.1f", k ? ", " : "", p->stage_name[k], p->stage_us[k]);
    fprintf(f, " |\n");
  }
}

/* Paired A/B (--ab-library, --ab-env): B beside A per point. The ratio is the median of per-pair ratios, not
 * the ratio of the two medians: each pair ran back to back, so the drift between pairs cancels. */
static void write_ab_markdown(FILE* f, const bench_run* run) {
  if (!run->ab) return;
  fprintf(f, "\nA/B (B = %s with FP8MOE_CUDA_GEMM_FALLBACK%s%s; replays in interleaved pairs, order alternating):\n\n",
          run->ab_library, run->ab_env_set ? "=" : " unset", run->ab_env);
  fprintf(f, "| shape | format | routing | T | A µs | B µs | B/A (paired median) | B faster in | B rel err "
             "| route+perm A µs | B µs | B/A | B faster in |\n");
  fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < run->n_points; ++i) {
    const bench_point* p = &run->points[i];
    const bench_case* c = bench_case_at((size_t)p->case_index);
    char a[32], b[32], ratio[32] = "–", wins[32] = "–", err[32] = "–";
    const int timed = p->n_ab_replays > 0 && p->n_replays > 0;
    fmt_us(a, sizeof a, timed ? p->median_us : -1);
    fmt_us(b, sizeof b, timed ? p->ab_median_us : -1);
    if (timed) snprintf(ratio, sizeof ratio, "%.4f", p->ab_ratio);
    if (timed) snprintf(wins, sizeof wins, "%d of %d", p->ab_wins, p->n_ab_replays);
    if (p->ab_rel_err >= 0) snprintf(err, sizeof err, "%.1e", p->ab_rel_err);
    char ra[32], rb[32], rratio[32] = "–", rwins[32] = "–";
    const int rtimed = p->ab_route_us >= 0;
    fmt_us(ra, sizeof ra, rtimed ? p->route_us : -1);
    fmt_us(rb, sizeof rb, rtimed ? p->ab_route_us : -1);
    if (rtimed) snprintf(rratio, sizeof rratio, "%.4f", p->ab_route_ratio);
    if (rtimed) snprintf(rwins, sizeof rwins, "%d of %d", p->ab_route_wins, p->n_replays);
    fprintf(f, "| %s | %s | %s | %lld | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c->model->name,
            bench_format_short(c->format), bench_routing_name(p->routing), (long long)p->T, a, b, ratio, wins, err, ra,
            rb, rratio, rwins);
  }
}

void bench_write_markdown(FILE* f, const bench_run* run) {
  fprintf(f, "| shape | format | routing | T | µs median | p90 | route+perm µs | TFLOP/s | weight GB/s | experts hit "
             "| floor µs | bound | fraction of roofline | peer µs | peer/ours | rel err | SM MHz | board W "
             "| power-capped | status |\n");
  fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < run->n_points; ++i) {
    const bench_point* p = &run->points[i];
    const bench_case* c = bench_case_at((size_t)p->case_index);
    char med[32], p90[32], rt[32], fl[32], peer[32];
    fmt_us(med, sizeof med, p->n_replays ? p->median_us : -1);
    fmt_us(p90, sizeof p90, p->n_replays ? p->p90_us : -1);
    fmt_us(rt, sizeof rt, p->route_us);
    fmt_us(fl, sizeof fl, p->n_replays ? p->floor.floor_s * 1e6 : -1);
    fmt_us(peer, sizeof peer, p->peer_us);
    char ratio[32] = "–";
    if (p->peer_us > 0 && p->n_replays) snprintf(ratio, sizeof ratio, "%.2f", p->peer_us / p->median_us);
    char mhz[32], watts[32], capped[32];
    fmt_clock(&p->clock, mhz, watts, capped, sizeof mhz);
    fprintf(f,
            "| %s | %s | %s | %lld | %s | %s | %s | %.1f | %.0f | %d | %s | %s | %.2f | %s | %s | %.1e | %s | %s | %s "
            "| %s%s%s |\n",
            c->model->name, bench_format_short(c->format), bench_routing_name(p->routing), (long long)p->T, med, p90,
            rt, p->tflops, p->weight_gbs, (int)p->experts_hit, fl,
            p->n_replays ? (p->floor.compute_bound ? "compute" : "memory") : "–", p->fraction, peer, ratio, p->rel_err,
            mhz, watts, capped, status_name(p->status), p->note[0] ? ": " : "", p->note);
  }
  write_ab_markdown(f, run);
  write_stages_markdown(f, run);
}

/* ---- JSON ---- */
static void jstr(FILE* f, const char* s) {
  fputc('"', f);
  for (const unsigned char* p = (const unsigned char*)s; *p; ++p) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

/* JSON has no NaN/Inf: those become null. */
static void jnum(FILE* f, double v) {
  if (isfinite(v)) fprintf(f, "%.9g", v);
  else fputs("null", f);
}

static void jkey(FILE* f, const char* k) {
  jstr(f, k);
  fputc(':', f);
}

static void jgemm(FILE* f, const bench_gemm_rate* g) {
  fprintf(f, "{\"m\":%lld,\"n\":%lld,\"k\":%lld,\"tensor_tflops\":", (long long)g->m, (long long)g->n, (long long)g->k);
  jnum(f, g->tensor_tflops);
  fputs(",\"block_tflops\":", f);
  jnum(f, g->block_tflops);
  fputs(",\"tensor_sm_mhz\":", f);
  jnum(f, g->tensor_sm_mhz > 0 ? g->tensor_sm_mhz : NAN);
  fputs(",\"block_sm_mhz\":", f);
  jnum(f, g->block_sm_mhz > 0 ? g->block_sm_mhz : NAN);
  fputc('}', f);
}

/* A point's "clock": the sampled window; numbers not known are null. */
static void jclock(FILE* f, const bench_clock_summary* c) {
  fprintf(f, "\"clock\":{\"samples\":%d", c->samples);
  const struct { const char* k; double v; } nums[] = {
      {"window_ms", c->window_ms},   {"sm_mhz_median", c->sm_mhz_median},     {"sm_mhz_min", c->sm_mhz_min},
      {"sm_mhz_max", c->sm_mhz_max}, {"power_w", c->power_w},                 {"power_cap_share", c->power_cap_share},
      {"slowdown_share", c->slowdown_share},
  };
  for (size_t k = 0; k < sizeof nums / sizeof nums[0]; ++k) {
    fputc(',', f);
    jkey(f, nums[k].k);
    jnum(f, nums[k].v >= 0 ? nums[k].v : NAN);
  }
  fputs("},", f);
}

static void jarray(FILE* f, const double* v, int n) {
  fputc('[', f);
  for (int k = 0; k < n; ++k) {
    if (k) fputc(',', f);
    jnum(f, v[k]);
  }
  fputc(']', f);
}

/* The top-level "ab": B's library and the FALLBACK value its context saw (null: unset), or null without B. */
static void jab_run(FILE* f, const bench_run* run) {
  jkey(f, "ab");
  if (!run->ab) {
    fputs("null", f);
    return;
  }
  fputc('{', f);
  jkey(f, "library"), jstr(f, run->ab_library), fputc(',', f);
  jkey(f, "env");
  if (run->ab_env_set) jstr(f, run->ab_env);
  else fputs("null", f);
  fputc('}', f);
}

/* A point's B keys (only in A/B runs); numbers B was not timed or checked for are null. */
static void jab_point(FILE* f, const bench_point* p) {
  const int timed = p->n_ab_replays > 0;
  jkey(f, "ab_median_us"), jnum(f, timed ? p->ab_median_us : NAN), fputc(',', f);
  jkey(f, "ab_ratio"), jnum(f, timed ? p->ab_ratio : NAN), fputc(',', f);
  fprintf(f, "\"ab_wins\":%d,", p->ab_wins);
  jkey(f, "ab_rel_err"), jnum(f, p->ab_rel_err >= 0 ? p->ab_rel_err : NAN), fputc(',', f);
  jkey(f, "ab_replay_us"), jarray(f, p->ab_replay_us, p->n_ab_replays), fputc(',', f);
  const int rtimed = p->ab_route_us >= 0;
  jkey(f, "ab_route_us"), jnum(f, rtimed ? p->ab_route_us : NAN), fputc(',', f);
  jkey(f, "ab_route_ratio"), jnum(f, rtimed ? p->ab_route_ratio : NAN), fputc(',', f);
  fprintf(f, "\"ab_route_wins\":%d,", p->ab_route_wins);
}

int bench_write_json(FILE* f, const bench_run* run) {
  fputc('{', f);
  jkey(f, "schema"), jstr(f, BENCH_JSON_SCHEMA), fputc(',', f);
  jkey(f, "date"), jstr(f, run->date), fputc(',', f);
  jkey(f, "commit"), jstr(f, run->commit), fputc(',', f);
  jkey(f, "command"), jstr(f, run->command), fputc(',', f);
  jkey(f, "elapsed_s"), jnum(f, run->elapsed_s), fputc(',', f);
  fputs("\"gpu\":{", f);
  jkey(f, "name"), jstr(f, run->gpu), fputc(',', f);
  jkey(f, "driver"), jstr(f, run->driver), fputc(',', f);
  jkey(f, "clocks"), jstr(f, run->clocks), fputc(',', f);
  jkey(f, "clock_note"), jstr(f, run->clock_note), fputc(',', f);
  fprintf(f, "\"sm_count\":%d,\"l2_mib\":", run->sm_count);
  jnum(f, run->l2_mib);
  fputs("},\"rooflines\":{", f);
  const bench_rooflines* r = &run->roof;
  fprintf(f, "\"measured\":%s,\"read_gbs\":", r->measured ? "true" : "false");
  jnum(f, r->read_gbs);
  fputs(",\"read_bytes\":", f);
  jnum(f, r->read_bytes);
  fputs(",\"copy_gbs\":", f);
  jnum(f, r->copy_gbs);
  fprintf(f, ",\"warmup_ms\":%d", r->warmup_ms);
  fputs(",\"dense_8192\":", f);
  jgemm(f, &r->dense);
  fputs(",\"gemm_note\":", f);
  jstr(f, r->gemm_note);
  fputs(",\"gemm1\":[", f);
  int first = 1;
  for (size_t i = 0; i < bench_case_count(); ++i) {
    if (r->per_case[i].m == 0) continue;
    if (!first) fputc(',', f);
    first = 0;
    fputs("{\"shape\":", f);
    jstr(f, bench_case_at(i)->model->name);
    fputs(",\"format\":", f);
    jstr(f, bench_format_name(bench_case_at(i)->format));
    fputs(",\"rate\":", f);
    jgemm(f, &r->per_case[i]);
    fputc('}', f);
  }
  fputs("]},", f);
  jab_run(f, run);
  fputs(",\"points\":[", f);
  for (int i = 0; i < run->n_points; ++i) {
    const bench_point* p = &run->points[i];
    const bench_case* c = bench_case_at((size_t)p->case_index);
    if (i) fputc(',', f);
    fputc('{', f);
    jkey(f, "shape"), jstr(f, c->model->name), fputc(',', f);
    jkey(f, "format"), jstr(f, bench_format_name(c->format)), fputc(',', f);
    jkey(f, "routing"), jstr(f, bench_routing_name(p->routing)), fputc(',', f);
    fprintf(f, "\"T\":%lld,\"E\":%d,\"K\":%d,\"H\":%lld,\"I\":%lld,", (long long)p->T, (int)c->model->E,
            (int)c->model->K, (long long)c->model->H, (long long)c->model->I);
    jkey(f, "status"), jstr(f, status_name(p->status)), fputc(',', f);
    jkey(f, "note"), jstr(f, p->note), fputc(',', f);
    const struct { const char* k; double v; } nums[] = {
        {"median_us", p->median_us},         {"p90_us", p->p90_us},
        {"route_permute_us", p->route_us},   {"tflops", p->tflops},
        {"weight_gbs", p->weight_gbs},       {"weight_bytes", p->floor.weight_bytes},
        {"bytes", p->floor.bytes},           {"flops", p->floor.flops},
        {"memory_floor_us", p->floor.memory_s * 1e6}, {"compute_floor_us", p->floor.compute_s * 1e6},
        {"floor_us", p->floor.floor_s * 1e6}, {"fraction_of_roofline", p->fraction},
        {"peer_us", p->peer_us},             {"rel_err", p->rel_err},
    };
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; ++k) {
      jkey(f, nums[k].k);
      jnum(f, nums[k].v);
      fputc(',', f);
    }
    fprintf(f, "\"bound\":\"%s\",\"experts_hit\":%d,\"slots\":%lld,\"check_tokens\":%d,\"ids_mismatch\":%lld,",
            p->floor.compute_bound ? "compute" : "memory", (int)p->experts_hit, (long long)p->slots, p->check_tokens,
            (long long)p->ids_mismatch);
    if (run->ab) jab_point(f, p);
    jclock(f, &p->clock);
    jkey(f, "replay_us"), jarray(f, p->replay_us, p->n_replays);
    fputs(",\"stages\":[", f);
    for (int k = 0; k < p->n_stages; ++k) {
      if (k) fputc(',', f);
      fputs("{\"name\":", f);
      jstr(f, p->stage_name[k]);
      fputs(",\"us\":", f);
      jnum(f, p->stage_us[k]);
      fputc('}', f);
    }
    fputs("]}", f);
  }
  fputs("]}\n", f);
  return ferror(f) ? -1 : 0;
}
