/* status.c — the one table of status strings, and the formatter every refusal goes through. */
#include <stdarg.h>
#include <stdio.h>

#include "error_internal.h"

int32_t fp8moe_fail(fp8moe_err* err, int32_t status, const char* fmt, ...) {
  if (err != NULL && err->buf != NULL && err->size > 0) {
    va_list ap;
    va_start(ap, fmt);
    /* vsnprintf truncates and always NUL-terminates when size > 0. */
    (void)vsnprintf(err->buf, err->size, fmt, ap);
    va_end(ap);
  }
  return status;
}

static const char* const status_strings[] = {
    [FP8MOE_STATUS_OK] = "ok",
    [FP8MOE_STATUS_INVALID_ARGUMENT] = "invalid argument",
    [FP8MOE_STATUS_UNSUPPORTED_DTYPE] = "unsupported dtype",
    [FP8MOE_STATUS_UNSUPPORTED] = "unsupported combination or size",
    [FP8MOE_STATUS_ABI_MISMATCH] = "ABI version mismatch",
    [FP8MOE_STATUS_BACKEND_UNAVAILABLE] = "backend unavailable",
    [FP8MOE_STATUS_WORKSPACE_TOO_SMALL] = "workspace too small",
    [FP8MOE_STATUS_WRONG_DEVICE] = "tensor on the wrong device",
    [FP8MOE_STATUS_OUT_OF_MEMORY] = "out of memory",
    [FP8MOE_STATUS_DEVICE_ERROR] = "device error",
    [FP8MOE_STATUS_INTERNAL] = "internal error",
    [FP8MOE_STATUS_DATA_ERROR] = "invalid input data",
};

const char* fp8moe_status_string(int32_t status) {
  if (status < 0 || (size_t)status >= sizeof status_strings / sizeof status_strings[0]) return "unknown status";
  return status_strings[status];
}
