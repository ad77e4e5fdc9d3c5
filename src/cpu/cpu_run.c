/* cpu_run.c — one validated problem through the CPU backend, in phases separated by pool barriers:
 *   route → (input amax) → input quantization → expert FFN + combine
 * and, for a dynamic per-tensor a2, the FFN split in two around the intermediate's amax. Every phase
 * partitions tokens into contiguous ranges; a token's slots run in slot order on one thread, so the
 * result is the same for any thread count. */
#include <string.h>

#include "cpu_run_internal.h"
#include "numeric_internal.h"

typedef struct cpu_run {
  const fp8moe_problem* p;
  const fp8moe_cpu_layout* l;
  const float* lut;
  void* ws;
  int32_t* ids;
  float* w;
  uint8_t* xq;
  float* xs;
  float* partial;
  float* inter;
  float a1; /* PER_TENSOR input scale (static or dynamic) */
  float a2; /* PER_TENSOR intermediate scale (static or dynamic) */
} cpu_run;

static int slot_is_local(const fp8moe_problem* p, int32_t id) {
  return id >= p->local_offset && id < p->local_offset + p->E_local;
}

/* The input row of token t as fp32, with the routing weight applied first when it goes on the input. */
static void load_input(const cpu_run* r, int64_t t, float* x) {
  const fp8moe_view* hv = &r->p->hidden_states;
  fp8moe_cpu_read_row(hv, t * hv->strides[0], hv->strides[1], r->p->H, x);
  if (r->p->weight_on_input) {
    float wt = r->w[t * r->p->K];
    for (int64_t i = 0; i < r->p->H; ++i) x[i] = wt * x[i];
  }
}

static void phase_route(void* arg, int32_t ti, int32_t nt) {
  cpu_run* r = (cpu_run*)arg;
  const fp8moe_problem* p = r->p;
  fp8moe_cpu_scratch s;
  fp8moe_cpu_scratch_at(r->l, r->ws, ti, &s);
  int64_t t0, t1;
  fp8moe_pool_split(p->T, ti, nt, &t0, &t1);
  for (int64_t t = t0; t < t1; ++t) {
    int32_t* ids = r->ids + t * p->K;
    float* w = r->w + t * p->K;
    fp8moe_cpu_route_token(p, t, &s, ids, w);
    const fp8moe_view* io = &p->routing_ids_out;
    const fp8moe_view* wo = &p->routing_weights_out;
    for (int32_t k = 0; k < p->K; ++k) {
      if (io->dt != FP8MOE_DT_NONE)
        memcpy((char*)io->data + (t * io->strides[0] + k * io->strides[1]) * 4, &ids[k], sizeof(int32_t));
      if (wo->dt != FP8MOE_DT_NONE)
        memcpy((char*)wo->data + (t * wo->strides[0] + k * wo->strides[1]) * 4, &w[k], sizeof(float));
    }
  }
}

static void phase_input_amax(void* arg, int32_t ti, int32_t nt) {
  cpu_run* r = (cpu_run*)arg;
  fp8moe_cpu_scratch s;
  fp8moe_cpu_scratch_at(r->l, r->ws, ti, &s);
  int64_t t0, t1;
  fp8moe_pool_split(r->p->T, ti, nt, &t0, &t1);
  float m = 0.0f;
  for (int64_t t = t0; t < t1; ++t) {
    load_input(r, t, s.xf);
    float a = fp8moe_cpu_amax(s.xf, r->p->H);
    if (a > m) m = a;
  }
  r->partial[ti] = m;
}

static void phase_input_quant(void* arg, int32_t ti, int32_t nt) {
  cpu_run* r = (cpu_run*)arg;
  const fp8moe_problem* p = r->p;
  fp8moe_cpu_scratch s;
  fp8moe_cpu_scratch_at(r->l, r->ws, ti, &s);
  int64_t t0, t1;
  fp8moe_pool_split(p->T, ti, nt, &t0, &t1);
  int64_t per = r->l->xscale_per_token;
  for (int64_t t = t0; t < t1; ++t) {
    uint8_t* q = r->xq + t * p->H;
    if (p->hidden_is_fp8) {
      const fp8moe_view* hv = &p->hidden_states;
      const uint8_t* src = (const uint8_t*)hv->data + t * hv->strides[0];
      for (int64_t i = 0; i < p->H; ++i) q[i] = src[i * hv->strides[1]];
      const fp8moe_view* sv = &p->hidden_scale;
      for (int64_t b = 0; b < per; ++b) {
        int64_t off = t * sv->strides[0] + (sv->ndim > 1 ? b * sv->strides[1] : 0);
        r->xs[t * per + b] = fp8moe_view_read_f32(sv, off);
      }
      continue;
    }
    float unused_scale;
    load_input(r, t, s.xf);
    fp8moe_cpu_quant_row(&p->geom, s.xf, p->H, r->a1, q, per ? r->xs + t * per : &unused_scale);
  }
}

/* GEMM1 + activation of slot (t, k) on local expert e into act[I]. */
static void slot_first_half(const cpu_run* r, fp8moe_cpu_scratch* s, int64_t t, int32_t k, int32_t e,
                            float* act) {
  const fp8moe_problem* p = r->p;
  const float* xs = r->l->xscale_per_token ? r->xs + t * r->l->xscale_per_token : r->xs;
  fp8moe_cpu_gemm(&p->geom, r->lut, s->xf, xs, p->H, &p->w13, &p->w13_scale, e, 2 * p->I, s->h);
  if (p->weight_on_input && p->hidden_is_fp8) {
    /* (w·x)·W = w·(x·W): the host's fp8 input cannot be re-weighted before quantization. */
    float wt = r->w[t * p->K + k];
    for (int64_t n = 0; n < 2 * p->I; ++n) s->h[n] *= wt;
  }
  fp8moe_cpu_activate(p->activation, p->gate_up_order, s->h, p->I, act);
}

/* Requantization + GEMM2 of slot (t, k) on local expert e, accumulated into s->acc. */
static void slot_second_half(const cpu_run* r, fp8moe_cpu_scratch* s, int64_t t, int32_t k, int32_t e,
                             const float* act) {
  const fp8moe_problem* p = r->p;
  fp8moe_cpu_quant_row(&p->geom, act, p->I, r->a2, s->aq, s->ascale);
  for (int64_t i = 0; i < p->I; ++i) s->af[i] = r->lut[s->aq[i]];
  fp8moe_cpu_gemm(&p->geom, r->lut, s->af, s->ascale, p->I, &p->w2, &p->w2_scale, e, p->H, s->y);
  float wt = p->weight_on_input ? 1.0f : r->w[t * p->K + k];
  /* y is kept as bf16 before the combine, as on the GPU (docs/DESIGN.md "Combine"). */
  for (int64_t n = 0; n < p->H; ++n) s->acc[n] += wt * fp8moe_slot_bf16(s->y[n]);
}

static void decode_input(const cpu_run* r, int64_t t, float* xf) {
  const uint8_t* q = r->xq + t * r->p->H;
  for (int64_t i = 0; i < r->p->H; ++i) xf[i] = r->lut[q[i]];
}

static void write_output(const cpu_run* r, int64_t t, const float* acc) {
  const fp8moe_view* o = &r->p->output;
  fp8moe_cpu_write_row(o, t * o->strides[0], o->strides[1], r->p->H, acc);
}

/* Single-phase FFN: every slot of a token from GEMM1 to the combine. */
static void phase_experts(void* arg, int32_t ti, int32_t nt) {
  cpu_run* r = (cpu_run*)arg;
  const fp8moe_problem* p = r->p;
  fp8moe_cpu_scratch s;
  fp8moe_cpu_scratch_at(r->l, r->ws, ti, &s);
  int64_t t0, t1;
  fp8moe_pool_split(p->T, ti, nt, &t0, &t1);
  for (int64_t t = t0; t < t1; ++t) {
    memset(s.acc, 0, (size_t)p->H * sizeof(float));
    decode_input(r, t, s.xf);
    for (int32_t k = 0; k < p->K; ++k) {
      int32_t id = r->ids[t * p->K + k];
      if (!slot_is_local(p, id)) continue;
      slot_first_half(r, &s, t, k, id - p->local_offset, s.act);
      slot_second_half(r, &s, t, k, id - p->local_offset, s.act);
    }
    write_output(r, t, s.acc);
  }
}

/* Two-phase FFN, first half: activations of every local slot kept, and their finite amax. */
static void phase_experts_first(void* arg, int32_t ti, int32_t nt) {
  cpu_run* r = (cpu_run*)arg;
  const fp8moe_problem* p = r->p;
  fp8moe_cpu_scratch s;
  fp8moe_cpu_scratch_at(r->l, r->ws, ti, &s);
  int64_t t0, t1;
  fp8moe_pool_split(p->T, ti, nt, &t0, &t1);
  float m = 0.0f;
  for (int64_t t = t0; t < t1; ++t) {
    decode_input(r, t, s.xf);
    for (int32_t k = 0; k < p->K; ++k) {
      int32_t id = r->ids[t * p->K + k];
      if (!slot_is_local(p, id)) continue;
      float* act = r->inter + (t * p->K + k) * p->I;
      slot_first_half(r, &s, t, k, id - p->local_offset, act);
      float a = fp8moe_cpu_amax(act, p->I);
      if (a > m) m = a;
    }
  }
  r->partial[ti] = m;
}

static void phase_experts_second(void* arg, int32_t ti, int32_t nt) {
  cpu_run* r = (cpu_run*)arg;
  const fp8moe_problem* p = r->p;
  fp8moe_cpu_scratch s;
  fp8moe_cpu_scratch_at(r->l, r->ws, ti, &s);
  int64_t t0, t1;
  fp8moe_pool_split(p->T, ti, nt, &t0, &t1);
  for (int64_t t = t0; t < t1; ++t) {
    memset(s.acc, 0, (size_t)p->H * sizeof(float));
    for (int32_t k = 0; k < p->K; ++k) {
      int32_t id = r->ids[t * p->K + k];
      if (!slot_is_local(p, id)) continue;
      slot_second_half(r, &s, t, k, id - p->local_offset, r->inter + (t * p->K + k) * p->I);
    }
    write_output(r, t, s.acc);
  }
}

/* Max over the threads' partial amax values (order-free), as a dynamic scale. */
static float reduce_scale(const cpu_run* r, int32_t nt) {
  float m = 0.0f;
  for (int32_t i = 0; i < nt; ++i)
    if (r->partial[i] > m) m = r->partial[i];
  return fp8moe_cpu_dynamic_scale(m);
}

int32_t fp8moe_cpu_run(fp8moe_cpu_impl* impl, const fp8moe_problem* p, fp8moe_err* err) {
  fp8moe_cpu_layout l;
  int32_t nt = impl->num_threads;
  fp8moe_cpu_layout_make(p, nt, &l);
  RETURN_IF(p->workspace_size < l.total || (l.total && !p->workspace), err, FP8MOE_STATUS_WORKSPACE_TOO_SMALL,
            "workspace_size: too small for the CPU backend; got %zu; expected >= %zu", p->workspace_size,
            l.total);
  if (p->routing_method == FP8MOE_ROUTING_PRECOMPUTED) FORWARD_IF_ERROR(fp8moe_cpu_check_topk_ids(p, err));
  if (p->T == 0) return FP8MOE_STATUS_OK;

  unsigned char* ws = (unsigned char*)p->workspace;
  cpu_run r = {
      .p = p,
      .l = &l,
      .lut = impl->e4m3_lut,
      .ws = ws,
      .ids = (int32_t*)(void*)(ws + l.ids),
      .w = (float*)(void*)(ws + l.weights),
      .xq = ws + l.xq,
      .xs = (float*)(void*)(ws + l.xscale),
      .partial = (float*)(void*)(ws + l.partial),
      .inter = (float*)(void*)(ws + l.inter),
      .a1 = 1.0f,
      .a2 = 1.0f,
  };
  int per_tensor = p->geom.act == FP8MOE_GRAN_TENSOR;
  if (per_tensor && p->a1_static) r.a1 = fp8moe_view_read_f32(&p->a1_scale, 0);
  if (per_tensor && p->a2_static) r.a2 = fp8moe_view_read_f32(&p->a2_scale, 0);
  if (per_tensor && p->hidden_is_fp8) r.xs[0] = fp8moe_view_read_f32(&p->hidden_scale, 0);

  fp8moe_pool_lock(impl->pool);
  fp8moe_pool_run(impl->pool, phase_route, &r);
  if (per_tensor && !p->hidden_is_fp8) {
    if (!p->a1_static) {
      fp8moe_pool_run(impl->pool, phase_input_amax, &r);
      r.a1 = reduce_scale(&r, nt);
    }
    r.xs[0] = r.a1;
  }
  fp8moe_pool_run(impl->pool, phase_input_quant, &r);
  if (l.two_phase) {
    fp8moe_pool_run(impl->pool, phase_experts_first, &r);
    r.a2 = reduce_scale(&r, nt);
    fp8moe_pool_run(impl->pool, phase_experts_second, &r);
  } else {
    fp8moe_pool_run(impl->pool, phase_experts, &r);
  }
  fp8moe_pool_unlock(impl->pool);
  return FP8MOE_STATUS_OK;
}
