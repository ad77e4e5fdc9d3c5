/* test_stream_split.c — the stream GEMMs' CTA count (kernels/gemm/stream_split.h, fp8moe_split_ctas_units;
 * docs/GPU.md "Weight-streaming decode GEMMs", "Unit-aligned split") on the host, no GPU: with fewer units
 * than CTAs the count is a multiple of the units above half the grid (or W, one iteration per CTA), every
 * CTA's range lies inside one unit (one segment, no fixup in the middle of a range), each unit's pieces
 * differ by at most one block; with more units the whole grid (stream-K); and for every count the cover,
 * inverse, segment, slot and counter rules the kernels rely on (as test_cuda_plan.c checks them for
 * fp8moe_split_ctas). */
#include <stdio.h>
#include <string.h>

#include "gemm/stream_split.h"
#include "plugin_host.h"
#include "stream_split_rules.h"

/* Below one unit per CTA: G = U·s, s > 0, G > grid / 2 unless G = W, every range inside one unit, the s
 * pieces of a unit within one block of each other. */
static int aligned_holds(int64_t U, int64_t KB, int64_t grid, int64_t G) {
  const int64_t W = U * KB;
  int bad = 0;
  if (G % U != 0 || (2 * G <= grid && G != W)) ++bad;
  for (int64_t cta = 0; cta < G; ++cta) {
    const int64_t b0 = fp8moe_split_begin(cta, W, G), b1 = fp8moe_split_begin(cta + 1, W, G);
    if (b0 / KB != (b1 - 1) / KB) ++bad; /* one unit */
    const int64_t n = b1 - b0, lo = KB / (G / U);
    if (n < lo || n > lo + 1) ++bad;
  }
  return bad;
}

/* The expert-aligned count (fp8moe_split_ctas_tiles) for `tiles` entries of `per_tile` iterations each, of
 * `experts` experts (units ≥ grid): 0 exactly where the rule says no (more entries than CTAs, no expert with two
 * entries, or tiles·G < 1.1·experts·grid), else a multiple of the entries within the grid, each entry's CTAs
 * starting at the same offsets inside their entries as entry 0's (so the entries of one expert read the same
 * weight blocks at the same time), and the split rules hold over the units. */
static int tiles_holds(int64_t tiles, int64_t col_units, int64_t KB, int64_t grid, int64_t experts, int* taken) {
  const int64_t per_tile = col_units * KB, G = fp8moe_split_ctas_tiles(grid, tiles, per_tile, experts);
  const int64_t s = tiles <= grid ? (grid / tiles < per_tile ? grid / tiles : per_tile) : 0;
  const int pays = tiles <= grid && experts < tiles && 10 * tiles * tiles * s >= 11 * experts * grid;
  if (G == 0) return pays;
  ++*taken;
  int bad = !pays;
  if (G != tiles * s || G > grid) ++bad;
  const int64_t W = tiles * per_tile;
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t i = 0; i <= s; ++i)
      if (fp8moe_split_begin(t * s + i, W, G) - t * per_tile != fp8moe_split_begin(i, W, G)) ++bad;
  return bad + stream_split_rules_bad(tiles * col_units, KB, G);
}

/* The rounds (fp8moe_split_rounds) for `entries` entries of `experts` experts on `grid` CTAs: 0 exactly where the rule
 * says no, else R ≥ 2 rounds on C ≤ grid CTAs where every entry is taken exactly once, each CTA's real slots are a
 * prefix of its R (the empty ones ≥ entries), and two consecutive entries of one round sit on neighbouring CTAs. */
static int rounds_holds(int64_t grid, int64_t entries, int64_t experts, int* taken) {
  const int64_t R = fp8moe_split_rounds(grid, entries, experts);
  const int64_t need = (entries + grid - 1) / grid;
  const int pays = entries > grid && experts < entries && 10 * entries * entries >= 13 * experts * need * grid;
  if (R == 0) return pays;
  ++*taken;
  int bad = !pays || R != need;
  const int64_t C = fp8moe_split_round_ctas(entries, R);
  if (C > grid || C * R < entries) ++bad;
  static unsigned char seen[8192];
  memset(seen, 0, sizeof seen);
  for (int64_t c = 0; c < C; ++c) {
    const int64_t n = fp8moe_split_round_count(c, entries, R, C);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t e = fp8moe_split_round_entry(c * R + r, R, C);
      if (r < n) {
        if (e < 0 || e >= entries || seen[e]++) ++bad;
        if (e + 1 < entries && (e + 1) / C == r && fp8moe_split_round_entry((c + 1) * R + r, R, C) != e + 1) ++bad;
      } else if (e < entries) {
        ++bad;
      }
    }
  }
  for (int64_t e = 0; e < entries; ++e)
    if (!seen[e]) ++bad;
  return bad;
}

/* The rounds balanced (fp8moe_split_balanced) for `entries` ≥ grid entries of col_units × KB iterations: every CTA
 * takes F = ⌊entries / grid⌋ whole entries in the full rounds (entry r·grid + c in round r, as the kernels' unit_at
 * maps virtual entry c·F + r), then its stream-K piece of the tail (the split rules over the tail's units); every
 * (entry, column unit, block) is taken exactly once, and no CTA streams more than F entries and its tail share. */
static int balanced_holds(int64_t grid, int64_t entries, int64_t col_units, int64_t KB, int drop_last) {
  const int64_t F = entries / grid, P = col_units * KB, tail_units = (entries - F * grid) * col_units;
  static unsigned char seen[1 << 20];
  if (entries * P > (int64_t)sizeof seen) return 1;
  memset(seen, 0, (size_t)(entries * P));
  int bad = 0;
  int64_t tail_ctas = -1;
  for (int64_t c = 0; c < grid; ++c) {
    fp8moe_split_pieces p = fp8moe_split_balanced(c, grid, entries, col_units, KB);
    if (drop_last && c == grid - 1 && p.end2 > p.begin2) --p.end2; /* a fault to catch: the last tail iteration lost */
    if (p.begin != c * F * P || p.end != p.begin + F * P || p.tail_base != grid * F * P ||
        p.tail_work != tail_units * KB || p.begin2 < p.end || p.end2 < p.begin2)
      ++bad;
    if (tail_ctas < 0) tail_ctas = p.tail_ctas;
    if (p.tail_ctas != tail_ctas || (tail_units > 0) != (p.tail_ctas > 0) || p.tail_ctas > grid) ++bad;
    if (c < p.tail_ctas && (p.begin2 != p.tail_base + fp8moe_split_begin(c, p.tail_work, p.tail_ctas) ||
                            p.end2 != p.tail_base + fp8moe_split_begin(c + 1, p.tail_work, p.tail_ctas)))
      ++bad;
    if (c >= p.tail_ctas && (p.begin2 != p.end || p.end2 != p.end)) ++bad;
    const int64_t share = p.tail_ctas > 0 ? (p.tail_work + p.tail_ctas - 1) / p.tail_ctas : 0;
    if ((p.end - p.begin) + (p.end2 - p.begin2) > F * P + share) ++bad;
    for (int piece = 0; piece < 2; ++piece)
      for (int64_t i = piece ? p.begin2 : p.begin; i < (piece ? p.end2 : p.end); ++i) {
        const int64_t u = i / KB, q = u / col_units, col = u % col_units;
        const int64_t e = q < F * grid ? fp8moe_split_round_entry(q, F, grid) : q;
        if (e < 0 || e >= entries || (q < F * grid && e % grid != c)) {
          ++bad;
          continue;
        }
        if (seen[e * P + col * KB + i % KB]++) ++bad;
      }
  }
  for (int64_t i = 0; i < entries * P; ++i)
    if (seen[i] != 1) ++bad;
  if (tail_units > 0) bad += stream_split_rules_bad(tail_units, KB, tail_ctas);
  return bad;
}

int main(void) {
  const int64_t units[] = {1, 2, 7, 32, 48, 64, 66, 67, 128, 131, 132, 133, 224, 1000};
  const int64_t kblocks[] = {1, 2, 3, 6, 16, 56, 112};
  const int64_t grids[] = {1, 2, 3, 10, 132, 160};
  int bad = 0, aligned = 0;
  for (size_t a = 0; a < sizeof units / sizeof units[0]; ++a)
    for (size_t b = 0; b < sizeof kblocks / sizeof kblocks[0]; ++b)
      for (size_t c = 0; c < sizeof grids / sizeof grids[0]; ++c) {
        const int64_t U = units[a], KB = kblocks[b], grid = grids[c], W = U * KB;
        const int64_t G = fp8moe_split_ctas_units(grid, U, KB);
        if (G < 1 || G > grid || G > W) {
          ++bad;
          continue;
        }
        if (U >= grid && G != grid) ++bad;
        if (U < grid) {
          bad += aligned_holds(U, KB, grid, G);
          ++aligned;
        }
        bad += stream_split_rules_bad(U, KB, G);
      }
  EXPECT(bad == 0, "unit-aligned split: %d inconsistencies", bad);
  EXPECT(aligned > 100, "the aligned branch ran for %d shapes only", aligned);
  EXPECT(fp8moe_split_ctas_units(132, 0, 56) == 0 && fp8moe_split_ctas_units(132, 8, 0) == 0, "no work: no CTA");
  int tiles_bad = 0, tiles_taken = 0;
  const int64_t tile_counts[] = {1, 2, 3, 9, 13, 33, 34, 44, 45, 99, 100, 132, 133};
  const int64_t col_counts[] = {1, 2, 6, 20, 64};
  for (size_t a = 0; a < sizeof tile_counts / sizeof tile_counts[0]; ++a)
    for (size_t b = 0; b < sizeof col_counts / sizeof col_counts[0]; ++b)
      for (size_t k = 0; k < sizeof kblocks / sizeof kblocks[0]; ++k)
        for (size_t c = 0; c < sizeof grids / sizeof grids[0]; ++c)
          for (int64_t experts = 1; experts <= tile_counts[a]; experts += 1 + tile_counts[a] / 7)
            if (tile_counts[a] * col_counts[b] >= grids[c]) /* the kernels ask only there */
              tiles_bad += tiles_holds(tile_counts[a], col_counts[b], kblocks[k], grids[c], experts, &tiles_taken);
  EXPECT(tiles_bad == 0, "expert-aligned split: %d inconsistencies", tiles_bad);
  EXPECT(tiles_taken > 200, "the expert-aligned count was taken for %d shapes only", tiles_taken);
  /* The points of docs/GPU.md "Experts routed more than a unit" on 132 CTAs: llama4-scout skewed T = 128 (10 tiles
   * of 3 experts, GEMM1 64 groups × 40 blocks) on 130; glm-4.5-air T = 128 (115 of 88, 11 × 32) on 115;
   * deepseek-v3 skewed T = 128 (99 pairs of 82, 16 × 56: measured 11 % slower so) and one expert a tile: none. */
  int rounds_bad = 0, rounds_taken = 0;
  for (int64_t grid = 1; grid <= 160; grid += grid < 8 ? 1 : 31)
    for (int64_t entries = 1; entries <= 8 * grid + 3 && entries < 8192; entries += 1 + entries / 9)
      for (int64_t experts = 1; experts <= entries; experts += 1 + entries / 5)
        rounds_bad += rounds_holds(grid, entries, experts, &rounds_taken);
  EXPECT(rounds_bad == 0, "expert-aligned rounds: %d inconsistencies", rounds_bad);
  EXPECT(rounds_taken > 100, "the rounds were taken for %d shapes only", rounds_taken);
  /* kimi-k2 skewed T = 512 on 132 CTAs (211 pair entries of 117 experts): 2 rounds on 106 CTAs; uniform (247 of 189,
   * measured 3.6 % slower in rounds under the first rule): none; 160 of 40 (test_gpu_sweep's case (h)): 2 on 80. */
  EXPECT(fp8moe_split_rounds(132, 211, 117) == 2 && fp8moe_split_round_ctas(211, 2) == 106 &&
             fp8moe_split_rounds(132, 247, 189) == 0 && fp8moe_split_rounds(132, 160, 40) == 2 &&
             fp8moe_split_round_ctas(160, 2) == 80 &&
             fp8moe_split_rounds(132, 141, 141) == 0 && fp8moe_split_rounds(132, 132, 3) == 0,
         "the rounds at kimi-k2 T = 512, none without a shared expert or within the grid");
  int balanced_bad = 0, balanced_runs = 0;
  const int64_t bal_cols[] = {1, 3, 16}, bal_kblocks[] = {1, 5, 56};
  for (int64_t grid = 1; grid <= 160; grid += grid < 8 ? 1 : 31)
    for (int64_t entries = grid; entries <= 3 * grid + 2; entries += 1 + entries / 7)
      for (size_t a = 0; a < sizeof bal_cols / sizeof bal_cols[0]; ++a)
        for (size_t b = 0; b < sizeof bal_kblocks / sizeof bal_kblocks[0]; ++b, ++balanced_runs)
          balanced_bad += balanced_holds(grid, entries, bal_cols[a], bal_kblocks[b], 0);
  EXPECT(balanced_bad == 0 && balanced_runs > 300, "balanced rounds: %d inconsistencies in %d shapes", balanced_bad,
         balanced_runs);
  /* kimi-k2 skewed T = 512 (211 pair entries, GEMM1 16 column units × 56 blocks) on 132 CTAs: one full round, the 79
   * entries left as 1,264 units of stream-K over the 132: a CTA streams 1 + 0.6 entries where the rounds gave 2. */
  const fp8moe_split_pieces kimi = fp8moe_split_balanced(131, 132, 211, 16, 56);
  EXPECT(kimi.end - kimi.begin == 16 * 56 && kimi.tail_ctas == 132 && kimi.tail_work == 79 * 16 * 56 &&
             kimi.end2 == kimi.tail_base + 79 * 16 * 56 && kimi.end2 - kimi.begin2 <= (79 * 16 * 56 + 131) / 132,
         "kimi-k2 skewed T = 512: one round and 0.6 of an entry per CTA");
  EXPECT(fp8moe_split_balanced(0, 132, 132, 16, 56).tail_ctas == 0 && balanced_holds(132, 132, 16, 56, 0) == 0,
         "no tail where the entries fill whole rounds");
  /* The host replay of the bench's routing (docs/GPU.md "Balanced rounds"): deepseek-v3 skewed T = 256 135 pair entries
   * of 96 experts (block) and 140 of 98 (per-tensor) balanced; kimi-k2 uniform T = 512 247 of 189, skewed T = 256 165
   * of 129, deepseek-v3 uniform T = 256 165 of 152 not; 1.35 entries an expert exactly balanced, within the grid never. */
  EXPECT(fp8moe_split_balanced_pays(132, 135, 96) && fp8moe_split_balanced_pays(132, 140, 98) &&
             !fp8moe_split_balanced_pays(132, 247, 189) && !fp8moe_split_balanced_pays(132, 165, 129) &&
             !fp8moe_split_balanced_pays(132, 165, 152),
         "balanced by entries an expert at the measured points");
  EXPECT(fp8moe_split_balanced_pays(132, 270, 200) && !fp8moe_split_balanced_pays(132, 269, 200) &&
             !fp8moe_split_balanced_pays(132, 132, 3) && !fp8moe_split_balanced_pays(0, 211, 117),
         "the bound 1.35 itself balanced, below it not; never within the grid or without CTAs");
  /* Shown able to fail: a tail that lost its last iteration is caught. */
  EXPECT(balanced_holds(132, 211, 16, 56, 1) != 0, "a lost tail iteration is caught");
  EXPECT(fp8moe_split_ctas_tiles(132, 10, 64 * 40, 3) == 130, "llama4-scout skewed T = 128: 130 CTAs");
  EXPECT(fp8moe_split_ctas_tiles(132, 115, 11 * 32, 88) == 115, "glm-4.5-air T = 128: 115 CTAs");
  EXPECT(fp8moe_split_ctas_tiles(132, 99, 16 * 56, 82) == 0 && fp8moe_split_ctas_tiles(132, 40, 64 * 40, 40) == 0 &&
             fp8moe_split_ctas_tiles(132, 133, 64 * 40, 3) == 0 && fp8moe_split_ctas_tiles(132, 0, 40, 1) == 0,
         "no aligned split where it does not pay, where no expert holds two entries, past the grid, without work");
  /* The shapes of docs/GPU.md's prediction on 132 CTAs (T = 1): deepseek-v3 GEMM1 8 tiles × 16 groups → one
   * unit per CTA; GEMM2 8 × 28 → stream-K; qwen3-30b-a3b GEMM1 8 × 6 (16 blocks) → halves; GEMM2 8 × 8
   * (6 blocks) → halves; mixtral-8x7b GEMM1 2 × 112 → stream-K; GEMM2 2 × 16 (112 blocks) → quarters. */
  EXPECT(fp8moe_split_ctas_units(132, 128, 56) == 128, "deepseek-v3 GEMM1: 128");
  EXPECT(fp8moe_split_ctas_units(132, 224, 16) == 132, "deepseek-v3 GEMM2: 132");
  EXPECT(fp8moe_split_ctas_units(132, 48, 16) == 96, "qwen3 GEMM1: 96");
  EXPECT(fp8moe_split_ctas_units(132, 64, 6) == 128, "qwen3 GEMM2: 128");
  EXPECT(fp8moe_split_ctas_units(132, 224, 32) == 132, "mixtral GEMM1: 132");
  EXPECT(fp8moe_split_ctas_units(132, 32, 112) == 128, "mixtral GEMM2: 128");
  /* Shown able to fail: the old count (min(grid, W)) is not unit-aligned for deepseek-v3 GEMM1. */
  EXPECT(aligned_holds(128, 56, 132, fp8moe_split_ctas(132, 128 * 56)) != 0, "the old count is caught");
  return test_finish("test_stream_split", test_checks_run);
}
