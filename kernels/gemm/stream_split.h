/* stream_split.h — how the weight-streaming decode GEMMs (gemm_stream_sm90.cu) share their work over a
 * persistent grid without wave quantization (docs/GPU.md "Weight-streaming decode GEMMs"): the flattened
 * iteration space of `units` units × `kblocks` 128-K blocks (unit-major) is cut into `ctas` contiguous,
 * nearly equal ranges, CTA c taking iterations [begin(c), begin(c + 1)), begin(c) = ⌊c·W / ctas⌋,
 * W = units·kblocks (stream-K). A unit whose blocks fall into more than one CTA's range is split: each CTA
 * computes its segment and, except the last to finish, leaves an fp32 partial tile in the workspace; the
 * last one sums the segments in K order (CTA order) and runs the epilogue. Every split unit is the last unit
 * that starts in its first CTA, so that CTA's number names the unit's arrival counter, and a CTA holds at
 * most two segments of split units: the one its range starts inside (partial slot 0) and the one its range
 * ends inside that started in it (slot 1). The kernels take ctas = fp8moe_split_ctas_units(grid, units,
 * kblocks) (unit-aligned pieces when the units are fewer than the CTAs); every rule here holds for any
 * 1 ≤ ctas ≤ W. Compiled as C too: the host unit tests (test_cuda_plan.c, test_stream_split.c) check the
 * cover, the inverse and the slot rule for many shapes. */
#ifndef FP8MOE_KERNELS_STREAM_SPLIT_H
#define FP8MOE_KERNELS_STREAM_SPLIT_H

#include <stdint.h>

#if defined(__CUDACC__)
#define FP8MOE_SPLIT_FN __host__ __device__ __forceinline__
#else
#define FP8MOE_SPLIT_FN static inline
#endif

/* CTAs that take part: at most one per iteration, so that every taking part has a non-empty range (then the
 * CTAs first..last of a split unit all hold a segment of it); the others of the grid exit at once. */
FP8MOE_SPLIT_FN int64_t fp8moe_split_ctas(int64_t grid, int64_t work) { return work < grid ? work : grid; }

/* CTAs that take part for `units` units of `kblocks` blocks on a grid of `grid` (docs/GPU.md "Weight-streaming
 * decode GEMMs", "Unit-aligned split"). More units than CTAs: the whole grid, stream-K. Otherwise a
 * multiple of the units, units·s with s = min(kblocks, ⌊grid / units⌋) (more than half the grid, or W
 * when every iteration gets its own CTA): then
 * begin(c) = ⌊c·kblocks / s⌋ inside unit ⌊c / s⌋, so every CTA's range lies in one unit and holds one
 * segment; a unit is cut into s near-equal pieces that run at the same time, no CTA finishes a segment
 * (partial store, fence, counter) in the middle of its range, and a unit's last arriver sums s − 1 partials
 * instead of up to ⌈kblocks / (W / grid)⌉. Any such count keeps the cover, inverse, slot and counter rules
 * of the functions below (they hold for every 1 ≤ ctas ≤ W). */
FP8MOE_SPLIT_FN int64_t fp8moe_split_ctas_units(int64_t grid, int64_t units, int64_t kblocks) {
  if (units <= 0 || kblocks <= 0 || grid <= 0) return 0;
  if (units >= grid) return grid;
  const int64_t s = grid / units < kblocks ? grid / units : kblocks;
  return units * s;
}

/* CTAs for the expert-aligned split (docs/GPU.md "Experts routed more than a unit"): where the `tiles` entries of the
 * unit list (tiles, or pairs of tiles) belong to `experts` < tiles experts and the units are at least the grid,
 * the kernels order the units entry-major (column unit fastest) over tiles·s CTAs, s = min(⌊grid / tiles⌋,
 * per_tile): then begin(t·s + i) = t·per_tile + ⌊i·per_tile / s⌋, so entry t's i-th CTA walks the same column
 * units and K blocks at the same offsets as every other entry's i-th CTA, and the entries of one expert read each
 * weight block at about the same time — once from DRAM, the rest from L2 — where stream-K over the whole grid gave
 * one CTA several entries of one column unit in turn, each a DRAM re-read once the grid had streamed past the L2.
 * It pays where the weight bytes saved (tiles / experts reads per byte down to one) outweigh the CTAs left idle
 * (each taking part streams grid / (tiles·s) times its share): tiles·(tiles·s) ≥ 1.1·experts·grid, the margin from
 * the first measurement (H100, session 39: 1.21 re-reads on 99 of 132 CTAs lost 11 %, 1.31 on 115 gained 10 %).
 * 0 (keep fp8moe_split_ctas_units) otherwise, and where tiles > grid. */
FP8MOE_SPLIT_FN int64_t fp8moe_split_ctas_tiles(int64_t grid, int64_t tiles, int64_t per_tile, int64_t experts) {
  if (tiles <= 0 || per_tile <= 0 || grid <= 0 || tiles > grid || experts <= 0 || experts >= tiles) return 0;
  const int64_t s = grid / tiles < per_tile ? grid / tiles : per_tile;
  return 10 * tiles * (tiles * s) >= 11 * experts * grid ? tiles * s : 0;
}

/* The expert-aligned split in rounds, for more entries than CTAs (docs/GPU.md "Experts routed more than a unit"):
 * R = ⌈entries / grid⌉ rounds on C = ⌈entries / R⌉ CTAs, entry e on CTA e mod C in round e div C, whole entries
 * (no unit split, no fixup), so consecutive entries — one expert's — run side by side in the same round. In the
 * split's terms the entries are renumbered CTA-major (virtual entry v = CTA·R + round, fp8moe_split_round_entry;
 * W = C·R·per_tile, begin(c) = c·R·per_tile), and CTA c's range ends after its real entries
 * (fp8moe_split_round_count: the last round's slots past `entries` are empty). Each CTA streams R entries where
 * stream-K gave it entries / grid, so it pays where the reads per weight byte saved beat that: entries / experts ≥
 * 1.3·R·grid / entries (kimi-k2 uniform T = 512, 1.22 by this measure, lost 2.5–3.6 % in rounds on an H100; skewed,
 * 1.44, gained 11–13 %): returns R (≥ 2) there, else 0. */
FP8MOE_SPLIT_FN int64_t fp8moe_split_rounds(int64_t grid, int64_t entries, int64_t experts) {
  if (grid <= 0 || entries <= grid || experts <= 0 || experts >= entries) return 0;
  const int64_t r = (entries + grid - 1) / grid;
  return 10 * entries * entries >= 13 * experts * r * grid ? r : 0;
}

/* The CTAs of R rounds over `entries` entries. */
FP8MOE_SPLIT_FN int64_t fp8moe_split_round_ctas(int64_t entries, int64_t rounds) {
  return (entries + rounds - 1) / rounds;
}

/* The entry at virtual position v (CTA v / R, round v mod R) of R rounds on C CTAs; ≥ entries: an empty slot. */
FP8MOE_SPLIT_FN int64_t fp8moe_split_round_entry(int64_t v, int64_t rounds, int64_t ctas) {
  return (v % rounds) * ctas + v / rounds;
}

/* How many of CTA c's R slots hold an entry: its rounds r with r·C + c < entries, a prefix of them. */
FP8MOE_SPLIT_FN int64_t fp8moe_split_round_count(int64_t c, int64_t entries, int64_t rounds, int64_t ctas) {
  const int64_t n = c < entries ? (entries - c + ctas - 1) / ctas : 0;
  return n < rounds ? n : rounds;
}

/* First iteration of CTA c (0 ≤ c ≤ ctas; begin(ctas) = W). W·ctas < 2^63. */
FP8MOE_SPLIT_FN int64_t fp8moe_split_begin(int64_t c, int64_t work, int64_t ctas) { return c * work / ctas; }

/* The CTA whose range holds iteration i (0 ≤ i < W): the largest c with begin(c) ≤ i, i.e. c·W < (i + 1)·ctas. */
FP8MOE_SPLIT_FN int64_t fp8moe_split_cta_of(int64_t i, int64_t work, int64_t ctas) {
  return ((i + 1) * ctas - 1) / work;
}

/* The rounds balanced (docs/GPU.md "Balanced rounds"), where fp8moe_split_rounds takes R rounds: F = ⌊entries /
 * grid⌋ full rounds on the whole grid (entry r·grid + c on CTA c in round r: fp8moe_split_round_entry with R = F,
 * C = grid, every slot real), then the N_t = entries − F·grid entries left by stream-K over the grid
 * (fp8moe_split_ctas_units of their N_t·col_units units, in entry order, an entry's column units in turn; the usual
 * fixup there). A CTA then streams F + N_t / grid entries where the rounds gave it F + 1: the rounds run at one
 * CTA's stream rate (docs/GPU.md "Rounds and bandwidth"), so spreading the last round over every CTA cuts their time
 * by up to (1 − N_t / grid) / (F + 1) of it, at the price of the tail's entries of one expert no longer streaming
 * side by side. In the kernels' virtual iteration space (P = col_units·kblocks iterations an entry) CTA c takes
 * [begin, end) = [c·F·P, (c + 1)·F·P) of the full rounds, then [begin2, end2) = tail_base + its stream-K range
 * [fp8moe_split_begin(c), fp8moe_split_begin(c + 1)) of tail_work iterations on tail_ctas CTAs, tail_base = F·grid·P
 * (begin2 = end2 = end where it takes no tail iterations). entries ≥ grid ≥ 1. */
typedef struct fp8moe_split_pieces {
  int64_t begin, end;
  int64_t tail_base, tail_work, tail_ctas;
  int64_t begin2, end2;
} fp8moe_split_pieces;

FP8MOE_SPLIT_FN fp8moe_split_pieces fp8moe_split_balanced(int64_t c, int64_t grid, int64_t entries, int64_t col_units,
                                                          int64_t kblocks) {
  fp8moe_split_pieces p;
  const int64_t full = entries / grid, per_entry = col_units * kblocks;
  const int64_t tail_units = (entries - full * grid) * col_units;
  p.begin = c * full * per_entry;
  p.end = p.begin + full * per_entry;
  p.tail_base = grid * full * per_entry;
  p.tail_work = tail_units * kblocks;
  p.tail_ctas = tail_units > 0 ? fp8moe_split_ctas_units(grid, tail_units, kblocks) : 0;
  p.begin2 = p.end2 = p.end;
  if (c < p.tail_ctas) {
    p.begin2 = p.tail_base + fp8moe_split_begin(c, p.tail_work, p.tail_ctas);
    p.end2 = p.tail_base + fp8moe_split_begin(c + 1, p.tail_work, p.tail_ctas);
  }
  return p;
}

/* Where the rounds balanced also run without the rounds' rule (fp8moe_split_rounds; mode 3 of the kernels'
 * stream_rounds): more entries than CTAs, at least 1.35 entries an expert. Each CTA then streams the entries / grid
 * that stream-K would give it, and the full rounds read a shared expert's weights once for its entries. Measured (H100,
 * session 60, balanced wherever an expert held two entries against stream-K; docs/GPU.md "Balanced rounds"): 1.41 and
 * 1.43 entries an expert (deepseek-v3 skewed T = 256) −10 and −12 %; 1.28 (kimi-k2 skewed T = 256) ±1 %; 1.31 (kimi-k2
 * uniform T = 512) +2 %, 1.03–1.09 (uniform T = 256) +2 to +11 %: the balanced layout costs where little is shared. */
FP8MOE_SPLIT_FN int fp8moe_split_balanced_pays(int64_t grid, int64_t entries, int64_t experts) {
  return grid > 0 && entries > grid && experts > 0 && 20 * entries >= 27 * experts;
}

/* One CTA's share of unit u: blocks [kb0, kb1) of it; first and last CTA of the unit (first == last: the unit
 * is not split); slot: the partial slot this segment uses when split (0: the segment starts the CTA's range
 * inside the unit; 1: the segment starts the unit). */
typedef struct fp8moe_split_segment {
  int32_t kb0, kb1;
  int32_t first, last;
  int32_t slot;
} fp8moe_split_segment;

FP8MOE_SPLIT_FN fp8moe_split_segment fp8moe_split_segment_of(int64_t u, int64_t kblocks, int64_t begin, int64_t end,
                                                             int64_t work, int64_t ctas) {
  fp8moe_split_segment s;
  const int64_t u0 = u * kblocks, u1 = u0 + kblocks;
  const int64_t b = begin > u0 ? begin : u0, e = end < u1 ? end : u1;
  s.kb0 = (int32_t)(b - u0);
  s.kb1 = (int32_t)(e - u0);
  s.first = (int32_t)fp8moe_split_cta_of(u0, work, ctas);
  s.last = (int32_t)fp8moe_split_cta_of(u1 - 1, work, ctas);
  s.slot = b == u0 ? 1 : 0;
  return s;
}

/* The partial slot CTA c used for unit u (c in [first, last]): 1 for the unit's first CTA, else 0. */
FP8MOE_SPLIT_FN int32_t fp8moe_split_slot_of(int64_t c, int64_t first) { return c == first ? 1 : 0; }

#endif /* FP8MOE_KERNELS_STREAM_SPLIT_H */
