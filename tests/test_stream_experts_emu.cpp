/* test_stream_experts_emu.cpp — the stream GEMMs' scans of their tile list (kernels/gemm/stream_experts.cuh) compiled
 * for the host and run on the emulated block (routing_emu/warp_emu.h). First count_experts (the expert-aligned
 * split's rule reads it; docs/GPU.md "Experts routed more than a unit") against a plain count of expert starts. Block
 * sizes 160 and 288 (the kernels': one MMA warpgroup and the producer warp, plus the HANDOFF kernels' epilogue
 * warpgroup), 32 and 1,024; lists of 0 … 4,000 tiles, so that a thread sees 0, 1 or many tiles (the kernels count up
 * to 2·8·132 tiles); experts one per tile, one for all, random runs, and starts placed on one thread's tiles only
 * (where a count of threads instead of starts is most wrong); every thread must return the count; each case with the
 * warps scheduled first to last and last to first. Then the PAIRS kernels' build_groups (the list of units of one or
 * two tiles, "Units of two tiles", and the same count from its first pass) at the kernels' 160 threads and at 32 and
 * 256, lists of 0 … 1,024 tiles (the list's capacity) of up to 512 experts (first_tile's), runs of 1, 2, 3 or 1–5
 * tiles, against the list built tile by tile: every thread must return the same length and count, and the list its
 * entries in tile order. No GPU: the kernels' own use runs in test_gpu_sweep (cases (g), (h)). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "routing_rows.h"
#include "common_host.h" /* before the kernel header: takes the place of kernels/common.cuh */
#include "gemm/stream_experts.cuh"

int fp8moe::sfu_error_ulps = 0; /* unused here: common_host.h's SFU stand-ins */

namespace {

constexpr int32_t kPoison = 0x5A5A5A5A;

struct Job {
  const std::vector<int32_t>* tile_expert;
  int32_t tiles;
  std::vector<int32_t>* result; /* per thread */
};

void body(unsigned thread, void* ctx) {
  const Job* j = static_cast<const Job*>(ctx);
  const int32_t* te = j->tile_expert->data();
  (*j->result)[thread] = fp8moe::stream::count_experts([&](int32_t t) { return te[t]; }, j->tiles,
                                                       static_cast<int32_t>(thread),
                                                       static_cast<int32_t>(emu::block->threads));
}

/* tile_expert of kind k: expert ids non-decreasing along the list, as the permutation writes them. */
std::vector<int32_t> make_list(int kind, int32_t tiles, int threads) {
  std::vector<int32_t> te(static_cast<size_t>(tiles));
  int32_t e = static_cast<int32_t>(routing_rows_u32() % 7u);
  for (int32_t t = 0; t < tiles; ++t) {
    bool start = t == 0;
    switch (kind) {
      case 0: start = true; break;                                  /* every tile its own expert */
      case 1: break;                                                /* one expert for all */
      case 2: start = start || routing_rows_u32() % 3u == 0; break; /* random runs, ~3 tiles each */
      default: start = start || t % threads == 5 % threads; break;  /* starts on one thread's tiles only */
    }
    if (start && t > 0) e += 1 + static_cast<int32_t>(routing_rows_u32() % 3u);
    te[static_cast<size_t>(t)] = e;
  }
  return te;
}

long check_case(int threads, int kind, int32_t tiles) {
  const std::vector<int32_t> te = make_list(kind, tiles, threads);
  int32_t want = 0;
  for (int32_t t = 0; t < tiles; ++t) want += t == 0 || te[t] != te[t - 1];
  std::vector<int32_t> got(static_cast<size_t>(threads), kPoison);
  Job job = {&te, tiles, &got};
  const char* err = emu::run_block(threads, body, &job);
  const char* order = emu::reverse_warps ? ", warps in reverse" : "";
  if (err) {
    printf("FAIL threads %d kind %d tiles %d%s: %s\n", threads, kind, tiles, order, err);
    return 1;
  }
  for (int i = 0; i < threads; ++i)
    if (got[static_cast<size_t>(i)] != want) {
      printf("FAIL threads %d kind %d tiles %d%s: thread %d counted %d experts, expected %d\n", threads, kind, tiles,
             order, i, got[static_cast<size_t>(i)], want);
      return 1;
    }
  return 0;
}

/* build_groups' shared memory (the kernels' SmemT fields it uses). */
struct ListSm {
  int32_t warp_count[8];
  uint16_t group_first[FP8MOE_STREAM_LIST_TILES];
  int16_t first_tile[512];
};

struct ListJob {
  const std::vector<int32_t>* tile_expert;
  int32_t tiles;
  ListSm* sm;
  std::vector<fp8moe::stream::GroupList>* result; /* per thread */
};

template <int THREADS>
void list_body(unsigned thread, void* ctx) {
  const ListJob* j = static_cast<const ListJob*>(ctx);
  const int32_t* te = j->tile_expert->data();
  (*j->result)[thread] = fp8moe::stream::build_groups<THREADS>(*j->sm, [&](int32_t t) { return te[t]; }, j->tiles);
}

/* tile_expert of `tiles` tiles in runs of kind k (0: 1 tile, 1: 2, 2: 3, 3: 1–5 at random) over distinct experts
 * < 512 in increasing order, with random gaps where the runs leave room. */
std::vector<int32_t> make_runs(int kind, int32_t tiles) {
  std::vector<int32_t> runs;
  for (int32_t left = tiles; left > 0;) {
    int32_t n = kind == 3 ? 1 + static_cast<int32_t>(routing_rows_u32() % 5u) : kind + 1;
    n = n < left ? n : left;
    runs.push_back(n);
    left -= n;
  }
  std::vector<int32_t> te;
  int32_t e = -1;
  for (size_t r = 0; r < runs.size(); ++r) {
    const int32_t room = 511 - e - static_cast<int32_t>(runs.size() - r); /* ids left beyond one per run */
    e += 1 + (room > 0 ? static_cast<int32_t>(routing_rows_u32() % static_cast<uint32_t>(room < 3 ? room + 1 : 3)) : 0);
    te.insert(te.end(), static_cast<size_t>(runs[r]), e);
  }
  return te;
}

long check_list_case(int threads, int kind, int32_t tiles) {
  const std::vector<int32_t> te = make_runs(kind, tiles);
  std::vector<uint16_t> want;
  int32_t want_experts = 0;
  for (int32_t t = 0, first = 0; t < tiles; ++t) {
    if (t == 0 || te[t] != te[t - 1]) {
      first = t;
      ++want_experts;
    }
    if ((t - first) % 2 == 0)
      want.push_back(static_cast<uint16_t>(t | (t + 1 < tiles && te[t + 1] == te[t] ? FP8MOE_SM90_PAIR_TWO : 0u)));
  }
  ListSm sm;
  memset(&sm, 0x5A, sizeof sm);
  std::vector<fp8moe::stream::GroupList> got(static_cast<size_t>(threads), fp8moe::stream::GroupList{kPoison, kPoison});
  ListJob job = {&te, tiles, &sm, &got};
  void (*body_of)(unsigned, void*) = threads == 32 ? list_body<32> : threads == 160 ? list_body<160> : list_body<256>;
  const char* err = emu::run_block(threads, body_of, &job);
  const char* order = emu::reverse_warps ? ", warps in reverse" : "";
  if (err) {
    printf("FAIL list: threads %d kind %d tiles %d%s: %s\n", threads, kind, tiles, order, err);
    return 1;
  }
  for (int i = 0; i < threads; ++i) {
    const fp8moe::stream::GroupList g = got[static_cast<size_t>(i)];
    if (g.entries != static_cast<int32_t>(want.size()) || g.experts != want_experts) {
      printf("FAIL list: threads %d kind %d tiles %d%s: thread %d returned %d entries and %d experts, expected %zu "
             "and %d\n", threads, kind, tiles, order, i, g.entries, g.experts, want.size(), want_experts);
      return 1;
    }
  }
  for (size_t i = 0; i < want.size(); ++i)
    if (sm.group_first[i] != want[i]) {
      printf("FAIL list: threads %d kind %d tiles %d%s: entry %zu is 0x%x, expected 0x%x\n", threads, kind, tiles, order,
             i, sm.group_first[i], want[i]);
      return 1;
    }
  return 0;
}

}  // namespace

int main() {
  const int thread_counts[] = {160, 288, 32, 1024};
  long cases = 0, bad = 0;
  for (int threads : thread_counts) {
    const int32_t tile_counts[] = {0, 1, 2, threads - 1, threads, threads + 1, 2 * threads + 5, 361, 1024, 2112, 4000};
    for (int32_t tiles : tile_counts)
      for (int kind = 0; kind < 4; ++kind)
        for (int reverse = 0; reverse < 2; ++reverse) {
          emu::reverse_warps = reverse != 0;
          ++cases;
          bad += check_case(threads, kind, tiles);
        }
  }
  const int list_threads[] = {160, 32, 256};
  for (int threads : list_threads) {
    const int32_t tile_counts[] = {0, 1, 2, threads - 1, threads, threads + 1, 2 * threads + 3, 511, 512, 1023, 1024};
    for (int32_t tiles : tile_counts)
      for (int kind = 0; kind < 4; ++kind) {
        if (kind == 0 && tiles > 512) continue; /* one expert per tile: at most first_tile's 512 */
        for (int reverse = 0; reverse < 2; ++reverse) {
          emu::reverse_warps = reverse != 0;
          ++cases;
          bad += check_list_case(threads, kind, tiles);
        }
      }
  }
  printf("%ld cases, %ld failed; %ld collectives and barriers emulated\n", cases, bad, emu::block->collectives);
  printf("test_stream_experts_emu: %ld passed, %ld failed\n", cases - bad, bad);
  return bad == 0 ? 0 : 1;
}
