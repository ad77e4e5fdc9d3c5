/* validate.c — fp8moe_moe_args → a checked fp8moe_problem. Every refusal of SPEC §4 and DESIGN.md
 * ("Arguments and defaults") happens here, before any work, against the contract table. Messages read
 * `<argument>: <what>; got <x>; expected <y>` (dtype refusals: `...; accepted <list>`). */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "contract_internal.h"
#include "struct_size_internal.h"
#include "validate_internal.h"

/* The args fields up to and including `output` have no default; a struct_size must cover them. */
#define MOE_ARGS_MIN_SIZE FP8MOE_END_OF(fp8moe_moe_args, output)
/* No real tensor spans 2^40 elements along one stride; the bound keeps offset arithmetic in int64. */
#define MAX_STRIDE ((int64_t)1 << 40)
#define SHAPE_TEXT 96

int32_t fp8moe_read_moe_args(const fp8moe_moe_args* args, fp8moe_moe_args* full, fp8moe_err* err) {
  memset(full, 0, sizeof *full);
  full->struct_size = sizeof *full;
  full->activation = FP8MOE_ACTIVATION_SWIGLU;
  full->gate_up_order = FP8MOE_GATE_UP_GATE_FIRST;
  full->routed_scaling_factor = 1.0f;
  RETURN_IF(args == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "args: NULL pointer; got NULL; expected a fp8moe_moe_args");
  RETURN_IF(args->struct_size < MOE_ARGS_MIN_SIZE, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "args.struct_size: too small to hold the required fields (up to output); got %zu; expected >= %zu",
            args->struct_size, (size_t)MOE_ARGS_MIN_SIZE);
  fp8moe_struct_read(FP8MOE_STRUCT_MOE_ARGS, full, args);
  full->struct_size = sizeof *full;
  return FP8MOE_STATUS_OK;
}

/* ---- shapes ---------------------------------------------------------------------------------------- */

typedef struct shape_spec {
  int32_t ndim;
  int64_t dim[FP8MOE_MAX_RANK];
  const char* names[FP8MOE_MAX_RANK];
} shape_spec;

static void shape_text(char* buf, size_t size, int32_t ndim, const int64_t* dim) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < ndim && used < size; ++d)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? "," : "", dim[d]);
  if (used < size) (void)snprintf(buf + used, size - used, "]");
}

static void spec_text(char* buf, size_t size, const shape_spec* s) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < s->ndim && used < size; ++d)
    used += s->names[d] == NULL
                ? (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? "," : "", s->dim[d])
                : (size_t)snprintf(buf + used, size - used, "%s%s=%" PRId64, d ? "," : "", s->names[d], s->dim[d]);
  if (used < size) (void)snprintf(buf + used, size - used, "]");
}

static shape_spec spec0(void) {
  shape_spec s = {0, {0}, {NULL}};
  return s;
}
static shape_spec spec1(const char* n0, int64_t d0) {
  shape_spec s = {1, {d0}, {n0}};
  return s;
}
static shape_spec spec2(const char* n0, int64_t d0, const char* n1, int64_t d1) {
  shape_spec s = {2, {d0, d1}, {n0, n1}};
  return s;
}
static shape_spec spec3(const char* n0, int64_t d0, const char* n1, int64_t d1, const char* n2, int64_t d2) {
  shape_spec s = {3, {d0, d1, d2}, {n0, n1, n2}};
  return s;
}

/* ---- one tensor ------------------------------------------------------------------------------------ */

/* Where element addresses may lie: [0, 2^63) on LP64, the range in which a pointer difference (ptrdiff_t)
 * and the backends' int64 element offsets stay defined. User-space and CUDA unified addresses are far below. */
#define ADDRESS_LIMIT ((uintptr_t)PTRDIFF_MAX + 1u)

/* The first element's address and the span of all elements, in unsigned integers with every overflow
 * refused: no pointer is formed from host values until the whole byte extent is known to lie in the
 * address space (data + byte_offset past it would be undefined behaviour, and a wrapped pointer garbage). */
static int32_t resolve_extent(const fp8moe_argument_info* arg, const fp8moe_tensor* t, fp8moe_view* v,
                              fp8moe_err* err) {
  uintptr_t base = (uintptr_t)t->data, addr = 0;
  RETURN_IF(t->byte_offset >= ADDRESS_LIMIT || __builtin_add_overflow(base, (uintptr_t)t->byte_offset, &addr) ||
                addr >= ADDRESS_LIMIT,
            err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "%s: data + byte_offset lies outside the address space; got data %p, byte_offset %" PRIu64
            "; expected a sum below 2^63",
            arg->name, t->data, t->byte_offset);
  if (v->numel == 0) {
    v->data = t->data == NULL ? NULL : (void*)addr;
    v->bytes_begin = v->bytes_end = addr;
    return FP8MOE_STATUS_OK;
  }
  /* last element offset Σ (shape−1)·stride, then bytes, then the end address */
  uint64_t last = 0, bytes = 0;
  int overflow = 0;
  for (int32_t d = 0; d < v->ndim; ++d) {
    uint64_t term = 0;
    overflow |= __builtin_mul_overflow((uint64_t)(v->shape[d] - 1), (uint64_t)v->strides[d], &term);
    overflow |= __builtin_add_overflow(last, term, &last);
  }
  overflow |= __builtin_add_overflow(last, (uint64_t)1, &bytes);
  overflow |= __builtin_mul_overflow(bytes, (uint64_t)fp8moe_dt_size(v->dt), &bytes);
  uintptr_t end = 0;
  overflow |= bytes >= ADDRESS_LIMIT || __builtin_add_overflow(addr, (uintptr_t)bytes, &end) || end > ADDRESS_LIMIT;
  RETURN_IF(overflow, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "%s: the tensor's byte extent leaves the address space; got data %p, byte_offset %" PRIu64
            " and %d dims of shape x strides; expected every element below address 2^63",
            arg->name, t->data, t->byte_offset, (int)v->ndim);
  v->data = t->data == NULL ? NULL : (void*)addr;
  v->bytes_begin = addr;
  v->bytes_end = end;
  return FP8MOE_STATUS_OK;
}

/* dtype, lanes, rank bound, shape signs, element count, strides made explicit (checked only when the tensor
 * has elements: an empty tensor is accepted with any strides, as NumPy and PyTorch treat it as contiguous),
 * and the byte extent. Shape not compared. */
static int32_t describe(const fp8moe_argument_info* arg, const fp8moe_tensor* t, fp8moe_view* v, fp8moe_err* err) {
  char got[48];
  char accepted[96];
  memset(v, 0, sizeof *v);
  /* Vector dtypes (lanes != 1) map to no internal type, so they are refused here with the accepted set. */
  fp8moe_dt dt = fp8moe_dt_from_dlpack(t->dtype);
  if (!fp8moe_contract_accepts_dtype(arg, dt)) {
    fp8moe_dlpack_dtype_name(t->dtype, got, sizeof got);
    fp8moe_contract_dtype_list(arg, accepted, sizeof accepted);
    return fp8moe_fail(err, FP8MOE_STATUS_UNSUPPORTED_DTYPE, "%s: dtype is not accepted; got %s; accepted %s%s",
                       arg->name, got, accepted, t->dtype.lanes != 1 ? " (lanes 1)" : "");
  }
  RETURN_IF(t->ndim < 0 || t->ndim > FP8MOE_MAX_RANK, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "%s: wrong number of dimensions; got %d; expected %s", arg->name, (int)t->ndim, arg->shape);
  RETURN_IF(t->ndim > 0 && t->shape == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "%s: shape is NULL; got NULL; expected %d extents", arg->name, (int)t->ndim);
  v->dt = dt;
  v->ndim = t->ndim;
  v->device_type = t->device.device_type;
  v->device_id = t->device.device_id;
  uint64_t n = 1;
  int too_many = 0, empty = 0;
  for (int32_t d = 0; d < t->ndim; ++d) {
    RETURN_IF(t->shape[d] < 0, err, FP8MOE_STATUS_INVALID_ARGUMENT,
              "%s: negative extent in dim %d; got %" PRId64 "; expected >= 0", arg->name, (int)d, t->shape[d]);
    v->shape[d] = t->shape[d];
    empty |= t->shape[d] == 0;
    too_many |= __builtin_mul_overflow(n, (uint64_t)t->shape[d], &n);
  }
  /* a zero extent makes the tensor empty whatever the product of the others */
  RETURN_IF(too_many && !empty, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "%s: the shape has more elements than a 64-bit count holds; got %d dims; expected a product of "
            "extents below 2^64",
            arg->name, (int)t->ndim);
  v->numel = empty ? 0 : n;
  int64_t compact = 1;
  for (int32_t d = t->ndim - 1; d >= 0; --d) {
    if (t->strides == NULL) {
      v->strides[d] = compact;
      /* Extents are bounded by the limits once compared; saturate so huge bogus shapes cannot overflow. */
      compact = (v->shape[d] > 0 && compact > MAX_STRIDE / v->shape[d]) ? MAX_STRIDE : compact * v->shape[d];
    } else {
      v->strides[d] = t->strides[d];
    }
    if (v->numel == 0) continue; /* nothing is addressed: any stride is fine */
    RETURN_IF(v->strides[d] < 0, err, FP8MOE_STATUS_INVALID_ARGUMENT,
              "%s: negative stride in dim %d; got %" PRId64 "; expected >= 0", arg->name, (int)d, v->strides[d]);
    RETURN_IF(v->strides[d] > MAX_STRIDE, err, FP8MOE_STATUS_INVALID_ARGUMENT,
              "%s: stride in dim %d is too large; got %" PRId64 "; expected <= %" PRId64, arg->name, (int)d,
              v->strides[d], MAX_STRIDE);
  }
  return resolve_extent(arg, t, v, err);
}

/* Shape against one or two accepted forms; says which dim differs, got vs expected. */
static int32_t expect_shape(const fp8moe_argument_info* arg, const fp8moe_view* v, const shape_spec* a,
                            const shape_spec* b, fp8moe_err* err) {
  char got[SHAPE_TEXT];
  char want[2 * SHAPE_TEXT + 8];
  const shape_spec* match = NULL;
  if (v->ndim == a->ndim) match = a;
  else if (b != NULL && v->ndim == b->ndim) match = b;
  if (match == NULL) {
    shape_text(got, sizeof got, v->ndim, v->shape);
    spec_text(want, sizeof want, a);
    if (b != NULL) {
      size_t used = strlen(want);
      (void)snprintf(want + used, sizeof want - used, " or ");
      used = strlen(want);
      spec_text(want + used, sizeof want - used, b);
    }
    return fp8moe_fail(err, FP8MOE_STATUS_INVALID_ARGUMENT, "%s: wrong number of dimensions; got %d %s; expected %s",
                       arg->name, (int)v->ndim, got, want);
  }
  for (int32_t d = 0; d < match->ndim; ++d) {
    if (v->shape[d] != match->dim[d]) {
      shape_text(got, sizeof got, v->ndim, v->shape);
      spec_text(want, sizeof want, match);
      return fp8moe_fail(err, FP8MOE_STATUS_INVALID_ARGUMENT,
                         "%s: dim %d%s%s%s does not match; got %" PRId64 " (shape %s); expected %" PRId64
                         " (shape %s)",
                         arg->name, (int)d, match->names[d] ? " (" : "", match->names[d] ? match->names[d] : "",
                         match->names[d] ? ")" : "", v->shape[d], got, match->dim[d], want);
    }
  }
  return FP8MOE_STATUS_OK;
}

/* An output's elements must each have their own bytes, or its writers race (and the result depends on
 * the order): with the dims of extent > 1 sorted by stride, each stride must step past everything the
 * smaller dims span. This refuses every overlapping layout; it also refuses the rare non-overlapping
 * interleaved ones (docs/ABI.md, "Outputs and aliasing"). */
static int32_t check_no_self_overlap(const fp8moe_argument_info* arg, const fp8moe_view* v, fp8moe_err* err) {
  int32_t order[FP8MOE_MAX_RANK], n = 0;
  for (int32_t d = 0; d < v->ndim; ++d) {
    if (v->shape[d] <= 1) continue;
    int32_t i = n++;
    while (i > 0 && v->strides[order[i - 1]] > v->strides[d]) {
      order[i] = order[i - 1];
      --i;
    }
    order[i] = d;
  }
  uint64_t span = 0; /* the largest element offset the dims so far reach (bounded by the checked extent) */
  for (int32_t i = 0; i < n; ++i) {
    int32_t d = order[i];
    char got[SHAPE_TEXT], strides[SHAPE_TEXT];
    if ((uint64_t)v->strides[d] <= span) {
      shape_text(got, sizeof got, v->ndim, v->shape);
      shape_text(strides, sizeof strides, v->ndim, v->strides);
      return fp8moe_fail(err, FP8MOE_STATUS_INVALID_ARGUMENT,
                         "%s: its elements overlap; got shape %s with strides %s (dim %d steps %" PRId64
                         " elements, inside the %" PRIu64 " the smaller dims span); expected every element at its "
                         "own address",
                         arg->name, got, strides, (int)d, v->strides[d], span + 1);
    }
    span += (uint64_t)(v->shape[d] - 1) * (uint64_t)v->strides[d];
  }
  return FP8MOE_STATUS_OK;
}

/* Stride layout, data pointer (NULL, alignment) and device, per the argument's flags. */
static int32_t check_layout(const struct fp8moe_context* ctx, const fp8moe_argument_info* arg,
                            const fp8moe_view* v, fp8moe_err* err) {
  int32_t elem = fp8moe_dt_size(v->dt);
  if (v->numel > 0 && (arg->flags & FP8MOE_ARGUMENT_INNER_CONTIGUOUS)) {
    int32_t last = v->ndim - 1;
    RETURN_IF(last >= 0 && v->shape[last] > 1 && v->strides[last] != 1, err, FP8MOE_STATUS_INVALID_ARGUMENT,
              "%s: the last dimension must be contiguous; got stride %" PRId64 " in dim %d; expected 1", arg->name,
              v->strides[last], (int)last);
    for (int32_t d = 0; d < last; ++d) {
      RETURN_IF(v->shape[d] > 1 && (v->strides[d] * elem) % arg->alignment != 0, err,
                FP8MOE_STATUS_INVALID_ARGUMENT,
                "%s: stride of dim %d is not a multiple of %u bytes; got %" PRId64 " elements (%" PRId64
                " bytes); expected a multiple of %u bytes",
                arg->name, (int)d, (unsigned)arg->alignment, v->strides[d], v->strides[d] * elem,
                (unsigned)arg->alignment);
    }
  }
  if (v->numel > 0 && (arg->flags & FP8MOE_ARGUMENT_OUTPUT)) {
    for (int32_t d = 0; d < v->ndim; ++d) {
      RETURN_IF(v->shape[d] > 1 && v->strides[d] == 0, err, FP8MOE_STATUS_INVALID_ARGUMENT,
                "%s: an output cannot broadcast; got stride 0 in dim %d (extent %" PRId64 "); expected > 0",
                arg->name, (int)d, v->shape[d]);
    }
    FORWARD_IF_ERROR(check_no_self_overlap(arg, v, err));
  }
  if (v->numel > 0) {
    RETURN_IF(v->data == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT,
              "%s: data is NULL; got NULL for %" PRIu64 " elements; expected a pointer", arg->name, v->numel);
    uint32_t align = arg->alignment > (uint32_t)elem ? arg->alignment : (uint32_t)elem;
    RETURN_IF((uintptr_t)v->data % align != 0, err, FP8MOE_STATUS_INVALID_ARGUMENT,
              "%s: data + byte_offset is misaligned; got address %p; expected a multiple of %u bytes", arg->name,
              v->data, (unsigned)align);
  }
  RETURN_IF(!ctx->ops->accepts_device(ctx, v->device_type, v->device_id), err, FP8MOE_STATUS_WRONG_DEVICE,
            "%s: tensor on a device the %s backend cannot read; got device_type %d device_id %d; expected a device "
            "this context reads",
            arg->name, ctx->ops->name, (int)v->device_type, (int)v->device_id);
  return FP8MOE_STATUS_OK;
}

/* A full check of one tensor against one or two shapes. */
static int32_t check_tensor(const struct fp8moe_context* ctx, int32_t arg_id, const fp8moe_tensor* t,
                            const shape_spec* a, const shape_spec* b, fp8moe_view* v, fp8moe_err* err) {
  const fp8moe_argument_info* arg = fp8moe_contract_argument(arg_id);
  FORWARD_IF_ERROR(describe(arg, t, v, err));
  FORWARD_IF_ERROR(expect_shape(arg, v, a, b, err));
  return check_layout(ctx, arg, v, err);
}

/* Scalars given as [1] become rank-0 views; [T,1] per-token scales become [T]: one form per backend. */
static void drop_unit_last_dim(fp8moe_view* v, int32_t keep) {
  if (v->ndim == keep + 1) v->ndim = keep;
}

/* ---- presence ---------------------------------------------------------------------------------------- */

static int32_t require(int32_t arg_id, const void* t, int32_t wanted, const char* why, fp8moe_err* err) {
  const char* name = fp8moe_contract_argument(arg_id)->name;
  RETURN_IF(wanted && t == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT, "%s: required tensor is missing; got NULL; "
            "expected a tensor (%s)", name, why);
  RETURN_IF(!wanted && t != NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT, "%s: tensor must be absent; got a tensor; "
            "expected NULL (%s)", name, why);
  return FP8MOE_STATUS_OK;
}

/* ---- the call -------------------------------------------------------------------------------------- */

static int32_t check_enums(const struct fp8moe_context* ctx, const fp8moe_moe_args* a, fp8moe_err* err) {
  uint32_t mask = 1u << ctx->backend;
  const fp8moe_routing_method_info* m = fp8moe_contract_routing_method(a->routing_method);
  RETURN_IF(m == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "routing_method: unknown routing method; got %d; expected 0..%d (FP8MOE_ROUTING_*)", (int)a->routing_method,
            FP8MOE_ROUTING_PRECOMPUTED);
  RETURN_IF(!(m->backends & mask), err, FP8MOE_STATUS_UNSUPPORTED,
            "routing_method: not offered by this backend; got %s; expected a method of the %s backend", m->name,
            ctx->ops->name);
  const fp8moe_quant_format_info* q = fp8moe_contract_quant_format(a->quant_format);
  RETURN_IF(q == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "quant_format: unknown quantization format; got %d; expected 0..%d (FP8MOE_QUANT_*)", (int)a->quant_format,
            FP8MOE_QUANT_FP8_PER_CHANNEL);
  RETURN_IF(!(q->backends & mask), err, FP8MOE_STATUS_UNSUPPORTED,
            "quant_format: not offered by this backend; got %s; expected a format of the %s backend", q->name,
            ctx->ops->name);
  const fp8moe_activation_info* act = fp8moe_contract_activation(a->activation);
  RETURN_IF(act == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "activation: unknown activation; got %d; expected 0..%d (FP8MOE_ACTIVATION_*)", (int)a->activation,
            FP8MOE_ACTIVATION_GEGLU);
  RETURN_IF(!(act->backends & mask), err, FP8MOE_STATUS_UNSUPPORTED,
            "activation: not offered by this backend; got %s; expected an activation of the %s backend",
            act->name, ctx->ops->name);
  RETURN_IF(a->gate_up_order != FP8MOE_GATE_UP_GATE_FIRST && a->gate_up_order != FP8MOE_GATE_UP_UP_FIRST, err,
            FP8MOE_STATUS_INVALID_ARGUMENT,
            "gate_up_order: unknown order; got %d; expected 0 (GATE_FIRST) or 1 (UP_FIRST)", (int)a->gate_up_order);
  RETURN_IF(a->flags & ~FP8MOE_FLAG_WEIGHT_ON_INPUT, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "flags: unknown bits; got 0x%x; expected only 0x%x (FP8MOE_FLAG_WEIGHT_ON_INPUT)", (unsigned)a->flags,
            (unsigned)FP8MOE_FLAG_WEIGHT_ON_INPUT);
  RETURN_IF(!isfinite(a->routed_scaling_factor) || a->routed_scaling_factor < 0.0f, err,
            FP8MOE_STATUS_INVALID_ARGUMENT,
            "routed_scaling_factor: must be finite and non-negative; got %g; expected >= 0 (0 means 1.0)",
            (double)a->routed_scaling_factor);
  return FP8MOE_STATUS_OK;
}

static int32_t check_experts(const fp8moe_moe_args* a, uint32_t method_flags, fp8moe_problem* p, fp8moe_err* err) {
  const fp8moe_limits* lim = fp8moe_contract_limits();
  RETURN_IF(a->num_experts < 1, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "num_experts: must be positive; got %d; expected 1..%d", (int)a->num_experts, (int)lim->max_experts);
  RETURN_IF(a->num_experts > lim->max_experts, err, FP8MOE_STATUS_UNSUPPORTED,
            "num_experts: above the limit; got %d; expected <= %d", (int)a->num_experts, (int)lim->max_experts);
  RETURN_IF(a->top_k < 1, err, FP8MOE_STATUS_INVALID_ARGUMENT, "top_k: must be positive; got %d; expected 1..%d",
            (int)a->top_k, (int)lim->max_top_k);
  RETURN_IF(a->top_k > lim->max_top_k, err, FP8MOE_STATUS_UNSUPPORTED, "top_k: above the limit; got %d; expected <= %d",
            (int)a->top_k, (int)lim->max_top_k);
  RETURN_IF(a->top_k > a->num_experts, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "top_k: larger than num_experts; got %d; expected <= %d", (int)a->top_k, (int)a->num_experts);
  RETURN_IF((method_flags & FP8MOE_ROUTING_TOP1_ONLY) && a->top_k != 1, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "top_k: this routing method selects one expert; got %d; expected 1", (int)a->top_k);
  RETURN_IF((a->flags & FP8MOE_FLAG_WEIGHT_ON_INPUT) && a->top_k != 1, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "top_k: FP8MOE_FLAG_WEIGHT_ON_INPUT needs one expert per token; got %d; expected 1", (int)a->top_k);
  int32_t e_local = a->local_num_experts == 0 ? a->num_experts : a->local_num_experts;
  RETURN_IF(a->local_num_experts < 0 || a->local_num_experts > a->num_experts, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "local_num_experts: out of range; got %d; expected 0..%d (0 = all)", (int)a->local_num_experts,
            (int)a->num_experts);
  RETURN_IF(a->local_expert_offset < 0 || a->local_expert_offset > a->num_experts - e_local, err,
            FP8MOE_STATUS_INVALID_ARGUMENT,
            "local_expert_offset: the local experts must lie within num_experts; got %d (with %d local experts); "
            "expected 0..%d",
            (int)a->local_expert_offset, (int)e_local, (int)(a->num_experts - e_local));
  p->E = a->num_experts;
  p->K = a->top_k;
  p->E_local = e_local;
  p->local_offset = a->local_expert_offset;
  p->n_group = 1;
  p->topk_group = 1;
  if (!(method_flags & FP8MOE_ROUTING_USES_GROUPS)) return FP8MOE_STATUS_OK;

  RETURN_IF(a->n_group < 1, err, FP8MOE_STATUS_INVALID_ARGUMENT, "n_group: must be positive; got %d; expected 1..%d",
            (int)a->n_group, (int)lim->max_groups);
  RETURN_IF(a->n_group > lim->max_groups, err, FP8MOE_STATUS_UNSUPPORTED,
            "n_group: above the limit; got %d; expected <= %d", (int)a->n_group, (int)lim->max_groups);
  RETURN_IF(a->num_experts % a->n_group != 0, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "n_group: must divide num_experts (%d); got %d; expected a divisor of %d", (int)a->num_experts,
            (int)a->n_group, (int)a->num_experts);
  int32_t group_size = a->num_experts / a->n_group;
  RETURN_IF(a->n_group > 1 && group_size < lim->min_group_size, err, FP8MOE_STATUS_UNSUPPORTED,
            "n_group: groups would hold too few experts; got %d experts per group (num_experts %d / n_group %d); "
            "expected >= %d",
            (int)group_size, (int)a->num_experts, (int)a->n_group, (int)lim->min_group_size);
  RETURN_IF(group_size > lim->max_group_size, err, FP8MOE_STATUS_UNSUPPORTED,
            "n_group: groups would hold too many experts; got %d experts per group; expected <= %d", (int)group_size,
            (int)lim->max_group_size);
  RETURN_IF(a->topk_group < 1 || a->topk_group > a->n_group, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "topk_group: out of range; got %d; expected 1..%d (n_group)", (int)a->topk_group, (int)a->n_group);
  RETURN_IF((int64_t)a->top_k > (int64_t)a->topk_group * group_size, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "top_k: more than the experts of the kept groups; got %d; expected <= %d (topk_group %d x %d experts "
            "per group)",
            (int)a->top_k, (int)(a->topk_group * group_size), (int)a->topk_group, (int)group_size);
  p->n_group = a->n_group;
  p->topk_group = a->topk_group;
  return FP8MOE_STATUS_OK;
}

static int32_t check_presence(const fp8moe_moe_args* a, uint32_t method_flags, fp8moe_err* err) {
  FORWARD_IF_ERROR(require(FP8MOE_ARG_HIDDEN_STATES, a->hidden_states, 1, "always", err));
  FORWARD_IF_ERROR(require(FP8MOE_ARG_W13, a->w13, 1, "always", err));
  FORWARD_IF_ERROR(require(FP8MOE_ARG_W13_SCALE, a->w13_scale, 1, "always", err));
  FORWARD_IF_ERROR(require(FP8MOE_ARG_W2, a->w2, 1, "always", err));
  FORWARD_IF_ERROR(require(FP8MOE_ARG_W2_SCALE, a->w2_scale, 1, "always", err));
  FORWARD_IF_ERROR(require(FP8MOE_ARG_OUTPUT, a->output, 1, "always", err));
  int32_t logits = (method_flags & FP8MOE_ROUTING_USES_LOGITS) != 0;
  FORWARD_IF_ERROR(require(FP8MOE_ARG_ROUTER_LOGITS, a->router_logits, logits,
                           logits ? "this routing method reads logits" : "PRECOMPUTED routing reads no logits", err));
  int32_t topk_in = (method_flags & FP8MOE_ROUTING_USES_TOPK_INPUT) != 0;
  const char* topk_why = topk_in ? "PRECOMPUTED routing" : "only PRECOMPUTED routing takes it";
  FORWARD_IF_ERROR(require(FP8MOE_ARG_TOPK_IDS, a->topk_ids, topk_in, topk_why, err));
  FORWARD_IF_ERROR(require(FP8MOE_ARG_TOPK_WEIGHTS, a->topk_weights, topk_in, topk_why, err));
  if (!(method_flags & FP8MOE_ROUTING_USES_BIAS))
    FORWARD_IF_ERROR(require(FP8MOE_ARG_ROUTING_BIAS, a->routing_bias, 0, "only DEEPSEEK_V3 takes a bias", err));
  const fp8moe_quant_geometry* geom = fp8moe_contract_quant_geometry(a->quant_format);
  if (geom != NULL && geom->act != FP8MOE_GRAN_TENSOR) {
    FORWARD_IF_ERROR(require(FP8MOE_ARG_A1_SCALE, a->a1_scale, 0, "only FP8_PER_TENSOR takes static scales", err));
    FORWARD_IF_ERROR(require(FP8MOE_ARG_A2_SCALE, a->a2_scale, 0, "only FP8_PER_TENSOR takes static scales", err));
  }
  return FP8MOE_STATUS_OK;
}

/* H and I: the format's multiple and the limits. */
static int32_t check_dim(const char* arg, const char* what, int64_t v, int64_t max, int32_t multiple,
                         const char* format, fp8moe_err* err) {
  RETURN_IF(v <= 0, err, FP8MOE_STATUS_INVALID_ARGUMENT, "%s: %s must be positive; got %" PRId64 "; expected 1..%" PRId64,
            arg, what, v, max);
  RETURN_IF(v > max, err, FP8MOE_STATUS_UNSUPPORTED, "%s: %s above the limit; got %" PRId64 "; expected <= %" PRId64,
            arg, what, v, max);
  RETURN_IF(v % multiple != 0, err, FP8MOE_STATUS_UNSUPPORTED,
            "%s: %s must be a multiple of %d for %s; got %" PRId64 "; expected a multiple of %d", arg, what,
            (int)multiple, format, v, (int)multiple);
  return FP8MOE_STATUS_OK;
}

/* ---- aliasing ---------------------------------------------------------------------------------------- */

/* Outputs are written while inputs are still read, and by several workers: an output's bytes may not
 * intersect any input's or another output's (docs/ABI.md, "Outputs and aliasing"). Bounding byte ranges only,
 * so the cost is a few comparisons per call. */
static int32_t check_aliasing(const fp8moe_problem* p, fp8moe_err* err) {
  const struct {
    int32_t id;
    const fp8moe_view* v;
  } all[] = {
      {FP8MOE_ARG_OUTPUT, &p->output},
      {FP8MOE_ARG_ROUTING_IDS_OUT, &p->routing_ids_out},
      {FP8MOE_ARG_ROUTING_WEIGHTS_OUT, &p->routing_weights_out},
      {FP8MOE_ARG_DEVICE_STATUS, &p->device_status},
      {FP8MOE_ARG_HIDDEN_STATES, &p->hidden_states},
      {FP8MOE_ARG_HIDDEN_SCALE, &p->hidden_scale},
      {FP8MOE_ARG_ROUTER_LOGITS, &p->router_logits},
      {FP8MOE_ARG_ROUTING_BIAS, &p->routing_bias},
      {FP8MOE_ARG_TOPK_IDS, &p->topk_ids},
      {FP8MOE_ARG_TOPK_WEIGHTS, &p->topk_weights},
      {FP8MOE_ARG_W13, &p->w13},
      {FP8MOE_ARG_W13_SCALE, &p->w13_scale},
      {FP8MOE_ARG_W2, &p->w2},
      {FP8MOE_ARG_W2_SCALE, &p->w2_scale},
      {FP8MOE_ARG_A1_SCALE, &p->a1_scale},
      {FP8MOE_ARG_A2_SCALE, &p->a2_scale},
  };
  const size_t outputs = 4, count = sizeof all / sizeof all[0];
  for (size_t i = 0; i < outputs; ++i) {
    const fp8moe_view* o = all[i].v;
    if (o->dt == FP8MOE_DT_NONE || o->numel == 0) continue;
    for (size_t j = i + 1; j < count; ++j) {
      const fp8moe_view* x = all[j].v;
      if (x->dt == FP8MOE_DT_NONE || x->numel == 0) continue;
      if (o->bytes_begin < x->bytes_end && x->bytes_begin < o->bytes_end) {
        return fp8moe_fail(err, FP8MOE_STATUS_INVALID_ARGUMENT,
                           "%s: its bytes overlap those of %s; got [%#" PRIxPTR ", %#" PRIxPTR ") and [%#" PRIxPTR
                           ", %#" PRIxPTR "); expected disjoint memory (no output may alias an input or another "
                           "output)",
                           fp8moe_contract_argument(all[i].id)->name, fp8moe_contract_argument(all[j].id)->name,
                           o->bytes_begin, o->bytes_end, x->bytes_begin, x->bytes_end);
      }
    }
  }
  return FP8MOE_STATUS_OK;
}

int32_t fp8moe_check_workspace_aliasing(const fp8moe_problem* p, size_t need, fp8moe_err* err) {
  uintptr_t begin = (uintptr_t)p->workspace, end = 0;
  if (need == 0 || __builtin_add_overflow(begin, (uintptr_t)need, &end)) return FP8MOE_STATUS_OK;
  const fp8moe_view* all[] = {&p->output, &p->routing_ids_out, &p->routing_weights_out, &p->device_status,
                              &p->hidden_states, &p->hidden_scale, &p->router_logits, &p->routing_bias,
                              &p->topk_ids, &p->topk_weights, &p->w13, &p->w13_scale, &p->w2, &p->w2_scale,
                              &p->a1_scale, &p->a2_scale};
  const int32_t ids[] = {FP8MOE_ARG_OUTPUT, FP8MOE_ARG_ROUTING_IDS_OUT, FP8MOE_ARG_ROUTING_WEIGHTS_OUT,
                         FP8MOE_ARG_DEVICE_STATUS, FP8MOE_ARG_HIDDEN_STATES, FP8MOE_ARG_HIDDEN_SCALE,
                         FP8MOE_ARG_ROUTER_LOGITS, FP8MOE_ARG_ROUTING_BIAS, FP8MOE_ARG_TOPK_IDS,
                         FP8MOE_ARG_TOPK_WEIGHTS, FP8MOE_ARG_W13, FP8MOE_ARG_W13_SCALE, FP8MOE_ARG_W2,
                         FP8MOE_ARG_W2_SCALE, FP8MOE_ARG_A1_SCALE, FP8MOE_ARG_A2_SCALE};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    const fp8moe_view* x = all[i];
    if (x->dt == FP8MOE_DT_NONE || x->numel == 0) continue;
    RETURN_IF(begin < x->bytes_end && x->bytes_begin < end, err, FP8MOE_STATUS_INVALID_ARGUMENT,
              "workspace: the %zu bytes run uses overlap those of %s; got [%#" PRIxPTR ", %#" PRIxPTR
              ") and [%#" PRIxPTR ", %#" PRIxPTR "); expected scratch apart from every tensor",
              need, fp8moe_contract_argument(ids[i])->name, begin, end, x->bytes_begin, x->bytes_end);
  }
  return FP8MOE_STATUS_OK;
}

int32_t fp8moe_validate(const struct fp8moe_context* ctx, const fp8moe_moe_args* a, fp8moe_problem* p,
                        fp8moe_err* err) {
  memset(p, 0, sizeof *p);
  FORWARD_IF_ERROR(check_enums(ctx, a, err));
  const fp8moe_routing_method_info* method = fp8moe_contract_routing_method(a->routing_method);
  const fp8moe_quant_format_info* format = fp8moe_contract_quant_format(a->quant_format);
  const fp8moe_limits* lim = fp8moe_contract_limits();
  FORWARD_IF_ERROR(check_presence(a, method->flags, err));
  FORWARD_IF_ERROR(check_experts(a, method->flags, p, err));

  /* T and H come from hidden_states, I from w13: read their rank and extents before any other shape. */
  const fp8moe_argument_info* hs = fp8moe_contract_argument(FP8MOE_ARG_HIDDEN_STATES);
  FORWARD_IF_ERROR(describe(hs, a->hidden_states, &p->hidden_states, err));
  RETURN_IF(p->hidden_states.ndim != 2, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "hidden_states: wrong number of dimensions; got %d; expected 2 ([T,H])", (int)p->hidden_states.ndim);
  int64_t T = p->hidden_states.shape[0];
  int64_t H = p->hidden_states.shape[1];
  RETURN_IF(T > lim->max_tokens, err, FP8MOE_STATUS_UNSUPPORTED,
            "hidden_states: dim 0 (T) above the limit; got %" PRId64 "; expected <= %" PRId64, T, lim->max_tokens);
  FORWARD_IF_ERROR(check_dim("hidden_states", "dim 1 (H)", H, lim->max_hidden, format->k_multiple, format->name, err));
  const fp8moe_argument_info* w13 = fp8moe_contract_argument(FP8MOE_ARG_W13);
  FORWARD_IF_ERROR(describe(w13, a->w13, &p->w13, err));
  RETURN_IF(p->w13.ndim != 3, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "w13: wrong number of dimensions; got %d; expected 3 ([E_l,2I,H])", (int)p->w13.ndim);
  int64_t two_i = p->w13.shape[1];
  RETURN_IF(two_i % 2 != 0, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "w13: dim 1 (2I) must be even; got %" PRId64 "; expected 2 x intermediate size", two_i);
  int64_t I = two_i / 2;
  FORWARD_IF_ERROR(check_dim("w13", "dim 1 / 2 (I)", I, lim->max_intermediate, format->k_multiple, format->name, err));
  int64_t El = p->E_local;
  p->T = T;
  p->H = H;
  p->I = I;

  shape_spec s_th = spec2("T", T, "H", H);
  FORWARD_IF_ERROR(expect_shape(hs, &p->hidden_states, &s_th, NULL, err));
  FORWARD_IF_ERROR(check_layout(ctx, hs, &p->hidden_states, err));
  shape_spec s_w13 = spec3("E_l", El, "2I", 2 * I, "H", H);
  FORWARD_IF_ERROR(expect_shape(w13, &p->w13, &s_w13, NULL, err));
  FORWARD_IF_ERROR(check_layout(ctx, w13, &p->w13, err));
  shape_spec s_w2 = spec3("E_l", El, "H", H, "I", I);
  FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_W2, a->w2, &s_w2, NULL, &p->w2, err));

  /* Scales per the format's geometry (fp8moe.h; quant_geometry_internal.h). */
  const fp8moe_quant_geometry* geom = fp8moe_contract_quant_geometry(a->quant_format);
  char n13[2][16], n2[2][16], nh[16];
  shape_spec s13, s2, sh_a, sh_b;
  int32_t sh_alternatives = 1;
  if (geom->weight == FP8MOE_GRAN_BLOCK) {
    snprintf(n13[0], sizeof n13[0], "2I/%d", (int)geom->w_n);
    snprintf(n13[1], sizeof n13[1], "H/%d", (int)geom->w_k);
    snprintf(n2[0], sizeof n2[0], "H/%d", (int)geom->w_n);
    snprintf(n2[1], sizeof n2[1], "I/%d", (int)geom->w_k);
    s13 = spec3("E_l", El, n13[0], 2 * I / geom->w_n, n13[1], H / geom->w_k);
    s2 = spec3("E_l", El, n2[0], H / geom->w_n, n2[1], I / geom->w_k);
  } else if (geom->weight == FP8MOE_GRAN_ROW) {
    s13 = spec2("E_l", El, "2I", 2 * I);
    s2 = spec2("E_l", El, "H", H);
  } else {
    s13 = spec1("E_l", El);
    s2 = spec1("E_l", El);
  }
  if (geom->act == FP8MOE_GRAN_BLOCK) {
    snprintf(nh, sizeof nh, "H/%d", (int)geom->act_k);
    sh_a = spec2("T", T, nh, H / geom->act_k);
    sh_b = sh_a;
  } else if (geom->act == FP8MOE_GRAN_ROW) {
    sh_a = spec1("T", T);
    sh_b = spec2("T", T, NULL, 1);
    sh_alternatives = 2;
  } else {
    sh_a = spec0();
    sh_b = spec1(NULL, 1);
    sh_alternatives = 2;
  }
  FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_W13_SCALE, a->w13_scale, &s13, NULL, &p->w13_scale, err));
  FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_W2_SCALE, a->w2_scale, &s2, NULL, &p->w2_scale, err));

  p->hidden_is_fp8 = p->hidden_states.dt == FP8MOE_DT_E4M3;
  FORWARD_IF_ERROR(require(FP8MOE_ARG_HIDDEN_SCALE, a->hidden_scale, p->hidden_is_fp8,
                           p->hidden_is_fp8 ? "float8_e4m3fn hidden_states need their scales"
                                            : "bfloat16/float16 hidden_states are quantized by fp8moe",
                           err));
  if (p->hidden_is_fp8) {
    FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_HIDDEN_SCALE, a->hidden_scale, &sh_a,
                                  sh_alternatives == 2 ? &sh_b : NULL, &p->hidden_scale, err));
    if (geom->act == FP8MOE_GRAN_TENSOR) drop_unit_last_dim(&p->hidden_scale, 0);
    if (geom->act == FP8MOE_GRAN_ROW) drop_unit_last_dim(&p->hidden_scale, 1);
  }

  shape_spec s_scalar = spec0(), s_one = spec1(NULL, 1);
  if (a->a1_scale != NULL) {
    FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_A1_SCALE, a->a1_scale, &s_scalar, &s_one, &p->a1_scale, err));
    drop_unit_last_dim(&p->a1_scale, 0);
    p->a1_static = 1;
  }
  if (a->a2_scale != NULL) {
    FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_A2_SCALE, a->a2_scale, &s_scalar, &s_one, &p->a2_scale, err));
    drop_unit_last_dim(&p->a2_scale, 0);
    p->a2_static = 1;
  }

  /* Routing inputs. */
  shape_spec s_te = spec2("T", T, "E", p->E), s_e = spec1("E", p->E), s_tk = spec2("T", T, "K", p->K);
  if (a->router_logits != NULL)
    FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_ROUTER_LOGITS, a->router_logits, &s_te, NULL, &p->router_logits, err));
  if (a->routing_bias != NULL)
    FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_ROUTING_BIAS, a->routing_bias, &s_e, NULL, &p->routing_bias, err));
  if (a->topk_ids != NULL)
    FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_TOPK_IDS, a->topk_ids, &s_tk, NULL, &p->topk_ids, err));
  if (a->topk_weights != NULL)
    FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_TOPK_WEIGHTS, a->topk_weights, &s_tk, NULL, &p->topk_weights, err));

  /* Outputs. */
  FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_OUTPUT, a->output, &s_th, NULL, &p->output, err));
  if (a->routing_ids_out != NULL)
    FORWARD_IF_ERROR(
        check_tensor(ctx, FP8MOE_ARG_ROUTING_IDS_OUT, a->routing_ids_out, &s_tk, NULL, &p->routing_ids_out, err));
  if (a->routing_weights_out != NULL)
    FORWARD_IF_ERROR(check_tensor(ctx, FP8MOE_ARG_ROUTING_WEIGHTS_OUT, a->routing_weights_out, &s_tk, NULL,
                                  &p->routing_weights_out, err));
  shape_spec s_status = spec1(NULL, 1);
  if (a->device_status != NULL)
    FORWARD_IF_ERROR(
        check_tensor(ctx, FP8MOE_ARG_DEVICE_STATUS, a->device_status, &s_status, NULL, &p->device_status, err));

  p->routing_method = a->routing_method;
  p->quant_format = a->quant_format;
  p->geom = *geom;
  p->requant = fp8moe_requant_of(geom, p->a2_static);
  p->activation = a->activation;
  p->gate_up_order = a->gate_up_order;
  p->routed_scaling_factor = a->routed_scaling_factor == 0.0f ? 1.0f : a->routed_scaling_factor;
  p->weight_on_input =
      (method->flags & FP8MOE_ROUTING_WEIGHT_ON_INPUT) != 0 || (a->flags & FP8MOE_FLAG_WEIGHT_ON_INPUT) != 0;
  p->workspace = a->workspace;
  p->workspace_size = a->workspace_size;
  p->stream = a->stream;
  return check_aliasing(p, err);
}
