/* negotiate_internal.h — ABI range negotiation, with the plugin's version as a parameter so that the
 * test-only fake plugins (built with other minors) run the very same code as the real library. */
#ifndef FP8MOE_NEGOTIATE_INTERNAL_H
#define FP8MOE_NEGOTIATE_INTERNAL_H

#include <stdint.h>

#include "fp8moe.h"

/* Negotiates n (see fp8moe.h) for a plugin speaking ABI plugin_major.plugin_minor. Fills the out fields
 * that n->struct_size covers whole (the message only when all of it is covered). Returns OK; ABI_MISMATCH (refusal MAJOR_MISMATCH,
 * PLUGIN_TOO_OLD or BAD_RANGE); INVALID_ARGUMENT for a NULL n (nothing written) or a struct_size that
 * does not cover `refusal` (refusal STRUCT_TOO_SMALL, written only where covered). */
int32_t fp8moe_negotiate(fp8moe_negotiation* n, uint32_t plugin_major, uint32_t plugin_minor);

/* The whole fp8moe_get_api contract around fp8moe_negotiate: a NULL api is refused (NULL_ARGUMENT,
 * INVALID_ARGUMENT); *api is set to table on OK and to NULL on any refusal. */
int32_t fp8moe_negotiate_get_api(fp8moe_negotiation* n, const fp8moe_api** api, const fp8moe_api* table,
                                 uint32_t plugin_major, uint32_t plugin_minor);

#endif /* FP8MOE_NEGOTIATE_INTERNAL_H */
