/* test_permute_emu.cpp — the permutation's per-warp passes (kernels/permute_segment.cuh: count_segment and
 * place_segment, which the one-block and the chunked permutation both run over their warps' segments) compiled for the
 * host and run on an emulated warp (routing_emu/warp_emu.h), against a CPU stable counting sort: the counts per
 * expert, every slot's row and every real row's slot, with the segments' cursors from a scan over segments as the
 * kernels build them, in both call forms (first rows apart, as permute.cu passes them; folded into the cursors, as
 * permute_chunks.cu does). Slots: random ids with skipped (−1) and non-local ones, T·K from 1 to 4,100 (partial
 * 32-slot steps and 8-step batches), 1 to 2,048 local experts, tile_m 16 and 64, 1 to 8 segments. No GPU. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "routing_rows.h"
#include "warp_emu.h"

#include "permute_segment.cuh"

extern "C" {
#include "plugin_host.h"
}

namespace {

uint32_t next_u32() { return routing_rows_u32(); } /* routing_rows.h's generator */

struct Job {
  const fp8moe_permute_args* a;
  int S;                          /* segments */
  const int32_t* bounds;          /* [S + 1] */
  int32_t* counters;              /* [S × E] */
  int32_t* cursors;               /* [S × E] */
  const int32_t* first_row;       /* nullptr: folded into the cursors */
  bool place;
};

void body(unsigned, void* p) {
  Job* j = static_cast<Job*>(p);
  const int32_t E = j->a->E_local;
  for (int s = 0; s < j->S; ++s) {
    if (j->place)
      fp8moe::permute::place_segment(*j->a, j->bounds[s], j->bounds[s + 1], j->cursors + s * E, j->first_row);
    else
      fp8moe::permute::count_segment(*j->a, j->bounds[s], j->bounds[s + 1], j->counters + s * E);
  }
}

/* One case; returns the number of mismatches (printing the first few). */
long check_case(int32_t TK, int32_t E, int32_t offset, int32_t tile_m, int S, bool folded) {
  std::vector<int32_t> ids(static_cast<size_t>(TK));
  const uint32_t span = static_cast<uint32_t>(E + offset + 3);
  for (int32_t i = 0; i < TK; ++i) ids[i] = next_u32() % 11 == 0 ? -1 : static_cast<int32_t>(next_u32() % span);
  /* the reference: a stable counting sort into tile_m-padded experts */
  std::vector<int32_t> cnt(static_cast<size_t>(E), 0), first(static_cast<size_t>(E), 0);
  for (int32_t i = 0; i < TK; ++i)
    if (ids[i] >= offset && ids[i] < offset + E) ++cnt[ids[i] - offset];
  int64_t rows = 0;
  for (int32_t e = 0; e < E; ++e) {
    first[e] = static_cast<int32_t>(rows);
    rows += (cnt[e] + tile_m - 1) / tile_m * tile_m;
  }
  std::vector<int32_t> ref_sorted(static_cast<size_t>(rows > 0 ? rows : 1), -1), ref_row(static_cast<size_t>(TK), -1),
      fill(first);
  for (int32_t i = 0; i < TK; ++i)
    if (ids[i] >= offset && ids[i] < offset + E) {
      const int32_t r = fill[ids[i] - offset]++;
      ref_sorted[r] = i;
      ref_row[i] = r;
    }

  fp8moe_permute_args a;
  memset(&a, 0, sizeof a);
  std::vector<int32_t> sorted(ref_sorted.size(), -1), slot_row(static_cast<size_t>(TK), -7);
  a.ids = ids.data();
  a.TK = TK;
  a.local_offset = offset;
  a.E_local = E;
  a.tile_m = tile_m;
  a.sorted_slots = sorted.data();
  a.slot_row = slot_row.data();
  std::vector<int32_t> bounds(static_cast<size_t>(S + 1));
  for (int s = 0; s <= S; ++s) bounds[s] = static_cast<int32_t>(static_cast<int64_t>(TK) * s / S);
  std::vector<int32_t> counters(static_cast<size_t>(S * E), 0), cursors(static_cast<size_t>(S * E), 0);
  Job j = {&a, S, bounds.data(), counters.data(), cursors.data(), nullptr, false};
  long bad = 0;
  const char* err = emu::run(body, &j);
  if (err) {
    fprintf(stderr, "count pass: %s\n", err);
    return 1;
  }
  /* pass 1's counts, then the scan over segments the kernels do: segment s starts at the rows of earlier ones */
  for (int32_t e = 0; e < E; ++e) {
    int32_t run = 0;
    for (int s = 0; s < S; ++s) {
      cursors[s * E + e] = (folded ? first[e] : 0) + run;
      run += counters[s * E + e];
    }
    if (run != cnt[e] && ++bad <= 3) fprintf(stderr, "E %d: expert %d counted %d, expected %d\n", E, e, run, cnt[e]);
  }
  j.place = true;
  j.first_row = folded ? nullptr : first.data();
  err = emu::run(body, &j);
  if (err) {
    fprintf(stderr, "place pass: %s\n", err);
    return bad + 1;
  }
  for (int32_t i = 0; i < TK; ++i)
    if (slot_row[i] != ref_row[i] && ++bad <= 3)
      fprintf(stderr, "TK %d E %d S %d: slot %d row %d, expected %d\n", TK, E, S, i, slot_row[i], ref_row[i]);
  for (size_t r = 0; r < sorted.size(); ++r)
    if (sorted[r] != ref_sorted[r] && ++bad <= 3)
      fprintf(stderr, "TK %d E %d S %d: row %zu slot %d, expected %d\n", TK, E, S, r, sorted[r], ref_sorted[r]);
  return bad;
}

}  // namespace

int main() {
  const int32_t tks[] = {1, 7, 32, 33, 255, 256, 257, 1000, 4100};
  const int32_t es[] = {1, 8, 64, 256, 2048};
  long cases = 0, bad_cases = 0;
  for (int32_t TK : tks)
    for (int32_t E : es)
      for (int32_t tile_m : {16, 64})
        for (int S : {1, 3, 8})
          for (bool folded : {false, true}) {
            const int32_t offset = static_cast<int32_t>(next_u32() % 3) * E / 2;
            const long bad = check_case(TK, E, offset, tile_m, S, folded);
            ++cases;
            bad_cases += bad != 0;
            EXPECT(bad == 0, "TK %d E %d offset %d tile_m %d S %d folded %d: %ld mismatches", TK, E, offset, tile_m,
                   S, folded, bad);
          }
  printf("%ld cases, %ld with mismatches; %ld warp collectives emulated\n", cases, bad_cases, emu::block->collectives);
  return test_finish("test_permute_emu", test_checks_run);
}
