/* error_internal.h — how every internal function reports a refusal: a status code plus a formatted
 * message written into the caller's buffer. One-line error paths via RETURN_IF / FORWARD_IF_ERROR. */
#ifndef FP8MOE_ERROR_INTERNAL_H
#define FP8MOE_ERROR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "fp8moe.h"

/* Where a message goes. buf may be NULL (message dropped); it is always NUL-terminated when size > 0. */
typedef struct fp8moe_err {
  char* buf;
  size_t size;
} fp8moe_err;

#if defined(__GNUC__)
#define FP8MOE_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define FP8MOE_PRINTF(fmt_index, first_arg)
#endif

/* Formats the message into err and returns status, so refusals read `return fp8moe_fail(err, ...)`. */
int32_t fp8moe_fail(fp8moe_err* err, int32_t status, const char* fmt, ...) FP8MOE_PRINTF(3, 4);

/* Static, never-NULL text for a status code (the one table of status messages). */
const char* fp8moe_status_string(int32_t status);

#define RETURN_IF(cond, err, status, ...)                                                                   \
  do {                                                                                                      \
    if (cond) return fp8moe_fail((err), (status), __VA_ARGS__);                                             \
  } while (0)

#define FORWARD_IF_ERROR(expr)                                                                              \
  do {                                                                                                      \
    int32_t fwd_status_ = (expr);                                                                           \
    if (fwd_status_ != FP8MOE_STATUS_OK) return fwd_status_;                                                \
  } while (0)

#endif /* FP8MOE_ERROR_INTERNAL_H */
