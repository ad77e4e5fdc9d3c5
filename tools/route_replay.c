/* route_replay — the routing of fp8moe-bench's points replayed on the host, no GPU: for each case (shape, format),
 * T and routing distribution, the bench's own logits and bias (bench_problem.c, the same seeds), routed by the CPU
 * backend through the C ABI with H = I = 128 (routing reads only logits and bias), then the counts that the stream
 * GEMMs' split rules read: experts hit, 16-row tiles and pair entries (two tiles of one expert a unit), and their
 * ratios (docs/GPU.md "Balanced rounds"); then the routed rows and the 64-row tiles of the tile GEMMs, and the rows
 * each form computes per routed row (tiles × 64 / rows and tiles16 × 16 / rows: the tensor-core work on padding rows;
 * docs/GPU.md "Padding rows"). It takes fp8moe-bench's own point arguments (bench_parse_args: --shape,
 * --format, --tokens, --routing, --library) and replays the points the bench would run; the others are ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_plugin.h"
#include "bench_problem.h"
#include "kernels_internal.h" /* the tile heights: the stream GEMMs' 16-row tiles, the tile GEMMs' 64 */

enum { kDim = 128, kTileRows = FP8MOE_GEMM_TILE_M_SMALL, kWgmmaRows = FP8MOE_GEMM_TILE_M_LARGE };

/* Zero weights of model ms (H = I = kDim) in per-tensor FP8: the routing's outputs do not depend on them. */
static int small_weights(const bench_model* ms, bench_weights* w) {
  const int64_t E = ms->E;
  memset(w, 0, sizeof *w);
  w->model = ms;
  w->format = FP8MOE_QUANT_FP8_PER_TENSOR;
  w->h13 = calloc((size_t)(E * 2 * kDim * kDim), 1);
  w->h2 = calloc((size_t)(E * kDim * kDim), 1);
  w->hs13 = calloc((size_t)E, sizeof(float));
  w->hs2 = calloc((size_t)E, sizeof(float));
  w->shape13[0] = w->shape2[0] = E;
  w->shape13[1] = 2 * kDim;
  w->shape13[2] = w->shape2[1] = w->shape2[2] = kDim;
  w->sndim = 1;
  w->sshape13[0] = w->sshape2[0] = E;
  w->ns13 = w->ns2 = (size_t)E;
  return w->h13 && w->h2 && w->hs13 && w->hs2 ? 0 : -1;
}

/* One point: 0 and its line printed, or -1. */
static int replay(const fp8moe_api* api, fp8moe_context* cpu, size_t ci, int64_t T, int routing) {
  const bench_case* c = bench_case_at(ci);
  bench_model ms = *c->model;
  ms.H = ms.I = kDim;
  const int64_t E = ms.E, K = ms.K;
  bench_weights w;
  bench_inputs in;
  memset(&in, 0, sizeof in); /* freed below whatever fails */
  const int ready = small_weights(&ms, &w) == 0 && bench_inputs_make(c->model, T, 31 * T + ci, &in) == 0;
  if (ready) bench_inputs_route(c->model, routing, 7 * T + (uint64_t)routing, &in);
  bench_buffers b;
  memset(&b, 0, sizeof b);
  b.hidden = calloc((size_t)(T * kDim), 2);
  b.logits = in.logits;
  b.bias = in.bias;
  b.a1 = &in.a_scales[0];
  b.a2 = &in.a_scales[1];
  b.out = malloc((size_t)(T * kDim) * 2);
  b.ids_out = malloc((size_t)(T * K) * 4);
  b.w_out = malloc((size_t)(T * K) * 4);
  int64_t* rows = calloc((size_t)E, sizeof(int64_t));
  bench_call call;
  bench_call_describe(&call, &w, &b, T, 0);
  size_t bytes = 0;
  int32_t st = ready && b.hidden && b.out && b.ids_out && b.w_out && rows ? api->query_workspace(cpu, &call.a, &bytes)
                                                                          : -1;
  void* ws = st == FP8MOE_STATUS_OK && bytes ? aligned_alloc(256, (bytes + 255) / 256 * 256) : NULL;
  call.a.workspace = ws;
  call.a.workspace_size = bytes;
  if (st == FP8MOE_STATUS_OK) st = bytes && !ws ? -1 : api->run(cpu, &call.a);
  if (st == FP8MOE_STATUS_OK) {
    const int32_t* ids = b.ids_out;
    for (int64_t i = 0; i < T * K; ++i)
      if (ids[i] >= 0 && ids[i] < E) ++rows[ids[i]];
    int64_t hit = 0, tiles = 0, pairs = 0, routed = 0, tiles64 = 0;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t t = (rows[e] + kTileRows - 1) / kTileRows;
      hit += rows[e] > 0;
      tiles += t;
      pairs += (t + 1) / 2;
      routed += rows[e];
      tiles64 += (rows[e] + kWgmmaRows - 1) / kWgmmaRows;
    }
    const double per_hit = hit ? 1.0 / (double)hit : 0.0, per_row = routed ? 1.0 / (double)routed : 0.0;
    printf("%s %s %s %lld %lld %lld %lld %.2f %.2f %lld %lld %.3f %.3f\n", c->model->name,
           bench_format_short(c->format), routing == BENCH_ROUTING_SKEWED ? "skewed" : "uniform", (long long)T,
           (long long)hit, (long long)tiles, (long long)pairs, (double)tiles * per_hit, (double)pairs * per_hit,
           (long long)routed, (long long)tiles64, (double)(tiles64 * kWgmmaRows) * per_row,
           (double)(tiles * kTileRows) * per_row);
  }
  free(ws);
  free(rows);
  free(b.hidden);
  free(b.out);
  free(b.ids_out);
  free(b.w_out);
  free(w.h13);
  free(w.h2);
  free(w.hs13);
  free(w.hs2);
  bench_inputs_free(&in);
  return st == FP8MOE_STATUS_OK ? 0 : -1;
}

int main(int argc, char** argv) {
  bench_args args;
  char err[256];
  if (bench_parse_args(argc, argv, &args, err, sizeof err) != 0) {
    fprintf(stderr, "route_replay: %s\n", err);
    return 2;
  }
  void* so = NULL;
  const fp8moe_api* api = NULL;
  fp8moe_context* cpu = NULL;
  if (bench_plugin_open(bench_plugin_path(args.library), "route_replay: ", &so, &api) != 0 ||
      bench_context_create(api, FP8MOE_BACKEND_CPU, "route_replay: CPU context", &cpu) != 0)
    return 1;
  printf("shape format routing T experts tiles16 pairs16 tiles/expert pairs/expert rows tiles64 work64 work16\n");
  int bad = 0;
  for (size_t ci = 0; ci < bench_case_count(); ++ci) {
    if (!(args.case_mask & (1u << ci))) continue;
    for (int ti = 0; ti < args.n_tokens; ++ti)
      for (int routing = BENCH_ROUTING_UNIFORM; routing <= BENCH_ROUTING_SKEWED; routing <<= 1)
        if (args.routing_mask & routing) bad += replay(api, cpu, ci, args.tokens[ti], routing) != 0;
  }
  api->context_destroy(cpu);
  return bad ? 1 : 0;
}
