/* fuzz_run.c — libFuzzer target for validation and the CPU backend at tiny shapes (docs/RELIABILITY.md).
 *
 * The input is a fixed header of choices (fuzz_problem.h) followed by data bytes. The header describes a
 * problem — method, format, sizes, dtypes, struct_size — and up to two perturbations of its tensors (strides,
 * shapes, byte_offset, dtype, device, NULL data, an output aliasing an input, overlapping output rows). The
 * harness allocates every tensor exactly to the extent its final descriptor spans (so AddressSanitizer sees
 * any read or write outside what the call described), fills it from the data bytes, and calls query_support,
 * query_workspace and run on a CPU context. The custom mutator changes one header choice within (mostly) its
 * valid domain, or the data bytes, so mutation starts from the valid problems of the seed corpus.
 *
 * Invariants (a trap when broken): statuses are documented ones; a refusal leaves every output untouched and
 * carries a NUL-terminated message; query_support answers what run answers (the workspace aside); a problem
 * with an aliased output, overlapping output rows or an address past 2^63 is refused. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_problem.h"
#include "fuzz_problem.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

static const fp8moe_api* api;
static fp8moe_context* ctx;

/* ---- data bytes and allocations ---- */

typedef struct feed {
  const uint8_t* bytes;
  size_t size, pos;
} feed;

static uint8_t next_byte(feed* f) {
  if (f->size == 0) return 0x3C;
  uint8_t b = f->bytes[f->pos % f->size];
  f->pos++;
  return b;
}

#define MAX_ALLOCS 40
static void* allocs[MAX_ALLOCS];
static uint64_t alloc_bytes[MAX_ALLOCS];
static int n_allocs;
static feed data_feed;

static void* take(size_t bytes) {
  if (n_allocs == MAX_ALLOCS) return NULL;
  void* p = malloc(bytes ? bytes : 1);
  alloc_bytes[n_allocs] = bytes;
  allocs[n_allocs++] = p;
  return p;
}

/* Bytes of our allocations from ptr on (0 when ptr is not inside one): what the harness itself may touch. */
static uint64_t backed_bytes(const void* ptr) {
  for (int i = 0; i < n_allocs; ++i) {
    const unsigned char* b = allocs[i];
    if ((const unsigned char*)ptr >= b && (const unsigned char*)ptr <= b + alloc_bytes[i])
      return alloc_bytes[i] - (uint64_t)((const unsigned char*)ptr - b);
  }
  return 0;
}

static void fill(void* d, fp8moe_dtype dt, int32_t arg, uint64_t bytes) {
  unsigned char* b = d;
  /* the first 4 KiB from the data bytes, then repeated (weights run to megabytes; speed matters) */
  uint64_t head = bytes < 4096 ? bytes : 4096;
  for (uint64_t i = 0; i < head; ++i) b[i] = next_byte(&data_feed);
  for (uint64_t done = head; done < bytes && head > 0;) {
    uint64_t n = done < bytes - done ? done : bytes - done;
    memcpy(b + done, b, n);
    done += n;
  }
  /* keep scales positive and finite, most of the time, so runs reach the GEMMs */
  if ((arg == FP8MOE_ARG_W13_SCALE || arg == FP8MOE_ARG_W2_SCALE || arg == FP8MOE_ARG_HIDDEN_SCALE ||
       arg == FP8MOE_ARG_A1_SCALE || arg == FP8MOE_ARG_A2_SCALE) && dt.code == FP8MOE_DTYPE_FLOAT && dt.bits == 32)
    for (uint64_t i = 0; i + 4 <= bytes; i += 4) b[i + 3] = (unsigned char)(0x3C | (b[i + 3] & 0x80 ? 0x00 : 0x01));
  if (arg == FP8MOE_ARG_TOPK_IDS && dt.code == FP8MOE_DTYPE_INT)
    for (uint64_t i = 0; i < bytes; ++i) b[i] = (i % (dt.bits / 8)) == 0 ? (unsigned char)(b[i] % 20) : 0;
}

static void* data_fn(const baseline_problem* p, int32_t arg, fp8moe_dtype dt, int64_t n) {
  (void)p;
  uint64_t bytes = (uint64_t)(n > 0 ? n : 0) * (dt.bits / 8u);
  void* d = take(bytes);
  if (d) fill(d, dt, arg, bytes);
  return d;
}

/* The bytes a descriptor spans from data (byte_offset included); UINT64_MAX when it is not plain. */
static uint64_t span_bytes(const test_tensor* tt) {
  const fp8moe_tensor* t = &tt->t;
  if (t->ndim < 0 || t->ndim > 4) return UINT64_MAX;
  uint64_t elem = (uint64_t)t->dtype.bits / 8u * (t->dtype.lanes ? t->dtype.lanes : 1);
  uint64_t last = 0, compact = 1;
  for (int32_t d = t->ndim - 1; d >= 0; --d) {
    if (t->shape[d] == 0) return t->byte_offset;
    if (t->shape[d] < 0) return UINT64_MAX;
    int64_t s = t->strides ? t->strides[d] : (int64_t)compact;
    if (s < 0 || s > (1 << 24)) return UINT64_MAX;
    last += (uint64_t)(t->shape[d] - 1) * (uint64_t)s;
    compact *= (uint64_t)t->shape[d];
  }
  if (t->byte_offset > (1u << 24)) return UINT64_MAX;
  return t->byte_offset + (last + 1) * (elem ? elem : 1);
}

/* Gives tensor arg a fresh buffer exactly as large as its descriptor spans (when that is plain). */
static void reback(baseline_problem* p, int32_t arg) {
  test_tensor* tt = &p->t[arg];
  uint64_t bytes = span_bytes(tt);
  if (bytes == UINT64_MAX || bytes > (64u << 20)) return;
  void* d = take(bytes);
  if (!d) return;
  fill(d, tt->t.dtype, arg, bytes);
  tt->t.data = d;
}

/* ---- one problem ---- */

static const int32_t all_args[] = {
    FP8MOE_ARG_HIDDEN_STATES, FP8MOE_ARG_HIDDEN_SCALE, FP8MOE_ARG_ROUTER_LOGITS, FP8MOE_ARG_ROUTING_BIAS,
    FP8MOE_ARG_TOPK_IDS,      FP8MOE_ARG_TOPK_WEIGHTS, FP8MOE_ARG_W13,           FP8MOE_ARG_W13_SCALE,
    FP8MOE_ARG_W2,            FP8MOE_ARG_W2_SCALE,     FP8MOE_ARG_A1_SCALE,      FP8MOE_ARG_A2_SCALE,
    FP8MOE_ARG_OUTPUT,        FP8MOE_ARG_ROUTING_IDS_OUT, FP8MOE_ARG_ROUTING_WEIGHTS_OUT, FP8MOE_ARG_DEVICE_STATUS};

static const fp8moe_tensor* arg_ptr(const fp8moe_moe_args* a, int32_t arg) {
  const fp8moe_tensor* const list[] = {a->hidden_states, a->hidden_scale, a->router_logits, a->routing_bias,
                                       a->topk_ids,      a->topk_weights, a->w13,           a->w13_scale,
                                       a->w2,            a->w2_scale,     a->a1_scale,      a->a2_scale,
                                       a->output,        a->routing_ids_out, a->routing_weights_out,
                                       a->device_status};
  return list[arg];
}

static int is_output(int32_t arg) { return arg >= FP8MOE_ARG_OUTPUT; }

/* Applies one perturbation; returns 1 when the result must be refused. */
static int perturb(baseline_problem* p, const fuzz_perturbation* q, int32_t* touched) {
  int32_t arg = all_args[q->tensor % 16];
  touched[0] = arg;
  test_tensor* tt = &p->t[arg];
  if (arg_ptr(&p->args, arg) == NULL || tt->t.ndim > 4) return 0;
  const int32_t nd = tt->t.ndim;
  const int32_t d = nd > 0 ? (int32_t)(q->param % (uint8_t)nd) : 0;
  int empty = 0;
  for (int32_t i = 0; i < nd; ++i) empty |= tt->shape[i] == 0;
  if (!tt->t.strides) { /* make strides explicit to edit them */
    int64_t c = 1;
    for (int32_t i = nd - 1; i >= 0; --i) {
      tt->strides[i] = c;
      c *= tt->shape[i] ? tt->shape[i] : 1;
    }
    tt->t.strides = tt->strides;
  }
  switch (q->kind % FUZZ_PERTURB_KINDS) {
    case 1: /* pad a stride */
      if (nd > 0) tt->strides[d] += 8 * (int64_t)(q->param >> 2);
      reback(p, arg);
      return 0;
    case 2: /* broadcast a dim */
      if (nd > 0) tt->strides[d] = 0;
      reback(p, arg);
      return 0;
    case 3: /* negative stride: refused unless empty or extent 1 there */
      if (nd > 0) tt->strides[d] = -1 - (int64_t)(q->param >> 4);
      return nd > 0 && !empty && tt->shape[d] > 1;
    case 4: /* one more along a dim */
      if (nd > 0) tt->shape[d] += 1;
      reback(p, arg);
      return 0;
    case 5: /* empty */
      if (nd > 0) tt->shape[d] = 0;
      return 0;
    case 6: /* byte_offset past 2^63 */
      tt->t.byte_offset = ((uint64_t)1 << 63) + (uint64_t)q->param * 0x10001u;
      return 1;
    case 7: /* an aligned byte_offset into a larger buffer */
      tt->t.byte_offset = 256u * (q->param % 4u);
      reback(p, arg);
      return 0;
    case 8: /* misaligned */
      tt->t.byte_offset = 1u + q->param % 3u;
      reback(p, arg);
      return 0;
    case 9:
      tt->t.data = NULL;
      return 0;
    case 10:
      tt->t.dtype.lanes = 2;
      return 1;
    case 11:
      tt->t.device.device_type = FP8MOE_DEVICE_CUDA;
      return 1;
    case 12: /* a rank off by one */
      tt->t.ndim = (q->param & 1) ? nd + 1 : nd - 1;
      if (tt->t.ndim > 0 && tt->t.ndim <= 4 && tt->t.ndim > nd) {
        tt->shape[nd] = 1;
        tt->strides[nd] = 1;
      }
      reback(p, arg);
      return 0;
    case 13: { /* the output (or another output) placed on this tensor */
      const int32_t target = is_output(arg) && arg != FP8MOE_ARG_OUTPUT ? FP8MOE_ARG_OUTPUT : arg;
      const int32_t victim = target == FP8MOE_ARG_OUTPUT && arg == FP8MOE_ARG_OUTPUT ? FP8MOE_ARG_ROUTING_WEIGHTS_OUT
                                                                                       : FP8MOE_ARG_OUTPUT;
      if (arg_ptr(&p->args, victim) == NULL) return 0;
      test_tensor* v = &p->t[victim];
      int v_empty = 0, t_empty = 0;
      for (int32_t i = 0; i < v->t.ndim; ++i) v_empty |= v->shape[i] == 0;
      for (int32_t i = 0; i < p->t[target].t.ndim; ++i) t_empty |= p->t[target].shape[i] == 0;
      /* the victim's extent must fit the target's buffer for the check to be meaningful */
      if (span_bytes(v) > span_bytes(&p->t[target]) || p->t[target].t.data == NULL) return 0;
      v->t.data = p->t[target].t.data;
      v->t.byte_offset = p->t[target].t.byte_offset;
      touched[0] = target;
      touched[1] = victim;
      return !v_empty && !t_empty && victim != target;
    }
    case 14: /* output rows overlapping: a row stride of 8..32 elements (aligned) under longer rows */
      if (!is_output(arg) || nd != 2 || empty) return 0;
      tt->strides[0] = 8 * (1 + q->param % 4);
      tt->strides[1] = 1;
      reback(p, arg);
      return tt->shape[0] > 1 && tt->shape[1] > tt->strides[0];
    case 15:
      tt->t.dtype = (q->param & 1) ? TEST_E5M2 : TEST_I8;
      reback(p, arg);
      return 1;
    default:
      return 0;
  }
}

static const uint8_t POISON = 0xA5;

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (api == NULL) {
    static test_plugin tp;
    if (test_plugin_open_static(&tp) != 0) abort();
    api = tp.api;
    if (baseline_cpu_context(api, 2, &ctx) != FP8MOE_STATUS_OK) abort();
  }
  fuzz_header h;
  fuzz_header_read(&h, data, size);
  data_feed.bytes = size > sizeof h ? data + sizeof h : NULL;
  data_feed.size = size > sizeof h ? size - sizeof h : 0;
  data_feed.pos = 0;
  n_allocs = 0;

  static baseline_problem p;
  baseline_config c;
  fuzz_config(&h, &c);
  baseline_build(&p, &c, data_fn);
  int must_refuse = 0;
  fuzz_struct_size(&h, &p.args);
  /* a perturbation that must be refused counts only when struct_size covers the tensors it touched, and
   * when the second perturbation did not touch them again (it may undo the first) */
  int32_t touched[2][2] = {{-1, -1}, {-1, -1}};
  int must[2];
  for (int i = 0; i < 2; ++i) {
    must[i] = perturb(&p, &h.perturb[i], touched[i]);
    int covered = p.args.struct_size >= FUZZ_MIN_STRUCT_SIZE;
    for (int j = 0; j < 2; ++j)
      if (touched[i][j] >= 0) covered &= fuzz_args_covers(&p.args, touched[i][j]);
    must[i] &= covered;
  }
  for (int j = 0; j < 2; ++j)
    for (int k = 0; k < 2; ++k)
      if (touched[0][j] >= 0 && touched[0][j] == touched[1][k]) must[0] = 0;
  must_refuse = must[0] || must[1];

  /* outputs poisoned, and remembered to prove a refusal leaves them untouched */
  unsigned char* saved[4] = {NULL, NULL, NULL, NULL};
  uint64_t saved_bytes[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    test_tensor* tt = &p.t[FP8MOE_ARG_OUTPUT + i];
    uint64_t b = span_bytes(tt);
    if (tt->t.data == NULL || b == UINT64_MAX || b > backed_bytes(tt->t.data)) continue;
    int shared = 0; /* an output placed on an input keeps the input's bytes */
    for (int j = 0; j < FP8MOE_ARG_OUTPUT; ++j) shared |= p.t[j].t.data == tt->t.data;
    if (!shared) memset(tt->t.data, POISON, b);
    saved[i] = malloc(b ? b : 1);
    memcpy(saved[i], tt->t.data, b);
    saved_bytes[i] = b;
  }
  size_t need = 0;
  int32_t qw = api->query_workspace(ctx, &p.args, &need);
  void* ws = NULL;
  if (qw == FP8MOE_STATUS_OK && need > 0 && need < (256u << 20)) {
    ws = baseline_workspace(need, NULL);
    p.args.workspace = ws;
    p.args.workspace_size = (h.workspace_mode % 4 == 3) ? need - 1 : need;
  }
  int32_t qs = api->query_support(ctx, &p.args);
  int32_t st = api->run(ctx, &p.args);
  if (st < 0 || st > FP8MOE_STATUS_DATA_ERROR || qs < 0 || qs > FP8MOE_STATUS_DATA_ERROR) __builtin_trap();
  if (qw != qs) __builtin_trap();
  const int run_only = st == FP8MOE_STATUS_WORKSPACE_TOO_SMALL || st == FP8MOE_STATUS_DATA_ERROR ||
                       strncmp(p.message, "workspace", 9) == 0;
  if (!run_only && qs != st) __builtin_trap();
  if (must_refuse && st == FP8MOE_STATUS_OK) __builtin_trap();
  if (st != FP8MOE_STATUS_OK) {
    if (p.args.struct_size >= offsetof(fp8moe_moe_args, routing_method) && memchr(p.message, '\0', sizeof p.message) == NULL)
      __builtin_trap();
    for (int i = 0; i < 4; ++i)
      if (saved[i] && memcmp(saved[i], p.t[FP8MOE_ARG_OUTPUT + i].t.data, saved_bytes[i]) != 0) __builtin_trap();
  }
  for (int i = 0; i < 4; ++i) free(saved[i]);
  free(ws);
  for (int i = 0; i < n_allocs; ++i) free(allocs[i]);
  return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  if (size < sizeof(fuzz_header) || max_size < sizeof(fuzz_header) || (seed % 4) == 0)
    return LLVMFuzzerMutate(data, size, max_size);
  fuzz_header h;
  fuzz_header_read(&h, data, size);
  fuzz_header_mutate(&h, seed);
  memcpy(data, &h, sizeof h);
  return size;
}
