/* test_routing_filter.c — the filtered selection of DeepSeek-V3 routing (kernels/routing_filter.h, the decisions of
 * routing_token.cuh's route_filtered) selects exactly the experts the exact routing selects, on the host (no GPU).
 * A model of route_filtered's steps — approximate keys, group top-2 and scores, the groups picked by rank, the
 * margin test, the candidate floor, at most 32 candidates, top-K over their exact keys — runs on keys that are off
 * from the exact ones by up to the bound routing_filter.h assumes (FP8MOE_RF_SIGMOID_ERR plus the roundings of
 * "+ bias"), each expert pushed to one end of its interval at random, and its ids are compared, in slot order, with
 * the exact selection (src/cpu/cpu_routing.c's limit_groups and select_topk for rows whose logits and bias are
 * finite). Rows: random at several scales and biases, groups whose scores differ by about the bound, keys packed
 * around the K-th within the bound, exact ties, huge biases, exp's thresholds. The model must decline (exact path)
 * rather than differ; how often it declines is printed, and must stay rare on the random rows. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plugin_host.h"
#include "routing_filter.h"
#include "routing_math.h"

#define MAX_E 512

static uint64_t g_state = 0x243F6A8885A308D3ull;
static uint64_t next_u64(void) {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}
static float uniform(void) { return (float)(next_u64() >> 40) / 16777216.0f; } /* [0, 1) */
static float bf16_round(float v) {                                               /* the bias dtype of real hosts */
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  memcpy(&v, &u, sizeof v);
  return v;
}

typedef struct config {
  int32_t E, K, G, topk_group;
} config;

/* The exact key, as both backends compute it. */
static float exact_key(float x, float b) { return fp8moe_rm_sigmoid(fminf(x, FLT_MAX)) + b; }

/* DeepSeek-V3 limits groups (G = 1 or topk_group ≥ G: plain top-K, as the sigmoid methods). */
static int limits_groups(config c) { return c.G > 1 && c.topk_group < c.G; }

/* The exact selection (cpu_routing.c: limit_groups, then select_topk by key descending, ties to the lower index),
 * for rows whose keys are all finite. */
static void route_exact(const float* key_in, config c, int32_t* ids) {
  float key[MAX_E], score[32];
  int picked[32] = {0}, taken[MAX_E] = {0};
  const int32_t gs = limits_groups(c) ? c.E / c.G : c.E;
  memcpy(key, key_in, sizeof(float) * (size_t)c.E);
  if (!limits_groups(c)) picked[0] = 1;
  for (int32_t g = 0; limits_groups(c) && g < c.G; ++g) {
    float first = -INFINITY, second = -INFINITY;
    for (int32_t e = g * gs; e < (g + 1) * gs; ++e) {
      if (key[e] > first) {
        second = first;
        first = key[e];
      } else if (key[e] > second) {
        second = key[e];
      }
    }
    score[g] = first + second;
  }
  for (int32_t r = 0; limits_groups(c) && r < c.topk_group; ++r) {
    int32_t best = -1;
    for (int32_t g = 0; g < c.G; ++g)
      if (!picked[g] && (best < 0 || score[g] > score[best])) best = g;
    picked[best] = 1;
  }
  for (int32_t e = 0; e < c.E; ++e)
    if (!picked[e / gs]) key[e] = -INFINITY;
  for (int32_t k = 0; k < c.K; ++k) {
    int32_t best = -1;
    for (int32_t e = 0; e < c.E; ++e)
      if (!taken[e] && key[e] > -INFINITY && (best < 0 || key[e] > key[best])) best = e;
    taken[best] = 1;
    ids[k] = best;
  }
}

/* Top-K over the candidates (in index order) by their exact keys: the lowest lane holding the maximum. 1, or −1 where
 * fewer than K remain (cannot happen: the floor keeps ≥ K candidates). */
static int select_candidates(const float* x, const float* b, const int32_t* cand, int32_t n, int32_t K, int32_t* ids) {
  float key[FP8MOE_RF_MAX_CANDIDATES];
  for (int32_t i = 0; i < n; ++i) key[i] = exact_key(x[cand[i]], b[cand[i]]);
  for (int32_t k = 0; k < K; ++k) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; ++i)
      if (key[i] > -INFINITY && (best < 0 || key[i] > key[best])) best = i;
    if (best < 0) return -1;
    ids[k] = cand[best];
    key[best] = -INFINITY;
  }
  return 1;
}

/* route_filtered's decisions on approximate keys ak; returns 0 where it declines (the exact path runs), else 1 with
 * ids. The kernel's group scores are b1 + b2 of merge_top2, its pick the rank of pick_groups<true>; without group
 * limiting its floor comes from the K-th largest of the 32 lanes' largest keys (lane l: experts l, l + 32, …). */
static int route_filtered_model(const float* x, const float* b, const float* ak, config c, int32_t* ids,
                                int32_t* n_out) {
  const int32_t gs = limits_groups(c) ? c.E / c.G : c.E;
  float max_abs = 0.0f, score[32], second[32];
  for (int32_t e = 0; e < c.E; ++e) max_abs = fmaxf(max_abs, fabsf(ak[e]));
  if (!(max_abs < 0x1p64f)) return 0;
  const float delta = fp8moe_rf_delta(max_abs);
  if (!limits_groups(c)) {
    float lane_max[32];
    for (int32_t l = 0; l < 32; ++l) lane_max[l] = -INFINITY;
    for (int32_t e = 0; e < c.E; ++e) lane_max[e % 32] = fmaxf(lane_max[e % 32], ak[e]);
    float top = -INFINITY;
    for (int32_t k = 0; k < c.K; ++k) { /* K rounds, each removing one lane holding the maximum */
      int32_t owner = -1;
      for (int32_t l = 0; l < 32 && l < c.E; ++l)
        if (lane_max[l] > -INFINITY && (owner < 0 || lane_max[l] > lane_max[owner])) owner = l;
      top = lane_max[owner];
      lane_max[owner] = -INFINITY;
    }
    const float floor_key = fp8moe_rf_candidate_floor(top, delta);
    int32_t cand[MAX_E], n = 0;
    for (int32_t e = 0; e < c.E; ++e)
      if (ak[e] >= floor_key) cand[n++] = e;
    *n_out = n;
    if (n > FP8MOE_RF_MAX_CANDIDATES) return 0;
    return select_candidates(x, b, cand, n, c.K, ids);
  }
  for (int32_t g = 0; g < c.G; ++g) {
    float b1 = -INFINITY, b2 = -INFINITY;
    for (int32_t e = g * gs; e < (g + 1) * gs; ++e) {
      const float lo = fminf(b1, ak[e]);
      b1 = fmaxf(b1, ak[e]);
      b2 = fmaxf(lo, b2);
    }
    score[g] = b1 + b2;
    second[g] = b2;
  }
  int picked[32];
  float last = INFINITY, first_out = -INFINITY, min_second = INFINITY;
  for (int32_t g = 0; g < c.G; ++g) {
    int32_t ahead = 0;
    for (int32_t h = 0; h < c.G; ++h) ahead += score[h] > score[g] || (score[h] == score[g] && h < g);
    picked[g] = ahead < c.topk_group;
    if (picked[g]) {
      last = fminf(last, score[g]);
      min_second = fminf(min_second, second[g]);
    } else {
      first_out = fmaxf(first_out, score[g]);
    }
  }
  if (!fp8moe_rf_groups_certain(last, first_out, delta)) return 0;
  const float floor_key = fp8moe_rf_candidate_floor(min_second, delta);
  int32_t cand[MAX_E], n = 0;
  for (int32_t e = 0; e < c.E; ++e)
    if (picked[e / gs] && ak[e] >= floor_key) cand[n++] = e;
  *n_out = n;
  if (n > FP8MOE_RF_MAX_CANDIDATES) return 0;
  return select_candidates(x, b, cand, n, c.K, ids);
}

/* The approximate key of an expert: the exact one moved to an end of the interval the bound allows (the sigmoid's
 * FP8MOE_RF_SIGMOID_ERR plus one rounding of "+ bias" on each side), or inside it. */
static float approx_key(float x, float b, int mode) {
  const double s = (double)fp8moe_rm_sigmoid(fminf(x, FLT_MAX));
  const double k = (double)exact_key(x, b);
  const double err = (double)FP8MOE_RF_SIGMOID_ERR * (mode == 0 ? 1.0 : 2.0 * uniform() - 1.0);
  const double sa = s + ((next_u64() & 1u) ? err : -err);
  const float ka = (float)(sa + (double)b); /* one rounding of the approximate sum */
  const double ulp = fmax(fabs(k), fabs((double)ka)) * 0x1p-23;
  const double r = (mode == 2) ? ulp * (2.0 * uniform() - 1.0) : 0.0; /* the kernel's FFMA rounds once, elsewhere */
  return (float)((double)ka + r);
}

/* One row of logits and bias, kind 0 … 7. */
static void fill_row(float* x, float* b, config c, int kind) {
  static const float scales[] = {1.0f, 4.0f, 30.0f};
  const int32_t gs = c.E / c.G;
  for (int32_t e = 0; e < c.E; ++e) {
    x[e] = (2.0f * uniform() - 1.0f) * scales[kind % 3];
    b[e] = bf16_round((2.0f * uniform() - 1.0f) * (kind % 2 ? 0.1f : 1.0f));
  }
  switch (kind) {
    case 3: { /* two groups' scores about the bound apart: the margin test decides */
      if (c.G < 2) break;
      const int32_t g0 = (int32_t)(next_u64() % (uint64_t)c.G), g1 = (g0 + 1) % c.G;
      for (int32_t e = 0; e < gs; ++e) {
        x[g1 * gs + e] = x[g0 * gs + e];
        b[g1 * gs + e] = b[g0 * gs + e];
      }
      x[g1 * gs + (int32_t)(next_u64() % (uint64_t)gs)] += (float)(next_u64() % 64) * 1e-6f;
      break;
    }
    case 4: /* many keys near each other: the floor and the count decide */
      for (int32_t e = 0; e < c.E; ++e) {
        x[e] = 0.5f + (float)(next_u64() % 16) * 2e-6f;
        b[e] = 0.0f;
      }
      break;
    case 5: /* exact ties */
      for (int32_t e = 0; e < c.E; ++e) {
        x[e] = (float)(next_u64() % 3);
        b[e] = (float)(next_u64() % 2) * 0.25f;
      }
      break;
    case 6: /* exp's thresholds and saturated sigmoids (σ = 1 for large x: ties after the sigmoid) */
      for (int32_t e = 0; e < c.E; ++e) {
        static const float edges[] = {17.0f, 40.0f, 88.7f, -87.3f, -103.9f, 0.0f, -0.0f, 1e-30f};
        x[e] = edges[next_u64() % 8] + (float)(next_u64() % 4) * 1e-3f;
      }
      break;
    case 7: /* huge biases */
      for (int32_t e = 0; e < c.E; ++e) b[e] = bf16_round((2.0f * uniform() - 1.0f) * 1e20f);
      break;
    default:
      break;
  }
}

int main(void) {
  const config configs[] = {
      {256, 8, 8, 4}, /* deepseek-v3 */
      {256, 6, 8, 3},
      {128, 4, 4, 2},
      {64, 8, 8, 4}, /* groups of 8 */
      {160, 8, 5, 4},
      {384, 8, 12, 4},
      {384, 8, 1, 1}, /* kimi-k2: no group limiting */
      {128, 8, 1, 1}, /* glm-4.5-air */
      {256, 8, 8, 8}, /* topk_group = G: no limiting either */
      {64, 4, 1, 1},
      {20, 4, 1, 1}, /* fewer experts than lanes */
  };
  long total_bad = 0;
  for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ++ci) {
    const config c = configs[ci];
    long rows = 0, declined[8] = {0}, per_kind[8] = {0}, bad = 0, max_n = 0;
    for (long r = 0; r < 160000; ++r) {
      const int kind = (int)(r % 8), mode = (int)((r / 8) % 3);
      float x[MAX_E], b[MAX_E], key[MAX_E], ak[MAX_E];
      fill_row(x, b, c, kind);
      for (int32_t e = 0; e < c.E; ++e) {
        key[e] = exact_key(x[e], b[e]);
        ak[e] = approx_key(x[e], b[e], mode);
      }
      int32_t want[32], got[32], n = 0;
      route_exact(key, c, want);
      const int decided = route_filtered_model(x, b, ak, c, got, &n);
      ++rows;
      ++per_kind[kind];
      if (n > max_n) max_n = n;
      if (decided == 0) {
        ++declined[kind];
        continue;
      }
      int same = decided == 1;
      for (int32_t k = 0; same && k < c.K; ++k) same = got[k] == want[k];
      if (!same && ++bad <= 5)
        fprintf(stderr, "E %d K %d G %d topk_group %d, row %ld (kind %d): slot ids differ\n", c.E, c.K, c.G,
                c.topk_group, r, kind);
    }
    printf("E %d K %d groups %d topk_group %d: %ld rows, %ld differ; declined per kind:", c.E, c.K, c.G, c.topk_group,
           rows, bad);
    for (int k = 0; k < 8; ++k) printf(" %ld/%ld", declined[k], per_kind[k]);
    printf("; most candidates %ld\n", max_n);
    EXPECT(bad == 0, "E %d: the filtered selection differs from the exact one on %ld rows", c.E, bad);
    /* Random rows (kinds 0–2) must mostly take the filtered path, or it buys nothing. */
    const long random_declined = declined[0] + declined[1] + declined[2];
    EXPECT(random_declined * 50 < per_kind[0] + per_kind[1] + per_kind[2],
           "E %d: %ld of the random rows declined (more than 2 %%)", c.E, random_declined);
    /* The adversarial kinds must exercise the declines (ties fit in 32 candidates with few experts: there the ties
     * are decided among the candidates, lowest index first). */
    EXPECT(declined[7] > 0 && (declined[5] > 0 || c.E <= 64), "E %d: huge biases (and ties) decline", c.E);
    total_bad += bad;
  }
  EXPECT(total_bad == 0, "no configuration differs");
  return test_finish("test_routing_filter", test_checks_run);
}
