/* cpu_layout.c — where each piece of a run's scratch lives in the caller's workspace. The layout depends
 * only on the problem's sizes and the context's thread count, never on tensor data, so query_workspace and
 * run agree. */
#include "cpu_internal.h"

static size_t align_up(size_t n) {
  return (n + (FP8MOE_CPU_ALIGN - 1)) & ~(size_t)(FP8MOE_CPU_ALIGN - 1);
}

/* Reserves bytes at *cursor and returns the slice's offset. */
static size_t take(size_t* cursor, size_t bytes) {
  size_t at = *cursor;
  *cursor = align_up(at + bytes);
  return at;
}

void fp8moe_cpu_layout_make(const fp8moe_problem* p, int32_t num_threads, fp8moe_cpu_layout* l) {
  size_t T = (size_t)p->T, K = (size_t)p->K, H = (size_t)p->H, I = (size_t)p->I, E = (size_t)p->E;
  size_t nt = (size_t)(num_threads < 1 ? 1 : num_threads);
  const int64_t act_scales = fp8moe_act_scales_per_row(&p->geom, p->I);
  size_t ai = act_scales > 0 ? (size_t)act_scales : 1;

  l->xscale_per_token = fp8moe_act_scales_per_row(&p->geom, p->H);
  l->two_phase = p->requant == FP8MOE_REQUANT_TENSOR;

  size_t cursor = 0;
  l->ids = take(&cursor, T * K * sizeof(int32_t));
  l->weights = take(&cursor, T * K * sizeof(float));
  l->xq = take(&cursor, T * H);
  l->xscale = take(&cursor, (l->xscale_per_token ? T * (size_t)l->xscale_per_token : 1) * sizeof(float));
  l->partial = take(&cursor, nt * sizeof(float));
  l->inter = take(&cursor, l->two_phase ? T * K * I * sizeof(float) : 0);

  size_t s = 0;
  l->s_logit = take(&s, E * sizeof(float));
  l->s_key = take(&s, E * sizeof(float));
  l->s_aux = take(&s, E * sizeof(float));
  l->s_group = take(&s, E * sizeof(float));
  l->s_valid = take(&s, (E > K ? E : K) * sizeof(int32_t));
  l->s_picked = take(&s, E);
  l->s_gpicked = take(&s, E);
  l->s_xf = take(&s, H * sizeof(float));
  l->s_h = take(&s, 2 * I * sizeof(float));
  l->s_act = take(&s, I * sizeof(float));
  l->s_aq = take(&s, I);
  l->s_ascale = take(&s, ai * sizeof(float));
  l->s_af = take(&s, I * sizeof(float));
  l->s_y = take(&s, H * sizeof(float));
  l->s_acc = take(&s, H * sizeof(float));
  l->scratch_stride = s;

  l->scratch = take(&cursor, nt * s);
  l->total = cursor;
}

void fp8moe_cpu_scratch_at(const fp8moe_cpu_layout* l, void* workspace, int32_t thread_index,
                           fp8moe_cpu_scratch* s) {
  unsigned char* base = (unsigned char*)workspace + l->scratch + (size_t)thread_index * l->scratch_stride;
  s->logit = (float*)(void*)(base + l->s_logit);
  s->key = (float*)(void*)(base + l->s_key);
  s->aux = (float*)(void*)(base + l->s_aux);
  s->group = (float*)(void*)(base + l->s_group);
  s->valid = (int32_t*)(void*)(base + l->s_valid);
  s->picked = base + l->s_picked;
  s->gpicked = base + l->s_gpicked;
  s->xf = (float*)(void*)(base + l->s_xf);
  s->h = (float*)(void*)(base + l->s_h);
  s->act = (float*)(void*)(base + l->s_act);
  s->aq = base + l->s_aq;
  s->ascale = (float*)(void*)(base + l->s_ascale);
  s->af = (float*)(void*)(base + l->s_af);
  s->y = (float*)(void*)(base + l->s_y);
  s->acc = (float*)(void*)(base + l->s_acc);
}
