/* struct_size_internal.h — the one rule for structs that start with struct_size (docs/ABI.md, "The
 * struct_size rule"): a field is read or written only when the caller's struct_size covers ALL of it. A
 * struct_size that ends inside a field (half a pointer, one byte of an enum) is treated as if it ended
 * before that field, so its default applies. Every copy in or out of a host struct goes through
 * fp8moe_struct_read / fp8moe_struct_write, which use the field table below. */
#ifndef FP8MOE_STRUCT_SIZE_INTERNAL_H
#define FP8MOE_STRUCT_SIZE_INTERNAL_H

#include <stddef.h>
#include <string.h>

#include "fp8moe.h"

/* Bytes from the start of `type` to the end of `field`. */
#define FP8MOE_END_OF(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))
/* 1 when s (a `type*` whose struct_size is the caller's sizeof) covers all of field. */
#define FP8MOE_COVERS(type, s, field) ((s)->struct_size >= FP8MOE_END_OF(type, field))

typedef enum fp8moe_struct_kind {
  FP8MOE_STRUCT_NEGOTIATION,
  FP8MOE_STRUCT_CONTEXT_ARGS,
  FP8MOE_STRUCT_CONTEXT_INFO,
  FP8MOE_STRUCT_BACKEND_INFO,
  FP8MOE_STRUCT_CAPABILITIES,
  FP8MOE_STRUCT_MOE_ARGS,
} fp8moe_struct_kind;

/* The ends of a struct's fields, in order. A new field appended to a struct in fp8moe.h must be appended
 * here too (tests/test_struct_size_bytes.c checks every byte size against its own copy of these lists). */
static inline const size_t* fp8moe_struct_field_ends(fp8moe_struct_kind kind, size_t* count) {
#define E_(type, field) FP8MOE_END_OF(type, field)
  static const size_t negotiation[] = {
      E_(fp8moe_negotiation, struct_size),      E_(fp8moe_negotiation, host_abi_major),
      E_(fp8moe_negotiation, host_min_minor),   E_(fp8moe_negotiation, host_max_minor),
      E_(fp8moe_negotiation, plugin_abi_major), E_(fp8moe_negotiation, plugin_abi_minor),
      E_(fp8moe_negotiation, agreed_minor),     E_(fp8moe_negotiation, refusal),
      E_(fp8moe_negotiation, message)};
  static const size_t context_args[] = {
      E_(fp8moe_context_args, struct_size),    E_(fp8moe_context_args, error_message),
      E_(fp8moe_context_args, error_message_size), E_(fp8moe_context_args, backend),
      E_(fp8moe_context_args, device_ordinal), E_(fp8moe_context_args, num_threads),
      E_(fp8moe_context_args, flags)};
  static const size_t context_info[] = {
      E_(fp8moe_context_info, struct_size),      E_(fp8moe_context_info, backend),
      E_(fp8moe_context_info, device_ordinal),   E_(fp8moe_context_info, num_threads),
      E_(fp8moe_context_info, graph_capturable), E_(fp8moe_context_info, sm_count),
      E_(fp8moe_context_info, compute_capability), E_(fp8moe_context_info, device_name)};
  static const size_t backend_info[] = {
      E_(fp8moe_backend_info, struct_size), E_(fp8moe_backend_info, backend),
      E_(fp8moe_backend_info, available),   E_(fp8moe_backend_info, device_count),
      E_(fp8moe_backend_info, compiled_in), E_(fp8moe_backend_info, name),
      E_(fp8moe_backend_info, device_name), E_(fp8moe_backend_info, reason)};
  static const size_t capabilities[] = {
      E_(fp8moe_capabilities, struct_size),          E_(fp8moe_capabilities, backend),
      E_(fp8moe_capabilities, flags),                E_(fp8moe_capabilities, routing_method_count),
      E_(fp8moe_capabilities, quant_format_count),   E_(fp8moe_capabilities, activation_count),
      E_(fp8moe_capabilities, argument_count),       E_(fp8moe_capabilities, routing_methods),
      E_(fp8moe_capabilities, quant_formats),        E_(fp8moe_capabilities, activations),
      E_(fp8moe_capabilities, arguments),            E_(fp8moe_capabilities, limits)};
  static const size_t moe_args[] = {
      E_(fp8moe_moe_args, struct_size),   E_(fp8moe_moe_args, error_message),
      E_(fp8moe_moe_args, error_message_size), E_(fp8moe_moe_args, routing_method),
      E_(fp8moe_moe_args, quant_format),  E_(fp8moe_moe_args, activation),
      E_(fp8moe_moe_args, gate_up_order), E_(fp8moe_moe_args, flags),
      E_(fp8moe_moe_args, num_experts),   E_(fp8moe_moe_args, top_k),
      E_(fp8moe_moe_args, local_expert_offset), E_(fp8moe_moe_args, local_num_experts),
      E_(fp8moe_moe_args, n_group),       E_(fp8moe_moe_args, topk_group),
      E_(fp8moe_moe_args, routed_scaling_factor), E_(fp8moe_moe_args, hidden_states),
      E_(fp8moe_moe_args, hidden_scale),  E_(fp8moe_moe_args, router_logits),
      E_(fp8moe_moe_args, routing_bias),  E_(fp8moe_moe_args, topk_ids),
      E_(fp8moe_moe_args, topk_weights),  E_(fp8moe_moe_args, w13),
      E_(fp8moe_moe_args, w13_scale),     E_(fp8moe_moe_args, w2),
      E_(fp8moe_moe_args, w2_scale),      E_(fp8moe_moe_args, a1_scale),
      E_(fp8moe_moe_args, a2_scale),      E_(fp8moe_moe_args, output),
      E_(fp8moe_moe_args, routing_ids_out), E_(fp8moe_moe_args, routing_weights_out),
      E_(fp8moe_moe_args, device_status), E_(fp8moe_moe_args, workspace),
      E_(fp8moe_moe_args, workspace_size), E_(fp8moe_moe_args, stream)};
#undef E_
#define N_(a) (sizeof(a) / sizeof((a)[0]))
  switch (kind) {
    case FP8MOE_STRUCT_NEGOTIATION: *count = N_(negotiation); return negotiation;
    case FP8MOE_STRUCT_CONTEXT_ARGS: *count = N_(context_args); return context_args;
    case FP8MOE_STRUCT_CONTEXT_INFO: *count = N_(context_info); return context_info;
    case FP8MOE_STRUCT_BACKEND_INFO: *count = N_(backend_info); return backend_info;
    case FP8MOE_STRUCT_CAPABILITIES: *count = N_(capabilities); return capabilities;
    case FP8MOE_STRUCT_MOE_ARGS: *count = N_(moe_args); return moe_args;
  }
#undef N_
  *count = 0;
  return NULL;
}

/* The bytes a caller's struct_size covers in whole fields of the plugin's struct: the end of the last field
 * that ends at or before struct_size (0 when not even struct_size itself is covered). Never more than the
 * plugin's own struct, so bytes a newer host appended are ignored. */
static inline size_t fp8moe_struct_covered(fp8moe_struct_kind kind, size_t struct_size) {
  size_t count = 0;
  const size_t* ends = fp8moe_struct_field_ends(kind, &count);
  size_t covered = 0;
  for (size_t i = 0; i < count && ends[i] <= struct_size; ++i) covered = ends[i];
  return covered;
}

/* In-structs: copies the whole fields the caller covers from in into full, which holds the defaults. */
static inline void fp8moe_struct_read(fp8moe_struct_kind kind, void* full, const void* in) {
  size_t struct_size;
  memcpy(&struct_size, in, sizeof struct_size);
  memcpy(full, in, fp8moe_struct_covered(kind, struct_size));
}

/* Out-structs: copies the whole fields the caller covers, from byte `from` on, from full into out (struct_size
 * itself and the in-fields before `from` are never written). */
static inline void fp8moe_struct_write(fp8moe_struct_kind kind, void* out, const void* full, size_t from) {
  size_t struct_size;
  memcpy(&struct_size, out, sizeof struct_size);
  size_t end = fp8moe_struct_covered(kind, struct_size);
  if (end > from) memcpy((char*)out + from, (const char*)full + from, end - from);
}

#endif /* FP8MOE_STRUCT_SIZE_INTERNAL_H */
