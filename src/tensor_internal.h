/* tensor_internal.h — a validated, resolved view of one fp8moe_tensor: byte_offset applied, strides made
 * explicit (in elements), dtype mapped to a closed internal enum. Backends read tensors only through
 * views, never through the host's descriptors. */
#ifndef FP8MOE_TENSOR_INTERNAL_H
#define FP8MOE_TENSOR_INTERNAL_H

#include <stdint.h>

#include "fp8moe.h"

#define FP8MOE_MAX_RANK 4

typedef enum fp8moe_dt {
  FP8MOE_DT_NONE = 0, /* absent tensor */
  FP8MOE_DT_F32,
  FP8MOE_DT_BF16,
  FP8MOE_DT_F16,
  FP8MOE_DT_E4M3,
  FP8MOE_DT_I32,
  FP8MOE_DT_I64,
} fp8moe_dt;

typedef struct fp8moe_view {
  void* data;                        /* byte_offset already applied; NULL when absent */
  fp8moe_dt dt;                      /* FP8MOE_DT_NONE when absent */
  int32_t ndim;
  int32_t device_type;               /* FP8MOE_DEVICE_* */
  int32_t device_id;
  int64_t shape[FP8MOE_MAX_RANK];
  int64_t strides[FP8MOE_MAX_RANK];  /* in elements, explicit even when the host passed NULL */
  uint64_t numel;                    /* elements; 0 for an empty tensor (whose strides are not checked) */
  uintptr_t bytes_begin, bytes_end;  /* the bytes the elements span, [begin, end); empty when numel is 0 */
} fp8moe_view;

/* Bytes per element of an internal dtype (0 for NONE). */
int32_t fp8moe_dt_size(fp8moe_dt dt);
/* Human-readable name: "float32", "bfloat16", "float16", "float8_e4m3fn", "int32", "int64". */
const char* fp8moe_dt_name(fp8moe_dt dt);
/* Maps a DLPack dtype to the internal enum; FP8MOE_DT_NONE when fp8moe has no such type. */
fp8moe_dt fp8moe_dt_from_dlpack(fp8moe_dtype dtype);
/* Writes a DLPack dtype's name (e.g. "int8", "float8_e5m2", "code 7 bits 8 lanes 2") into buf. */
void fp8moe_dlpack_dtype_name(fp8moe_dtype dtype, char* buf, size_t size);

/* Element offset of index idx[0..ndim) in v. */
static inline int64_t fp8moe_view_offset(const fp8moe_view* v, const int64_t* idx) {
  int64_t off = 0;
  for (int32_t d = 0; d < v->ndim; ++d) off += idx[d] * v->strides[d];
  return off;
}

#endif /* FP8MOE_TENSOR_INTERNAL_H */
