/* fuzz_problem.h — the structured input of fuzz_run.c: a fixed header of small choices, each byte picking
 * one value of a field's domain (a few values outside it, with low weight), then data bytes. Byte-level
 * mutation of the header is therefore already a structured mutation; fuzz_header_mutate changes one field at a
 * time, towards valid values, so campaigns start from and stay near the valid problems of the seed corpus. */
#ifndef FP8MOE_FUZZ_PROBLEM_H
#define FP8MOE_FUZZ_PROBLEM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "baseline_problem.h"

#define FUZZ_PERTURB_KINDS 16
#define FUZZ_MIN_STRUCT_SIZE (offsetof(fp8moe_moe_args, output) + sizeof(void*))

typedef struct fuzz_perturbation {
  uint8_t tensor, kind, param;
} fuzz_perturbation;

typedef struct fuzz_header {
  uint8_t method, format, activation, gate_up, flags;
  uint8_t T, H, I, E, K, n_group, topk_group, local, offset;
  uint8_t hidden_dtype, options, scaling, struct_size_mode, struct_size_param, workspace_mode;
  fuzz_perturbation perturb[2];
} fuzz_header;

static inline void fuzz_header_read(fuzz_header* h, const uint8_t* data, size_t size) {
  memset(h, 0, sizeof *h);
  memcpy(h, data, size < sizeof *h ? size : sizeof *h);
}

/* A valid configuration as far as the choices allow (invalid enum values stay reachable). */
static inline void fuzz_config(const fuzz_header* h, baseline_config* c) {
  *c = baseline_config_default();
  c->method = h->method % 11;  /* 10: unknown */
  c->format = h->format % 4;   /* 3: unknown */
  c->activation = h->activation % 3;
  c->T = h->T % 6;
  c->H = 128 * (1 + h->H % 2);
  c->I = 128 * (1 + h->I % 2);
  c->E = 1 + h->E % 16;
  c->K = 1 + h->K % 8;
  if (c->K > c->E) c->K = c->E;
  static const int32_t groups[] = {1, 2, 4, 8};
  c->n_group = groups[h->n_group % 4];
  if (c->method == FP8MOE_ROUTING_DEEPSEEK_V3) {
    while (c->E % c->n_group) c->n_group /= 2;
    c->topk_group = 1 + h->topk_group % c->n_group;
    c->with_bias = h->options & 1;
  } else {
    c->n_group = 1;
    c->topk_group = 1;
  }
  if (c->method == FP8MOE_ROUTING_LLAMA4) c->K = 1;
  c->E_local = (h->local % 3 == 0) ? 0 : 1 + h->local % c->E;
  static const fp8moe_dtype* hidden[] = {&TEST_BF16, &TEST_F16, &TEST_E4M3};
  c->hidden_dt = *hidden[h->hidden_dtype % 3];
  c->hidden_scale_ndim = (h->hidden_dtype >> 2) & 1 ? (c->format == FP8MOE_QUANT_FP8_PER_CHANNEL ? 2 : 1) : -1;
  c->with_static_scales = c->format == FP8MOE_QUANT_FP8_PER_TENSOR && ((h->options >> 1) & 1);
  c->with_outputs = (h->options >> 2) & 1 ? 0 : 1;
}

/* struct_size and the remaining scalar fields of the args. */
static inline void fuzz_struct_size(const fuzz_header* h, fp8moe_moe_args* a) {
  a->gate_up_order = h->gate_up % 3;
  a->flags = (h->flags % 8 == 7) ? 2u : (h->flags % 8 == 6 ? FP8MOE_FLAG_WEIGHT_ON_INPUT : 0u);
  a->local_expert_offset = a->local_num_experts ? h->offset % (a->num_experts - a->local_num_experts + 2) : 0;
  static const float scales[] = {1.0f, 0.0f, 2.5f, -1.0f};
  a->routed_scaling_factor = scales[h->scaling % 4];
  switch (h->struct_size_mode % 8) {
    case 5: a->struct_size = FUZZ_MIN_STRUCT_SIZE; break;
    case 6: a->struct_size = h->struct_size_param; break; /* 0..255: inside fields too */
    case 7: a->struct_size = sizeof *a + h->struct_size_param; break;
    default: a->struct_size = sizeof *a; break;
  }
}

/* 1 when a's struct_size covers all of the field of tensor argument arg. */
static inline int fuzz_args_covers(const fp8moe_moe_args* a, int32_t arg) {
  const size_t first = offsetof(fp8moe_moe_args, hidden_states);
  return a->struct_size >= first + (size_t)(arg + 1) * sizeof(void*);
}

/* One field of h changed: mostly a small step, sometimes a fresh value, sometimes a perturbation. */
static inline void fuzz_header_mutate(fuzz_header* h, unsigned int seed) {
  uint8_t* b = (uint8_t*)h;
  size_t field = (seed >> 2) % sizeof *h;
  unsigned r = seed >> 10;
  switch (r % 4) {
    case 0: b[field] = (uint8_t)(b[field] + 1); break;
    case 1: b[field] = (uint8_t)(b[field] - 1); break;
    case 2: b[field] = (uint8_t)(r >> 2); break;
    default: { /* a perturbation of a random tensor */
      fuzz_perturbation* q = &h->perturb[(r >> 2) & 1];
      q->tensor = (uint8_t)(r >> 3);
      q->kind = (uint8_t)(r >> 7);
      q->param = (uint8_t)(r >> 11);
      break;
    }
  }
}

/* The library's table without dlopen (the fuzzers link its sources statically). */
static inline int test_plugin_open_static(test_plugin* tp) {
  memset(tp, 0, sizeof *tp);
  tp->negotiation.struct_size = sizeof tp->negotiation;
  tp->negotiation.host_abi_major = FP8MOE_ABI_VERSION_MAJOR;
  tp->negotiation.host_max_minor = FP8MOE_ABI_VERSION_MINOR;
  return fp8moe_get_api(&tp->negotiation, &tp->api) == FP8MOE_STATUS_OK ? 0 : -1;
}

#endif /* FP8MOE_FUZZ_PROBLEM_H */
