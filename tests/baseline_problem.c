/* baseline_problem.c — see baseline_problem.h. */
#include "baseline_problem.h"

#include <stdlib.h>
#include <string.h>

baseline_config baseline_config_default(void) {
  baseline_config c;
  memset(&c, 0, sizeof c);
  c.method = FP8MOE_ROUTING_RENORMALIZE;
  c.format = FP8MOE_QUANT_FP8_BLOCK128;
  c.activation = FP8MOE_ACTIVATION_SWIGLU;
  c.T = 4;
  c.H = 256;
  c.I = 128;
  c.E = 8;
  c.K = 2;
  c.n_group = 1;
  c.topk_group = 1;
  c.hidden_dt = TEST_BF16;
  c.hidden_scale_ndim = -1;
  c.with_outputs = 1;
  return c;
}

void baseline_set(baseline_problem* p, int32_t arg, fp8moe_dtype dt, int32_t ndim, const int64_t* shape,
                  baseline_data_fn data) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; ++d) n *= shape[d];
  test_tensor_init(&p->t[arg], data(p, arg, dt, n), dt, ndim, shape, NULL);
}

/* The inputs are described in argument order, so a data() that fills from a random stream sees the same
 * sequence of requests for the same configuration. */
void baseline_build(baseline_problem* p, const baseline_config* c, baseline_data_fn data) {
  memset(p, 0, sizeof *p);
  p->c = *c;
  fp8moe_moe_args* a = &p->args;
  a->struct_size = sizeof *a;
  a->error_message = p->message;
  a->error_message_size = sizeof p->message;
  a->routing_method = c->method;
  a->quant_format = c->format;
  a->activation = c->activation;
  a->num_experts = c->E;
  a->top_k = c->K;
  a->local_num_experts = c->E_local;
  a->n_group = c->n_group;
  a->topk_group = c->topk_group;
  const int64_t T = c->T, H = c->H, I = c->I, E = c->E, K = c->K, El = c->E_local ? c->E_local : c->E;

  baseline_set(p, FP8MOE_ARG_HIDDEN_STATES, c->hidden_dt, 2, (int64_t[]){T, H}, data);
  a->hidden_states = &p->t[FP8MOE_ARG_HIDDEN_STATES].t;
  if (c->method != FP8MOE_ROUTING_PRECOMPUTED) {
    baseline_set(p, FP8MOE_ARG_ROUTER_LOGITS, TEST_F32, 2, (int64_t[]){T, E}, data);
    a->router_logits = &p->t[FP8MOE_ARG_ROUTER_LOGITS].t;
  } else {
    baseline_set(p, FP8MOE_ARG_TOPK_IDS, TEST_I32, 2, (int64_t[]){T, K}, data);
    baseline_set(p, FP8MOE_ARG_TOPK_WEIGHTS, TEST_F32, 2, (int64_t[]){T, K}, data);
    a->topk_ids = &p->t[FP8MOE_ARG_TOPK_IDS].t;
    a->topk_weights = &p->t[FP8MOE_ARG_TOPK_WEIGHTS].t;
  }
  if (c->with_bias) {
    baseline_set(p, FP8MOE_ARG_ROUTING_BIAS, TEST_F32, 1, (int64_t[]){E}, data);
    a->routing_bias = &p->t[FP8MOE_ARG_ROUTING_BIAS].t;
  }
  baseline_set(p, FP8MOE_ARG_W13, TEST_E4M3, 3, (int64_t[]){El, 2 * I, H}, data);
  baseline_set(p, FP8MOE_ARG_W2, TEST_E4M3, 3, (int64_t[]){El, H, I}, data);
  a->w13 = &p->t[FP8MOE_ARG_W13].t;
  a->w2 = &p->t[FP8MOE_ARG_W2].t;
  if (c->format == FP8MOE_QUANT_FP8_BLOCK128) {
    baseline_set(p, FP8MOE_ARG_W13_SCALE, TEST_F32, 3, (int64_t[]){El, 2 * I / 128, H / 128}, data);
    baseline_set(p, FP8MOE_ARG_W2_SCALE, TEST_F32, 3, (int64_t[]){El, H / 128, I / 128}, data);
    baseline_set(p, FP8MOE_ARG_HIDDEN_SCALE, TEST_F32, 2, (int64_t[]){T, H / 128}, data);
  } else if (c->format == FP8MOE_QUANT_FP8_PER_CHANNEL) {
    baseline_set(p, FP8MOE_ARG_W13_SCALE, TEST_F32, 2, (int64_t[]){El, 2 * I}, data);
    baseline_set(p, FP8MOE_ARG_W2_SCALE, TEST_F32, 2, (int64_t[]){El, H}, data);
    if (c->hidden_scale_ndim == 2) baseline_set(p, FP8MOE_ARG_HIDDEN_SCALE, TEST_F32, 2, (int64_t[]){T, 1}, data);
    else baseline_set(p, FP8MOE_ARG_HIDDEN_SCALE, TEST_F32, 1, (int64_t[]){T}, data);
  } else {
    baseline_set(p, FP8MOE_ARG_W13_SCALE, TEST_F32, 1, (int64_t[]){El}, data);
    baseline_set(p, FP8MOE_ARG_W2_SCALE, TEST_F32, 1, (int64_t[]){El}, data);
    if (c->hidden_scale_ndim == 1) baseline_set(p, FP8MOE_ARG_HIDDEN_SCALE, TEST_F32, 1, (int64_t[]){1}, data);
    else baseline_set(p, FP8MOE_ARG_HIDDEN_SCALE, TEST_F32, 0, NULL, data);
  }
  a->w13_scale = &p->t[FP8MOE_ARG_W13_SCALE].t;
  a->w2_scale = &p->t[FP8MOE_ARG_W2_SCALE].t;
  if (c->hidden_dt.code == FP8MOE_DTYPE_FLOAT8_E4M3FN) a->hidden_scale = &p->t[FP8MOE_ARG_HIDDEN_SCALE].t;
  if (c->with_static_scales) {
    baseline_set(p, FP8MOE_ARG_A1_SCALE, TEST_F32, 1, (int64_t[]){1}, data);
    baseline_set(p, FP8MOE_ARG_A2_SCALE, TEST_F32, 0, NULL, data);
    a->a1_scale = &p->t[FP8MOE_ARG_A1_SCALE].t;
    a->a2_scale = &p->t[FP8MOE_ARG_A2_SCALE].t;
  }
  baseline_set(p, FP8MOE_ARG_OUTPUT, TEST_BF16, 2, (int64_t[]){T, H}, data);
  a->output = &p->t[FP8MOE_ARG_OUTPUT].t;
  if (c->with_outputs) {
    baseline_set(p, FP8MOE_ARG_ROUTING_IDS_OUT, TEST_I32, 2, (int64_t[]){T, K}, data);
    baseline_set(p, FP8MOE_ARG_ROUTING_WEIGHTS_OUT, TEST_F32, 2, (int64_t[]){T, K}, data);
    baseline_set(p, FP8MOE_ARG_DEVICE_STATUS, TEST_I32, 1, (int64_t[]){1}, data);
    a->routing_ids_out = &p->t[FP8MOE_ARG_ROUTING_IDS_OUT].t;
    a->routing_weights_out = &p->t[FP8MOE_ARG_ROUTING_WEIGHTS_OUT].t;
    a->device_status = &p->t[FP8MOE_ARG_DEVICE_STATUS].t;
  }
}

int32_t baseline_cpu_context(const fp8moe_api* api, int32_t num_threads, fp8moe_context** ctx) {
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.backend = FP8MOE_BACKEND_CPU;
  ca.num_threads = num_threads;
  return api->context_create(&ca, ctx);
}

void* baseline_alloc256(size_t bytes) { return aligned_alloc(256, (bytes + 255) / 256 * 256); }

void* baseline_workspace(size_t need, size_t* size) {
  const size_t bytes = (need + 255) / 256 * 256 + 256;
  if (size) *size = bytes;
  return aligned_alloc(256, bytes);
}

int32_t baseline_run_with_workspace(const fp8moe_api* api, fp8moe_context* ctx, baseline_problem* p, void** ws) {
  size_t need = 0, size = 0;
  *ws = NULL;
  const int32_t st = api->query_workspace(ctx, &p->args, &need);
  if (st != FP8MOE_STATUS_OK) return st;
  *ws = baseline_workspace(need, &size);
  p->args.workspace = *ws;
  p->args.workspace_size = size;
  return api->run(ctx, &p->args);
}
