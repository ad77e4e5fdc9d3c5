/* validate_internal.h — turns the host's fp8moe_moe_args into a checked fp8moe_problem, reading only
 * what the host's struct_size covers and refusing, before any work, everything the contract table and
 * SPEC §4 exclude. The message always names the argument, what was received and what is accepted. */
#ifndef FP8MOE_VALIDATE_INTERNAL_H
#define FP8MOE_VALIDATE_INTERNAL_H

#include "backend_internal.h"
#include "error_internal.h"
#include "fp8moe.h"
#include "problem_internal.h"

/* Copies the caller's args into *full (defaults for fields past args->struct_size). Refuses a NULL args
 * or a struct_size too small to hold the required fields. */
int32_t fp8moe_read_moe_args(const fp8moe_moe_args* args, fp8moe_moe_args* full, fp8moe_err* err);

/* Checks full (from fp8moe_read_moe_args) for the context's backend and fills *p. Reads no tensor data. */
int32_t fp8moe_validate(const struct fp8moe_context* ctx, const fp8moe_moe_args* full, fp8moe_problem* p,
                        fp8moe_err* err);

/* Refuses a workspace whose first `need` bytes (what run uses) intersect any tensor of p. */
int32_t fp8moe_check_workspace_aliasing(const fp8moe_problem* p, size_t need, fp8moe_err* err);

#endif /* FP8MOE_VALIDATE_INTERNAL_H */
