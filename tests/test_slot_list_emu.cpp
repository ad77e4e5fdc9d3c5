/* test_slot_list_emu.cpp — the small-T prologue's slot list (kernels/slot_list.cuh: build_slot_list on a block of 512
 * or 1,024 threads, both instruction sequences; build_slot_list_warp on one warp) compiled for the host and run on the
 * emulated block (routing_emu/warp_emu.h: every thread a coroutine, warps in lockstep at their collectives, threads
 * meeting at __syncthreads), against a stable counting sort into tile-padded experts: num_tiles, every tile's expert,
 * every row's slot (padding −1) and every slot's row (−1 where not local), outputs poisoned first; each case with the
 * warps scheduled first to last and last to first (a missing barrier shows in one of them). Ids: random with
 * skipped (−1) and other ranks' experts, all slots on one expert, every slot on its own expert; T·K 1 … 512, 1 … 512
 * local experts with an offset, tile_m 1, 16, 64 and 128 (the layouts' tile heights and the magic-free case). No GPU:
 * the GPU runs the same code in test_gpu_prologue, which compares the prologue's three paths bit for bit. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "routing_rows.h"
#include "common_host.h" /* before slot_list.cuh: takes the place of kernels/common.cuh */
#include "slot_list.cuh"

int fp8moe::sfu_error_ulps = 0; /* unused here: common_host.h's SFU stand-ins */

namespace {

uint32_t next_u32() { return routing_rows_u32(); } /* routing_rows.h's generator */

constexpr int32_t kPoison = 0x5A5A5A5A;

enum Variant { kBlock512, kBlock512V1, kBlock512Wide, kBlock1024, kBlock1024V1, kWarp };
const char* const kVariantName[] = {"block 512", "block 512 (w)", "block 512, 16 experts a lane", "block 1024",
                                    "block 1024 (w)", "one warp"};

const char* order_name() { return emu::reverse_warps ? ", warps in reverse" : ""; }

struct Job {
  const fp8moe_permute_args* p;
  const int32_t* ids; /* the block's shared ids */
  int32_t *count, *start, *cursor;
  Variant v;
};

void body(unsigned, void* ctx) {
  const Job* j = static_cast<const Job*>(ctx);
  using fp8moe::build_slot_list;
  switch (j->v) {
    case kBlock512: build_slot_list<512, false>(*j->p, j->ids, j->count, j->start, j->cursor); break;
    case kBlock512V1: build_slot_list<512, true>(*j->p, j->ids, j->count, j->start, j->cursor); break;
    case kBlock512Wide:
      build_slot_list<512, false, FP8MOE_PROLOGUE_BLOCK_MAX_EXPERTS>(*j->p, j->ids, j->count, j->start, j->cursor);
      break;
    case kBlock1024: build_slot_list<1024, false>(*j->p, j->ids, j->count, j->start, j->cursor); break;
    case kBlock1024V1: build_slot_list<1024, true>(*j->p, j->ids, j->count, j->start, j->cursor); break;
    case kWarp: {
      const int lane = static_cast<int>(threadIdx.x % 32);
      fp8moe::build_slot_list_warp(*j->p, lane < j->p->TK ? j->ids[lane] : -1);
      break;
    }
  }
}

/* One case; returns the number of mismatching outputs (printing the first few). */
long check_case(Variant v, const std::vector<int32_t>& ids, int32_t E, int32_t offset, int32_t tile_m) {
  const int32_t TK = static_cast<int32_t>(ids.size());
  /* the reference: a stable counting sort into tile_m-padded experts */
  std::vector<int32_t> cnt(static_cast<size_t>(E), 0), first(static_cast<size_t>(E), 0);
  for (int32_t i = 0; i < TK; ++i)
    if (ids[i] >= offset && ids[i] < offset + E) ++cnt[ids[i] - offset];
  int32_t tiles = 0;
  for (int32_t e = 0; e < E; ++e) {
    first[e] = tiles * tile_m;
    tiles += (cnt[e] + tile_m - 1) / tile_m;
  }
  std::vector<int32_t> ref_sorted(static_cast<size_t>(tiles) * tile_m, -1), ref_row(static_cast<size_t>(TK), -1),
      ref_expert(static_cast<size_t>(tiles)), fill(first);
  for (int32_t e = 0; e < E; ++e)
    for (int32_t j = 0; j < (cnt[e] + tile_m - 1) / tile_m; ++j) ref_expert[first[e] / tile_m + j] = e;
  for (int32_t i = 0; i < TK; ++i)
    if (ids[i] >= offset && ids[i] < offset + E) {
      const int32_t r = fill[ids[i] - offset]++;
      ref_sorted[r] = i;
      ref_row[i] = r;
    }

  /* The layout's capacity: every expert may pad a tile (as the workspace, src/cuda/cuda_layout.c) */
  const int32_t max_tiles = (TK + tile_m - 1) / tile_m + E;
  std::vector<int32_t> sorted(static_cast<size_t>(max_tiles) * tile_m, kPoison),
      slot_row(static_cast<size_t>(TK), kPoison), tile_expert(static_cast<size_t>(max_tiles), kPoison), shared_ids(ids), count(static_cast<size_t>(E), 0),
      start(static_cast<size_t>(E), kPoison), cursor(static_cast<size_t>(E), kPoison);
  int32_t num_tiles = kPoison;
  fp8moe_permute_args p;
  memset(&p, 0, sizeof p);
  p.ids = ids.data();
  p.TK = TK;
  p.local_offset = offset;
  p.E_local = E;
  p.max_tiles = max_tiles;
  p.tile_m = tile_m;
  p.sorted_slots = sorted.data();
  p.slot_row = slot_row.data();
  p.tile_expert = tile_expert.data();
  p.num_tiles = &num_tiles;
  Job job = {&p, shared_ids.data(), count.data(), start.data(), cursor.data(), v};
  const int threads = v == kWarp ? 32 : (v == kBlock1024 || v == kBlock1024V1) ? 1024 : 512;
  const char* err = emu::run_block(threads, body, &job);
  if (err) {
    printf("FAIL %s%s TK %d E %d offset %d tile_m %d: %s\n", kVariantName[v], order_name(), TK, E, offset, tile_m,
           err);
    return 1;
  }
  long bad = 0;
  auto miss = [&](const char* what, int32_t i, int32_t got, int32_t want) {
    if (bad++ < 3)
      printf("FAIL %s%s TK %d E %d offset %d tile_m %d: %s[%d] = %d, expected %d\n", kVariantName[v], order_name(), TK,
             E, offset, tile_m, what, i, got, want);
  };
  if (num_tiles != tiles) miss("num_tiles", 0, num_tiles, tiles);
  for (int32_t t = 0; t < tiles && t < max_tiles; ++t)
    if (tile_expert[t] != ref_expert[t]) miss("tile_expert", t, tile_expert[t], ref_expert[t]);
  for (int32_t r = 0; r < tiles * tile_m && r < max_tiles * tile_m; ++r)
    if (sorted[r] != ref_sorted[r]) miss("sorted_slots", r, sorted[r], ref_sorted[r]);
  for (int32_t r = tiles * tile_m; r < max_tiles * tile_m; ++r) /* nothing written past the tiles */
    if (sorted[r] != kPoison) miss("sorted_slots (past the tiles)", r, sorted[r], kPoison);
  for (int32_t i = 0; i < TK; ++i)
    if (slot_row[i] != ref_row[i]) miss("slot_row", i, slot_row[i], ref_row[i]);
  return bad;
}

/* Ids of kind k for T·K slots over experts [offset, offset + E) of a model with `total` experts. */
std::vector<int32_t> make_ids(int kind, int32_t TK, int32_t E, int32_t offset, int32_t total) {
  std::vector<int32_t> ids(static_cast<size_t>(TK));
  for (int32_t i = 0; i < TK; ++i) {
    switch (kind) {
      case 0: /* random over every expert of the model, some skipped */
        ids[i] = next_u32() % 13 == 0 ? -1 : static_cast<int32_t>(next_u32() % static_cast<uint32_t>(total));
        break;
      case 1: /* all on one local expert */
        ids[i] = offset + E / 2;
        break;
      case 2: /* each slot its own expert where E allows, else round robin */
        ids[i] = offset + i % E;
        break;
      default: /* a few hot local experts */
        ids[i] = offset + static_cast<int32_t>(next_u32() % 3u) * (E / 3);
        break;
    }
  }
  return ids;
}

}  // namespace

int main() {
  const int32_t tile_ms[] = {1, 16, 64, 128};
  const int32_t TKs[] = {1, 2, 8, 31, 32, 33, 64, 100, 256, 511, 512};
  const int32_t Es[] = {1, 8, 64, 256, 384, 512};
  long cases = 0, bad_cases = 0;
  for (int v = kBlock512; v <= kWarp; ++v) {
    const int32_t max_e = v == kBlock512Wide ? FP8MOE_PROLOGUE_BLOCK_MAX_EXPERTS : FP8MOE_PROLOGUE_MAX_EXPERTS;
    for (int32_t TK : TKs) {
      if (v == kWarp && TK > 32) continue; /* the one-token list: T·K ≤ 32 */
      for (int32_t E : Es) {
        if (E > max_e) continue;
        for (int32_t tile_m : tile_ms)
          for (int kind = 0; kind < 4; ++kind) {
            /* one rank of a model with twice the experts, at an offset, or the whole model */
            const bool ep = (TK + E + kind) % 2 == 1;
            const int32_t offset = ep ? E / 2 + 1 : 0, total = ep ? 2 * E + 1 : E;
            const std::vector<int32_t> ids = make_ids(kind, TK, E, offset, total);
            for (int reverse = 0; reverse < 2; ++reverse) {
              emu::reverse_warps = reverse != 0;
              ++cases;
              bad_cases += check_case(static_cast<Variant>(v), ids, E, offset, tile_m) != 0;
            }
          }
      }
    }
  }
  printf("%ld cases, %ld with mismatches; %ld collectives and barriers emulated\n", cases, bad_cases,
         emu::block->collectives);
  printf("test_slot_list_emu: %ld passed, %ld failed\n", cases - bad_cases, bad_cases);
  return bad_cases == 0 ? 0 : 1;
}
