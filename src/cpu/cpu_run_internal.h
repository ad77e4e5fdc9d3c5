/* cpu_run_internal.h — the CPU backend's run entry, separate from the ops table that owns the context. */
#ifndef FP8MOE_CPU_RUN_INTERNAL_H
#define FP8MOE_CPU_RUN_INTERNAL_H

#include "cpu_internal.h"

/* Runs a validated problem on impl's pool; DATA_ERROR (PRECOMPUTED ids) before any output write. */
int32_t fp8moe_cpu_run(fp8moe_cpu_impl* impl, const fp8moe_problem* p, fp8moe_err* err);

#endif /* FP8MOE_CPU_RUN_INTERNAL_H */
