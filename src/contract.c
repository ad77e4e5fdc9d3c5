/* contract.c — the capability/contract table as read-only data. query_capabilities hands these arrays
 * out unchanged and validate.c checks every call against them: one source of truth. A new routing method,
 * format, activation or dtype is a row here (plus its kernels). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "contract_internal.h"
#include "quant_geometry_internal.h"
#include "struct_size_internal.h"

#define BOTH_BACKENDS (FP8MOE_BACKEND_MASK_CPU | FP8MOE_BACKEND_MASK_CUDA)
#define COUNT(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

/* Rows are indexed by id: row i has id i (checked by the tests through query_capabilities). */
static const fp8moe_routing_method_info routing_methods[] = {
    {FP8MOE_ROUTING_DEFAULT, FP8MOE_ROUTING_USES_LOGITS, BOTH_BACKENDS, 0, "DEFAULT",
     "softmax over all E -> top-K; weights are those probabilities"},
    {FP8MOE_ROUTING_RENORMALIZE, FP8MOE_ROUTING_USES_LOGITS, BOTH_BACKENDS, 0, "RENORMALIZE",
     "top-K on raw logits -> softmax over the K selected"},
    {FP8MOE_ROUTING_DEEPSEEK_V3,
     FP8MOE_ROUTING_USES_LOGITS | FP8MOE_ROUTING_USES_BIAS | FP8MOE_ROUTING_USES_GROUPS, BOTH_BACKENDS, 0,
     "DEEPSEEK_V3",
     "sigmoid + bias, best topk_group of n_group groups (top-2 sum), top-K -> sigma / sum(sigma) x scale"},
    {FP8MOE_ROUTING_LLAMA4,
     FP8MOE_ROUTING_USES_LOGITS | FP8MOE_ROUTING_WEIGHT_ON_INPUT | FP8MOE_ROUTING_TOP1_ONLY, BOTH_BACKENDS, 0,
     "LLAMA4", "top-1 on raw logits -> sigmoid(logit), applied to the input; K must be 1"},
    {FP8MOE_ROUTING_RENORMALIZE_NAIVE, FP8MOE_ROUTING_USES_LOGITS, BOTH_BACKENDS, 0, "RENORMALIZE_NAIVE",
     "softmax over all E -> top-K -> divided by their sum"},
    {FP8MOE_ROUTING_TOPK, FP8MOE_ROUTING_USES_LOGITS, BOTH_BACKENDS, 0, "TOPK",
     "top-K on raw logits -> weight = the raw logit"},
    {FP8MOE_ROUTING_SIGMOID, FP8MOE_ROUTING_USES_LOGITS, BOTH_BACKENDS, 0, "SIGMOID",
     "sigmoid -> top-K; no renormalization"},
    {FP8MOE_ROUTING_SIGMOID_RENORM, FP8MOE_ROUTING_USES_LOGITS, BOTH_BACKENDS, 0, "SIGMOID_RENORM",
     "sigmoid -> top-K -> divided by their sum"},
    {FP8MOE_ROUTING_TOPK_SIGMOID, FP8MOE_ROUTING_USES_LOGITS, BOTH_BACKENDS, 0, "TOPK_SIGMOID",
     "top-K on raw logits -> sigmoid"},
    {FP8MOE_ROUTING_PRECOMPUTED, FP8MOE_ROUTING_USES_TOPK_INPUT, BOTH_BACKENDS, 0, "PRECOMPUTED",
     "the host's topk_ids -> the host's topk_weights"},
};

static const fp8moe_quant_format_info quant_formats[] = {
    {FP8MOE_QUANT_FP8_PER_TENSOR, 128, BOTH_BACKENDS, 0, "FP8_PER_TENSOR",
     "e4m3fn weights, fp32 scale per expert matrix; activations per-tensor (static a1/a2_scale or dynamic)"},
    {FP8MOE_QUANT_FP8_BLOCK128, 128, BOTH_BACKENDS, 0, "FP8_BLOCK128",
     "e4m3fn weights, fp32 scale per 128x128 block; activations in dynamic 1x128 groups"},
    {FP8MOE_QUANT_FP8_PER_CHANNEL, 128, BOTH_BACKENDS, 0, "FP8_PER_CHANNEL",
     "e4m3fn weights, fp32 scale per output row; activations per token (dynamic)"},
};

/* The arithmetic of each format (quant_geometry_internal.h), row i beside quant_formats[i]. */
static const fp8moe_quant_geometry quant_geometries[] = {
    /* FP8_PER_TENSOR */ {FP8MOE_GRAN_TENSOR, 0, FP8MOE_GRAN_TENSOR, 0, 0},
    /* FP8_BLOCK128 */ {FP8MOE_GRAN_BLOCK, 128, FP8MOE_GRAN_BLOCK, 128, 128},
    /* FP8_PER_CHANNEL */ {FP8MOE_GRAN_ROW, 0, FP8MOE_GRAN_ROW, 0, 0},
};
_Static_assert(sizeof quant_geometries / sizeof quant_geometries[0] == sizeof quant_formats / sizeof quant_formats[0],
               "one geometry per quantization format");

static const fp8moe_activation_info activations[] = {
    {FP8MOE_ACTIVATION_SWIGLU, BOTH_BACKENDS, "SWIGLU"},
    {FP8MOE_ACTIVATION_GEGLU, BOTH_BACKENDS, "GEGLU"},
};

#define DT_F32 {FP8MOE_DTYPE_FLOAT, 32, 1}
#define DT_BF16 {FP8MOE_DTYPE_BFLOAT, 16, 1}
#define DT_F16 {FP8MOE_DTYPE_FLOAT, 16, 1}
#define DT_E4M3 {FP8MOE_DTYPE_FLOAT8_E4M3FN, 8, 1}
#define DT_I32 {FP8MOE_DTYPE_INT, 32, 1}
#define DT_I64 {FP8MOE_DTYPE_INT, 64, 1}

static const fp8moe_dtype dtypes_hidden[] = {DT_BF16, DT_F16, DT_E4M3};
static const fp8moe_dtype dtypes_float[] = {DT_F32, DT_BF16, DT_F16};
static const fp8moe_dtype dtypes_ids[] = {DT_I32, DT_I64};
static const fp8moe_dtype dtypes_e4m3[] = {DT_E4M3};
static const fp8moe_dtype dtypes_output[] = {DT_BF16, DT_F16, DT_F32};
static const fp8moe_dtype dtypes_i32[] = {DT_I32};
static const fp8moe_dtype dtypes_f32[] = {DT_F32};

#define IN_ANY FP8MOE_ARGUMENT_ANY_STRIDES
#define IN_ROWS FP8MOE_ARGUMENT_INNER_CONTIGUOUS
#define OUT_ROWS (FP8MOE_ARGUMENT_OUTPUT | FP8MOE_ARGUMENT_INNER_CONTIGUOUS)
#define OUT_ANY (FP8MOE_ARGUMENT_OUTPUT | FP8MOE_ARGUMENT_ANY_STRIDES)

/* alignment: bytes the data pointer (after byte_offset) must be a multiple of. For ANY_STRIDES arguments it
 * is the smallest element size of the accepted set; the pointer must also be aligned to the element size
 * of the dtype actually passed. */
static const fp8moe_argument_info arguments[] = {
    {FP8MOE_ARG_HIDDEN_STATES, IN_ROWS, COUNT(dtypes_hidden), 16, "hidden_states", "[T,H]",
     "required; e4m3fn requires hidden_scale", dtypes_hidden},
    {FP8MOE_ARG_HIDDEN_SCALE, IN_ANY, COUNT(dtypes_float), 2, "hidden_scale",
     "FP8_PER_TENSOR [] or [1]; FP8_BLOCK128 [T,H/128]; FP8_PER_CHANNEL [T] or [T,1]",
     "required with e4m3fn hidden_states, refused otherwise", dtypes_float},
    {FP8MOE_ARG_ROUTER_LOGITS, IN_ANY, COUNT(dtypes_float), 2, "router_logits", "[T,E]",
     "required by every routing method but PRECOMPUTED, refused by PRECOMPUTED", dtypes_float},
    {FP8MOE_ARG_ROUTING_BIAS, IN_ANY, COUNT(dtypes_float), 2, "routing_bias", "[E]",
     "optional with DEEPSEEK_V3, refused by other methods", dtypes_float},
    {FP8MOE_ARG_TOPK_IDS, IN_ANY, COUNT(dtypes_ids), 4, "topk_ids", "[T,K]",
     "required by PRECOMPUTED, refused by other methods", dtypes_ids},
    {FP8MOE_ARG_TOPK_WEIGHTS, IN_ANY, COUNT(dtypes_float), 2, "topk_weights", "[T,K]",
     "required by PRECOMPUTED, refused by other methods", dtypes_float},
    {FP8MOE_ARG_W13, IN_ROWS, COUNT(dtypes_e4m3), 16, "w13", "[E_l,2I,H]", "required", dtypes_e4m3},
    {FP8MOE_ARG_W13_SCALE, IN_ANY, COUNT(dtypes_float), 2, "w13_scale",
     "FP8_PER_TENSOR [E_l]; FP8_BLOCK128 [E_l,2I/128,H/128]; FP8_PER_CHANNEL [E_l,2I]", "required", dtypes_float},
    {FP8MOE_ARG_W2, IN_ROWS, COUNT(dtypes_e4m3), 16, "w2", "[E_l,H,I]", "required", dtypes_e4m3},
    {FP8MOE_ARG_W2_SCALE, IN_ANY, COUNT(dtypes_float), 2, "w2_scale",
     "FP8_PER_TENSOR [E_l]; FP8_BLOCK128 [E_l,H/128,I/128]; FP8_PER_CHANNEL [E_l,H]", "required", dtypes_float},
    {FP8MOE_ARG_A1_SCALE, IN_ANY, COUNT(dtypes_float), 2, "a1_scale", "[] or [1]",
     "optional with FP8_PER_TENSOR (NULL = dynamic), refused by other formats", dtypes_float},
    {FP8MOE_ARG_A2_SCALE, IN_ANY, COUNT(dtypes_float), 2, "a2_scale", "[] or [1]",
     "optional with FP8_PER_TENSOR (NULL = dynamic), refused by other formats", dtypes_float},
    {FP8MOE_ARG_OUTPUT, OUT_ROWS, COUNT(dtypes_output), 16, "output", "[T,H]", "required; fully written",
     dtypes_output},
    {FP8MOE_ARG_ROUTING_IDS_OUT, OUT_ANY, COUNT(dtypes_i32), 4, "routing_ids_out", "[T,K]", "optional",
     dtypes_i32},
    {FP8MOE_ARG_ROUTING_WEIGHTS_OUT, OUT_ANY, COUNT(dtypes_f32), 4, "routing_weights_out", "[T,K]", "optional",
     dtypes_f32},
    {FP8MOE_ARG_DEVICE_STATUS, OUT_ANY, COUNT(dtypes_i32), 4, "device_status", "[1]",
     "optional; written by the CUDA backend only when T > 0", dtypes_i32},
};

_Static_assert(sizeof(arguments) / sizeof(arguments[0]) == FP8MOE_ARG_COUNT_V1_0, "one row per argument id");
_Static_assert(sizeof(routing_methods) / sizeof(routing_methods[0]) == FP8MOE_ROUTING_PRECOMPUTED + 1,
               "one row per routing method id");

static const fp8moe_limits limits = {
    .max_tokens = (int64_t)1 << 24,
    .max_hidden = 16384,
    .max_intermediate = 32768,
    .max_experts = 2048,
    .max_top_k = 32,
    .max_groups = 32,
    .min_group_size = 2,
    .max_group_size = 2048,
    .reserved = 0,
};

const fp8moe_routing_method_info* fp8moe_contract_routing_method(int32_t id) {
  for (uint32_t i = 0; i < COUNT(routing_methods); ++i)
    if (routing_methods[i].id == id) return &routing_methods[i];
  return NULL;
}

const fp8moe_quant_format_info* fp8moe_contract_quant_format(int32_t id) {
  for (uint32_t i = 0; i < COUNT(quant_formats); ++i)
    if (quant_formats[i].id == id) return &quant_formats[i];
  return NULL;
}

const fp8moe_quant_geometry* fp8moe_contract_quant_geometry(int32_t format_id) {
  for (uint32_t i = 0; i < COUNT(quant_formats); ++i)
    if (quant_formats[i].id == format_id) return &quant_geometries[i];
  return NULL;
}

const fp8moe_activation_info* fp8moe_contract_activation(int32_t id) {
  for (uint32_t i = 0; i < COUNT(activations); ++i)
    if (activations[i].id == id) return &activations[i];
  return NULL;
}

const fp8moe_argument_info* fp8moe_contract_argument(int32_t arg_id) {
  for (uint32_t i = 0; i < COUNT(arguments); ++i)
    if (arguments[i].id == arg_id) return &arguments[i];
  return NULL;
}

const fp8moe_limits* fp8moe_contract_limits(void) { return &limits; }

int32_t fp8moe_contract_accepts_dtype(const fp8moe_argument_info* arg, fp8moe_dt dt) {
  if (dt == FP8MOE_DT_NONE) return 0;
  for (uint32_t i = 0; i < arg->dtype_count; ++i)
    if (fp8moe_dt_from_dlpack(arg->dtypes[i]) == dt) return 1;
  return 0;
}

void fp8moe_contract_dtype_list(const fp8moe_argument_info* arg, char* buf, size_t size) {
  if (buf == NULL || size == 0) return;
  buf[0] = '\0';
  size_t used = 0;
  for (uint32_t i = 0; i < arg->dtype_count && used < size; ++i) {
    int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", fp8moe_dt_name(fp8moe_dt_from_dlpack(arg->dtypes[i])));
    if (n < 0) break;
    used += (size_t)n;
  }
}

#define COVERS(caps, field) FP8MOE_COVERS(fp8moe_capabilities, caps, field)

void fp8moe_contract_fill(fp8moe_capabilities* caps) {
  if (COVERS(caps, routing_method_count)) caps->routing_method_count = COUNT(routing_methods);
  if (COVERS(caps, quant_format_count)) caps->quant_format_count = COUNT(quant_formats);
  if (COVERS(caps, activation_count)) caps->activation_count = COUNT(activations);
  if (COVERS(caps, argument_count)) caps->argument_count = COUNT(arguments);
  if (COVERS(caps, routing_methods)) caps->routing_methods = routing_methods;
  if (COVERS(caps, quant_formats)) caps->quant_formats = quant_formats;
  if (COVERS(caps, activations)) caps->activations = activations;
  if (COVERS(caps, arguments)) caps->arguments = arguments;
  if (COVERS(caps, limits)) caps->limits = limits;
}
