/* backend_internal.h — what a backend (CPU, CUDA) provides to the API layer, and the context object.
 * api.c owns argument reading, validation and error reporting; a backend only sees validated problems. */
#ifndef FP8MOE_BACKEND_INTERNAL_H
#define FP8MOE_BACKEND_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "error_internal.h"
#include "fp8moe.h"
#include "problem_internal.h"

struct fp8moe_context;

typedef struct fp8moe_backend_ops {
  int32_t backend;           /* FP8MOE_BACKEND_CPU / _CUDA */
  const char* name;          /* "cpu", "cuda" */
  uint32_t capability_flags; /* FP8MOE_CAPABILITY_* */
  /* Fills info (available, device_count, device_name, reason) without creating a context. */
  void (*probe)(fp8moe_backend_info* info);
  /* Sets ctx->impl. args has every default applied. Frees everything it made on failure. */
  int32_t (*create)(struct fp8moe_context* ctx, const fp8moe_context_args* args, fp8moe_err* err);
  void (*destroy)(struct fp8moe_context* ctx);
  /* Fills the backend-specific fields of info (device name, threads, sm count, …). */
  void (*fill_info)(const struct fp8moe_context* ctx, fp8moe_context_info* info);
  /* 1 when tensors on (device_type, device_id) can be read by this context. */
  int32_t (*accepts_device)(const struct fp8moe_context* ctx, int32_t device_type, int32_t device_id);
  /* Workspace bytes for a validated problem (0 allowed). Must not depend on tensor data. */
  size_t (*workspace_size)(const struct fp8moe_context* ctx, const fp8moe_problem* p);
  /* Runs a validated problem whose workspace is large enough. Data-dependent refusals (e.g. CPU
   * PRECOMPUTED ids out of range) must happen before the first write to any output. */
  int32_t (*run)(struct fp8moe_context* ctx, const fp8moe_problem* p, fp8moe_err* err);
} fp8moe_backend_ops;

#define FP8MOE_ERROR_CAPACITY 512

struct fp8moe_context {
  const fp8moe_backend_ops* ops;
  int32_t backend;         /* resolved: CPU or CUDA */
  int32_t device_ordinal;  /* CUDA ordinal, -1 for the CPU */
  void* impl;              /* the backend's private state */
  pthread_mutex_t error_lock; /* guards the two fields below */
  int32_t last_status;
  char last_error[FP8MOE_ERROR_CAPACITY];
  struct fp8moe_context* live_prev; /* the list of live contexts (unload.c) */
  struct fp8moe_context* live_next;
};

/* unload.c: the contexts alive now, so that unloading the library can shut down their worker threads. */
void fp8moe_live_add(struct fp8moe_context* ctx);
void fp8moe_live_remove(struct fp8moe_context* ctx);
/* Frees a context (its backend state, its mutex, itself); it must not be in the live list. */
void fp8moe_context_free(struct fp8moe_context* ctx);

extern const fp8moe_backend_ops fp8moe_cpu_backend_ops;
#ifdef FP8MOE_WITH_CUDA
extern const fp8moe_backend_ops fp8moe_cuda_backend_ops;
#endif

#endif /* FP8MOE_BACKEND_INTERNAL_H */
