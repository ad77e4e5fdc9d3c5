/* tensor.c — the mapping between DLPack dtypes and fp8moe's closed set of internal element types. */
#include <stdio.h>

#include "tensor_internal.h"

int32_t fp8moe_dt_size(fp8moe_dt dt) {
  switch (dt) {
    case FP8MOE_DT_F32: return 4;
    case FP8MOE_DT_BF16: return 2;
    case FP8MOE_DT_F16: return 2;
    case FP8MOE_DT_E4M3: return 1;
    case FP8MOE_DT_I32: return 4;
    case FP8MOE_DT_I64: return 8;
    case FP8MOE_DT_NONE: break;
  }
  return 0;
}

const char* fp8moe_dt_name(fp8moe_dt dt) {
  switch (dt) {
    case FP8MOE_DT_F32: return "float32";
    case FP8MOE_DT_BF16: return "bfloat16";
    case FP8MOE_DT_F16: return "float16";
    case FP8MOE_DT_E4M3: return "float8_e4m3fn";
    case FP8MOE_DT_I32: return "int32";
    case FP8MOE_DT_I64: return "int64";
    case FP8MOE_DT_NONE: break;
  }
  return "none";
}

fp8moe_dt fp8moe_dt_from_dlpack(fp8moe_dtype dtype) {
  if (dtype.lanes != 1) return FP8MOE_DT_NONE;
  switch (dtype.code) {
    case FP8MOE_DTYPE_FLOAT:
      if (dtype.bits == 32) return FP8MOE_DT_F32;
      if (dtype.bits == 16) return FP8MOE_DT_F16;
      break;
    case FP8MOE_DTYPE_BFLOAT:
      if (dtype.bits == 16) return FP8MOE_DT_BF16;
      break;
    case FP8MOE_DTYPE_FLOAT8_E4M3FN:
      if (dtype.bits == 8) return FP8MOE_DT_E4M3;
      break;
    case FP8MOE_DTYPE_INT:
      if (dtype.bits == 32) return FP8MOE_DT_I32;
      if (dtype.bits == 64) return FP8MOE_DT_I64;
      break;
    default:
      break;
  }
  return FP8MOE_DT_NONE;
}

/* DLPack 1.1 names of the codes a host is likely to hand over by mistake. */
static const char* dlpack_code_prefix(uint8_t code) {
  switch (code) {
    case FP8MOE_DTYPE_INT: return "int";
    case FP8MOE_DTYPE_UINT: return "uint";
    case FP8MOE_DTYPE_FLOAT: return "float";
    case FP8MOE_DTYPE_BFLOAT: return "bfloat";
    default: return NULL;
  }
}

static const char* dlpack_fp8_name(uint8_t code) {
  switch (code) {
    case 7: return "float8_e3m4";
    case 8: return "float8_e4m3";
    case 9: return "float8_e4m3b11fnuz";
    case FP8MOE_DTYPE_FLOAT8_E4M3FN: return "float8_e4m3fn";
    case 11: return "float8_e4m3fnuz";
    case FP8MOE_DTYPE_FLOAT8_E5M2: return "float8_e5m2";
    case 13: return "float8_e5m2fnuz";
    case 14: return "float8_e8m0fnu";
    default: return NULL;
  }
}

void fp8moe_dlpack_dtype_name(fp8moe_dtype dtype, char* buf, size_t size) {
  if (buf == NULL || size == 0) return;
  const char* prefix = dlpack_code_prefix(dtype.code);
  const char* fp8 = dlpack_fp8_name(dtype.code);
  if (dtype.lanes == 1 && prefix != NULL) {
    (void)snprintf(buf, size, "%s%u", prefix, (unsigned)dtype.bits);
  } else if (dtype.lanes == 1 && fp8 != NULL && dtype.bits == 8) {
    (void)snprintf(buf, size, "%s", fp8);
  } else if (dtype.lanes == 1 && dtype.code == 6) {
    (void)snprintf(buf, size, "bool%u", (unsigned)dtype.bits);
  } else {
    (void)snprintf(buf, size, "code %u bits %u lanes %u", (unsigned)dtype.code, (unsigned)dtype.bits,
                   (unsigned)dtype.lanes);
  }
}
