/* e2e_check.c — see e2e_check.h. */
#include "e2e_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t pg_run(const test_plugin* tp, fp8moe_context* ctx, pg_problem* p) {
  size_t bytes = 0;
  int32_t st = tp->api->query_workspace(ctx, &p->args, &bytes);
  if (st != FP8MOE_STATUS_OK) return st;
  size_t n = (bytes + 255) / 256 * 256;
  void* ws = n ? aligned_alloc(256, n) : NULL;
  if (n && !ws) return FP8MOE_STATUS_OUT_OF_MEMORY;
  p->args.workspace = ws;
  p->args.workspace_size = bytes;
  st = tp->api->run(ctx, &p->args);
  p->args.workspace = NULL;
  p->args.workspace_size = 0;
  free(ws);
  return st;
}

/* Routing: the plugin's ids and weights against the reference; on a near-tie the reference adopts the
 * plugin's selection (and recomputes its weights) so the output comparison is like for like. */
static void check_routing(pg_problem* p, pg_result* r, int32_t* ids, double* w) {
  const int64_t T = p->cfg.T, K = p->cfg.K;
  char cfg[512];
  pg_describe_config(&p->cfg, cfg, sizeof cfg);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* got = p->ids_out + t * K;
    if (memcmp(got, ids + t * K, sizeof(int32_t) * (size_t)K) != 0) {
      if (ref_selection_acceptable(&p->ref, t, got, PG_TIE_ULPS)) {
        ++r->near_ties;
        memcpy(ids + t * K, got, sizeof(int32_t) * (size_t)K);
        ref_weigh(&p->ref, t, ids + t * K, w + t * K);
      } else {
        for (int64_t k = 0; k < K; ++k) {
          if (got[k] == ids[t * K + k]) continue;
          if (++r->ids_bad <= 4)
            fprintf(stderr, "  routing ids: token %lld slot %lld: plugin %d, reference %d [%s]\n", (long long)t,
                    (long long)k, got[k], ids[t * K + k], cfg);
        }
        continue;
      }
    }
    for (int64_t k = 0; k < K; ++k) {
      double want = w[t * K + k], have = p->weights_out[t * K + k];
      double err = fabs(have - want), rel = want != 0.0 ? err / fabs(want) : err;
      if (!(rel <= r->max_weight_rel)) r->max_weight_rel = isnan(rel) ? INFINITY : rel;
      if (!(err <= PG_WEIGHT_TOL * fabs(want))) {
        if (++r->weights_bad <= 4)
          fprintf(stderr, "  routing weight: token %lld slot %lld (expert %d): plugin %.9g, reference %.9g [%s]\n",
                  (long long)t, (long long)k, got[k], have, want, cfg);
      }
    }
  }
}

static void check_output(const pg_problem* p, pg_result* r, const double* ref) {
  const int64_t n = p->cfg.T * p->cfg.H;
  double d2 = 0.0, r2 = 0.0;
  char cfg[512];
  pg_describe_config(&p->cfg, cfg, sizeof cfg);
  for (int64_t i = 0; i < n; ++i) {
    if (pg_output_is_poison(p, i)) {
      if (++r->unwritten <= 4)
        fprintf(stderr, "  output[%lld][%lld] never written [%s]\n", (long long)(i / p->cfg.H),
                (long long)(i % p->cfg.H), cfg);
      continue;
    }
    double o = pg_output_at(p, i);
    if (!isfinite(ref[i]) != !isfinite(o) || (isnan(ref[i]) && !isnan(o))) {
      if (++r->nonfinite_bad <= 4)
        fprintf(stderr, "  output[%lld][%lld] = %g, reference %g [%s]\n", (long long)(i / p->cfg.H),
                (long long)(i % p->cfg.H), o, ref[i], cfg);
      continue;
    }
    if (!isfinite(ref[i])) continue;
    d2 += (o - ref[i]) * (o - ref[i]);
    r2 += ref[i] * ref[i];
  }
  r->rel_err = r2 > 0.0 ? sqrt(d2 / r2) : sqrt(d2);
}

int pg_check(pg_problem* p, pg_result* r, double* ref_out) {
  memset(r, 0, sizeof(*r));
  const int64_t T = p->cfg.T, K = p->cfg.K, H = p->cfg.H;
  char why[160];
  if (ref_supported(&p->ref, why, sizeof why) != 0) {
    fprintf(stderr, "  %s\n", why);
    r->ref_failed = 1;
    return 0;
  }
  int32_t* ids = malloc(sizeof(int32_t) * (size_t)(T * K + 1));
  double* w = malloc(sizeof(double) * (size_t)(T * K + 1));
  double* out = ref_out ? ref_out : malloc(sizeof(double) * (size_t)(T * H + 1));
  if (!ids || !w || !out) {
    r->ref_failed = 1;
  } else {
    ref_route(&p->ref, ids, w);
    if (p->cfg.want_routing_out) {
      check_routing(p, r, ids, w);
      /* From here on the plugin's fp32 weights (checked above): a weight applied to the input moves the
       * bf16-derived values x·w across exact fp8 ties with its last bit, so the reference must quantize
       * the very same fp32 products to reach the same codes. */
      if (r->ids_bad == 0 && r->weights_bad == 0)
        for (int64_t i = 0; i < T * K; ++i) w[i] = p->weights_out[i];
    }
    if (ref_forward(&p->ref, ids, w, out, NULL) != 0) r->ref_failed = 1;
    else check_output(p, r, out);
  }
  free(ids);
  free(w);
  if (out != ref_out) free(out);
  return !r->ref_failed && r->unwritten == 0 && r->nonfinite_bad == 0 && r->ids_bad == 0 && r->weights_bad == 0 &&
         r->rel_err <= PG_OUTPUT_TOL;
}

void pg_subcheck_begin(const char* name, int* failures_before) {
  printf("[ RUN  ] %s\n", name);
  fflush(stdout);
  *failures_before = test_failures;
}

void pg_subcheck_end(pg_tally* tally, const char* name, int failures_before) {
  if (test_failures == failures_before) {
    ++tally->passed;
    printf("[  OK  ] %s\n", name);
  } else {
    ++tally->failed;
    printf("[ FAIL ] %s\n", name);
  }
  fflush(stdout);
}

int pg_tally_finish(const pg_tally* tally, const char* suite) {
  printf("%s: %d passed, %d failed\n", suite, tally->passed, tally->failed);
  return (tally->failed || test_failures) ? 1 : 0;
}
