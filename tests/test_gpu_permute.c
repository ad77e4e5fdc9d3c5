/* test_gpu_permute.c — both permutation paths (kernels/permute.cu: one block; kernels/permute_chunks.cu: chunks
 * of slots over many blocks) against a CPU stable counting sort, bit for bit: num_tiles, tile_expert,
 * sorted_slots (rows of an expert in ascending slot order, −1 padding) and slot_row. The order is part of the
 * contract because it fixes each GEMM tile's rows from replay to replay (docs/PERFORMANCE.md, run-to-run
 * spread); an atomic placement fails this test. Every case runs the one-block path, the chunk size the kernel
 * plan gives run (src/cuda/cuda_plan.c; cases from its threshold up), and forced chunks of 256 slots (many
 * chunks) and 1,000 slots (segments that are no multiple of 32). Kernel-level: links the kernel archive and
 * the plan directly; exits 77 (skipped) without a GPU. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_plan.h"
#include "kernels_internal.h"
#include "plugin_host.h"

#define S FP8MOE_GEMM_TILE_M_SMALL
#define L FP8MOE_GEMM_TILE_M_LARGE

typedef struct perm_case {
  const char* name;
  int32_t TK, E_global, local_offset, E_local, tile_m;
  int hot;          /* > 0: this many hot experts take ~90 % of the slots */
  int skip_percent; /* ids set to −1 */
} perm_case;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

static void make_ids(const perm_case* c, int32_t* ids) {
  for (int32_t i = 0; i < c->TK; ++i) {
    if ((int)(rng() % 100) < c->skip_percent) {
      ids[i] = -1;
    } else if (c->hot > 0 && rng() % 10 != 0) {
      ids[i] = (int32_t)(rng() % (uint32_t)c->hot) * (c->E_global / c->hot);
    } else {
      ids[i] = (int32_t)(rng() % (uint32_t)c->E_global);
    }
  }
}

/* The reference: experts in order, each expert's slots in ascending slot order, padded to tile_m. */
static int32_t reference(const perm_case* c, const int32_t* ids, int32_t* sorted, int32_t* slot_row,
                         int32_t* tile_expert) {
  int32_t row = 0, tiles = 0;
  for (int32_t i = 0; i < c->TK; ++i) slot_row[i] = -1;
  for (int32_t e = 0; e < c->E_local; ++e) {
    const int32_t first = row;
    for (int32_t i = 0; i < c->TK; ++i) {
      if (ids[i] >= 0 && ids[i] - c->local_offset == e) {
        slot_row[i] = row;
        sorted[row++] = i;
      }
    }
    while ((row - first) % c->tile_m != 0) sorted[row++] = -1;
    for (int32_t r = first; r < row; r += c->tile_m) tile_expert[tiles++] = e;
  }
  return tiles;
}

static int cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  ++test_failures;
  return 0;
}

/* The chunk size run takes for these routed rows (0: one block). */
static int32_t plan_chunk(const perm_case* c) {
  fp8moe_problem p;
  memset(&p, 0, sizeof p);
  p.T = c->TK;
  p.K = 1;
  p.E = c->E_global;
  p.E_local = c->E_local;
  return fp8moe_cuda_plan_permute_chunk(&p);
}

static int plan_chunked_cases = 0; /* cases on which run itself takes the chunked path */

/* One launch of the path chunk (0: one block) over poisoned outputs, twice (the second must reproduce the
 * first exactly, and the reference); returns 0 when a CUDA call failed. */
static int run_path(const perm_case* c, int32_t chunk, const int32_t* ids, const int32_t* want_sorted,
                    const int32_t* want_slot_row, const int32_t* want_tiles, int32_t want_num, int32_t max_tiles,
                    int32_t** d, size_t counters, int32_t* got_sorted, int32_t* got_slot_row, int32_t* got_tiles) {
  const size_t rows = (size_t)max_tiles * (size_t)c->tile_m, tk = c->TK > 0 ? (size_t)c->TK : 1;
  int32_t *d_ids = d[0], *d_sorted = d[1], *d_slot_row = d[2], *d_tiles = d[3], *d_num = d[4], *d_counts = d[5];
  int ok = 1;
  for (int rep = 0; ok && rep < 2; ++rep) {
    ok = cuda_ok(cudaMemcpy(d_ids, ids, tk * 4, cudaMemcpyHostToDevice), "copy ids") &&
         cuda_ok(cudaMemset(d_sorted, 0x7f, rows * 4), "poison") &&
         cuda_ok(cudaMemset(d_slot_row, 0x7f, tk * 4), "poison") &&
         cuda_ok(cudaMemset(d_tiles, 0x7f, (size_t)max_tiles * 4), "poison") &&
         cuda_ok(cudaMemset(d_num, 0x7f, 4), "poison") &&
         cuda_ok(cudaMemset(d_counts, 0x7f, counters * 4), "poison");
    if (!ok) break;
    fp8moe_permute_args a;
    memset(&a, 0, sizeof a);
    a.ids = d_ids;
    a.TK = c->TK;
    a.local_offset = c->local_offset;
    a.E_local = c->E_local;
    a.max_tiles = max_tiles;
    a.tile_m = c->tile_m;
    a.sorted_slots = d_sorted;
    a.slot_row = d_slot_row;
    a.tile_expert = d_tiles;
    a.num_tiles = d_num;
    a.chunk_slots = chunk;
    a.chunk_counts = chunk > 0 ? d_counts : NULL;
    int32_t got_num = -1;
    ok = cuda_ok((cudaError_t)fp8moe_launch_permute(&a, 0), "launch") &&
         cuda_ok(cudaDeviceSynchronize(), "permute kernels") &&
         cuda_ok(cudaMemcpy(&got_num, d_num, 4, cudaMemcpyDeviceToHost), "copy back") &&
         cuda_ok(cudaMemcpy(got_slot_row, d_slot_row, tk * 4, cudaMemcpyDeviceToHost), "copy back");
    if (!ok) break;
    EXPECT(got_num == want_num, "%s chunk %d rep %d: num_tiles %d, expected %d", c->name, (int)chunk, rep, got_num,
           want_num);
    if (got_num != want_num) break;
    const size_t used = (size_t)want_num * (size_t)c->tile_m;
    ok = cuda_ok(cudaMemcpy(got_sorted, d_sorted, used * 4 + 4, cudaMemcpyDeviceToHost), "copy back") &&
         cuda_ok(cudaMemcpy(got_tiles, d_tiles, (size_t)want_num * 4 + 4, cudaMemcpyDeviceToHost), "copy back");
    if (!ok) break;
    int32_t bad_tile = -1, bad_row = -1, bad_slot = -1;
    for (int32_t j = 0; j < want_num && bad_tile < 0; ++j)
      if (got_tiles[j] != want_tiles[j]) bad_tile = j;
    for (size_t r = 0; r < used && bad_row < 0; ++r)
      if (got_sorted[r] != want_sorted[r]) bad_row = (int32_t)r;
    for (int32_t i = 0; i < c->TK && bad_slot < 0; ++i)
      if (got_slot_row[i] != want_slot_row[i]) bad_slot = i;
    EXPECT(bad_tile < 0, "%s chunk %d rep %d: tile_expert[%d] = %d, expected %d", c->name, (int)chunk, rep, bad_tile,
           bad_tile < 0 ? 0 : got_tiles[bad_tile], bad_tile < 0 ? 0 : want_tiles[bad_tile]);
    EXPECT(bad_row < 0, "%s chunk %d rep %d: sorted_slots[%d] = %d, expected %d (rows of an expert in slot order)",
           c->name, (int)chunk, rep, bad_row, bad_row < 0 ? 0 : got_sorted[bad_row],
           bad_row < 0 ? 0 : want_sorted[bad_row]);
    EXPECT(bad_slot < 0, "%s chunk %d rep %d: slot_row[%d] = %d, expected %d", c->name, (int)chunk, rep, bad_slot,
           bad_slot < 0 ? 0 : got_slot_row[bad_slot], bad_slot < 0 ? 0 : want_slot_row[bad_slot]);
    /* Nothing past the used rows or tiles is written (the buffers are sized by the worst case). */
    EXPECT(got_sorted[used] == 0x7f7f7f7f && got_tiles[want_num] == 0x7f7f7f7f, "%s chunk %d rep %d: wrote past the end",
           c->name, (int)chunk, rep);
  }
  return ok;
}

static void run_case(const perm_case* c) {
  const int32_t max_tiles = c->TK / c->tile_m + c->E_local + 1;
  const size_t rows = (size_t)max_tiles * (size_t)c->tile_m;
  const size_t tk = c->TK > 0 ? (size_t)c->TK : 1;
  /* Paths: one block, the plan's chunks, 256-slot chunks, 1,000-slot chunks (duplicates dropped). */
  int32_t chunks[4] = {0, plan_chunk(c), FP8MOE_PERMUTE_CHUNK_ALIGN, 1000};
  if (chunks[1] > 0) ++plan_chunked_cases;
  /* The most chunks any path here has (256-slot chunks), plus the row of the experts' totals. */
  const size_t counters = ((tk + FP8MOE_PERMUTE_CHUNK_ALIGN - 1) / FP8MOE_PERMUTE_CHUNK_ALIGN + 1) * (size_t)c->E_local;
  int32_t* ids = malloc(tk * 4);
  int32_t* want_sorted = malloc(rows * 4);
  int32_t* want_slot_row = malloc(tk * 4);
  int32_t* want_tiles = malloc((size_t)max_tiles * 4);
  int32_t* got_sorted = malloc(rows * 4);
  int32_t* got_slot_row = malloc(tk * 4);
  int32_t* got_tiles = malloc((size_t)max_tiles * 4);
  make_ids(c, ids);
  const int32_t want_num = reference(c, ids, want_sorted, want_slot_row, want_tiles);

  int32_t* d[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
  const size_t bytes[6] = {tk * 4, rows * 4, tk * 4, (size_t)max_tiles * 4, 4, counters * 4};
  int ok = 1;
  for (int i = 0; i < 6 && ok; ++i) ok = cuda_ok(cudaMalloc((void**)&d[i], bytes[i]), "cudaMalloc");
  for (int p = 0; p < 4 && ok; ++p) {
    int dup = chunks[p] < 0 || (p > 0 && chunks[p] == 0);
    for (int q = 0; q < p; ++q) dup = dup || chunks[q] == chunks[p];
    if (!dup)
      ok = run_path(c, chunks[p], ids, want_sorted, want_slot_row, want_tiles, want_num, max_tiles, d, counters,
                    got_sorted, got_slot_row, got_tiles);
  }
  if (!ok) ++test_checks_run;
  for (int i = 0; i < 6; ++i) cudaFree(d[i]);
  free(ids);
  free(want_sorted);
  free(want_slot_row);
  free(want_tiles);
  free(got_sorted);
  free(got_slot_row);
  free(got_tiles);
}

/* The chunked launcher refuses what it cannot serve, enqueuing nothing (a chunk count ≤ 0, E_local past the
 * counters, no counter buffer). */
static void refusals(void) {
  int32_t* d = NULL;
  if (!cuda_ok(cudaMalloc((void**)&d, 1 << 20), "cudaMalloc")) return;
  fp8moe_permute_args a;
  memset(&a, 0, sizeof a);
  a.ids = d;
  a.TK = 4096;
  a.E_local = 256;
  a.max_tiles = 4096 / 16 + 256;
  a.tile_m = 16;
  a.sorted_slots = a.slot_row = a.tile_expert = a.num_tiles = a.chunk_counts = d;
  a.chunk_slots = -256;
  EXPECT(fp8moe_launch_permute(&a, 0) == (int)cudaErrorInvalidValue, "negative chunk_slots accepted");
  a.chunk_slots = 256;
  a.E_local = FP8MOE_PERMUTE_MAX_EXPERTS + 1;
  EXPECT(fp8moe_launch_permute(&a, 0) == (int)cudaErrorInvalidValue, "E_local %d accepted", (int)a.E_local);
  a.E_local = 256;
  a.chunk_counts = NULL;
  EXPECT(fp8moe_launch_permute(&a, 0) == (int)cudaErrorInvalidValue, "chunked path without counters accepted");
  EXPECT(cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess, "a refusal left an error");
  cudaFree(d);
}

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("test_gpu_permute: no CUDA device, skipped\n");
    return TEST_SKIP_CODE;
  }
  static const perm_case cases[] = {
      {"zero tokens", 0, 256, 0, 256, S, 0, 0},
      {"T=1 deepseek", 8, 256, 0, 256, S, 0, 0},
      {"T=7 with skipped slots", 56, 256, 0, 256, S, 0, 20},
      {"T=64 K=8 E=256", 512, 256, 0, 256, S, 0, 0},
      {"T=2048 K=8 E=256 uniform", 16384, 256, 0, 256, L, 0, 0},
      {"T=2048 K=8 E=256 skewed", 16384, 256, 0, 256, L, 8, 0},
      {"T=8192 K=8 E=256 uniform", 65536, 256, 0, 256, L, 0, 0},
      {"T=16384 K=8 E=384 skewed", 131072, 384, 0, 384, L, 24, 0},
      {"T=8192 K=2 E=8 (mixtral)", 16384, 8, 0, 8, L, 0, 0},
      {"expert parallel 64 of 256 at 128", 16384, 256, 128, 64, L, 0, 5},
      {"expert parallel 1 of 16", 4096, 16, 7, 1, S, 0, 0},
      {"E_local 2048", 32768, 2048, 0, 2048, S, 0, 0},
      {"E_local 2048 skewed, tile 64", 32768, 2048, 0, 2048, L, 16, 10},
      {"odd TK 100003", 100003, 160, 0, 160, L, 0, 3},
      /* Around the plan's threshold and past it (docs/GPU.md "Permutation"). */
      {"T*K 4095, one below the chunked threshold", 4095, 256, 0, 256, S, 0, 0},
      {"T*K 4096 at the chunked threshold", 4096, 256, 0, 256, S, 0, 0},
      {"T=8192 K=8 E=256 skewed, tile 16", 65536, 256, 0, 256, S, 8, 0},
      {"T=8192 K=8, 90 % of the slots on expert 0", 65536, 256, 0, 256, L, 1, 0},
      {"T=8192 K=8 every id skipped", 65536, 256, 0, 256, L, 0, 100},
      {"T=8192 K=8 E=256 half skipped", 65536, 256, 0, 256, S, 0, 50},
      {"expert parallel 2048 of 4096 at 1024, odd TK", 65543, 4096, 1024, 2048, L, 0, 5},
      {"expert parallel 32 of 256 at 224, skewed", 65536, 256, 224, 32, L, 16, 5},
      {"mixtral E=8 odd TK 65537", 65537, 8, 0, 8, L, 0, 0},
      {"E_local 1024 at T*K 40000", 40000, 1024, 0, 1024, S, 0, 1},
  };
  refusals();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) run_case(&cases[i]);
  EXPECT(plan_chunked_cases >= 10, "only %d cases reach the plan's chunked path", plan_chunked_cases);
  return test_finish("test_gpu_permute", test_checks_run);
}
