/* test_header_c99.c — the public header on its own. CTest compiles this file as C99, C11 (with
 * -Wall -Wextra -pedantic -Werror) and as C++11; built as a C99 program it also checks at run time the
 * pinned values a host bakes into its binary. fp8moe.h is included first, so it must be self-contained. */
#include "fp8moe.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int checks_run = 0;
static int checks_failed = 0;

static void expect(int cond, const char* what) {
  ++checks_run;
  if (!cond) {
    ++checks_failed;
    fprintf(stderr, "FAILED: %s\n", what);
  }
}

#define EXPECT_EQ(a, b) expect((long long)(a) == (long long)(b), #a " == " #b)

/* A function with the entry point's signature converts to fp8moe_get_api_fn without a cast. */
static int32_t host_side_get_api(fp8moe_negotiation* negotiation, const struct fp8moe_api** api) {
  (void)negotiation;
  if (api) *api = NULL;
  return FP8MOE_STATUS_ABI_MISMATCH;
}

int main(void) {
  /* versions, statuses and refusals are pinned numbers */
  EXPECT_EQ(FP8MOE_ABI_VERSION_MAJOR, 1);
  EXPECT_EQ(FP8MOE_VERSION_MAJOR, FP8MOE_ABI_VERSION_MAJOR);
  expect(strlen(FP8MOE_VERSION_STRING) >= 5, "FP8MOE_VERSION_STRING is semver");
  EXPECT_EQ(FP8MOE_STATUS_OK, 0);
  EXPECT_EQ(FP8MOE_STATUS_INVALID_ARGUMENT, 1);
  EXPECT_EQ(FP8MOE_STATUS_UNSUPPORTED_DTYPE, 2);
  EXPECT_EQ(FP8MOE_STATUS_UNSUPPORTED, 3);
  EXPECT_EQ(FP8MOE_STATUS_ABI_MISMATCH, 4);
  EXPECT_EQ(FP8MOE_STATUS_BACKEND_UNAVAILABLE, 5);
  EXPECT_EQ(FP8MOE_STATUS_WORKSPACE_TOO_SMALL, 6);
  EXPECT_EQ(FP8MOE_STATUS_WRONG_DEVICE, 7);
  EXPECT_EQ(FP8MOE_STATUS_OUT_OF_MEMORY, 8);
  EXPECT_EQ(FP8MOE_STATUS_DEVICE_ERROR, 9);
  EXPECT_EQ(FP8MOE_STATUS_INTERNAL, 10);
  EXPECT_EQ(FP8MOE_STATUS_DATA_ERROR, 11);
  EXPECT_EQ(FP8MOE_REFUSAL_NONE, 0);
  EXPECT_EQ(FP8MOE_REFUSAL_NULL_ARGUMENT, 5);

  /* DLPack compatibility: device types and dtype codes as DLPack 1.1 */
  EXPECT_EQ(FP8MOE_DEVICE_CPU, 1);
  EXPECT_EQ(FP8MOE_DEVICE_CUDA, 2);
  EXPECT_EQ(FP8MOE_DEVICE_CUDA_HOST, 3);
  EXPECT_EQ(FP8MOE_DEVICE_CUDA_MANAGED, 13);
  EXPECT_EQ(FP8MOE_DTYPE_BFLOAT, 4);
  EXPECT_EQ(FP8MOE_DTYPE_FLOAT8_E4M3FN, 10);
  EXPECT_EQ(FP8MOE_DTYPE_FLOAT8_E5M2, 12);
  EXPECT_EQ(sizeof(fp8moe_dtype), 4);
  EXPECT_EQ(sizeof(fp8moe_device), 8);

  /* routing methods, formats, activations and argument ids */
  EXPECT_EQ(FP8MOE_ROUTING_DEFAULT, 0);
  EXPECT_EQ(FP8MOE_ROUTING_DEEPSEEK_V3, 2);
  EXPECT_EQ(FP8MOE_ROUTING_LLAMA4, 3);
  EXPECT_EQ(FP8MOE_ROUTING_PRECOMPUTED, 9);
  EXPECT_EQ(FP8MOE_QUANT_FP8_BLOCK128, 1);
  EXPECT_EQ(FP8MOE_QUANT_FP8_PER_CHANNEL, 2);
  EXPECT_EQ(FP8MOE_ACTIVATION_GEGLU, 1);
  EXPECT_EQ(FP8MOE_ARG_OUTPUT, 12);
  EXPECT_EQ(FP8MOE_ARG_COUNT_V1_0, 16);
  EXPECT_EQ(FP8MOE_BACKEND_MASK_CUDA, 4);

  /* the layout a host was compiled with (LP64) */
  if (sizeof(void*) == 8) {
    EXPECT_EQ(sizeof(fp8moe_tensor), 48);
    EXPECT_EQ(offsetof(fp8moe_tensor, byte_offset), 40);
    EXPECT_EQ(sizeof(fp8moe_negotiation), 296);
    EXPECT_EQ(offsetof(fp8moe_negotiation, message), 36);
    EXPECT_EQ(sizeof(fp8moe_context_args), 40);
    EXPECT_EQ(sizeof(fp8moe_context_info), 160);
    EXPECT_EQ(sizeof(fp8moe_backend_info), 536);
    EXPECT_EQ(sizeof(fp8moe_capabilities), 112);
    EXPECT_EQ(sizeof(fp8moe_moe_args), 224);
    EXPECT_EQ(offsetof(fp8moe_moe_args, output), 168);
    EXPECT_EQ(sizeof(fp8moe_api), 104);
    EXPECT_EQ(offsetof(fp8moe_api, last_error), 96);
  }

  /* the entry point's type is usable from C without casts */
  {
    fp8moe_get_api_fn fn = host_side_get_api;
    fp8moe_negotiation n;
    fp8moe_api placeholder;
    const fp8moe_api* api = &placeholder;
    memset(&n, 0, sizeof n);
    memset(&placeholder, 0, sizeof placeholder);
    n.struct_size = sizeof n;
    EXPECT_EQ(fn(&n, &api), FP8MOE_STATUS_ABI_MISMATCH);
    expect(api == NULL, "api set to NULL through fp8moe_get_api_fn");
  }

  printf("test_header_c99: %d passed, %d failed\n", checks_run - checks_failed, checks_failed);
  return checks_failed ? 1 : 0;
}
