/* negotiate.c — ABI range negotiation (fp8moe.h, "Negotiation"). Nothing is written past the host's
 * struct_size: an older or truncated negotiation struct only receives the fields it has room for.
 * Self-contained (no other fp8moe object) so the test fake plugins can link it alone. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "error_internal.h"
#include "negotiate_internal.h"
#include "struct_size_internal.h"

#define NEGOTIATION_MIN_SIZE FP8MOE_END_OF(fp8moe_negotiation, refusal)
#define NEGOTIATION_OUT_BEGIN offsetof(fp8moe_negotiation, plugin_abi_major)

/* Copies the out fields of full into n, each only when n->struct_size covers all of it (the message too:
 * a struct that ends inside message gets none of it). */
static void write_back(fp8moe_negotiation* n, const fp8moe_negotiation* full) {
  fp8moe_struct_write(FP8MOE_STRUCT_NEGOTIATION, n, full, NEGOTIATION_OUT_BEGIN);
}

static int32_t refuse(fp8moe_negotiation* n, fp8moe_negotiation* full, int32_t status, int32_t refusal,
                      const char* fmt, ...) FP8MOE_PRINTF(5, 6);

static int32_t refuse(fp8moe_negotiation* n, fp8moe_negotiation* full, int32_t status, int32_t refusal,
                      const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  (void)vsnprintf(full->message, sizeof full->message, fmt, ap);
  va_end(ap);
  full->refusal = refusal;
  full->agreed_minor = 0;
  write_back(n, full);
  return status;
}

int32_t fp8moe_negotiate(fp8moe_negotiation* n, uint32_t plugin_major, uint32_t plugin_minor) {
  if (n == NULL) return FP8MOE_STATUS_INVALID_ARGUMENT;
  fp8moe_negotiation full;
  memset(&full, 0, sizeof full);
  full.plugin_abi_major = plugin_major;
  full.plugin_abi_minor = plugin_minor;
  if (n->struct_size < NEGOTIATION_MIN_SIZE) {
    return refuse(n, &full, FP8MOE_STATUS_INVALID_ARGUMENT, FP8MOE_REFUSAL_STRUCT_TOO_SMALL,
                  "negotiation.struct_size: too small to hold the fields up to refusal; got %zu; expected >= %zu",
                  n->struct_size, (size_t)NEGOTIATION_MIN_SIZE);
  }
  if (n->host_abi_major != plugin_major) {
    return refuse(n, &full, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_MAJOR_MISMATCH,
                  "negotiation.host_abi_major: the plugin speaks another ABI major; got %u; expected %u",
                  n->host_abi_major, plugin_major);
  }
  if (n->host_min_minor > n->host_max_minor) {
    return refuse(n, &full, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_BAD_RANGE,
                  "negotiation.host_min_minor: the minor range is empty; got [%u, %u]; expected min <= max",
                  n->host_min_minor, n->host_max_minor);
  }
  if (plugin_minor < n->host_min_minor) {
    return refuse(n, &full, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_PLUGIN_TOO_OLD,
                  "negotiation.host_min_minor: the plugin is older than the host accepts; got plugin ABI %u.%u; "
                  "expected minor >= %u",
                  plugin_major, plugin_minor, n->host_min_minor);
  }
  full.agreed_minor = plugin_minor < n->host_max_minor ? plugin_minor : n->host_max_minor;
  full.refusal = FP8MOE_REFUSAL_NONE;
  write_back(n, &full);
  return FP8MOE_STATUS_OK;
}

int32_t fp8moe_negotiate_get_api(fp8moe_negotiation* n, const fp8moe_api** api, const fp8moe_api* table,
                                 uint32_t plugin_major, uint32_t plugin_minor) {
  if (api != NULL) *api = NULL;
  if (api == NULL && n != NULL && n->struct_size >= NEGOTIATION_MIN_SIZE) {
    fp8moe_negotiation full;
    memset(&full, 0, sizeof full);
    full.plugin_abi_major = plugin_major;
    full.plugin_abi_minor = plugin_minor;
    return refuse(n, &full, FP8MOE_STATUS_INVALID_ARGUMENT, FP8MOE_REFUSAL_NULL_ARGUMENT,
                  "api: NULL pointer; got NULL; expected a pointer that receives the function table");
  }
  if (api == NULL) {
    /* Still tell a struct that covers nothing useful that it is too small, when it can be read. */
    if (n != NULL) (void)fp8moe_negotiate(n, plugin_major, plugin_minor);
    return FP8MOE_STATUS_INVALID_ARGUMENT;
  }
  int32_t status = fp8moe_negotiate(n, plugin_major, plugin_minor);
  if (status == FP8MOE_STATUS_OK) *api = table;
  return status;
}
