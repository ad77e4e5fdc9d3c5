/* gemm_stream_sm90.cu — the weight-streaming decode GEMMs on Hopper (sm_90a): GEMM1 (gated activation and
 * requantization fused) and GEMM2 (y by slot) for tiles of 16 expert-sorted rows holding 1–16 real tokens,
 * where the cost is reading the selected experts' weights once (docs/GPU.md "Weight-streaming decode GEMMs").
 * Same contract, arithmetic and conventions as gemm_decode.cu (the register path they replace on cc 9.0).
 *  - PAIRS (the plan's choice where an expert can hold two tiles: fp8moe_cuda_plan_stream_pairs): a unit takes up
 *    to two consecutive tiles of one expert (32 token rows, wgmma N = 32), so the expert's weights stream once
 *    for up to 32 rows; each CTA builds its list of units in shared memory (docs/GPU.md "Units of two tiles").
 *  - One persistent CTA per SM: a producer warp and an MMA warpgroup (160 threads), or with HANDOFF (the
 *    plan's choice where CTAs hold several short units: fp8moe_cuda_plan_stream_handoff) also an epilogue
 *    warpgroup (288 threads): the MMA warpgroup hands each finished segment's accumulators over through
 *    shared memory and goes on with the next unit's stages while the epilogue warpgroup runs the fixup and
 *    the epilogue. The producer's lane 0
 *    loads per stage two 128-row × 128-K boxes of weights by TMA (the 3-D map [E, N rows, K bytes] with the
 *    128-byte swizzle that the sm90 tile GEMMs use) into a ring of kStages stages (6 × 32 KB of weights
 *    in flight per SM) guarded by full/empty mbarriers (the protocol of wgmma_sm90.cuh); the tile's 16 token
 *    rows (128 bytes each) come with them: GEMM2's contiguous a2q rows as one more TMA box, GEMM1's x rows
 *    gathered through sorted_slots by 16-byte cp.async of the whole producer warp into the same swizzled
 *    layout (each lane's share of the stage's full barrier completes when its copies land: publish_gathered,
 *    as gemm1_wgmma_sm90.cu).
 *  - Swap-AB: the weights are wgmma's A (M = 64 weight rows per instruction, 4 per stage: 256 rows), the
 *    tokens its B, N = 8 (tiles with ≤ 8 real rows) or 16: `wgmma m64nNk32 e4m3`, both from shared memory.
 *    Every 128-K block's sum starts from zero and is promoted into fp32 (FP8_BLOCK128: acc += (part·s_act)·s_w,
 *    the CPU backend's association; other formats acc += part and the scales in the epilogue).
 *  - Work: units of 256 weight rows of one tile — GEMM1 128 gate + 128 up rows of one 128-column group (the
 *    fused 1×128 requantization's amax stays in the CTA), GEMM2 256 output columns (the last unit of an H
 *    not a multiple of 256 has no second box: not loaded, that half computed from stale bytes, never
 *    stored) — tile
 *    fastest, each unit kblocks = K/128 iterations; the iterations are split evenly over the grid
 *    (stream-K, stream_split.h): no wave quantization; with fewer units than CTAs, over a multiple of the
 *    units instead, so that each CTA holds one piece of one unit (no fixup in the middle of a range); where
 *    an expert's rows fill several tiles (T > 16) and that pays, column unit fastest over a multiple of the
 *    tiles, so that the tiles of one expert stream the same weight blocks side by side (the expert-aligned
 *    split: fp8moe_split_ctas_tiles; docs/GPU.md "Experts routed more than a unit"). A unit
 *    cut between CTAs is finished deterministically: each segment stores its fp32 partial tile in the
 *    workspace and bumps the unit's counter; the last arriver sums the segments in K order (CTA order, its
 *    own from registers), runs the epilogue and puts the counter back to 0 (the counters are also zeroed
 *    with the run's scalar words). The epilogue's scales are read before the unit's K loop.
 *  - PDL: GEMM1 reads nothing before griddepcontrol.wait (it prefetches its tensor map). GEMM2's producer
 *    fills its first kStages stages with weights before the wait: the tile list it reads then (num_tiles,
 *    tile_expert) was final before
 *    GEMM1 could let this grid start (the permutation completed before any GEMM1 CTA passed its own wait,
 *    and this grid starts only after every GEMM1 CTA signalled after that wait), and it reads them with
 *    relaxed gpu-scope loads (L2, never a stale L1 line); the a2q boxes of those stages follow the wait.
 * Everything that needs sm_90a is compiled only under FP8MOE_SM90A; the compute_90 PTX build gets a
 * trapping body, and the kernel plan (src/cuda/cuda_plan.c) selects these kernels only on cc 9.0. */
#include "gemm_stream.h"
#include "ordered_append.cuh"
#include "pdl.cuh"
#include "stream_experts.cuh"
#include "stream_split.h"
#include "wgmma_sm90.cuh"

namespace fp8moe {
namespace stream {
namespace {

constexpr int kRows = FP8MOE_GEMM_TILE_M_SMALL;  /* token rows per tile: wgmma's N is 8 or 16 (32 for a pair) */
constexpr int kBK = FP8MOE_GEMM_TILE_K;          /* K per stage: one scale block, one 128-byte swizzle row */
constexpr int kBox = 128;                        /* weight rows per TMA box */
constexpr int kUnitRows = FP8MOE_STREAM_UNIT_ROWS; /* weight rows per unit: two boxes */
static_assert(kUnitRows == 2 * kBox, "a stage loads a unit's two boxes");
constexpr int kConsumers = 128;                  /* the MMA warpgroup: warps 0–3 */
constexpr int kEpilogue = 128;                   /* the epilogue warpgroup (HANDOFF kernels): warps 4–7 */
/* The producer warp's first thread and the block size: MMA warpgroup (+ epilogue warpgroup) + producer warp. */
template <bool HANDOFF>
__host__ __device__ constexpr int producer_thread() { return HANDOFF ? kConsumers + kEpilogue : kConsumers; }
template <bool HANDOFF>
__host__ __device__ constexpr int block_threads() { return producer_thread<HANDOFF>() + 32; }
constexpr int kBoxBytes = kBox * kBK;
constexpr int kEpiPitch = kUnitRows + 4;
static_assert(kRows == 16 && kBK == 128, "16-row tiles, 128-wide scale blocks");
static_assert(FP8MOE_STREAM_PARTIAL_FLOATS == 4 * kRows * kConsumers,
              "4 M blocks × N/2 accumulators × 128 threads at N = 32");
/* PAIRS kernels (the 160-thread kernels where an expert can hold more than one tile; the plan's
 * fp8moe_cuda_plan_stream_pairs): a unit takes two consecutive tiles of one expert, 32 token rows (wgmma N = 32),
 * so an expert with 17–32 rows streams its weights once instead of once per tile (docs/GPU.md "Units of two
 * tiles"). Their list of units (first tile, one or two) is built per CTA in shared memory (build_groups). */
constexpr int kListTiles = FP8MOE_STREAM_LIST_TILES; /* stream_experts.cuh */
constexpr int kListExperts = 512; /* first tile of each local expert */
static_assert(kListTiles <= FP8MOE_SM90_PAIR_TWO, "tile numbers fit below the list entry's flag bit");

/* The shared memory of one kernel family: ROWS token rows per unit (16, or 32 with PAIRS), STAGES ring depth
 * (6 × 34 KB, or 5 × 36 KB: the larger token tile and epi buffer leave no room for a sixth). */
template <bool PAIRS>
struct SmemT {
  static constexpr int kTok = PAIRS ? 2 * kRows : kRows; /* token rows of a unit's B tile */
  static constexpr int kStages = PAIRS ? FP8MOE_STREAM_STAGES - 1 : FP8MOE_STREAM_STAGES;
  static constexpr int kXBytes = kTok * kBK;
  /* floats of one fixup partial slot, 4 M blocks × kTok/2 accumulators × 128 threads (the workspace's slots hold
   * the PAIRS size; the 16-row kernels keep their own stride) */
  static constexpr int kPartial = 4 * (kTok / 2) * kConsumers;
  struct Stage {
    uint8_t w[2][kBoxBytes]; /* two 128-row boxes: GEMM1 gate rows then up rows; GEMM2 columns n0.., n0+128.. */
    uint8_t x[kXBytes];      /* the unit's token rows, K-major, 128-byte swizzle (8-row core groups 1 KB apart) */
  };
  static_assert(sizeof(Stage) % 1024 == 0, "the 128-byte swizzle repeats every 1024 bytes: tiles stay aligned");
  Stage st[kStages];
  /* A finished unit: first the MMA warpgroup's accumulators handed to the epilogue warpgroup ([element]
   * [thread], hand_over), then the epilogue's token-major rows for coalesced stores. */
  float epi[kTok][kEpiPitch];
  uint64_t full[kStages];
  uint64_t empty[kStages];
  uint64_t epi_full;  /* the accumulators are in epi (kConsumers arrivals) */
  uint64_t epi_empty; /* the epilogue is done reading epi (kEpilogue arrivals) */
  int32_t last;       /* the fixup's verdict, broadcast to the epilogue warpgroup */
  int32_t warp_count[8]; /* PAIRS: build_groups' compaction, one per warp; 8 so that no vector load of its 5
                            reads past it (racecheck saw one overlap group_first) */
  uint16_t group_first[PAIRS ? kListTiles : 1]; /* PAIRS: first tile | FP8MOE_SM90_PAIR_TWO (sm90_items.h) */
  int16_t first_tile[PAIRS ? kListExperts : 1]; /* PAIRS: each expert's first tile */
};
static_assert(kRows * kEpiPitch >= SmemT<false>::kPartial, "epi holds a whole 16-row unit's accumulators");
static_assert(SmemT<true>::kPartial == FP8MOE_STREAM_PARTIAL_FLOATS,
              "the workspace's partial slots hold a PAIRS unit's");
template <bool PAIRS>
__host__ __device__ constexpr size_t smem_bytes() { return sizeof(SmemT<PAIRS>) + 1024; /* + alignment slack */ }
static_assert(smem_bytes<false>() <= 232448 && smem_bytes<true>() <= 232448, "within the 227 KB a Hopper CTA may have");

#if FP8MOE_SM90A
/* What every thread of a CTA derives identically: the work, this CTA's iteration range. tiles counts the units
 * of one column group: tiles, or with PAIRS the entries of the unit list. Unit u is entry u % tiles of column
 * unit u / tiles (entry fastest), or where tile_major virtual entry u / col_units of column unit u % col_units
 * (the entry itself, or below rounds·round_ctas with rounds > 1 fp8moe_split_round_entry of it). The CTA's
 * iterations: [begin, end) of the split (work, ctas), then with the rounds balanced the tail's [begin2, end2),
 * split as tail_work iterations on tail_ctas CTAs from tail_base (fp8moe_split_balanced); begin2 = end2 = end
 * otherwise. */
struct Range {
  int32_t tiles, col_units, kblocks;
  bool tile_major;
  int32_t rounds, round_ctas; /* the expert-aligned split in whole rounds (rounds ≥ 2 on round_ctas CTAs), or the
                                 balanced rounds' full ones (≥ 1 on the grid); else 1 and 0 */
  int64_t work, ctas, begin, end;
  int64_t tail_base, tail_work, tail_ctas, begin2, end2;
};

/* experts: how many experts the entries belong to (experts_of_entries; = tiles where not counted); with fewer
 * experts than entries and at least as many units as CTAs, the expert-aligned split where it pays: entries spread
 * over the grid (fp8moe_split_ctas_tiles), or with more entries than CTAs in rounds (fp8moe_split_rounds) where
 * the launcher allows them (rounds_mode: 1 whole rounds, 2 balanced, 3 balanced also where fp8moe_split_balanced_pays,
 * 0 none; fp8moe_cuda_plan_stream_rounds). */
template <bool ROUNDS>
__device__ __forceinline__ Range range_of(int32_t tiles, int32_t col_units, int32_t kblocks, int32_t experts,
                                          int32_t rounds_mode) {
  Range r;
  r.tiles = tiles;
  r.col_units = col_units;
  r.kblocks = kblocks;
  r.rounds = 1;
  r.round_ctas = 0;
  const int64_t grid = gridDim.x, per_tile = static_cast<int64_t>(col_units) * kblocks;
  const int64_t units = static_cast<int64_t>(tiles > 0 ? tiles : 0) * col_units;
  r.work = units * kblocks;
  const int64_t aligned = units >= grid ? fp8moe_split_ctas_tiles(grid, tiles, per_tile, experts) : 0;
  const bool shared = ROUNDS && rounds_mode != 0 && units >= grid;
  const int64_t rounds = shared ? fp8moe_split_rounds(grid, tiles, experts) : 0;
  const bool balanced = shared && rounds_mode >= 2 &&
                        (rounds > 0 || (rounds_mode == 3 && fp8moe_split_balanced_pays(grid, tiles, experts) != 0));
  r.tile_major = aligned > 0 || rounds > 0 || balanced;
  r.begin = r.end = r.begin2 = r.end2 = 0;
  r.tail_base = r.tail_work = r.tail_ctas = 0;
  if (ROUNDS && balanced) {
    const fp8moe_split_pieces p = fp8moe_split_balanced(blockIdx.x, grid, tiles, col_units, kblocks);
    r.rounds = static_cast<int32_t>(tiles / grid);
    r.round_ctas = static_cast<int32_t>(grid);
    r.ctas = grid;
    r.work = p.tail_base;
    r.begin = p.begin;
    r.end = p.end;
    r.tail_base = p.tail_base;
    r.tail_work = p.tail_work;
    r.tail_ctas = p.tail_ctas;
    r.begin2 = p.begin2;
    r.end2 = p.end2;
    return r;
  }
  if (ROUNDS && rounds > 0) {
    const int64_t c = fp8moe_split_round_ctas(tiles, rounds);
    r.rounds = static_cast<int32_t>(rounds);
    r.round_ctas = static_cast<int32_t>(c);
    r.ctas = c;
    r.work = c * rounds * per_tile; /* virtual entries: C·R slots, the empty ones never in a range */
    if (static_cast<int64_t>(blockIdx.x) < c) {
      r.begin = static_cast<int64_t>(blockIdx.x) * rounds * per_tile;
      r.end = r.begin + fp8moe_split_round_count(blockIdx.x, tiles, rounds, c) * per_tile;
    }
    r.begin2 = r.end2 = r.end;
    return r;
  }
  /* unit-aligned below one unit per CTA (entry fastest: an expert's entries already run side by side there) */
  r.ctas = aligned > 0 ? aligned : fp8moe_split_ctas_units(grid, units, kblocks);
  if (static_cast<int64_t>(blockIdx.x) < r.ctas) {
    r.begin = fp8moe_split_begin(blockIdx.x, r.work, r.ctas);
    r.end = fp8moe_split_begin(static_cast<int64_t>(blockIdx.x) + 1, r.work, r.ctas);
  }
  r.begin2 = r.end2 = r.end;
  return r;
}

/* The CTA's iterations in order: from range_first, each next one through range_next (the tail after end), while
 * below end2 (end2 ≥ end: the tail lies past the full rounds, or is empty at end). */
__device__ __forceinline__ int64_t range_next(const Range& rg, int64_t i) { return i == rg.end ? rg.begin2 : i; }
__device__ __forceinline__ int64_t range_first(const Range& rg) { return range_next(rg, rg.begin); }
__device__ __forceinline__ int64_t range_size(const Range& rg) { return (rg.end - rg.begin) + (rg.end2 - rg.begin2); }
/* The CTA's n-th iteration. */
__device__ __forceinline__ int64_t range_at(const Range& rg, int64_t n) {
  return n < rg.end - rg.begin ? rg.begin + n : rg.begin2 + (n - (rg.end - rg.begin));
}
/* The end of the piece that iteration i (of this CTA's range) lies in. */
__device__ __forceinline__ int64_t piece_end(const Range& rg, int64_t i) { return i < rg.end ? rg.end : rg.end2; }
/* The CTA's segment of unit u, whose iterations start at u·kblocks ≥ the CTA's first in that piece: in the tail by
 * the tail's own split. */
__device__ __forceinline__ fp8moe_split_segment segment_at(const Range& rg, int64_t u) {
  if (u * rg.kblocks < rg.end)
    return fp8moe_split_segment_of(u, rg.kblocks, rg.begin, rg.end, rg.work, rg.ctas);
  const int64_t base = rg.tail_base / rg.kblocks;
  return fp8moe_split_segment_of(u - base, rg.kblocks, rg.begin2 - rg.tail_base, rg.end2 - rg.tail_base,
                                 rg.tail_work, rg.tail_ctas);
}

/* Unit u's entry of the unit list (tile, or PAIRS list entry) and its column unit, by one 32-bit division: the
 * stream rows run below 16 rows per expert, so entries < 3·E ≤ 6,144 and column units ≤ I/128 ≤ 256 (the contract's
 * limits, src/contract.c): u < 2^21. (A 64-bit division is a subroutine call: two of them per unit cost the decode
 * GEMMs ~1 %.) */
struct UnitAt {
  int32_t entry, col;
};
template <bool ROUNDS>
__device__ __forceinline__ UnitAt unit_at(const Range& rg, int64_t u) {
  const uint32_t v = static_cast<uint32_t>(u);
  if (rg.tile_major) {
    const uint32_t q = v / static_cast<uint32_t>(rg.col_units), col = v - q * static_cast<uint32_t>(rg.col_units);
    if (!ROUNDS || rg.rounds <= 1 || q >= static_cast<uint32_t>(rg.rounds) * static_cast<uint32_t>(rg.round_ctas))
      return {static_cast<int32_t>(q), static_cast<int32_t>(col)};
    const uint32_t cta = q / static_cast<uint32_t>(rg.rounds), round = q - cta * static_cast<uint32_t>(rg.rounds);
    return {static_cast<int32_t>(round * static_cast<uint32_t>(rg.round_ctas) + cta), static_cast<int32_t>(col)};
  }
  const uint32_t q = v / static_cast<uint32_t>(rg.tiles);
  return {static_cast<int32_t>(v - q * static_cast<uint32_t>(rg.tiles)), static_cast<int32_t>(q)};
}

using sm90::desc_sw128;
using sm90::fence_acc;
using sm90::wgmma_e4m3;
using sm90::fence_proxy_async;
using sm90::mbar_arrive;
using sm90::mbar_arrive_expect_tx;
using sm90::mbar_wait;
using sm90::wgmma_commit;
using sm90::wgmma_fence;

/* A unit's token rows: its first tile and the rows (16, or 32 for a pair of tiles of one expert). */
struct Group {
  int32_t tile0;
  int rows;
};
template <bool PAIRS, class SM>
__device__ __forceinline__ Group group_at(const SM& sm, int32_t g) {
  if constexpr (PAIRS) {
    const uint32_t v = sm.group_first[g];
    return {static_cast<int32_t>(v & (FP8MOE_SM90_PAIR_TWO - 1u)),
            (v & FP8MOE_SM90_PAIR_TWO) != 0u ? 2 * kRows : kRows};
  } else {
    (void)sm;
    return {g, kRows};
  }
}

/* By every thread of the CTA (it synchronizes the CTA), where the launcher asks (stream_align: T > 16, where an
 * expert can hold more rows than a tile): the experts among `tiles` expert-sorted tiles (count_experts,
 * stream_experts.cuh), counted only where their `entries` list entries (tiles, or PAIRS pairs of tiles) fit
 * kCountRounds rounds of the grid (the count's loop, on the kernel's start, stays within a few trips: at most 14 at
 * 160 threads, 4 barriers); otherwise `entries` (no expert shares). tile_expert is read at gpu scope, as
 * build_groups reads it (GEMM2 asks before griddepcontrol.wait). The PAIRS kernels pass build_groups' count
 * (`counted`), the same number. */
constexpr int32_t kCountRounds = 8;
__device__ int32_t experts_of_entries(const int32_t* tile_expert, int32_t tiles, int32_t entries) {
  const bool counted = entries <= kCountRounds * static_cast<int32_t>(gridDim.x);
  const int32_t experts = count_experts([&](int32_t t) { return ld_relaxed(tile_expert + t); }, counted ? tiles : 0,
                                        static_cast<int32_t>(threadIdx.x), static_cast<int32_t>(blockDim.x));
  return counted ? experts : entries;
}
__device__ __forceinline__ int32_t experts_of_entries(int32_t counted, int32_t entries) {
  return entries <= kCountRounds * static_cast<int32_t>(gridDim.x) ? counted : entries;
}

/* The unit list's length (tiles, or PAIRS entries of build_groups' list) and, where the launcher asks (stream_align),
 * the experts among them for range_of (else the length: no expert shares). By every thread of the CTA. */
template <bool PAIRS, class SM>
__device__ __forceinline__ GroupList unit_list(SM& sm, const int32_t* tile_expert, int32_t tiles, int32_t align) {
  if constexpr (PAIRS) {
    /* tile_expert at gpu scope (L2): GEMM2 builds the list before griddepcontrol.wait (file comment) */
    const GroupList g = build_groups<block_threads<false>()>(
        sm, [&](int32_t t) { return ld_relaxed(tile_expert + t); }, tiles);
    return {g.entries, align != 0 ? experts_of_entries(g.experts, g.entries) : g.entries};
  } else {
    (void)sm;
    return {tiles, align != 0 ? experts_of_entries(tile_expert, tiles, tiles) : tiles};
  }
}

/* An L2 prefetch of element (i0, i1) of a scale tensor: a hint only, so a scale that a unit's epilogue reads
 * after its last stage is not a DRAM round trip then (weights and their scales are cold at decode). */
__device__ __forceinline__ void prefetch_l2(const fp8moe_kref& r, int64_t i0, int64_t i1) {
  const int64_t size = r.dt == FP8MOE_DT_BF16 || r.dt == FP8MOE_DT_F16 ? 2 : r.dt == FP8MOE_DT_I64 ? 8 : 4;
  const char* p = static_cast<const char*>(r.data) + (i0 * r.s[0] + i1 * r.s[1]) * size;
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

/* The TMA descriptor (a __grid_constant__ parameter) fetched into the descriptor cache before the first copy
 * needs it; it depends on no earlier kernel, so it is issued before griddepcontrol.wait. */
__device__ __forceinline__ void prefetch_map(const CUtensorMap* m) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(m)) : "memory");
}

/* The fixup's release (before the counter's atomic) and acquire (after it) at gpu scope. __threadfence is
 * fence.sc.gpu (MEMBAR.SC.GPU), an SC fence the release/acquire protocol does not need; fence.acq_rel.gpu
 * (MEMBAR.ALL.GPU) orders the same accesses for it (PTX memory model: release and acquire patterns). */
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }

/* Named barrier of the warpgroup that runs the fixup and the epilogue (id 1; 0 is __syncthreads). */
__device__ __forceinline__ void epilogue_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kEpilogue) : "memory"); }
/* A thread's index in its warpgroup: the epilogue warpgroup's thread t plays the MMA thread t's part. */
__device__ __forceinline__ int wg_thread() { return static_cast<int>(threadIdx.x % 128); }

/* Accumulator element i of a thread: weight row inside its 64-row M block, token (column), and the index
 * of the token among the thread's N/4 tokens. */
__device__ __forceinline__ int acc_row(int i) { return 16 * ((threadIdx.x % 128) / 32) + (threadIdx.x % 32) / 4 + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int acc_tok(int i) { return 8 * (i >> 2) + 2 * (threadIdx.x % 4) + (i & 1); }
__device__ __forceinline__ int acc_tok_index(int i) { return 2 * (i >> 2) + (i & 1); }
/* The thread's b-th token (b < N/4). */
__device__ __forceinline__ int tok_of_index(int b) { return 8 * (b >> 1) + 2 * (threadIdx.x % 4) + (b & 1); }

/* The tile's rows as one warp sees them: lane l < 16 holds sorted_slots[row0 + l]; real rows come first (the
 * permutation pads each expert's rows at the end of its last tile). */
struct TileRows {
  int32_t slot; /* this lane's row's slot (lanes ≥ 16: −1) */
  int real;     /* real rows in the tile */
};

/* The walk over the CTA's range, the same for both GEMMs and both warpgroups: unit u = tile, or with PAIRS
 * list entry, (fastest) × UNIT_ROWS weight rows, its segment of blocks, its token rows (lane l: row l) and
 * expert; unit(seg, it, j, e, row0, n0, tr)
 * handles the CTA's j-th segment, which the MMA warpgroup consumes from ring position it on. AHEAD (the
 * HANDOFF kernels): the next unit's expert and row slots are loaded before this unit's work, so that their
 * latency hides under it instead of standing between two units; the 160-thread kernels measured 0.2–1.1 %
 * faster without it (docs/GPU.md "The epilogue warpgroup"). */
template <int UNIT_ROWS, bool AHEAD, bool PAIRS, class SM, class Unit>
__device__ __forceinline__ void walk_units(const SM& sm, const Range& rg, const int32_t* sorted_slots,
                                           const int32_t* tile_expert, Unit unit) {
  const int lane = threadIdx.x % 32;
  int32_t e_next = 0, slot_next = -1;
  auto fetch = [&](int64_t i) { /* the unit of iteration i */
    const Group gp = group_at<PAIRS>(sm, unit_at<!AHEAD>(rg, i / rg.kblocks).entry);
    e_next = tile_expert[gp.tile0];
    slot_next = lane < gp.rows ? sorted_slots[static_cast<int64_t>(gp.tile0) * kRows + lane] : -1;
  };
  if (AHEAD && range_size(rg) > 0) fetch(range_first(rg));
  uint32_t it = 0, j = 0;
  for (int64_t i = range_first(rg); i < rg.end2; ++j) {
    const int64_t u = i / rg.kblocks;
    const UnitAt ua = unit_at<!AHEAD>(rg, u);
    const Group gp = group_at<PAIRS>(sm, ua.entry);
    const int32_t n0 = ua.col * UNIT_ROWS;
    const fp8moe_split_segment seg = segment_at(rg, u);
    const int64_t row0 = static_cast<int64_t>(gp.tile0) * kRows;
    TileRows tr;
    tr.slot = AHEAD ? slot_next : lane < gp.rows ? sorted_slots[row0 + lane] : -1;
    tr.real = __popc(__ballot_sync(0xffffffffu, tr.slot >= 0));
    const int32_t e = AHEAD ? e_next : tile_expert[gp.tile0];
    i = range_next(rg, i + (seg.kb1 - seg.kb0));
    if (AHEAD && i < rg.end2) fetch(i);
    unit(seg, it, j, e, row0, n0, tr);
  }
}

/* HANDOFF: the MMA warpgroup hands the CTA's j-th finished segment to the epilogue warpgroup through sm.epi and
 * goes on with the next unit's stages while the epilogue (fixup, activation and requantization or y stores)
 * runs: with one warpgroup doing both, each unit end left the ring full and no weight bytes in flight for the
 * epilogue's length (docs/GPU.md "The epilogue warpgroup"). [element][thread]: conflict-free. */
template <int N, class SM>
__device__ __forceinline__ void hand_over(SM& sm, const float (&acc)[4][N / 2], uint32_t j) {
  constexpr int R = N / 2;
  mbar_wait(&sm.epi_empty, (j & 1u) ^ 1u); /* the epilogue of segment j − 1 is done reading epi */
  float* h = &sm.epi[0][0];
  const int ct = wg_thread();
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int i = 0; i < R; ++i) h[(m * R + i) * kConsumers + ct] = acc[m][i];
  mbar_arrive(&sm.epi_full);
}
/* The ring (full: full_count arrivals; empty: the MMA warpgroup) and the epi handoff; thread 0, before the
 * __syncthreads that publishes them. */
template <class SM>
__device__ __forceinline__ void init_barriers(SM& sm, uint32_t full_count) {
  for (int s = 0; s < SM::kStages; ++s) {
    sm90::mbar_init(&sm.full[s], full_count);
    sm90::mbar_init(&sm.empty[s], kConsumers);
  }
  sm90::mbar_init(&sm.epi_full, kConsumers);
  sm90::mbar_init(&sm.epi_empty, kEpilogue);
  sm90::mbar_init_fence();
}
template <int N, class SM>
__device__ __forceinline__ void take_over(SM& sm, float (&acc)[4][N / 2], uint32_t j) {
  constexpr int R = N / 2;
  mbar_wait(&sm.epi_full, j & 1u);
  const float* h = &sm.epi[0][0];
  const int ct = wg_thread();
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int i = 0; i < R; ++i) acc[m][i] = h[(m * R + i) * kConsumers + ct];
}

/* ------------------------------------------------------------------------------------------ consumers */
/* Blocks [kb0, kb1) of one unit from the ring (position `it` on): acc[m] is M block m (64 weight rows:
 * box m / 2, half m % 2). The block scales are read before the full barrier's wait, so their latency hides
 * under it: cx(b, kb) of the thread's b-th token, cw(box, kb) of a weight box. */
template <int N, bool BLOCK, bool GATHERED, class SM, class XScale, class WScale>
__device__ __forceinline__ void consume(SM& sm, int kb0, int kb1, uint32_t& it, float (&acc)[4][N / 2], XScale cx,
                                        WScale cw) {
  constexpr int R = N / 2, B = N / 4;
  float p[4][R];
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int i = 0; i < R; ++i) acc[m][i] = p[m][i] = 0.0f;
  /* The ring position and the block range are the same in every consumer thread; broadcast from lane 0 so that
   * the compiler knows it too and keeps the stage's descriptors and barrier addresses in uniform registers (no
   * R2UR move and its latency before every wgmma; docs/GPU.md "The pair kernels' consumer chain"). */
  kb0 = __shfl_sync(0xffffffffu, kb0, 0);
  kb1 = __shfl_sync(0xffffffffu, kb1, 0);
  it = __shfl_sync(0xffffffffu, it, 0);
#pragma unroll 1
  for (int kb = kb0; kb < kb1; ++kb, ++it) {
    float sx[B], sw[2];
    if (BLOCK) {
#pragma unroll
      for (int b = 0; b < B; ++b) sx[b] = cx(b, kb);
      sw[0] = cw(0, kb);
      sw[1] = cw(1, kb);
    }
    const int s = static_cast<int>(it % SM::kStages);
    mbar_wait(&sm.full[s], (it / SM::kStages) & 1u);
    if (GATHERED) fence_proxy_async(); /* GEMM1's x rows came by cp.async: sm90::publish_gathered */
    const uint64_t db = desc_sw128(sm.st[s].x);
    wgmma_fence();
#pragma unroll
    for (int m = 0; m < 4; ++m) fence_acc(p[m]);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint64_t da = desc_sw128(sm.st[s].w[m >> 1] + (m & 1) * (64 * kBK));
#pragma unroll
      for (int kk = 0; kk < kBK / 32; ++kk) wgmma_e4m3(p[m], da + 2 * kk, db + 2 * kk, kk > 0);
    }
    wgmma_commit();
    sm90::wgmma_wait<0>();
#pragma unroll
    for (int m = 0; m < 4; ++m) fence_acc(p[m]);
    mbar_arrive(&sm.empty[s]); /* this thread's wgmmas on the stage are complete */
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int i = 0; i < R; ++i) {
        if (BLOCK) acc[m][i] += p[m][i] * sx[acc_tok_index(i)] * sw[m >> 1];
        else acc[m][i] += p[m][i];
      }
  }
}

/* After this CTA's segment of a unit: true when the unit is finished here (not split, or the last segment to
 * arrive), with acc then holding the whole sum (segments in K order). Partial tiles are laid out [element]
 * [thread], so each consumer thread stores and loads its own column of the tile (coalesced). */
template <int N, class SM>
__device__ __forceinline__ bool fixup(SM& sm, const fp8moe_split_segment& seg, float* partials, uint32_t* counters,
                                      float (&acc)[4][N / 2]) {
  constexpr int R = N / 2;
  if (seg.first == seg.last) return true;
  const int ct = wg_thread();
  const int me = static_cast<int>(blockIdx.x);
  constexpr int kPartial = SM::kPartial;
  float* mine = partials + (static_cast<size_t>(me) * 2 + seg.slot) * kPartial;
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int i = 0; i < R; ++i) __stcg(mine + (m * R + i) * kConsumers + ct, acc[m][i]);
  fence_acq_rel_gpu(); /* the partial is visible at gpu scope before the counter says it is there */
  epilogue_sync();
  if (ct == 0) {
    const uint32_t segments = static_cast<uint32_t>(seg.last - seg.first + 1);
    sm.last = atomicAdd(counters + seg.first, 1u) == segments - 1u;
  }
  epilogue_sync();
  const bool last = sm.last != 0;
  if (!last) return false; /* sm.last is written again only after the next unit's first epilogue_sync */
  fence_acq_rel_gpu(); /* acquire: every other segment's partial is visible */
  /* Two segments' loads per trip (one L2 round trip for both; one for a two-tile unit, whose 64 accumulators
   * per thread leave no registers for two), added in CTA order: the K order is fixed. */
  constexpr int kPerTrip = R > 8 ? 1 : 2;
  auto seg_value = [&](int c, int m, int i) {
    const float* src = partials + (static_cast<size_t>(c) * 2 + fp8moe_split_slot_of(c, seg.first)) * kPartial;
    return c == me ? acc[m][i] : __ldcg(src + (m * R + i) * kConsumers + ct);
  };
  float tot[4][R] = {};
#pragma unroll 1
  for (int c = seg.first; c <= seg.last; c += kPerTrip) {
    const bool two = kPerTrip == 2 && c < seg.last;
    float v0[4][R], v1[4][R];
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int i = 0; i < R; ++i) {
        v0[m][i] = seg_value(c, m, i);
        v1[m][i] = two ? seg_value(c + 1, m, i) : 0.0f;
      }
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int i = 0; i < R; ++i) {
        tot[m][i] = c == seg.first ? v0[m][i] : tot[m][i] + v0[m][i];
        if (two) tot[m][i] = tot[m][i] + v1[m][i];
      }
  }
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int i = 0; i < R; ++i) acc[m][i] = tot[m][i];
  if (ct == 0) counters[seg.first] = 0u; /* every segment has arrived: ready for the next kernel or run */
  return true;
}

/* ------------------------------------------------------------------------------------------- producer */
/* GEMM1's producer warp: per stage lane 0 loads the unit's gate box and up box of W13[e] (32 KB, expect_tx),
 * and the lanes gather the unit's token rows in 16-byte chunks (16-row units: lane l 4 chunks of row l % 16,
 * 4·(l / 16)..+3; PAIRS: lane l the 8 of row l, none past a one-tile unit's 16 rows) into the swizzled B
 * layout (chunk c of row r at 16·(c ^ (r % 8))), padding rows zero-filled. */
template <bool PAIRS, bool HANDOFF, class SM>
__device__ __forceinline__ void produce1(const fp8moe_gemm1_args& a, const CUtensorMap& map_w, SM& sm,
                                         const Range& rg) {
  constexpr int kChunks = PAIRS ? 8 : 4;
  const int lane = threadIdx.x % 32, r = PAIRS ? lane : lane % kRows, c0 = PAIRS ? 0 : 4 * (lane / kRows);
  uint32_t it = 0;
  for (int64_t i = range_first(rg); i < rg.end2; i = range_next(rg, i)) {
    const int64_t u = i / rg.kblocks, end = piece_end(rg, i);
    const UnitAt ua = unit_at<!HANDOFF>(rg, u);
    const Group gp = group_at<PAIRS>(sm, ua.entry);
    const int32_t n0 = ua.col * kBox;
    const int32_t e = a.tile_expert[gp.tile0];
    const bool copy = !PAIRS || r < gp.rows;
    const int32_t slot = copy ? a.sorted_slots[static_cast<int64_t>(gp.tile0) * kRows + r] : -1;
    const int bytes = slot >= 0 ? 16 : 0;
    const uint8_t* src = slot >= 0 ? a.x + static_cast<int64_t>(slot / a.K) * a.x_stride : a.x;
    const int32_t gate_row = (a.gate_first ? 0 : a.I) + n0, up_row = (a.gate_first ? a.I : 0) + n0;
    const int kb1 = static_cast<int>((end - u * rg.kblocks) < rg.kblocks ? end - u * rg.kblocks : rg.kblocks);
#pragma unroll 1
    for (int kb = static_cast<int>(i - u * rg.kblocks); kb < kb1; ++kb, ++i, ++it) {
      const int s = static_cast<int>(it % SM::kStages);
      mbar_wait(&sm.empty[s], ((it / SM::kStages) & 1u) ^ 1u);
      if (lane == 0) {
        mbar_arrive_expect_tx(&sm.full[s], 2 * kBoxBytes);
        sm90::tma_load_3d(sm.st[s].w[0], &map_w, &sm.full[s], kb * kBK, gate_row, e);
        sm90::tma_load_3d(sm.st[s].w[1], &map_w, &sm.full[s], kb * kBK, up_row, e);
      }
      if (copy)
#pragma unroll
        for (int j = 0; j < kChunks; ++j) {
          const int c = c0 + j;
          cp_async_16(sm.st[s].x + r * kBK + ((c ^ (r & 7)) << 4), src + static_cast<int64_t>(kb) * kBK + 16 * c,
                      bytes);
        }
      sm90::publish_gathered(&sm.full[s]);
    }
  }
  cp_async_wait_all(); /* as gemm1_wgmma_sm90.cu */
}

/* GEMM2's producer (lane 0): per stage the unit's two boxes of W2[e] (output columns n0.., n0+128..; one
 * where n0 + 128 = H) and the unit's a2q rows (one kTok × 128 box of the 2-D map [rows, I] from its first tile's
 * first row; a one-tile unit of a PAIRS kernel also loads the next 16 rows, which no wgmma of it reads, rows
 * past the map zero-filled): 34 or 36 KB, expect_tx. The first min(kStages,
 * iterations) stages get their weight boxes before griddepcontrol.wait (the file comment says why that is
 * safe) and their a2q boxes right after it; their full barriers' expect_tx already counts both. */
template <bool PAIRS, bool HANDOFF, class SM>
__device__ __forceinline__ void produce2(const fp8moe_gemm2_args& a, const CUtensorMap& map_w,
                                         const CUtensorMap& map_x, SM& sm, const Range& rg) {
  constexpr int kStages = SM::kStages;
  const int64_t early = range_size(rg) < kStages ? range_size(rg) : kStages;
  auto x_box = [&](uint32_t pos, int64_t i) {
    const int64_t u = i / rg.kblocks;
    const int kb = static_cast<int>(i - u * rg.kblocks);
    const Group gp = group_at<PAIRS>(sm, unit_at<!HANDOFF>(rg, u).entry);
    const int s = static_cast<int>(pos % kStages);
    sm90::tma_load_2d(sm.st[s].x, &map_x, &sm.full[s], kb * kBK, gp.tile0 * kRows);
  };
  uint32_t it = 0;
  for (int64_t i = range_first(rg); i < rg.end2; i = range_next(rg, i + 1), ++it) {
    if (it == static_cast<uint32_t>(early)) { /* the weights of the first stages are on their way */
      wait_prior();
      allow_next();
      for (uint32_t j = 0; j < it; ++j) x_box(j, range_at(rg, j));
    }
    const int64_t u = i / rg.kblocks;
    const int kb = static_cast<int>(i - u * rg.kblocks);
    const UnitAt ua = unit_at<!HANDOFF>(rg, u);
    const Group gp = group_at<PAIRS>(sm, ua.entry);
    const int32_t n0 = ua.col * kUnitRows;
    const int32_t e = ld_relaxed(a.tile_expert + gp.tile0);
    const int s = static_cast<int>(it % kStages);
    mbar_wait(&sm.empty[s], ((it / kStages) & 1u) ^ 1u);
    /* The last unit of an H that is an odd multiple of 128 has no second box: it is not loaded, so nothing
     * rests on how TMA counts a box wholly out of bounds; the consumer's wgmmas on that half read whatever
     * the stage holds (an M row never mixes into another), and the epilogue stores no column ≥ H. */
    const bool second = n0 + kBox < a.H;
    mbar_arrive_expect_tx(&sm.full[s], (second ? 2 : 1) * kBoxBytes + SM::kXBytes);
    sm90::tma_load_3d(sm.st[s].w[0], &map_w, &sm.full[s], kb * kBK, n0, e);
    if (second) sm90::tma_load_3d(sm.st[s].w[1], &map_w, &sm.full[s], kb * kBK, n0 + kBox, e);
    if (it >= static_cast<uint32_t>(early)) x_box(it, i);
  }
  if (it <= static_cast<uint32_t>(early)) { /* all of this CTA's stages were early ones (or there were none) */
    wait_prior();
    allow_next();
    for (uint32_t j = 0; j < it; ++j) x_box(j, range_at(rg, j));
  }
}

/* ----------------------------------------------------------------------------------------------- GEMM1 */
template <int B>
struct Factors1 {
  float sx[B]; /* TENSOR: x scale × the expert's weight scale; ROW: the token's x scale; BLOCK: unused */
  float tw[B]; /* the input-side token weight, else 1 */
};

/* GEMM1 epilogue's per-token factors of the thread's B tokens, read before the unit's K loop (unit1) so their
 * latency hides under it instead of following the last stage; ROW's per-row weight scales are prefetched
 * into L2 for the same reason. */
template <int SCALE, int N>
__device__ __forceinline__ Factors1<N / 4> factors1(const fp8moe_gemm1_args& a, int32_t e, int32_t n0,
                                                    const TileRows& tr) {
  constexpr int B = N / 4;
  Factors1<B> f;
#pragma unroll
  for (int b = 0; b < B; ++b) {
    const int32_t slot = __shfl_sync(0xffffffffu, tr.slot, tok_of_index(b));
    const int32_t t = slot >= 0 ? slot / a.K : -1;
    f.sx[b] = 0.0f;
    if (SCALE == FP8MOE_SCALE_TENSOR) f.sx[b] = kref_at(a.x_scale, 0) * kref_at(a.w_scale, e);
    if (SCALE == FP8MOE_SCALE_ROW) f.sx[b] = t >= 0 ? kref_at(a.x_scale, t) : 0.0f;
    f.tw[b] = (a.token_weight && slot >= 0) ? a.token_weight[slot] : 1.0f;
  }
  const int ct = wg_thread();
  if (SCALE == FP8MOE_SCALE_ROW && ct < 8) { /* 4 lines of 32 fp32 row scales per 128-row box */
    const int k = ct / 4;
    prefetch_l2(a.w_scale, e, ((a.gate_first != 0) == (k == 0) ? 0 : a.I) + n0 + 32 * (ct % 4));
  }
  return f;
}

/* Unit (tile, 128-column group) finished: dequantize (TENSOR/ROW), weight by token, activate (gate and up of a
 * column are the same element of M blocks m and m + 2), then through shared memory 8 threads per token
 * requantize the token's 128 columns (the group's amax is CTA-local) as gemm_decode.cu does. */
template <int SCALE, int N, class SM>
__device__ __forceinline__ void epilogue1(const fp8moe_gemm1_args& a, SM& sm, float (&acc)[4][N / 2], int32_t e,
                                          int64_t row0, int32_t n0, const Factors1<N / 4>& f, bool release) {
  constexpr int R = N / 2;
  const int ct = wg_thread(), lane = ct % 32;
  const int32_t gate_row = (a.gate_first ? 0 : a.I) + n0, up_row = (a.gate_first ? a.I : 0) + n0;
  const float* sx = f.sx;
  const float* tw = f.tw;
  epilogue_sync(); /* the accumulators are out of epi, the previous unit's requantization is done with it */
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int row = 64 * m + acc_row(i), b = acc_tok_index(i);
      float h[2] = {acc[m][i], acc[m + 2][i]};
      const int32_t nrow[2] = {gate_row, up_row};
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        float v = h[k];
        if (SCALE == FP8MOE_SCALE_TENSOR) v = v * sx[b];
        else if (SCALE == FP8MOE_SCALE_ROW) v = v * sx[b] * kref_at(a.w_scale, e, nrow[k] + row);
        h[k] = a.token_weight ? v * tw[b] : v;
      }
      sm.epi[acc_tok(i)][row] = gated_activation(a.activation, h[0], h[1]);
    }
  epilogue_sync();
  /* Thread → token r (a second pass takes tokens 16..31 of a two-tile unit), column pairs c = 2·(ct % 8) + 16k
   * of the group's 128. */
#pragma unroll
  for (int pass = 0; pass < (N > 16 ? 2 : 1); ++pass) {
    const int r = ct / 8 + 16 * pass, q = ct % 8;
    const bool live = r < N; /* rows past N of a tile with ≤ 8 real rows are padding: never written */
    float v[16];
    float mx = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      v[2 * k] = live ? sm.epi[r][2 * q + 16 * k] : 0.0f;
      v[2 * k + 1] = live ? sm.epi[r][2 * q + 16 * k + 1] : 0.0f;
      mx = fmaxf(mx, fmaxf(finite_abs(v[2 * k]), finite_abs(v[2 * k + 1])));
    }
    if (release) mbar_arrive(&sm.epi_empty); /* this thread's last read of epi (HANDOFF: one pass) */
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const int64_t grow = row0 + r;
    if (a.requant == FP8MOE_REQ_FUSED_GROUP || a.requant == FP8MOE_REQ_FUSED_STATIC) {
      const float s = a.requant == FP8MOE_REQ_FUSED_GROUP ? dynamic_scale(mx) : kref_at(a.a2_static, 0);
      if (live) {
#pragma unroll
        for (int k = 0; k < 8; ++k)
          *reinterpret_cast<uint16_t*>(a.a2q + grow * a.I + n0 + 2 * q + 16 * k) =
              e4m3x2(v[2 * k] / s, v[2 * k + 1] / s);
        if (a.requant == FP8MOE_REQ_FUSED_GROUP && q == 0) a.a2s[grow * (a.I / kBK) + n0 / kBK] = s;
      }
    } else {
      if (live)
#pragma unroll
        for (int k = 0; k < 8; ++k)
          *reinterpret_cast<float2*>(a.inter + grow * a.I + n0 + 2 * q + 16 * k) = make_float2(v[2 * k], v[2 * k + 1]);
      if (a.requant == FP8MOE_REQ_DEFERRED_ROW) {
        if (live && q == 0) atomic_amax(a.amax + grow, mx);
      } else {
        mx = warp_max(mx);
        if (lane == 0) atomic_amax(a.amax, mx);
      }
    }
  }
}

/* The MMA warpgroup's share of a GEMM1 segment: its blocks, then the accumulators to the epilogue warpgroup
 * (handoff) or its own fixup and epilogue (the factors then loaded before the K loop, so their latency hides
 * under it). */
template <int SCALE, int N, bool HANDOFF, class SM>
__device__ __forceinline__ void mma1(const fp8moe_gemm1_args& a, SM& sm, const fp8moe_split_segment& seg,
                                     uint32_t& it, uint32_t j, int32_t e, int64_t row0, int32_t n0,
                                     const TileRows& tr) {
  constexpr int B = N / 4;
  const int32_t nb[2] = {((a.gate_first ? 0 : a.I) + n0) / kBK, ((a.gate_first ? a.I : 0) + n0) / kBK};
  int32_t tok[B];
#pragma unroll
  for (int b = 0; b < B; ++b) {
    const int32_t slot = __shfl_sync(0xffffffffu, tr.slot, tok_of_index(b));
    tok[b] = slot >= 0 ? slot / a.K : -1;
  }
  float acc[4][N / 2];
  auto cx = [&](int b, int kb) { return tok[b] >= 0 ? kref_at(a.x_scale, tok[b], kb) : 0.0f; };
  auto cw = [&](int box, int kb) { return kref_at(a.w_scale, e, nb[box], kb); };
  Factors1<B> f = {};
  if (!HANDOFF) f = factors1<SCALE, N>(a, e, n0, tr);
  consume<N, SCALE == FP8MOE_SCALE_BLOCK, true>(sm, seg.kb0, seg.kb1, it, acc, cx, cw);
  if (HANDOFF) hand_over<N>(sm, acc, j);
  else if (fixup<N>(sm, seg, a.stream_partials, a.stream_counters, acc))
    epilogue1<SCALE, N>(a, sm, acc, e, row0, n0, f, false);
}

/* The epilogue warpgroup's share: the factors (loaded while the segment's stages stream), the accumulators,
 * the fixup, the epilogue; epi is released at the epilogue's last read, or at once when another CTA finishes
 * the unit. */
template <int SCALE, int N, class SM>
__device__ __forceinline__ void finish1(const fp8moe_gemm1_args& a, SM& sm, const fp8moe_split_segment& seg,
                                        uint32_t j, int32_t e, int64_t row0, int32_t n0, const TileRows& tr) {
  const Factors1<N / 4> f = factors1<SCALE, N>(a, e, n0, tr);
  float acc[4][N / 2];
  take_over<N>(sm, acc, j);
  if (fixup<N>(sm, seg, a.stream_partials, a.stream_counters, acc))
    epilogue1<SCALE, N>(a, sm, acc, e, row0, n0, f, true);
  else
    mbar_arrive(&sm.epi_empty);
}
#endif

template <int SCALE, bool HANDOFF, bool PAIRS>
__global__ void __launch_bounds__(block_threads<HANDOFF>(), 1)
    gemm1_stream_kernel(const __grid_constant__ fp8moe_gemm1_args a, const __grid_constant__ CUtensorMap map_w) {
#if FP8MOE_SM90A
  static_assert(!(HANDOFF && PAIRS), "a two-tile unit's 128 accumulator registers do not fit the 288-thread cap");
  extern __shared__ uint8_t smem_raw[];
  SmemT<PAIRS>& sm = sm90::aligned_smem<SmemT<PAIRS>>(smem_raw);
  /* full: lane 0's expect_tx + every gathering lane */
  if (threadIdx.x == 0) init_barriers(sm, 1 + 32 * sm90::kGatherArrivals);
  constexpr int kProducer = producer_thread<HANDOFF>();
  if (threadIdx.x == kProducer) prefetch_map(&map_w);
  __syncthreads();
  wait_prior(); /* x, its scales and the expert-sorted rows come from the kernels before */
  allow_next();
  const int32_t tiles = *a.num_tiles;
  const GroupList ul = unit_list<PAIRS>(sm, a.tile_expert, tiles, a.stream_align);
  const int32_t units = ul.entries, experts = ul.experts; /* per column group */
  const Range rg = range_of<!HANDOFF>(units, a.I / kBox, a.H / kBK, experts, a.stream_rounds);
  if (range_size(rg) == 0) return;
  if (threadIdx.x >= kProducer) {
    produce1<PAIRS, HANDOFF>(a, map_w, sm, rg);
  } else if (threadIdx.x < kConsumers) {
    walk_units<kBox, HANDOFF, PAIRS>(sm, rg, a.sorted_slots, a.tile_expert,
                     [&](const fp8moe_split_segment& seg, uint32_t& it, uint32_t j, int32_t e, int64_t row0,
                         int32_t n0, const TileRows& tr) {
                       if constexpr (PAIRS) {
                         if (tr.real > 16) return mma1<SCALE, 32, false>(a, sm, seg, it, j, e, row0, n0, tr);
                       }
                       if (tr.real > 8) mma1<SCALE, 16, HANDOFF>(a, sm, seg, it, j, e, row0, n0, tr);
                       else mma1<SCALE, 8, HANDOFF>(a, sm, seg, it, j, e, row0, n0, tr);
                     });
  } else if (HANDOFF) { /* the epilogue warpgroup: the 160-thread kernels have none */
    walk_units<kBox, HANDOFF, PAIRS>(sm, rg, a.sorted_slots, a.tile_expert,
                     [&](const fp8moe_split_segment& seg, uint32_t&, uint32_t j, int32_t e, int64_t row0, int32_t n0,
                         const TileRows& tr) {
                       if (tr.real > 8) finish1<SCALE, 16>(a, sm, seg, j, e, row0, n0, tr);
                       else finish1<SCALE, 8>(a, sm, seg, j, e, row0, n0, tr);
                     });
  }
#elif defined(__CUDA_ARCH__)
  (void)a;
  (void)map_w;
  __trap(); /* the plan selects this kernel only where the sm_90a SASS loads */
#endif
}

/* ----------------------------------------------------------------------------------------------- GEMM2 */
#if FP8MOE_SM90A
/* The thread's epilogue scales (token ct / 8 of the unit, and ct / 8 + 16 of a two-tile unit; TENSOR a2 × the
 * expert's weight scale, ROW the row's a2 scale), read before the unit's K loop so their latency hides under
 * it; ROW's per-column weight scales of the unit are prefetched into L2 (8 lines of 32 fp32; a hint). */
struct Factor2 {
  float st[2];
};
template <int SCALE, int N>
__device__ __forceinline__ Factor2 factor2(const fp8moe_gemm2_args& a, int32_t e, int64_t row0, int32_t n0,
                                           const TileRows& tr) {
  Factor2 f = {{0.0f, 0.0f}};
#pragma unroll
  for (int pass = 0; pass < (N > 16 ? 2 : 1); ++pass) {
    if (SCALE == FP8MOE_SCALE_TENSOR) f.st[pass] = kref_at(a.a2_scale, 0) * kref_at(a.w_scale, e);
    if (SCALE == FP8MOE_SCALE_ROW) {
      const int r = wg_thread() / 8 + 16 * pass;
      const int32_t slot = __shfl_sync(0xffffffffu, tr.slot, r); /* padding rows' scales are never read */
      if (slot >= 0) f.st[pass] = kref_at(a.a2_scale, row0 + r);
    }
  }
  const int ct = wg_thread();
  if (SCALE == FP8MOE_SCALE_ROW && ct < 8 && n0 + 32 * ct < a.H) prefetch_l2(a.w_scale, e, n0 + 32 * ct);
  return f;
}

/* Unit (tile, 256 output columns) finished: through shared memory, 8 threads per token store bf16 pairs of
 * its columns (< H) into y's row of the token's slot; padding rows are not stored. */
template <int SCALE, int N, class SM>
__device__ __forceinline__ void epilogue2(const fp8moe_gemm2_args& a, SM& sm, float (&acc)[4][N / 2], int32_t e,
                                          int32_t n0, const TileRows& tr, const Factor2& f, bool release) {
  constexpr int R = N / 2;
  const int ct = wg_thread();
  epilogue_sync(); /* the accumulators are out of epi, the previous unit's stores are done with it */
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int i = 0; i < R; ++i) sm.epi[acc_tok(i)][64 * m + acc_row(i)] = acc[m][i];
  epilogue_sync();
#pragma unroll
  for (int pass = 0; pass < (N > 16 ? 2 : 1); ++pass) { /* tokens 16..31 of a two-tile unit in a second pass */
    const int r = ct / 8 + 16 * pass, q = ct % 8;
    const float st = f.st[pass];
    const int32_t slot = __shfl_sync(0xffffffffu, tr.slot, r);
    if (r < N && slot >= 0) { /* padding rows are not stored */
      uint16_t* yrow = a.y + static_cast<int64_t>(slot) * a.H;
#pragma unroll 4
      for (int k = 0; k < kUnitRows / 16; ++k) {
        const int c = 2 * q + 16 * k, col = n0 + c;
        if (col >= a.H) break;
        float v0 = sm.epi[r][c], v1 = sm.epi[r][c + 1];
        if (SCALE == FP8MOE_SCALE_TENSOR) {
          v0 *= st;
          v1 *= st;
        } else if (SCALE == FP8MOE_SCALE_ROW) {
          v0 = v0 * st * kref_at(a.w_scale, e, col);
          v1 = v1 * st * kref_at(a.w_scale, e, col + 1);
        }
        *reinterpret_cast<uint32_t*>(yrow + col) = y_bf16x2(v0, v1);
      }
    }
  }
  if (release) mbar_arrive(&sm.epi_empty); /* this thread's reads of epi are done */
}

/* GEMM2's shares, as mma1 and finish1 for GEMM1 (the epilogue factor loaded before the K loop where the MMA
 * warpgroup runs the epilogue itself). */
template <int SCALE, int N, bool HANDOFF, class SM>
__device__ __forceinline__ void mma2(const fp8moe_gemm2_args& a, SM& sm, const fp8moe_split_segment& seg,
                                     uint32_t& it, uint32_t j, int32_t e, int64_t row0, int32_t n0,
                                     const TileRows& tr) {
  const int32_t hb = a.H / kBK; /* weight-scale blocks along H: the out-of-bounds box reads the last one */
  const int32_t nb[2] = {n0 / kBK, n0 / kBK + 1 < hb ? n0 / kBK + 1 : hb - 1};
  float acc[4][N / 2];
  auto cx = [&](int b, int kb) { return kref_at(a.a2_scale, row0 + tok_of_index(b), kb); };
  auto cw = [&](int box, int kb) { return kref_at(a.w_scale, e, nb[box], kb); };
  const Factor2 f = HANDOFF ? Factor2{{0.0f, 0.0f}} : factor2<SCALE, N>(a, e, row0, n0, tr);
  consume<N, SCALE == FP8MOE_SCALE_BLOCK, false>(sm, seg.kb0, seg.kb1, it, acc, cx, cw);
  if (HANDOFF) hand_over<N>(sm, acc, j);
  else if (fixup<N>(sm, seg, a.stream_partials, a.stream_counters, acc))
    epilogue2<SCALE, N>(a, sm, acc, e, n0, tr, f, false);
}
template <int SCALE, int N, class SM>
__device__ __forceinline__ void finish2(const fp8moe_gemm2_args& a, SM& sm, const fp8moe_split_segment& seg,
                                        uint32_t j, int32_t e, int64_t row0, int32_t n0, const TileRows& tr) {
  const Factor2 f = factor2<SCALE, N>(a, e, row0, n0, tr);
  float acc[4][N / 2];
  take_over<N>(sm, acc, j);
  if (fixup<N>(sm, seg, a.stream_partials, a.stream_counters, acc))
    epilogue2<SCALE, N>(a, sm, acc, e, n0, tr, f, true);
  else
    mbar_arrive(&sm.epi_empty);
}
#endif

template <int SCALE, bool HANDOFF, bool PAIRS>
__global__ void __launch_bounds__(block_threads<HANDOFF>(), 1)
    gemm2_stream_kernel(const __grid_constant__ fp8moe_gemm2_args a, const __grid_constant__ CUtensorMap map_x,
                        const __grid_constant__ CUtensorMap map_w) {
#if FP8MOE_SM90A
  static_assert(!(HANDOFF && PAIRS), "a two-tile unit's 128 accumulator registers do not fit the 288-thread cap");
  extern __shared__ uint8_t smem_raw[];
  SmemT<PAIRS>& sm = sm90::aligned_smem<SmemT<PAIRS>>(smem_raw);
  if (threadIdx.x == 0) init_barriers(sm, 1); /* full: the producer's expect_tx */
  __syncthreads();
  constexpr int kProducer = producer_thread<HANDOFF>();
  const int32_t col_units = (a.H + kUnitRows - 1) / kUnitRows, kblocks = a.I / kBK;
  /* PAIRS: the unit list, from the tile list as the producer reads it before the wait (file comment) */
  const int32_t tiles = ld_relaxed(a.num_tiles);
  const GroupList ul = unit_list<PAIRS>(sm, a.tile_expert, tiles, a.stream_align);
  const int32_t units = ul.entries, experts = ul.experts;
  if (threadIdx.x >= kProducer) {
    if (threadIdx.x == kProducer) {
      prefetch_map(&map_w);
      prefetch_map(&map_x);
      const Range rg = range_of<!HANDOFF>(units, col_units, kblocks, experts, a.stream_rounds);
      produce2<PAIRS, HANDOFF>(a, map_w, map_x, sm, rg);
    }
    return;
  }
  wait_prior(); /* a2q, its scales come from GEMM1 (or the row quantization); counters and partials are free */
  allow_next();
  /* the tile list was final before the wait */
  const Range rg = range_of<!HANDOFF>(units, col_units, kblocks, experts, a.stream_rounds);
  if (threadIdx.x < kConsumers) {
    walk_units<kUnitRows, HANDOFF, PAIRS>(sm, rg, a.sorted_slots, a.tile_expert,
                          [&](const fp8moe_split_segment& seg, uint32_t& it, uint32_t j, int32_t e, int64_t row0,
                              int32_t n0, const TileRows& tr) {
                            if constexpr (PAIRS) {
                              if (tr.real > 16) return mma2<SCALE, 32, false>(a, sm, seg, it, j, e, row0, n0, tr);
                            }
                            if (tr.real > 8) mma2<SCALE, 16, HANDOFF>(a, sm, seg, it, j, e, row0, n0, tr);
                            else mma2<SCALE, 8, HANDOFF>(a, sm, seg, it, j, e, row0, n0, tr);
                          });
  } else if (HANDOFF) { /* the epilogue warpgroup: the 160-thread kernels have none */
    walk_units<kUnitRows, HANDOFF, PAIRS>(sm, rg, a.sorted_slots, a.tile_expert,
                          [&](const fp8moe_split_segment& seg, uint32_t&, uint32_t j, int32_t e, int64_t row0,
                              int32_t n0, const TileRows& tr) {
                            if (tr.real > 8) finish2<SCALE, 16>(a, sm, seg, j, e, row0, n0, tr);
                            else finish2<SCALE, 8>(a, sm, seg, j, e, row0, n0, tr);
                          });
  }
#elif defined(__CUDA_ARCH__)
  (void)a;
  (void)map_x;
  (void)map_w;
  __trap(); /* the plan selects this kernel only where the sm_90a SASS loads */
#endif
}

using Kernel1 = void (*)(fp8moe_gemm1_args, CUtensorMap);
using Kernel2 = void (*)(fp8moe_gemm2_args, CUtensorMap, CUtensorMap);

/* The kernel families: 160 threads with 16-row units, HANDOFF (288 threads, the epilogue warpgroup), PAIRS
 * (160 threads, units of up to two tiles). */
enum Variant { kPlain = 0, kHandoff = 1, kPairs = 2 };
template <int V>
Kernel1 kernel1_of(int32_t scale_mode) {
  constexpr bool H = V == kHandoff, P = V == kPairs;
  if (scale_mode == FP8MOE_SCALE_BLOCK) return gemm1_stream_kernel<FP8MOE_SCALE_BLOCK, H, P>;
  if (scale_mode == FP8MOE_SCALE_ROW) return gemm1_stream_kernel<FP8MOE_SCALE_ROW, H, P>;
  return gemm1_stream_kernel<FP8MOE_SCALE_TENSOR, H, P>;
}
template <int V>
Kernel2 kernel2_of(int32_t scale_mode) {
  constexpr bool H = V == kHandoff, P = V == kPairs;
  if (scale_mode == FP8MOE_SCALE_BLOCK) return gemm2_stream_kernel<FP8MOE_SCALE_BLOCK, H, P>;
  if (scale_mode == FP8MOE_SCALE_ROW) return gemm2_stream_kernel<FP8MOE_SCALE_ROW, H, P>;
  return gemm2_stream_kernel<FP8MOE_SCALE_TENSOR, H, P>;
}
Kernel1 kernel1_for(int32_t scale_mode, int v) {
  return v == kHandoff ? kernel1_of<kHandoff>(scale_mode) : v == kPairs ? kernel1_of<kPairs>(scale_mode)
                                                                         : kernel1_of<kPlain>(scale_mode);
}
Kernel2 kernel2_for(int32_t scale_mode, int v) {
  return v == kHandoff ? kernel2_of<kHandoff>(scale_mode) : v == kPairs ? kernel2_of<kPairs>(scale_mode)
                                                                         : kernel2_of<kPlain>(scale_mode);
}
unsigned threads_for(int v) {
  return static_cast<unsigned>(v == kHandoff ? block_threads<true>() : block_threads<false>());
}
size_t smem_for(int v) { return v == kPairs ? smem_bytes<true>() : smem_bytes<false>(); }
/* The plan's choice (stream_handoff, stream_pairs), the pair list kept to what its shared memory holds. */
template <class Args>
int variant_of(const Args* a) {
  if (a->stream_handoff != 0) return kHandoff;
  return a->stream_pairs != 0 && a->max_tiles <= kListTiles && a->E_local <= kListExperts ? kPairs : kPlain;
}

/* What both launchers refuse: 16-row tiles, the fixup's workspace, a grid within the workspace's slots. */
bool shape_ok(int32_t tile_m, const float* partials, const uint32_t* counters, int32_t max_ctas) {
  return tile_m == kRows && partials != nullptr && counters != nullptr && max_ctas >= 1 &&
         max_ctas <= FP8MOE_STREAM_MAX_CTAS;
}

}  // namespace
}  // namespace stream
}  // namespace fp8moe

extern "C" int fp8moe_launch_gemm1_stream(const fp8moe_gemm1_args* a, cudaStream_t stream) {
  using namespace fp8moe::stream;
  if (a->max_tiles == 0) return cudaSuccess;
  if (!shape_ok(a->tile_m, a->stream_partials, a->stream_counters, a->max_ctas)) return cudaErrorInvalidValue;
  CUtensorMap mw;
  const uint64_t dw[3] = {static_cast<uint64_t>(a->H), 2 * static_cast<uint64_t>(a->I),
                          static_cast<uint64_t>(a->E_local)};
  const uint64_t sw[2] = {static_cast<uint64_t>(a->w_stride_n), static_cast<uint64_t>(a->w_stride_e)};
  const int e = fp8moe_sm90_encode(a->tma_encode, &mw, a->w, 3, dw, sw, kBK, kBox);
  if (e != 0) return e;
  const int v = variant_of(a);
  return static_cast<int>(fp8moe::launch_pdl(kernel1_for(a->scale_mode, v), dim3(static_cast<unsigned>(a->max_ctas)),
                                             dim3(threads_for(v)), smem_for(v), stream, *a, mw));
}

extern "C" int fp8moe_launch_gemm2_stream(const fp8moe_gemm2_args* a, cudaStream_t stream) {
  using namespace fp8moe::stream;
  if (a->max_tiles == 0) return cudaSuccess;
  if (!shape_ok(a->tile_m, a->stream_partials, a->stream_counters, a->max_ctas)) return cudaErrorInvalidValue;
  CUtensorMap mx, mw;
  const int v = variant_of(a);
  const uint64_t rows = static_cast<uint64_t>(a->max_tiles) * kRows;
  const uint64_t dx[2] = {static_cast<uint64_t>(a->I), rows}, sx[1] = {static_cast<uint64_t>(a->I)};
  const uint64_t dw[3] = {static_cast<uint64_t>(a->I), static_cast<uint64_t>(a->H), static_cast<uint64_t>(a->E_local)};
  const uint64_t sw[2] = {static_cast<uint64_t>(a->w_stride_n), static_cast<uint64_t>(a->w_stride_e)};
  int e = fp8moe_sm90_encode(a->tma_encode, &mx, a->a2q, 2, dx, sx, kBK, v == kPairs ? 2 * kRows : kRows);
  if (e == 0) e = fp8moe_sm90_encode(a->tma_encode, &mw, a->w, 3, dw, sw, kBK, kBox);
  if (e != 0) return e;
  return static_cast<int>(fp8moe::launch_pdl(kernel2_for(a->scale_mode, v), dim3(static_cast<unsigned>(a->max_ctas)),
                                             dim3(threads_for(v)), smem_for(v), stream, *a, mx, mw));
}

/* One CTA per SM, at most FP8MOE_STREAM_MAX_CTAS: the shared-memory limits raised, one CTA resident per SM
 * for every instantiation; 0 (the plan keeps the register path) when the device refuses or a query fails. */
extern "C" int fp8moe_prepare_gemm_stream(int32_t sm_count, int32_t* ctas) {
  using namespace fp8moe::stream;
  *ctas = 0;
  const int32_t modes[3] = {FP8MOE_SCALE_TENSOR, FP8MOE_SCALE_BLOCK, FP8MOE_SCALE_ROW};
  for (int i = 0; i < 9; ++i) {
    const int v = i / 3, n_threads = static_cast<int>(threads_for(v));
    const size_t bytes = smem_for(v);
    int n1 = 0, n2 = 0;
    if (cudaFuncSetAttribute(kernel1_for(modes[i % 3], v), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(bytes)) != cudaSuccess ||
        cudaFuncSetAttribute(kernel2_for(modes[i % 3], v), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(bytes)) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n1, kernel1_for(modes[i % 3], v), n_threads, bytes) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n2, kernel2_for(modes[i % 3], v), n_threads, bytes) !=
            cudaSuccess) {
      (void)cudaGetLastError(); /* not an error of the context: the stream kernels just stay unused */
      return cudaSuccess;
    }
    if (n1 < 1 || n2 < 1) return cudaSuccess;
  }
  *ctas = sm_count < FP8MOE_STREAM_MAX_CTAS ? sm_count : FP8MOE_STREAM_MAX_CTAS;
  return cudaSuccess;
}
