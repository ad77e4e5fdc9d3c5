/* bench_plugin.c — dlopen + negotiation and context creation, as a host does (bench_plugin.h). */
#include "bench_plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char* bench_plugin_path(const char* library) {
  const char* path = library ? library : getenv("FP8MOE_LIBRARY");
  return path ? path : "libfp8moe.so.1";
}

int bench_plugin_open(const char* path, const char* prefix, void** so, const fp8moe_api** api) {
  *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!*so) {
    fprintf(stderr, "%sdlopen(%s): %s\n", prefix, path, dlerror());
    return -1;
  }
  fp8moe_get_api_fn get_api = (fp8moe_get_api_fn)(uintptr_t)dlsym(*so, "fp8moe_get_api");
  fp8moe_negotiation n;
  memset(&n, 0, sizeof n);
  n.struct_size = sizeof n;
  n.host_abi_major = FP8MOE_ABI_VERSION_MAJOR;
  n.host_max_minor = FP8MOE_ABI_VERSION_MINOR;
  if (!get_api || get_api(&n, api) != FP8MOE_STATUS_OK) {
    fprintf(stderr, "%snegotiation failed: %s\n", prefix, get_api ? n.message : "no fp8moe_get_api");
    return -1;
  }
  return 0;
}

int bench_context_create(const fp8moe_api* api, int32_t backend, const char* what, fp8moe_context** out) {
  char msg[512];
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.error_message = msg;
  ca.error_message_size = sizeof msg;
  ca.backend = backend;
  if (api->context_create(&ca, out) != FP8MOE_STATUS_OK) {
    fprintf(stderr, "%s: %s\n", what, msg);
    return -1;
  }
  return 0;
}
