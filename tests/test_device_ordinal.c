/* test_device_ordinal.c — fp8moe_context_args.device_ordinal as abi/fp8moe.h documents it: with backend CPU any
 * value is accepted (hosts pass -1 for "no device") and the context reports -1; with AUTO or CUDA a negative
 * ordinal is refused with INVALID_ARGUMENT naming the argument, and nothing is created. */
#include <stdint.h>
#include <string.h>

#include "plugin_host.h"

static int32_t create(const fp8moe_api* api, int32_t backend, int32_t ordinal, fp8moe_context** ctx, char* msg,
                      size_t msg_size) {
  fp8moe_context_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.backend = backend;
  a.device_ordinal = ordinal;
  a.error_message = msg;
  a.error_message_size = msg_size;
  msg[0] = '\0';
  *ctx = (fp8moe_context*)(uintptr_t)0x1;
  return api->context_create(&a, ctx);
}

int main(void) {
  test_plugin plugin;
  if (test_plugin_open(NULL, &plugin) != 0) return 1;
  const fp8moe_api* api = plugin.api;
  char msg[512];
  fp8moe_context* ctx = NULL;

  const int32_t cpu_ordinals[] = {-1, 0, 3, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof cpu_ordinals / sizeof cpu_ordinals[0]; ++i) {
    int32_t st = create(api, FP8MOE_BACKEND_CPU, cpu_ordinals[i], &ctx, msg, sizeof msg);
    EXPECT(st == FP8MOE_STATUS_OK && ctx != NULL, "CPU, ordinal %d: status %d '%s'", (int)cpu_ordinals[i], st, msg);
    if (st != FP8MOE_STATUS_OK) continue;
    fp8moe_context_info ci;
    memset(&ci, 0, sizeof ci);
    ci.struct_size = sizeof ci;
    EXPECT(api->context_info(ctx, &ci) == FP8MOE_STATUS_OK && ci.backend == FP8MOE_BACKEND_CPU &&
               ci.device_ordinal == -1,
           "CPU, ordinal %d: context reports backend %d ordinal %d", (int)cpu_ordinals[i], (int)ci.backend,
           (int)ci.device_ordinal);
    api->context_destroy(ctx);
  }

  const int32_t refused[] = {FP8MOE_BACKEND_AUTO, FP8MOE_BACKEND_CUDA};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; ++i) {
    int32_t st = create(api, refused[i], -1, &ctx, msg, sizeof msg);
    EXPECT(st == FP8MOE_STATUS_INVALID_ARGUMENT && ctx == NULL && strstr(msg, "device_ordinal") != NULL,
           "backend %d, ordinal -1: status %d, context %p, message '%s'", (int)refused[i], st, (void*)ctx, msg);
  }

  test_plugin_close(&plugin);
  return test_finish("test_device_ordinal", test_checks_run);
}
