/* stream_split_rules.h — the rules the stream GEMMs rely on for one split (kernels/gemm/stream_split.h; docs/GPU.md
 * "Weight-streaming decode GEMMs"), counted as inconsistencies for U units of KB blocks over G CTAs: the CTAs'
 * ranges are non-empty, contiguous and cover [0, U·KB) once; cta_of inverts begin; each unit's segments on
 * CTAs first..last tile its blocks in CTA order; split units use each CTA's slot 0 / slot 1 at most once and
 * their counter (the first CTA) names one unit only. Shared by test_cuda_plan.c (stream-K counts) and
 * test_stream_split.c (unit-aligned counts). G ≤ 160 (FP8MOE_STREAM_MAX_CTAS). */
#ifndef FP8MOE_TESTS_STREAM_SPLIT_RULES_H
#define FP8MOE_TESTS_STREAM_SPLIT_RULES_H

#include <string.h>

#include "gemm/stream_split.h"

static inline int stream_split_rules_bad(int64_t U, int64_t KB, int64_t G) {
  const int64_t W = U * KB;
  int bad = 0;
  static int slot_used[160][2];
  static int counter_unit[160];
  memset(slot_used, 0, sizeof slot_used);
  for (int i = 0; i < 160; ++i) counter_unit[i] = -1;
  int64_t prev_end = 0;
  for (int64_t cta = 0; cta < G; ++cta) {
    const int64_t b0 = fp8moe_split_begin(cta, W, G), b1 = fp8moe_split_begin(cta + 1, W, G);
    if (b0 != prev_end || b1 <= b0) ++bad;
    prev_end = b1;
    for (int64_t i = b0; i < b1; ++i)
      if (fp8moe_split_cta_of(i, W, G) != cta) ++bad;
  }
  if (prev_end != W) ++bad;
  for (int64_t u = 0; u < U; ++u) {
    int32_t next = 0;
    const fp8moe_split_segment s0 =
        fp8moe_split_segment_of(u, KB, fp8moe_split_begin(0, W, G), fp8moe_split_begin(1, W, G), W, G);
    for (int64_t cta = s0.first; cta <= s0.last; ++cta) {
      const fp8moe_split_segment s =
          fp8moe_split_segment_of(u, KB, fp8moe_split_begin(cta, W, G), fp8moe_split_begin(cta + 1, W, G), W, G);
      if (s.kb0 != next || s.kb1 <= s.kb0 || s.first != s0.first || s.last != s0.last) ++bad;
      next = s.kb1;
      if (s.slot != fp8moe_split_slot_of(cta, s.first)) ++bad;
      if (s.first != s.last && slot_used[cta][s.slot]++) ++bad;
    }
    if (next != KB) ++bad;
    if (s0.first != s0.last) {
      if (counter_unit[s0.first] != -1) ++bad;
      counter_unit[s0.first] = (int)u;
    }
  }
  return bad;
}

#endif /* FP8MOE_TESTS_STREAM_SPLIT_RULES_H */
