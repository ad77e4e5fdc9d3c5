/* plugin_host.c — see plugin_host.h. */
#include "plugin_host.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

int test_failures = 0;
int test_checks_run = 0;

const fp8moe_dtype TEST_F32 = {FP8MOE_DTYPE_FLOAT, 32, 1};
const fp8moe_dtype TEST_BF16 = {FP8MOE_DTYPE_BFLOAT, 16, 1};
const fp8moe_dtype TEST_F16 = {FP8MOE_DTYPE_FLOAT, 16, 1};
const fp8moe_dtype TEST_E4M3 = {FP8MOE_DTYPE_FLOAT8_E4M3FN, 8, 1};
const fp8moe_dtype TEST_E5M2 = {FP8MOE_DTYPE_FLOAT8_E5M2, 8, 1};
const fp8moe_dtype TEST_I32 = {FP8MOE_DTYPE_INT, 32, 1};
const fp8moe_dtype TEST_I64 = {FP8MOE_DTYPE_INT, 64, 1};
const fp8moe_dtype TEST_I8 = {FP8MOE_DTYPE_INT, 8, 1};

int test_plugin_open(const char* path, test_plugin* p) {
  memset(p, 0, sizeof(*p));
  if (!path) path = getenv("FP8MOE_LIBRARY");
#ifdef FP8MOE_TEST_LIBRARY
  if (!path) path = FP8MOE_TEST_LIBRARY;
#endif
  if (!path) {
    fprintf(stderr, "no library path: set FP8MOE_LIBRARY\n");
    return -1;
  }
  p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!p->handle) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    return -1;
  }
  fp8moe_get_api_fn get_api = (fp8moe_get_api_fn)(uintptr_t)dlsym(p->handle, "fp8moe_get_api");
  if (!get_api) {
    fprintf(stderr, "dlsym(fp8moe_get_api): %s\n", dlerror());
    dlclose(p->handle);
    p->handle = NULL;
    return -1;
  }
  p->negotiation.struct_size = sizeof(p->negotiation);
  p->negotiation.host_abi_major = FP8MOE_ABI_VERSION_MAJOR;
  p->negotiation.host_min_minor = 0;
  p->negotiation.host_max_minor = FP8MOE_ABI_VERSION_MINOR;
  int32_t st = get_api(&p->negotiation, &p->api);
  if (st != FP8MOE_STATUS_OK || !p->api) {
    fprintf(stderr, "negotiation refused (%d): %s\n", st, p->negotiation.message);
    dlclose(p->handle);
    p->handle = NULL;
    return -1;
  }
  return 0;
}

void test_plugin_close(test_plugin* p) {
  if (p->handle) dlclose(p->handle);
  memset(p, 0, sizeof(*p));
}

fp8moe_tensor* test_tensor_init(test_tensor* tt, void* data, fp8moe_dtype dtype, int32_t ndim, const int64_t* shape,
                                const int64_t* strides) {
  memset(tt, 0, sizeof(*tt));
  tt->t.data = data;
  tt->t.device.device_type = FP8MOE_DEVICE_CPU;
  tt->t.device.device_id = 0;
  tt->t.ndim = ndim;
  tt->t.dtype = dtype;
  for (int32_t d = 0; d < ndim && d < 4; ++d) {
    tt->shape[d] = shape[d];
    if (strides) tt->strides[d] = strides[d];
  }
  tt->t.shape = tt->shape;
  tt->t.strides = strides ? tt->strides : NULL;
  return &tt->t;
}

int test_finish(const char* name, int checks_run) {
  int failed = test_failures;
  int passed = checks_run > failed ? checks_run - failed : 0;
  printf("%s: %d passed, %d failed\n", name, passed, failed);
  return failed ? 1 : 0;
}
