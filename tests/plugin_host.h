/* plugin_host.h — what every test host needs, and nothing from src/: load libfp8moe the way a real host
 * does (dlopen + fp8moe_get_api), describe tensors, and count check failures. */
#ifndef FP8MOE_TEST_PLUGIN_HOST_H
#define FP8MOE_TEST_PLUGIN_HOST_H

#include <stdint.h>
#include <stdio.h>

#include "fp8moe.h"

/* CTest reports a test that exits with this code as skipped (SKIP_RETURN_CODE). */
#define TEST_SKIP_CODE 77

typedef struct test_plugin {
  void* handle;
  const fp8moe_api* api;
  fp8moe_negotiation negotiation;
} test_plugin;

/* dlopens path (NULL: $FP8MOE_LIBRARY, else the build's FP8MOE_TEST_LIBRARY), negotiates this header's
 * ABI version, and fills p. Returns 0 on success; prints why and returns -1 otherwise. */
int test_plugin_open(const char* path, test_plugin* p);
void test_plugin_close(test_plugin* p);

/* A tensor descriptor that owns its shape and strides arrays. */
typedef struct test_tensor {
  fp8moe_tensor t;
  int64_t shape[4];
  int64_t strides[4];
} test_tensor;

/* Describes data as [shape] with the given strides (NULL: compact row-major, left NULL in the descriptor),
 * on the CPU. Returns &tt->t. */
fp8moe_tensor* test_tensor_init(test_tensor* tt, void* data, fp8moe_dtype dtype, int32_t ndim, const int64_t* shape,
                                const int64_t* strides);

extern const fp8moe_dtype TEST_F32, TEST_BF16, TEST_F16, TEST_E4M3, TEST_E5M2, TEST_I32, TEST_I64, TEST_I8;

/* Failure counting: CHECK prints the first few failures with file:line and keeps going. */
extern int test_failures;
#define CHECK(cond, ...)                                                                                    \
  do {                                                                                                      \
    if (!(cond)) {                                                                                          \
      if (++test_failures <= 20) {                                                                          \
        fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);                            \
        fprintf(stderr, __VA_ARGS__);                                                                       \
        fputc('\n', stderr);                                                                                \
      }                                                                                                     \
    }                                                                                                       \
  } while (0)

/* EXPECT counts every check it makes in test_checks_run (for test_finish), then CHECKs it. */
extern int test_checks_run;
#define EXPECT(cond, ...)                                                                                   \
  do {                                                                                                      \
    ++test_checks_run;                                                                                      \
    CHECK(cond, __VA_ARGS__);                                                                               \
  } while (0)

/* Prints "<name>: N passed, M failed" (checks_run counts every check, failed ones included) and returns the
 * process exit code. */
int test_finish(const char* name, int checks_run);

#endif /* FP8MOE_TEST_PLUGIN_HOST_H */
