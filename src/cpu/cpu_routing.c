/* cpu_routing.c — every routing method of SPEC §2 for one token, in fp32, exactly as docs/DESIGN.md
 * "Routing" states: sanitize → select (ties to the lower index, unselectable fillers with weight 0) →
 * weigh → × routed_scaling_factor. exp, sigmoid and the softmax sums come from src/routing_math.h, the
 * formulation the CUDA kernel uses too, so both backends give the same bits. */
#include <float.h>
#include <inttypes.h>
#include <math.h>

#include "cpu_internal.h"
#include "numeric_internal.h"
#include "routing_math.h"

static float sigmoid(float s) { return fp8moe_rm_sigmoid(s); }

/* NaN and −Inf become −Inf (unselectable), +Inf becomes FLT_MAX. */
static float sanitize(float s) {
  if (s != s || s == -INFINITY) return -INFINITY;
  if (s == INFINITY) return FLT_MAX;
  return s;
}

/* Picks the index of the largest key > −Inf among the n not yet picked (ties: lower index); when none is
 * left, the lowest-index unpicked entry with *valid = 0. */
static int32_t pick_best(const float* key, uint8_t* picked, int32_t n, int32_t* valid) {
  int32_t best = -1;
  for (int32_t e = 0; e < n; ++e) {
    if (picked[e] || !(key[e] > -INFINITY)) continue;
    if (best < 0 || key[e] > key[best]) best = e;
  }
  *valid = best >= 0;
  if (best < 0) {
    for (int32_t e = 0; e < n && best < 0; ++e)
      if (!picked[e]) best = e;
  }
  picked[best] = 1;
  return best;
}

/* Selects K entries by key; ids[k], valid[k] (1 when the entry was selectable). */
static void select_topk(const float* key, uint8_t* picked, int32_t n, int32_t K, int32_t* ids, int32_t* valid) {
  for (int32_t e = 0; e < n; ++e) picked[e] = 0;
  for (int32_t k = 0; k < K; ++k) ids[k] = pick_best(key, picked, n, &valid[k]);
}

/* prob[e] = softmax over the selectable logits (unselectable: 0), summed in the kernel's warp order. */
static void softmax_all(const float* logit, int32_t E, float* prob) {
  float m = -INFINITY;
  for (int32_t e = 0; e < E; ++e)
    if (logit[e] > m) m = logit[e];
  for (int32_t e = 0; e < E; ++e) prob[e] = logit[e] > -INFINITY ? fp8moe_rm_softmax_term(logit[e], m) : 0.0f;
  float sum = fp8moe_rm_sum32(prob, E);
  for (int32_t e = 0; e < E; ++e) prob[e] = sum > 0.0f ? prob[e] / sum : 0.0f;
}

/* w[k] /= (Σ w + 1e-20), the sum in slot order. */
static void renormalize(float* w, int32_t K) {
  float sum = 0.0f;
  for (int32_t k = 0; k < K; ++k) sum += w[k];
  for (int32_t k = 0; k < K; ++k) w[k] = w[k] / (sum + 1e-20f);
}

/* DEEPSEEK_V3 group limiting: keys of experts outside the best topk_group groups become −Inf. */
static void limit_groups(const fp8moe_problem* p, float* key, fp8moe_cpu_scratch* s) {
  int32_t G = p->n_group, size = p->E / p->n_group;
  if (G <= 1 || p->topk_group >= G) return;
  for (int32_t g = 0; g < G; ++g) {
    const float* k = key + (int64_t)g * size;
    float first = -INFINITY, second = -INFINITY;
    for (int32_t e = 0; e < size; ++e) {
      if (k[e] > first) {
        second = first;
        first = k[e];
      } else if (k[e] > second) {
        second = k[e];
      }
    }
    s->group[g] = size >= 2 ? first + second : first;
  }
  /* Groups are ranked like experts, but a group whose score is −Inf can still be kept by index order. */
  for (int32_t g = 0; g < G; ++g) s->gpicked[g] = 0;
  for (int32_t r = 0; r < p->topk_group; ++r) {
    int32_t best = -1;
    for (int32_t g = 0; g < G; ++g) {
      if (s->gpicked[g]) continue;
      if (best < 0 || s->group[g] > s->group[best]) best = g;
    }
    s->gpicked[best] = 1;
  }
  for (int32_t g = 0; g < G; ++g)
    if (!s->gpicked[g])
      for (int32_t e = 0; e < size; ++e) key[(int64_t)g * size + e] = -INFINITY;
}

int32_t fp8moe_cpu_check_topk_ids(const fp8moe_problem* p, fp8moe_err* err) {
  const fp8moe_view* v = &p->topk_ids;
  for (int64_t t = 0; t < p->T; ++t) {
    for (int32_t k = 0; k < p->K; ++k) {
      int64_t id = fp8moe_view_read_i64(v, t * v->strides[0] + k * v->strides[1]);
      RETURN_IF(id < 0 || id >= p->E, err, FP8MOE_STATUS_DATA_ERROR,
                "topk_ids[%" PRId64 "][%" PRId32 "]: expert id out of range; got %" PRId64
                "; expected 0 <= id < %" PRId32 " (num_experts)",
                t, k, id, p->E);
    }
  }
  return FP8MOE_STATUS_OK;
}

static void route_precomputed(const fp8moe_problem* p, int64_t t, int32_t* ids, float* w) {
  const fp8moe_view* vi = &p->topk_ids;
  const fp8moe_view* vw = &p->topk_weights;
  for (int32_t k = 0; k < p->K; ++k) {
    ids[k] = (int32_t)fp8moe_view_read_i64(vi, t * vi->strides[0] + k * vi->strides[1]);
    w[k] = fp8moe_view_read_f32(vw, t * vw->strides[0] + k * vw->strides[1]);
  }
}

void fp8moe_cpu_route_token(const fp8moe_problem* p, int64_t t, fp8moe_cpu_scratch* s, int32_t* ids,
                            float* w) {
  int32_t E = p->E, K = p->K;
  int32_t* valid = s->valid;

  if (p->routing_method == FP8MOE_ROUTING_PRECOMPUTED) {
    route_precomputed(p, t, ids, w);
    for (int32_t k = 0; k < K; ++k) w[k] *= p->routed_scaling_factor;
    return;
  }

  const fp8moe_view* lv = &p->router_logits;
  fp8moe_cpu_read_row(lv, t * lv->strides[0], lv->strides[1], E, s->logit);
  for (int32_t e = 0; e < E; ++e) s->logit[e] = sanitize(s->logit[e]);
  float* key = s->key;
  float* aux = s->aux; /* the per-expert weight before selection, where the method has one */

  switch (p->routing_method) {
    case FP8MOE_ROUTING_DEFAULT:
    case FP8MOE_ROUTING_RENORMALIZE_NAIVE:
      softmax_all(s->logit, E, aux);
      for (int32_t e = 0; e < E; ++e) key[e] = s->logit[e] > -INFINITY ? aux[e] : -INFINITY;
      break;
    case FP8MOE_ROUTING_SIGMOID:
    case FP8MOE_ROUTING_SIGMOID_RENORM:
    case FP8MOE_ROUTING_DEEPSEEK_V3:
      for (int32_t e = 0; e < E; ++e) {
        aux[e] = s->logit[e] > -INFINITY ? sigmoid(s->logit[e]) : 0.0f;
        key[e] = s->logit[e] > -INFINITY ? aux[e] : -INFINITY;
      }
      if (p->routing_method == FP8MOE_ROUTING_DEEPSEEK_V3) {
        const fp8moe_view* bv = &p->routing_bias;
        for (int32_t e = 0; e < E; ++e) {
          float b = bv->dt != FP8MOE_DT_NONE ? fp8moe_view_read_f32(bv, e * bv->strides[0]) : 0.0f;
          float k2 = key[e] + b;
          key[e] = k2 != k2 ? -INFINITY : k2;
        }
        limit_groups(p, key, s);
      }
      break;
    default: /* RENORMALIZE, LLAMA4, TOPK, TOPK_SIGMOID select on the raw logits */
      for (int32_t e = 0; e < E; ++e) key[e] = s->logit[e];
      break;
  }

  select_topk(key, s->picked, E, K, ids, valid);

  for (int32_t k = 0; k < K; ++k) {
    float l = s->logit[ids[k]];
    switch (p->routing_method) {
      case FP8MOE_ROUTING_RENORMALIZE:
        w[k] = l; /* softmax over the K below */
        break;
      case FP8MOE_ROUTING_LLAMA4:
      case FP8MOE_ROUTING_TOPK_SIGMOID:
        w[k] = sigmoid(l);
        break;
      case FP8MOE_ROUTING_TOPK:
        w[k] = l;
        break;
      default:
        w[k] = aux[ids[k]];
        break;
    }
    if (!valid[k] && p->routing_method != FP8MOE_ROUTING_RENORMALIZE) w[k] = 0.0f;
  }

  switch (p->routing_method) {
    case FP8MOE_ROUTING_RENORMALIZE: {
      float m = -INFINITY;
      for (int32_t k = 0; k < K; ++k)
        if (valid[k] && w[k] > m) m = w[k];
      float sum = 0.0f;
      for (int32_t k = 0; k < K; ++k) {
        w[k] = valid[k] ? fp8moe_rm_softmax_term(w[k], m) : 0.0f;
        sum += w[k];
      }
      for (int32_t k = 0; k < K; ++k) w[k] = sum > 0.0f ? w[k] / sum : 0.0f;
      break;
    }
    case FP8MOE_ROUTING_RENORMALIZE_NAIVE:
    case FP8MOE_ROUTING_SIGMOID_RENORM:
    case FP8MOE_ROUTING_DEEPSEEK_V3:
      renormalize(w, K);
      break;
    default:
      break;
  }
  for (int32_t k = 0; k < K; ++k) w[k] *= p->routed_scaling_factor;
}
