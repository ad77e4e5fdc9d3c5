/* abi_fake_plugin.c — the smallest library with fp8moe's exported interface, compiled by abi_selftest.sh
 * against edited copies of fp8moe.h to prove that the ABI gate (packaging/abi/abi_gate.sh) refuses
 * incompatible edits and accepts additive ones. Only the types matter here: abidiff reads them from the DWARF
 * of fp8moe_get_api's signature and of the function table, so nothing in this file ever runs. */
#include "fp8moe.h"

static const fp8moe_api fake_table = {
    .struct_size = sizeof(fp8moe_api),
    .abi_major = FP8MOE_ABI_VERSION_MAJOR,
    .abi_minor = FP8MOE_ABI_VERSION_MINOR,
};

FP8MOE_EXPORT int32_t fp8moe_get_api(fp8moe_negotiation* negotiation, const struct fp8moe_api** api) {
  if (!negotiation || !api) return FP8MOE_STATUS_INVALID_ARGUMENT;
  negotiation->plugin_abi_major = FP8MOE_ABI_VERSION_MAJOR;
  *api = &fake_table;
  return FP8MOE_STATUS_OK;
}
