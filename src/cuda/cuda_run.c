/* cuda_run.c — one MoE call as a sequence of kernel launches on the caller's stream (docs/GPU.md):
 * zero the scalar words → routing (or PRECOMPUTED ids) → permute → input quantization (at small T these are
 * one launch, kernels/prologue.cu, when the kernel plan's prologue rule says so) → GEMM1 with the
 * fused activation/requantization (→ deferred row quantization) → GEMM2 → combine. Only kernel launches
 * and cudaMemsetAsync: no host synchronization, no allocation, capturable in a CUDA graph. */
#include <cuda_runtime_api.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_plan.h"
#include "gemm_decode.h"
#include "gemm/sm90_items.h"
#include "gemm_stream.h"
#include "kernels_internal.h"

static fp8moe_kref kref_of(const fp8moe_view* v) {
  fp8moe_kref r;
  memset(&r, 0, sizeof r);
  r.data = v->data;
  r.dt = (int32_t)v->dt;
  for (int32_t d = 0; d < v->ndim && d < 3; ++d) r.s[d] = v->strides[d];
  return r;
}

/* A contiguous fp32 workspace array seen as a kref with strides (s0, s1). */
static fp8moe_kref kref_f32(const void* data, int64_t s0, int64_t s1) {
  fp8moe_kref r;
  memset(&r, 0, sizeof r);
  r.data = data;
  r.dt = FP8MOE_DT_F32;
  r.s[0] = s0;
  r.s[1] = s1;
  return r;
}

static fp8moe_kout kout_of(const fp8moe_view* v) {
  fp8moe_kout r;
  memset(&r, 0, sizeof r);
  if (v->dt == FP8MOE_DT_NONE) return r;
  r.data = v->data;
  r.dt = (int32_t)v->dt;
  for (int32_t d = 0; d < v->ndim && d < 2; ++d) r.s[d] = v->strides[d];
  return r;
}

static int32_t check(int rc, const char* stage, fp8moe_err* err) {
  RETURN_IF(rc != 0, err, FP8MOE_STATUS_DEVICE_ERROR, "run: %s failed on the device; got %s; expected success",
            stage, cudaGetErrorString((cudaError_t)rc));
  return FP8MOE_STATUS_OK;
}

/* The kernels' name for the weight-scale geometry (their block is FP8MOE_GEMM_TILE_K wide; checked in run). */
static int32_t weight_scale_mode(const fp8moe_quant_geometry* g) {
  if (g->weight == FP8MOE_GRAN_BLOCK) return FP8MOE_SCALE_BLOCK;
  if (g->weight == FP8MOE_GRAN_ROW) return FP8MOE_SCALE_ROW;
  return FP8MOE_SCALE_TENSOR;
}

static void precomputed_args_of(const fp8moe_problem* p, const fp8moe_cuda_layout* l, char* ws,
                                fp8moe_precomputed_args* a) {
  memset(a, 0, sizeof *a);
  a->ids_in = kref_of(&p->topk_ids);
  a->weights_in = kref_of(&p->topk_weights);
  a->T = (int32_t)p->T;
  a->E = p->E;
  a->K = p->K;
  a->scale = p->routed_scaling_factor;
  a->ids = (int32_t*)(ws + l->ids);
  a->weights = (float*)(ws + l->weights);
  a->device_status = p->device_status.dt != FP8MOE_DT_NONE ? (int32_t*)p->device_status.data : NULL;
  a->ids_out = kout_of(&p->routing_ids_out);
  a->weights_out = kout_of(&p->routing_weights_out);
}

static void routing_args_of(const fp8moe_problem* p, const fp8moe_cuda_layout* l, char* ws, fp8moe_routing_args* a) {
  memset(a, 0, sizeof *a);
  a->logits = kref_of(&p->router_logits);
  if (p->routing_bias.dt != FP8MOE_DT_NONE) a->bias = kref_of(&p->routing_bias);
  a->T = (int32_t)p->T;
  a->E = p->E;
  a->K = p->K;
  a->method = p->routing_method;
  a->n_group = p->n_group;
  a->topk_group = p->topk_group;
  a->scale = p->routed_scaling_factor;
  a->ids = (int32_t*)(ws + l->ids);
  a->weights = (float*)(ws + l->weights);
  a->ids_out = kout_of(&p->routing_ids_out);
  a->weights_out = kout_of(&p->routing_weights_out);
}

/* chunked: the layout's chunked permutation is allowed (the context's switch); the prologue passes 0. */
static void permute_args_of(const fp8moe_problem* p, const fp8moe_cuda_layout* l, char* ws, int chunked,
                            fp8moe_permute_args* a) {
  memset(a, 0, sizeof *a);
  a->ids = (const int32_t*)(ws + l->ids);
  a->TK = (int32_t)(p->T * p->K);
  a->local_offset = p->local_offset;
  a->E_local = p->E_local;
  a->max_tiles = (int32_t)l->max_tiles;
  a->tile_m = l->tile_m;
  a->sorted_slots = (int32_t*)(ws + l->sorted_slots);
  a->slot_row = (int32_t*)(ws + l->slot_row);
  a->tile_expert = (int32_t*)(ws + l->tile_expert);
  a->num_tiles = (int32_t*)(ws + l->scalars) + FP8MOE_CUDA_S_NUM_TILES;
  if (chunked && l->permute_chunk > 0) {
    a->chunk_slots = l->permute_chunk;
    a->chunk_counts = (int32_t*)(ws + l->chunk_counts);
  }
}

/* Where GEMM1 reads x and its scales; returns 1 and fills *a when the input needs quantizing (not e4m3). */
static int quantize_args_of(const fp8moe_problem* p, const fp8moe_cuda_layout* l, char* ws, fp8moe_gemm1_args* g,
                            fp8moe_quantize_input_args* a) {
  uint32_t* words = (uint32_t*)(ws + l->scalars);
  memset(a, 0, sizeof *a);
  if (p->hidden_is_fp8) {
    g->x = (const uint8_t*)p->hidden_states.data;
    g->x_stride = p->hidden_states.strides[0];
    g->x_scale = kref_of(&p->hidden_scale);
    if (p->geom.act != FP8MOE_GRAN_BLOCK) g->x_scale.s[1] = 0; /* [T,1] reads column 0 */
    if (p->geom.act == FP8MOE_GRAN_TENSOR) g->x_scale.s[0] = 0;
    return 0;
  }
  a->hidden = kref_of(&p->hidden_states);
  a->T = (int32_t)p->T;
  a->H = (int32_t)p->H;
  a->K = p->K;
  a->token_weight = p->weight_on_input ? (const float*)(ws + l->weights) : NULL;
  a->amax = words + FP8MOE_CUDA_S_X_AMAX;
  a->xq = (uint8_t*)(ws + l->xq);
  g->x = a->xq;
  g->x_stride = p->H;
  switch (p->geom.act) {
    case FP8MOE_GRAN_BLOCK:
      a->mode = FP8MOE_ACTQ_GROUP128;
      a->xs = (float*)(ws + l->xs);
      g->x_scale = kref_f32(a->xs, p->H / p->geom.act_k, 1);
      break;
    case FP8MOE_GRAN_ROW:
      a->mode = FP8MOE_ACTQ_ROW;
      a->xs = (float*)(ws + l->xs);
      g->x_scale = kref_f32(a->xs, 1, 0);
      break;
    default:
      if (p->a1_static) {
        a->mode = FP8MOE_ACTQ_STATIC;
        a->static_scale = kref_of(&p->a1_scale);
        a->static_scale.s[0] = 0;
        g->x_scale = a->static_scale;
      } else {
        a->mode = FP8MOE_ACTQ_DYN_TENSOR;
        a->xs = (float*)(words + FP8MOE_CUDA_S_X_SCALE);
        g->x_scale = kref_f32(a->xs, 0, 0);
      }
      break;
  }
  return 1;
}

/* Whether this run's GEMM1 pair items read A from expert-sorted rows (docs/GPU.md "Expert-sorted activations"):
 * the plan's rule (fp8moe_cuda_plan_sorted_x, with the variant's mode) says so, the separate launches run (their
 * input quantization writes the rows; the prologue does not), y's bytes hold the rows (the layout leaves xq_sorted 0
 * where the input is already fp8 or the rows do not fit) and the plan's GEMM1, k1, is the 128-row kernel on one CTA
 * per item. experts() takes that kernel and refuses the flag anywhere else. */
static int sorted_x(const fp8moe_cuda_impl* impl, const fp8moe_problem* p, const fp8moe_cuda_layout* l,
                    const fp8moe_plan_row* k1) {
  return fp8moe_cuda_plan_sorted_x(p, impl->gemm1_sorted_x) && l->xq_sorted != 0 && impl->gemm1_pair_clusters == 0 &&
         k1->kernel == FP8MOE_GEMM_WGMMA128_SM90;
}

/* Separate launches (any T): routing or PRECOMPUTED intake → permutation (one block, or three launches over
 * chunks of slots at large T·K: the layout's permute_chunk) → input quantization. The scalar words, the per-row
 * amax and device_status are zeroed by the routing grid; before the PRECOMPUTED intake, which counts skipped ids
 * into device_status as it runs, by memsets. */
static int32_t stages_before_gemm1(const fp8moe_cuda_impl* impl, const fp8moe_problem* p, const fp8moe_cuda_layout* l,
                                   char* ws, cudaStream_t s, int sorted, fp8moe_gemm1_args* g, fp8moe_err* err) {
  if (p->routing_method == FP8MOE_ROUTING_PRECOMPUTED) {
    FORWARD_IF_ERROR(check(cudaMemsetAsync(ws + l->scalars, 0, FP8MOE_CUDA_S_WORDS * 4, s), "zeroing scalars", err));
    if (l->row_amax_bytes)
      FORWARD_IF_ERROR(check(cudaMemsetAsync(ws + l->row_amax, 0, l->row_amax_bytes, s), "zeroing row amax", err));
    if (p->device_status.dt != FP8MOE_DT_NONE)
      FORWARD_IF_ERROR(check(cudaMemsetAsync(p->device_status.data, 0, sizeof(int32_t), s), "zeroing device_status",
                             err));
    fp8moe_precomputed_args a;
    precomputed_args_of(p, l, ws, &a);
    FORWARD_IF_ERROR(check(fp8moe_launch_precomputed(&a, s), "precomputed routing", err));
  } else {
    fp8moe_routing_args a;
    routing_args_of(p, l, ws, &a);
    a.v1 = impl->route_v1;
    a.filtered = impl->route_filtered;
    fp8moe_zero_args z;
    memset(&z, 0, sizeof z);
    z.words = (uint32_t*)(ws + l->scalars);
    z.n_words = FP8MOE_CUDA_S_WORDS;
    if (l->row_amax_bytes) {
      z.rows = (uint32_t*)(ws + l->row_amax);
      z.n_rows = (int64_t)(l->row_amax_bytes / 4);
    }
    if (p->device_status.dt != FP8MOE_DT_NONE) z.status = (int32_t*)p->device_status.data;
    FORWARD_IF_ERROR(check(fp8moe_launch_routing(&a, &z, s), "routing", err));
  }
  fp8moe_permute_args pa;
  permute_args_of(p, l, ws, impl->permute_chunks, &pa);
  FORWARD_IF_ERROR(check(fp8moe_launch_permute(&pa, s), "permutation", err));
  fp8moe_quantize_input_args q;
  if (!quantize_args_of(p, l, ws, g, &q)) return FP8MOE_STATUS_OK;
  if (!sorted) return check(fp8moe_launch_quantize_input(&q, s), "input quantization", err);
  q.xq = (uint8_t*)(ws + l->xq_sorted); /* each token's codes into its slots' sorted rows, in y's bytes (sorted_x) */
  g->x = q.xq;
  g->x_sorted = 1;
  return check(fp8moe_launch_quantize_input_sorted(&q, (const int32_t*)(ws + l->slot_row), s), "input quantization",
               err);
}

/* The same stages in one launch at small T (the plan's prologue rule; single_block: its one-block variant at the
 * smallest T, else the routing cluster): the kernel zeroes the scalar words,
 * the per-row amax and device_status itself, except that a dynamic per-tensor input scale accumulates its
 * amax inside the launch, so then the scalar words are zeroed before it and the encoding pass follows. */
static int32_t fused_prologue(const fp8moe_cuda_impl* impl, const fp8moe_problem* p, const fp8moe_cuda_layout* l,
                              char* ws, cudaStream_t s, int single_block, fp8moe_gemm1_args* g, fp8moe_err* err) {
  fp8moe_prologue_args a;
  memset(&a, 0, sizeof a);
  a.single_block = single_block;
  a.precomputed = p->routing_method == FP8MOE_ROUTING_PRECOMPUTED;
  precomputed_args_of(p, l, ws, &a.pre); /* device_status: stored by the kernel on either routing path */
  if (!a.precomputed) routing_args_of(p, l, ws, &a.r);
  a.r.v1 = impl->route_v1; /* also picks the slot-list sequence on the PRECOMPUTED path */
  a.r.filtered = impl->route_filtered;
  a.warm_code = !a.precomputed && impl->route_warm;
  a.team = single_block && fp8moe_cuda_plan_prologue_team(p, impl->prologue);
  permute_args_of(p, l, ws, 0, &a.perm); /* small T·K: the prologue's own one-block placement */
  a.quantize = quantize_args_of(p, l, ws, g, &a.q);
  const int dyn_tensor = a.quantize && a.q.mode == FP8MOE_ACTQ_DYN_TENSOR;
  if (dyn_tensor) {
    FORWARD_IF_ERROR(check(cudaMemsetAsync(ws + l->scalars, 0, FP8MOE_CUDA_S_WORDS * 4, s), "zeroing scalars", err));
  } else {
    a.zero_words = (uint32_t*)(ws + l->scalars);
    a.n_zero_words = FP8MOE_CUDA_S_WORDS;
  }
  if (l->row_amax_bytes) {
    a.zero_rows = (uint32_t*)(ws + l->row_amax);
    a.n_zero_rows = (int64_t)(l->row_amax_bytes / 4);
  }
  FORWARD_IF_ERROR(check(fp8moe_launch_prologue(&a, s), "prologue (routing, permutation, input quantization)", err));
  if (!dyn_tensor) return FP8MOE_STATUS_OK;
  a.q.amax_done = 1;
  return check(fp8moe_launch_quantize_input(&a.q, s), "input quantization", err);
}

/* GEMM1, the intermediate quantization where it is deferred, GEMM2: on the plan's rows k1 and k2, which
 * fp8moe_cuda_enqueue picked once for the run. */
static int32_t experts(const fp8moe_cuda_impl* impl, const fp8moe_problem* p, const fp8moe_cuda_layout* l, char* ws,
                       cudaStream_t s, const fp8moe_plan_row* k1, const fp8moe_plan_row* k2, fp8moe_gemm1_args* g,
                       fp8moe_err* err) {
  uint32_t* words = (uint32_t*)(ws + l->scalars);
  const int32_t* num_tiles = (const int32_t*)words + FP8MOE_CUDA_S_NUM_TILES;
  const fp8moe_quant_geometry* geo = &p->geom;
  RETURN_IF((geo->weight == FP8MOE_GRAN_BLOCK && (geo->w_n != FP8MOE_GEMM_TILE_N || geo->w_k != FP8MOE_GEMM_TILE_K)) ||
                (geo->act == FP8MOE_GRAN_BLOCK && geo->act_k != FP8MOE_GEMM_TILE_K),
            err, FP8MOE_STATUS_INTERNAL,
            "run: quantization geometry the CUDA kernels do not cover; got %dx%d weight blocks and 1x%d groups; "
            "expected %dx%d and 1x%d",
            (int)geo->w_n, (int)geo->w_k, (int)geo->act_k, FP8MOE_GEMM_TILE_N, FP8MOE_GEMM_TILE_K, FP8MOE_GEMM_TILE_K);
  g->w = (const uint8_t*)p->w13.data;
  g->w_stride_e = p->w13.strides[0];
  g->w_stride_n = p->w13.strides[1];
  g->w_scale = kref_of(&p->w13_scale);
  g->sorted_slots = (const int32_t*)(ws + l->sorted_slots);
  g->tile_expert = (const int32_t*)(ws + l->tile_expert);
  g->num_tiles = num_tiles;
  g->token_weight = (p->weight_on_input && p->hidden_is_fp8) ? (const float*)(ws + l->weights) : NULL;
  g->H = (int32_t)p->H;
  g->I = (int32_t)p->I;
  g->K = p->K;
  g->scale_mode = weight_scale_mode(&p->geom);
  g->activation = p->activation;
  g->gate_first = p->gate_up_order == FP8MOE_GATE_UP_GATE_FIRST;
  g->a2q = (uint8_t*)(ws + l->a2q);
  g->max_tiles = (int32_t)l->max_tiles;
  g->tile_m = l->tile_m;
  g->max_ctas = impl->sm_count * FP8MOE_GEMM1_CTAS_PER_SM;
  g->E_local = p->E_local;
  g->tma_encode = impl->tma_encode;
  g->sm90_loop = impl->sm90_loop;
  g->item_order = impl->gemm1_order;
  g->item_group = fp8moe_cuda_plan_sm90_group(p->H); /* e4m3: K bytes = H */
  g->max_clusters = impl->gemm1_clusters;
  RETURN_IF(g->x_sorted && k1->kernel != FP8MOE_GEMM_WGMMA128_SM90, err, FP8MOE_STATUS_INTERNAL,
            "run: expert-sorted activations for the GEMM1 kernel; got kernel %d; expected the 128-row kernel (%d)",
            (int)k1->kernel, (int)FP8MOE_GEMM_WGMMA128_SM90);

  fp8moe_gemm2_args g2;
  memset(&g2, 0, sizeof g2);
  if (p->requant == FP8MOE_REQUANT_GROUP) {
    g->requant = FP8MOE_REQ_FUSED_GROUP;
    g->a2s = (float*)(ws + l->a2s);
    g2.a2_scale = kref_f32(g->a2s, p->I / p->geom.act_k, 1);
  } else if (p->requant == FP8MOE_REQUANT_STATIC) {
    g->requant = FP8MOE_REQ_FUSED_STATIC;
    g->a2_static = kref_of(&p->a2_scale);
    g->a2_static.s[0] = 0;
    g2.a2_scale = g->a2_static;
  } else {
    const int per_row = p->requant == FP8MOE_REQUANT_ROW;
    g->requant = per_row ? FP8MOE_REQ_DEFERRED_ROW : FP8MOE_REQ_DEFERRED_TENSOR;
    g->inter = (float*)(ws + l->inter);
    g->amax = per_row ? (uint32_t*)(ws + l->row_amax) : words + FP8MOE_CUDA_S_A2_AMAX;
    g->a2s = per_row ? (float*)(ws + l->a2s) : (float*)(words + FP8MOE_CUDA_S_A2_SCALE);
    g2.a2_scale = kref_f32(g->a2s, per_row ? 1 : 0, 0);
  }
  const int decode = k1->kernel == FP8MOE_GEMM_DECODE, stream = k1->kernel == FP8MOE_GEMM_STREAM_SM90;
  RETURN_IF((decode || stream || k2->kernel == FP8MOE_GEMM_DECODE || k2->kernel == FP8MOE_GEMM_STREAM_SM90) &&
                k1->kernel != k2->kernel,
            err, FP8MOE_STATUS_INTERNAL,
            "run: the kernel plan paired a decode GEMM with another kind; got kernels %d and %d; expected a pair",
            (int)k1->kernel, (int)k2->kernel);
  if (decode) {
    const int32_t clusters = impl->decode_ctas1 / FP8MOE_DECODE_CLUSTER;
    g->decode_dense = fp8moe_cuda_plan_decode_dense(p, clusters, impl->decode_ctas1_dense / FP8MOE_DECODE_CLUSTER,
                                                    impl->decode_dense);
    g->max_ctas = g->decode_dense ? impl->decode_ctas1_dense : impl->decode_ctas1;
  }
  if (stream) {
    g->max_ctas = impl->stream_ctas;
    g->stream_partials = (float*)(ws + l->stream_partials);
    g->stream_counters = words + FP8MOE_CUDA_S_STREAM_COUNTERS; /* zeroed with the scalar words */
    g->stream_handoff = impl->stream_handoff && fp8moe_cuda_plan_stream_handoff(p, FP8MOE_GEMM1, g->max_ctas);
    g->stream_pairs = !g->stream_handoff && fp8moe_cuda_plan_stream_pairs(p, impl->stream_pairs);
    g->stream_align = fp8moe_cuda_plan_stream_align(p, impl->stream_align);
    g->stream_rounds = g->stream_align ? impl->stream_rounds : 0;
  }
  /* zeroed with the scalar words; read only by the pair kernel */
  g->item_counter = impl->gemm1_claim ? words + FP8MOE_CUDA_S_GEMM1_ITEMS : NULL;
  g->partitioned = g->item_counter != NULL && impl->gemm1_partitioned; /* the one-CTA pair kernel reads it */
  memcpy(g->sm_partition, impl->sm_partition, sizeof g->sm_partition);
  int e1;
  if (stream) e1 = fp8moe_launch_gemm1_stream(g, s);
  else if (decode) e1 = fp8moe_launch_gemm1_decode(g, s);
  else if (k1->kernel == FP8MOE_GEMM_WGMMA_SM90 && impl->gemm1_alternate && g->max_clusters == 0 &&
           fp8moe_gemm1_sm90_alternate_fits(g)) {
    g->alternate = 1; /* the same items on the pair kernel, its warpgroups alternating (docs/GPU.md) */
    g->item_group = fp8moe_cuda_plan_sm90_gemm1_alt_group(p->H, p->T * p->K, p->E, impl->gemm1_sparse_group);
    /* docs/GPU.md "Expert-aligned groups" */
    g->aligned_groups =
        impl->gemm1_aligned && fp8moe_sm90_aligned_ok(g->item_order, g->max_clusters, g->max_tiles, g->item_group);
    e1 = fp8moe_launch_gemm1_sm90_pairs(g, s);
  } else if (k1->kernel == FP8MOE_GEMM_WGMMA_SM90) e1 = fp8moe_launch_gemm1_sm90(g, s);
  else if (k1->kernel == FP8MOE_GEMM_WGMMA128_SM90) {
    g->max_clusters = impl->gemm1_pair_clusters; /* "e": the pair items in 2-CTA clusters */
    /* the grouped order walks pairs of tiles; a cluster takes two consecutive ones */
    g->item_group = g->max_clusters > 0 ? fp8moe_cuda_plan_sm90_cluster_pair_group(p->H)
                                        : fp8moe_cuda_plan_sm90_pair_group(p->H);
    /* over pairs, the one-CTA kernel only (docs/GPU.md "Expert-aligned groups") */
    g->aligned_groups = impl->gemm1_pair_aligned &&
                        fp8moe_sm90_aligned_ok(g->item_order, g->max_clusters,
                                               fp8moe_sm90_max_pairs(g->max_tiles, g->E_local), g->item_group);
    e1 = fp8moe_launch_gemm1_sm90_pairs(g, s);
  }
  else e1 = fp8moe_launch_gemm1(g, s);
  FORWARD_IF_ERROR(check(e1, "GEMM1", err));
  if (g->requant == FP8MOE_REQ_DEFERRED_ROW || g->requant == FP8MOE_REQ_DEFERRED_TENSOR) {
    fp8moe_quantize_rows_args q;
    memset(&q, 0, sizeof q);
    q.inter = g->inter;
    q.amax = g->amax;
    q.per_row = g->requant == FP8MOE_REQ_DEFERRED_ROW;
    q.I = g->I;
    q.num_tiles = num_tiles;
    q.max_tiles = g->max_tiles;
    q.tile_m = g->tile_m;
    q.a2q = g->a2q;
    q.a2s = g->a2s;
    FORWARD_IF_ERROR(check(fp8moe_launch_quantize_rows(&q, s), "intermediate quantization", err));
  }

  g2.a2q = g->a2q;
  g2.w = (const uint8_t*)p->w2.data;
  g2.w_stride_e = p->w2.strides[0];
  g2.w_stride_n = p->w2.strides[1];
  g2.w_scale = kref_of(&p->w2_scale);
  g2.tile_expert = g->tile_expert;
  g2.num_tiles = num_tiles;
  g2.H = (int32_t)p->H;
  g2.I = (int32_t)p->I;
  g2.scale_mode = g->scale_mode;
  g2.max_tiles = g->max_tiles;
  g2.tile_m = g->tile_m;
  g2.max_ctas = decode ? impl->decode_ctas2 : impl->sm_count * FP8MOE_GEMM2_CTAS_PER_SM;
  g2.sorted_slots = g->sorted_slots;
  g2.y = (uint16_t*)(ws + l->y);
  g2.E_local = p->E_local;
  g2.tma_encode = impl->tma_encode;
  g2.sm90_loop = impl->sm90_loop;
  g2.item_order = impl->gemm2_order;
  g2.item_group =
      fp8moe_cuda_plan_sm90_gemm2_group(p->I, p->T * p->K, p->E, impl->gemm2_group, impl->gemm2_sparse_group);
  g2.max_clusters = impl->gemm2_clusters;
  /* read only by the one-CTA 64-row kernel (docs/GPU.md "Expert-aligned groups") */
  g2.aligned_groups =
      impl->gemm2_aligned && fp8moe_sm90_aligned_ok(g2.item_order, g2.max_clusters, g2.max_tiles, g2.item_group);
  g2.stream_partials = g->stream_partials;
  g2.stream_counters = g->stream_counters;
  if (stream) {
    g2.max_ctas = impl->stream_ctas;
    g2.stream_handoff = impl->stream_handoff && fp8moe_cuda_plan_stream_handoff(p, FP8MOE_GEMM2, g2.max_ctas);
    g2.stream_pairs = !g2.stream_handoff && fp8moe_cuda_plan_stream_pairs(p, impl->stream_pairs);
    g2.stream_align = g->stream_align;
    g2.stream_rounds = g->stream_rounds;
    return check(fp8moe_launch_gemm2_stream(&g2, s), "GEMM2", err);
  }
  if (decode) return check(fp8moe_launch_gemm2_decode(&g2, g->sorted_slots, s), "GEMM2", err);
  if (k2->kernel == FP8MOE_GEMM_WGMMA128_SM90) {
    g2.item_group = fp8moe_cuda_plan_sm90_pair_group(p->I); /* the grouped order walks pairs of tiles */
    return check(fp8moe_launch_gemm2_sm90_pairs(&g2, s), "GEMM2", err);
  }
  return check(k2->kernel == FP8MOE_GEMM_WGMMA_SM90 ? fp8moe_launch_gemm2_sm90(&g2, s) : fp8moe_launch_gemm2(&g2, s),
               "GEMM2", err);
}

static int32_t combine(const fp8moe_problem* p, const fp8moe_cuda_layout* l, char* ws, cudaStream_t s,
                       fp8moe_err* err) {
  fp8moe_combine_args a;
  memset(&a, 0, sizeof a);
  a.y = (const uint16_t*)(ws + l->y);
  a.slot_row = (const int32_t*)(ws + l->slot_row);
  a.weights = p->weight_on_input ? NULL : (const float*)(ws + l->weights);
  a.T = (int32_t)p->T;
  a.H = (int32_t)p->H;
  a.K = p->K;
  a.out = kout_of(&p->output);
  return check(fp8moe_launch_combine(&a, s), "combine", err);
}

int32_t fp8moe_cuda_enqueue(const fp8moe_cuda_impl* impl, const fp8moe_problem* p, fp8moe_err* err) {
  fp8moe_cuda_layout l;
  fp8moe_cuda_layout_make(p, impl->compute_capability, &l);
  char* ws = (char*)p->workspace;
  cudaStream_t s = (cudaStream_t)p->stream;
  fp8moe_gemm1_args g;
  memset(&g, 0, sizeof g);
  /* the plan's GEMM rows, picked once: sorted_x() and experts() both read them */
  const uint32_t offers = fp8moe_cuda_plan_offers(p, impl->plan_offers, impl->sm_count);
  const fp8moe_plan_row* k1 = fp8moe_cuda_plan_pick(FP8MOE_GEMM1, impl->compute_capability, p, offers);
  const fp8moe_plan_row* k2 = fp8moe_cuda_plan_pick(FP8MOE_GEMM2, impl->compute_capability, p, offers);
  RETURN_IF(k1 == NULL || k2 == NULL, err, FP8MOE_STATUS_DEVICE_ERROR,
            "run: no GEMM kernel in the plan for compute capability %d; got none; expected a plan row",
            (int)impl->compute_capability);
  const uint32_t prologue = fp8moe_cuda_plan_prologue(p, impl->prologue);
  if (prologue != FP8MOE_PROLOGUE_SEPARATE)
    FORWARD_IF_ERROR(fused_prologue(impl, p, &l, ws, s, prologue == FP8MOE_PROLOGUE_BLOCK, &g, err));
  else
    FORWARD_IF_ERROR(stages_before_gemm1(impl, p, &l, ws, s, sorted_x(impl, p, &l, k1), &g, err));
  FORWARD_IF_ERROR(experts(impl, p, &l, ws, s, k1, k2, &g, err));
  return combine(p, &l, ws, s, err);
}
