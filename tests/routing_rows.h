/* routing_rows.h — the router-logit rows the routing tests feed both backends (test_gpu_routing_bits.c on the GPU,
 * test_routing_emu.cpp on the emulated warp), and the xorshift generator they draw from (one state per including
 * file). C and C++. */
#ifndef FP8MOE_TESTS_ROUTING_ROWS_H
#define FP8MOE_TESTS_ROUTING_ROWS_H

#include <math.h>
#include <stdint.h>

#define ROUTING_ROW_KINDS 14

static uint64_t routing_rows_state = 0x1234567887654321ull;

static inline uint32_t routing_rows_u32(void) {
  routing_rows_state ^= routing_rows_state << 13;
  routing_rows_state ^= routing_rows_state >> 7;
  routing_rows_state ^= routing_rows_state << 17;
  return (uint32_t)(routing_rows_state >> 16);
}
static inline float routing_rows_uniform(void) { return (float)(routing_rows_u32() >> 8) / 16777216.0f; }

/* One logit row of E experts (K selected): kind 0..5 random at scales 1, 4, 30; 6.. adversarial patterns. bias: the
 * row's bias (fp32, E values) or NULL, for kinds 12 (sigmoid keys σ(x) + bias on a grid of 3e-5, about 3× the error
 * bound of the filtered selection of sigmoid-keyed routing, so decisions sit at its margins) and 13 (eight equal
 * chunks, DeepSeek-V3's groups where E / 8 experts make one: in a random half of them the two largest keys sum to
 * 1.9 within a few ulp, closer than the filtered selection can tell from approximate keys, so the exact scores
 * rank those groups; the other chunks' two largest keys sum to ~1.9 − 0.02, some close enough, some not). */
static inline void routing_rows_fill(float* row, int32_t E, int32_t K, uint32_t kind, const float* bias) {
  static const float scales[] = {1.0f, 4.0f, 30.0f};
  static const float edges[] = {88.0f, 88.7228f, 89.0f, -87.3f, -103.9f, -104.5f, 1e-30f, -1e-30f, 0.0f, -0.0f};
  for (int32_t e = 0; e < E; ++e) row[e] = (routing_rows_uniform() - 0.5f) * 2.0f * scales[kind % 3];
  switch (kind) {
    case 6: /* ties everywhere */
      for (int32_t e = 0; e < E; ++e) row[e] = (float)(routing_rows_u32() % 3);
      break;
    case 7: /* non-finite sprinkled in */
      for (int32_t e = 0; e < E; ++e) {
        const uint32_t r = routing_rows_u32() % 16;
        if (r == 0) row[e] = NAN;
        else if (r == 1) row[e] = INFINITY;
        else if (r == 2) row[e] = -INFINITY;
      }
      break;
    case 8: /* fewer selectable experts than K */
      for (int32_t e = 0; e < E; ++e) row[e] = (int32_t)(routing_rows_u32() % (uint32_t)E) < K - 1 ? row[e] : -INFINITY;
      break;
    case 9: /* huge magnitudes */
      for (int32_t e = 0; e < E; ++e) row[e] = (routing_rows_uniform() - 0.5f) * 2e30f;
      break;
    case 10: /* exp's thresholds and signed zeros */
      for (int32_t e = 0; e < E; ++e)
        row[e] = edges[routing_rows_u32() % 10] + (routing_rows_uniform() - 0.5f) * 1e-3f * (float)(routing_rows_u32() % 2);
      break;
    case 11: /* nearly equal: differences of a few ulp */
      for (int32_t e = 0; e < E; ++e) row[e] = 1.0f + (float)(routing_rows_u32() % 8) * 1.1920929e-7f;
      break;
    case 12: /* sigmoid keys on a 3e-5 grid */
      for (int32_t e = 0; e < E; ++e) {
        const double s = 0.25 + 3e-5 * (double)(routing_rows_u32() % 256) - (bias ? (double)bias[e] : 0.0);
        row[e] = (float)log(s / (1.0 - s));
      }
      break;
    case 13: {
      const int32_t gs = E / 8 >= 2 ? E / 8 : E;
      for (int32_t e = 0; e < E; ++e) row[e] = (routing_rows_uniform() - 0.5f) * 2.0f; /* keys ≤ 0.74 + bias */
      const uint32_t close = routing_rows_u32();
      for (int32_t g = 0; g + gs <= E; g += gs) {
        const double level = ((close >> (g / gs)) & 1u) ? 0.95 : 0.94 + 1e-5 * (double)(routing_rows_u32() % 8);
        for (int32_t i = 0; i < 2; ++i) {
          const int32_t e = g + (int32_t)(routing_rows_u32() % (uint32_t)gs);
          const double s = level + 0x1p-24 * (double)(routing_rows_u32() % 4) - (bias ? (double)bias[e] : 0.0);
          row[e] = (float)log(s / (1.0 - s));
        }
      }
      break;
    }
    default:
      break;
  }
}

#endif /* FP8MOE_TESTS_ROUTING_ROWS_H */
