/* fuzz_negotiation.c — libFuzzer target for fp8moe_get_api (docs/RELIABILITY.md). The input is a
 * struct_size (2 bytes), two flag bits (NULL negotiation, NULL api) and the bytes of the negotiation struct.
 * Invariants, checked with a trap: the status is one get_api documents; *api is the table exactly when the
 * status is OK; only whole out-fields that struct_size covers are written (struct_size and the in-fields never,
 * nothing past the covered fields, up to sizeof + 64); an accepted negotiation agrees on a minor inside the
 * host's range; the message, when written, is NUL-terminated. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fp8moe.h"
#include "struct_size_internal.h"

#define SLACK 64

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  union {
    fp8moe_negotiation n;
    unsigned char b[sizeof(fp8moe_negotiation) + SLACK];
  } u, before;
  memset(&u, 0xA5, sizeof u);
  size_t struct_size = 0;
  unsigned flags = 0;
  if (size >= 2) struct_size = (size_t)(data[0] | (data[1] << 8)) % (sizeof u + 1);
  if (size >= 3) flags = data[2];
  if (size > 3) memcpy(u.b + sizeof(size_t), data + 3, size - 3 < sizeof u - sizeof(size_t) ? size - 3 : sizeof u - sizeof(size_t));
  if (flags & 4) struct_size = (size_t)-1 - (size_t)(flags >> 3); /* absurd sizes too */
  memcpy(u.b, &struct_size, sizeof struct_size);
  memcpy(&before, &u, sizeof u);
  const fp8moe_api* api = (const fp8moe_api*)(uintptr_t)0x1;
  int32_t st = fp8moe_get_api((flags & 1) ? NULL : &u.n, (flags & 2) ? NULL : &api);

  if (st != FP8MOE_STATUS_OK && st != FP8MOE_STATUS_INVALID_ARGUMENT && st != FP8MOE_STATUS_ABI_MISMATCH)
    __builtin_trap();
  if (!(flags & 2) && ((st == FP8MOE_STATUS_OK) != (api != NULL))) __builtin_trap();
  if (flags & 1) {
    if (memcmp(&u, &before, sizeof u) != 0) __builtin_trap();
    return 0;
  }
  const size_t covered = fp8moe_struct_covered(FP8MOE_STRUCT_NEGOTIATION, struct_size);
  const size_t out_begin = offsetof(fp8moe_negotiation, plugin_abi_major);
  /* struct_size and in-fields untouched; nothing written from the covered end on */
  if (memcmp(u.b, before.b, out_begin) != 0) __builtin_trap();
  size_t from = covered > out_begin ? covered : out_begin;
  if (memcmp(u.b + from, before.b + from, sizeof u - from) != 0) __builtin_trap();
  if (st == FP8MOE_STATUS_OK) {
    if (u.n.host_abi_major != FP8MOE_ABI_VERSION_MAJOR || u.n.host_min_minor > u.n.host_max_minor) __builtin_trap();
    if (u.n.agreed_minor < u.n.host_min_minor || u.n.agreed_minor > u.n.host_max_minor ||
        u.n.agreed_minor > FP8MOE_ABI_VERSION_MINOR || u.n.refusal != FP8MOE_REFUSAL_NONE)
      __builtin_trap();
    if (api->struct_size < sizeof(fp8moe_api) || api->abi_major != FP8MOE_ABI_VERSION_MAJOR) __builtin_trap();
  }
  if (covered >= FP8MOE_END_OF(fp8moe_negotiation, message) &&
      memchr(u.n.message, '\0', sizeof u.n.message) == NULL)
    __builtin_trap();
  return 0;
}
