/* api.c — fp8moe_get_api, the one exported symbol, and the function table behind it. Each entry reads its
 * args honouring struct_size, refuses with a message (into the caller's buffer and the context's last
 * error) and hands validated problems to the context's backend. No per-call state lives here beyond the
 * mutex-guarded last-error copy, so concurrent calls on one context are safe. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "contract_internal.h"
#include "negotiate_internal.h"
#include "struct_size_internal.h"
#include "validate_internal.h"

#define WORKSPACE_ALIGNMENT 256

typedef struct fp8moe_context fp8moe_context_impl;

/* ---- error reporting ------------------------------------------------------------------------------- */

/* Where one call's message goes: a local buffer, copied to the caller and the context when non-OK. */
typedef struct call_error {
  char msg[FP8MOE_ERROR_CAPACITY];
  fp8moe_err err;
  char* caller_buf;
  size_t caller_size;
} call_error;

static void call_error_init(call_error* ce, char* caller_buf, size_t caller_size) {
  ce->msg[0] = '\0';
  ce->err.buf = ce->msg;
  ce->err.size = sizeof ce->msg;
  ce->caller_buf = caller_buf;
  ce->caller_size = caller_buf == NULL ? 0 : caller_size;
}

/* The context is const in the query entries, but its last-error slot is the one field calls may write:
 * it is guarded by error_lock and the object was allocated mutable by context_create. */
static int32_t finish(const fp8moe_context* ctx, call_error* ce, int32_t status) {
  if (status == FP8MOE_STATUS_OK) {
    /* An empty message on success, so a reused buffer never shows an older call's refusal. */
    if (ce->caller_size > 0) ce->caller_buf[0] = '\0';
    return status;
  }
  if (ce->msg[0] == '\0') (void)snprintf(ce->msg, sizeof ce->msg, "%s", fp8moe_status_string(status));
  if (ce->caller_size > 0) (void)snprintf(ce->caller_buf, ce->caller_size, "%s", ce->msg);
  if (ctx != NULL) {
    fp8moe_context_impl* c = (fp8moe_context_impl*)ctx;
    pthread_mutex_lock(&c->error_lock);
    c->last_status = status;
    (void)snprintf(c->last_error, sizeof c->last_error, "%s", ce->msg);
    pthread_mutex_unlock(&c->error_lock);
  }
  return status;
}

/* The caller's message buffer of a moe_args, when its struct_size covers the two fields. */
static void moe_args_buffer(const fp8moe_moe_args* args, char** buf, size_t* size) {
  *buf = NULL;
  *size = 0;
  if (args != NULL && args->struct_size >= FP8MOE_END_OF(fp8moe_moe_args, error_message_size)) {
    *buf = args->error_message;
    *size = args->error_message_size;
  }
}

/* ---- backends -------------------------------------------------------------------------------------- */

static const fp8moe_backend_ops* backend_ops(int32_t backend) {
  if (backend == FP8MOE_BACKEND_CPU) return &fp8moe_cpu_backend_ops;
#ifdef FP8MOE_WITH_CUDA
  if (backend == FP8MOE_BACKEND_CUDA) return &fp8moe_cuda_backend_ops;
#endif
  return NULL;
}

static void probe_backend(int32_t backend, fp8moe_backend_info* info) {
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  info->backend = backend;
  const fp8moe_backend_ops* ops = backend_ops(backend);
  if (ops == NULL) {
    (void)snprintf(info->name, sizeof info->name, "%s", backend == FP8MOE_BACKEND_CUDA ? "cuda" : "unknown");
    (void)snprintf(info->reason, sizeof info->reason, "this build of fp8moe does not include the %s backend",
                   info->name);
    return;
  }
  info->compiled_in = 1;
  (void)snprintf(info->name, sizeof info->name, "%s", ops->name);
  ops->probe(info);
}


/* ---- entries --------------------------------------------------------------------------------------- */

static void api_get_version(uint32_t* major, uint32_t* minor, uint32_t* patch) {
  if (major != NULL) *major = FP8MOE_VERSION_MAJOR;
  if (minor != NULL) *minor = FP8MOE_VERSION_MINOR;
  if (patch != NULL) *patch = FP8MOE_VERSION_PATCH;
}

static const char* api_status_string(int32_t status) { return fp8moe_status_string(status); }

static int32_t api_backend_info(fp8moe_backend_info* info) {
  if (info == NULL || info->struct_size < FP8MOE_END_OF(fp8moe_backend_info, backend)) return FP8MOE_STATUS_INVALID_ARGUMENT;
  if (info->backend != FP8MOE_BACKEND_CPU && info->backend != FP8MOE_BACKEND_CUDA)
    return FP8MOE_STATUS_INVALID_ARGUMENT;
  fp8moe_backend_info full;
  probe_backend(info->backend, &full);
  fp8moe_struct_write(FP8MOE_STRUCT_BACKEND_INFO, info, &full, sizeof(size_t));
  return FP8MOE_STATUS_OK;
}

static int32_t resolve_backend(const fp8moe_context_args* a, int32_t* backend, fp8moe_err* err) {
  fp8moe_backend_info info;
  switch (a->backend) {
    case FP8MOE_BACKEND_AUTO:
      probe_backend(FP8MOE_BACKEND_CUDA, &info);
      *backend = (info.compiled_in && info.available) ? FP8MOE_BACKEND_CUDA : FP8MOE_BACKEND_CPU;
      return FP8MOE_STATUS_OK;
    case FP8MOE_BACKEND_CPU:
      *backend = FP8MOE_BACKEND_CPU;
      return FP8MOE_STATUS_OK;
    case FP8MOE_BACKEND_CUDA:
      probe_backend(FP8MOE_BACKEND_CUDA, &info);
      RETURN_IF(!info.compiled_in || !info.available, err, FP8MOE_STATUS_BACKEND_UNAVAILABLE,
                "backend: the CUDA backend is unavailable; got FP8MOE_BACKEND_CUDA (%s); expected AUTO or CPU on "
                "this machine",
                info.reason[0] ? info.reason : "no usable device");
      *backend = FP8MOE_BACKEND_CUDA;
      return FP8MOE_STATUS_OK;
    default:
      return fp8moe_fail(err, FP8MOE_STATUS_INVALID_ARGUMENT,
                         "backend: unknown backend; got %d; expected 0 (AUTO), 1 (CPU) or 2 (CUDA)", (int)a->backend);
  }
}

static int32_t create_context(const fp8moe_context_args* args, fp8moe_context** out, fp8moe_err* err) {
  RETURN_IF(args == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT, "args: NULL pointer; got NULL; expected a fp8moe_context_args");
  RETURN_IF(out == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT, "context: NULL pointer; got NULL; expected a pointer "
            "that receives the context");
  RETURN_IF(args->struct_size < sizeof(size_t), err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "args.struct_size: too small; got %zu; expected >= %zu", args->struct_size, sizeof(size_t));
  fp8moe_context_args a;
  memset(&a, 0, sizeof a);
  fp8moe_struct_read(FP8MOE_STRUCT_CONTEXT_ARGS, &a, args);
  a.struct_size = sizeof a;
  RETURN_IF(a.flags != 0, err, FP8MOE_STATUS_INVALID_ARGUMENT, "flags: reserved bits set; got 0x%x; expected 0",
            (unsigned)a.flags);
  RETURN_IF(a.num_threads < 0, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "num_threads: must not be negative; got %d; expected >= 0 (0 = online cores)", (int)a.num_threads);
  /* The CPU backend ignores the ordinal (hosts pass -1 for "no device"); AUTO may resolve to CUDA. */
  RETURN_IF(a.device_ordinal < 0 && a.backend != FP8MOE_BACKEND_CPU, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "device_ordinal: must not be negative with backend AUTO or CUDA; got %d; expected >= 0 (any value "
            "with backend CPU)", (int)a.device_ordinal);
  int32_t backend = FP8MOE_BACKEND_CPU;
  FORWARD_IF_ERROR(resolve_backend(&a, &backend, err));

  fp8moe_context_impl* c = calloc(1, sizeof *c);
  RETURN_IF(c == NULL, err, FP8MOE_STATUS_OUT_OF_MEMORY, "context: out of memory; got %zu bytes refused; expected "
            "an allocation to succeed", sizeof *c);
  if (pthread_mutex_init(&c->error_lock, NULL) != 0) {
    free(c);
    return fp8moe_fail(err, FP8MOE_STATUS_OUT_OF_MEMORY, "context: could not create its mutex; got an error from "
                       "pthread_mutex_init; expected success");
  }
  c->ops = backend_ops(backend);
  c->backend = backend;
  c->device_ordinal = backend == FP8MOE_BACKEND_CPU ? -1 : a.device_ordinal;
  c->last_status = FP8MOE_STATUS_OK;
  int32_t status = c->ops->create(c, &a, err);
  if (status != FP8MOE_STATUS_OK) {
    pthread_mutex_destroy(&c->error_lock);
    free(c);
    return status;
  }
  fp8moe_live_add(c);
  *out = c;
  return FP8MOE_STATUS_OK;
}

static int32_t api_context_create(const fp8moe_context_args* args, fp8moe_context** context) {
  if (context != NULL) *context = NULL;
  call_error ce;
  int32_t covers_buffer = args != NULL && args->struct_size >= FP8MOE_END_OF(fp8moe_context_args, error_message_size);
  call_error_init(&ce, covers_buffer ? args->error_message : NULL, covers_buffer ? args->error_message_size : 0);
  return finish(NULL, &ce, create_context(args, context, &ce.err));
}

void fp8moe_context_free(fp8moe_context* context) {
  context->ops->destroy(context);
  pthread_mutex_destroy(&context->error_lock);
  free(context);
}

static int32_t api_context_destroy(fp8moe_context* context) {
  if (context == NULL) return FP8MOE_STATUS_OK;
  fp8moe_live_remove(context);
  fp8moe_context_free(context);
  return FP8MOE_STATUS_OK;
}

static int32_t api_context_info(const fp8moe_context* context, fp8moe_context_info* info) {
  if (context == NULL || info == NULL || info->struct_size < FP8MOE_END_OF(fp8moe_context_info, backend))
    return FP8MOE_STATUS_INVALID_ARGUMENT;
  fp8moe_context_info full;
  memset(&full, 0, sizeof full);
  full.struct_size = sizeof full;
  full.backend = context->backend;
  full.device_ordinal = context->device_ordinal;
  full.graph_capturable = (context->ops->capability_flags & FP8MOE_CAPABILITY_GRAPH_CAPTURABLE) != 0;
  context->ops->fill_info(context, &full);
  fp8moe_struct_write(FP8MOE_STRUCT_CONTEXT_INFO, info, &full, sizeof(size_t));
  return FP8MOE_STATUS_OK;
}

static int32_t api_query_capabilities(const fp8moe_context* context, fp8moe_capabilities* caps) {
  if (caps == NULL || caps->struct_size < FP8MOE_END_OF(fp8moe_capabilities, flags)) return FP8MOE_STATUS_INVALID_ARGUMENT;
  const fp8moe_backend_ops* ops = context != NULL ? context->ops : &fp8moe_cpu_backend_ops;
  fp8moe_capabilities full;
  memset(&full, 0, sizeof full);
  full.struct_size = sizeof full;
  full.backend = ops->backend;
  full.flags = ops->capability_flags;
  fp8moe_contract_fill(&full);
  fp8moe_struct_write(FP8MOE_STRUCT_CAPABILITIES, caps, &full, sizeof(size_t));
  return FP8MOE_STATUS_OK;
}

/* read → validate: the common front of query_workspace, query_support and run. */
static int32_t read_and_validate(const fp8moe_context* ctx, const fp8moe_moe_args* args, fp8moe_problem* p,
                                 fp8moe_err* err) {
  RETURN_IF(ctx == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT, "context: NULL pointer; got NULL; expected a context "
            "from context_create");
  fp8moe_moe_args full;
  FORWARD_IF_ERROR(fp8moe_read_moe_args(args, &full, err));
  return fp8moe_validate(ctx, &full, p, err);
}

/* Nothing runs for T = 0, so it needs no scratch. */
static size_t workspace_bytes(const fp8moe_context* ctx, const fp8moe_problem* p) {
  return p->T == 0 ? 0 : ctx->ops->workspace_size(ctx, p);
}

static int32_t api_query_workspace(const fp8moe_context* context, const fp8moe_moe_args* args, size_t* bytes) {
  call_error ce;
  char* buf;
  size_t size;
  moe_args_buffer(args, &buf, &size);
  call_error_init(&ce, buf, size);
  if (bytes == NULL)
    return finish(context, &ce, fp8moe_fail(&ce.err, FP8MOE_STATUS_INVALID_ARGUMENT,
                                            "bytes: NULL pointer; got NULL; expected a pointer to a size_t"));
  *bytes = 0;
  fp8moe_problem p;
  int32_t status = read_and_validate(context, args, &p, &ce.err);
  if (status == FP8MOE_STATUS_OK) *bytes = workspace_bytes(context, &p);
  return finish(context, &ce, status);
}

static int32_t api_query_support(const fp8moe_context* context, const fp8moe_moe_args* args) {
  call_error ce;
  char* buf;
  size_t size;
  moe_args_buffer(args, &buf, &size);
  call_error_init(&ce, buf, size);
  fp8moe_problem p;
  return finish(context, &ce, read_and_validate(context, args, &p, &ce.err));
}

static int32_t run_checked(fp8moe_context* context, const fp8moe_moe_args* args, fp8moe_err* err) {
  fp8moe_problem p;
  FORWARD_IF_ERROR(read_and_validate(context, args, &p, err));
  if (p.T == 0) return FP8MOE_STATUS_OK; /* DESIGN.md: nothing is read or written */
  size_t need = workspace_bytes(context, &p);
  if (need > 0) {
    RETURN_IF(p.workspace_size < need, err, FP8MOE_STATUS_WORKSPACE_TOO_SMALL,
              "workspace_size: smaller than query_workspace reports; got %zu; expected >= %zu", p.workspace_size, need);
    RETURN_IF(p.workspace == NULL, err, FP8MOE_STATUS_INVALID_ARGUMENT,
              "workspace: NULL with a nonzero workspace_size; got NULL; expected %zu bytes of scratch", need);
    RETURN_IF((uintptr_t)p.workspace % WORKSPACE_ALIGNMENT != 0, err, FP8MOE_STATUS_INVALID_ARGUMENT,
              "workspace: misaligned; got address %p; expected a multiple of %d bytes", p.workspace,
              WORKSPACE_ALIGNMENT);
    FORWARD_IF_ERROR(fp8moe_check_workspace_aliasing(&p, need, err));
  }
  return context->ops->run(context, &p, err);
}

static int32_t api_run(fp8moe_context* context, const fp8moe_moe_args* args) {
  call_error ce;
  char* buf;
  size_t size;
  moe_args_buffer(args, &buf, &size);
  call_error_init(&ce, buf, size);
  return finish(context, &ce, run_checked(context, args, &ce.err));
}

static int32_t api_last_error(const fp8moe_context* context, char* buf, size_t size) {
  if (context == NULL) return FP8MOE_STATUS_INVALID_ARGUMENT;
  fp8moe_context_impl* c = (fp8moe_context_impl*)context;
  pthread_mutex_lock(&c->error_lock);
  int32_t status = c->last_status;
  if (buf != NULL && size > 0) (void)snprintf(buf, size, "%s", c->last_error);
  pthread_mutex_unlock(&c->error_lock);
  return status;
}

static const fp8moe_api api_table = {
    .struct_size = sizeof(fp8moe_api),
    .abi_major = FP8MOE_ABI_VERSION_MAJOR,
    .abi_minor = FP8MOE_ABI_VERSION_MINOR,
    .get_version = api_get_version,
    .status_string = api_status_string,
    .backend_info = api_backend_info,
    .context_create = api_context_create,
    .context_destroy = api_context_destroy,
    .context_info = api_context_info,
    .query_capabilities = api_query_capabilities,
    .query_workspace = api_query_workspace,
    .query_support = api_query_support,
    .run = api_run,
    .last_error = api_last_error,
};

FP8MOE_EXPORT int32_t fp8moe_get_api(fp8moe_negotiation* negotiation, const struct fp8moe_api** api) {
  return fp8moe_negotiate_get_api(negotiation, api, &api_table, FP8MOE_ABI_VERSION_MAJOR, FP8MOE_ABI_VERSION_MINOR);
}
