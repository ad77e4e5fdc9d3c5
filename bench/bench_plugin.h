/* bench_plugin.h — the library loaded as a host loads it (dlopen, then fp8moe_get_api's negotiation) and a context
 * created on it; shared by fp8moe-bench and tools/route_replay. */
#ifndef FP8MOE_BENCH_PLUGIN_H
#define FP8MOE_BENCH_PLUGIN_H

#include <stdint.h>

#include "fp8moe.h"

/* The library to load: `library` (--library), else $FP8MOE_LIBRARY, else the SONAME. */
const char* bench_plugin_path(const char* library);
/* Each call opens its own handle: another file loads a second copy even under the same SONAME (RTLD_LOCAL keeps
 * the copies' symbols apart); the same file again, by any path (a symlink too), is the same copy with its
 * reference count raised. 0, or -1 with a message on stderr led by `prefix`. */
int bench_plugin_open(const char* path, const char* prefix, void** so, const fp8moe_api** api);
/* A context of `backend` with default arguments. 0, or -1 with "<what>: <the library's message>" on stderr. */
int bench_context_create(const fp8moe_api* api, int32_t backend, const char* what, fp8moe_context** out);

#endif /* FP8MOE_BENCH_PLUGIN_H */
