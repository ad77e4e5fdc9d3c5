/* cpu_backend.c — the CPU reference backend's ops table: context lifetime (a persistent thread pool and
 * the e4m3 decode table), what it reports about itself, and the workspace it asks for. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cpu_run_internal.h"
#include "numeric_internal.h"
#include "struct_size_internal.h"

/* The API layer hands over full-size structs today; checking struct_size keeps a shorter one safe anyway. */
#define INFO_FITS(field) FP8MOE_COVERS(fp8moe_backend_info, info, field)
#define CTX_FITS(field) FP8MOE_COVERS(fp8moe_context_info, info, field)

static int32_t online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > FP8MOE_CPU_MAX_THREADS ? FP8MOE_CPU_MAX_THREADS : (int32_t)n;
}

static void describe(int32_t threads, char* buf, size_t size) {
  snprintf(buf, size, "CPU reference backend (%d thread%s)", (int)threads, threads == 1 ? "" : "s");
}

static void cpu_probe(fp8moe_backend_info* info) {
  if (INFO_FITS(available)) info->available = 1;
  if (INFO_FITS(device_count)) info->device_count = 1;
  if (INFO_FITS(compiled_in)) info->compiled_in = 1;
  if (INFO_FITS(name)) snprintf(info->name, sizeof info->name, "cpu");
  if (INFO_FITS(device_name)) describe(online_cores(), info->device_name, sizeof info->device_name);
  if (INFO_FITS(reason)) info->reason[0] = '\0';
}

static int32_t cpu_create(struct fp8moe_context* ctx, const fp8moe_context_args* args, fp8moe_err* err) {
  int32_t threads = args->num_threads;
  RETURN_IF(threads < 0 || threads > FP8MOE_CPU_MAX_THREADS, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "num_threads: out of range; got %d; expected 0 (online cores) to %d", (int)threads,
            FP8MOE_CPU_MAX_THREADS);
  if (threads == 0) threads = online_cores();

  fp8moe_cpu_impl* impl = (fp8moe_cpu_impl*)calloc(1, sizeof *impl);
  RETURN_IF(!impl, err, FP8MOE_STATUS_OUT_OF_MEMORY,
            "context: out of memory; got %zu bytes refused; expected an allocation to succeed", sizeof *impl);
  impl->num_threads = threads;
  for (int c = 0; c < 256; ++c) impl->e4m3_lut[c] = fp8moe_e4m3_to_f32((uint8_t)c);
  describe(threads, impl->device_name, sizeof impl->device_name);
  int rc = fp8moe_pool_create(threads, &impl->pool);
  if (rc != 0) {
    free(impl);
    return fp8moe_fail(err, FP8MOE_STATUS_OUT_OF_MEMORY,
                       "num_threads: cannot start the worker threads; got %d (pthread error %d); expected the threads "
                       "to start",
                       (int)threads, rc);
  }
  ctx->impl = impl;
  return FP8MOE_STATUS_OK;
}

static void cpu_destroy(struct fp8moe_context* ctx) {
  fp8moe_cpu_impl* impl = (fp8moe_cpu_impl*)ctx->impl;
  if (!impl) return;
  fp8moe_pool_destroy(impl->pool);
  free(impl);
  ctx->impl = NULL;
}

static void cpu_fill_info(const struct fp8moe_context* ctx, fp8moe_context_info* info) {
  const fp8moe_cpu_impl* impl = (const fp8moe_cpu_impl*)ctx->impl;
  if (CTX_FITS(backend)) info->backend = FP8MOE_BACKEND_CPU;
  if (CTX_FITS(device_ordinal)) info->device_ordinal = -1;
  if (CTX_FITS(num_threads)) info->num_threads = impl->num_threads;
  if (CTX_FITS(graph_capturable)) info->graph_capturable = 0;
  if (CTX_FITS(sm_count)) info->sm_count = 0;
  if (CTX_FITS(compute_capability)) info->compute_capability = 0;
  if (CTX_FITS(device_name)) snprintf(info->device_name, sizeof info->device_name, "%s", impl->device_name);
}

static int32_t cpu_accepts_device(const struct fp8moe_context* ctx, int32_t device_type, int32_t device_id) {
  (void)ctx;
  (void)device_id; /* host and pinned host memory are readable whatever ordinal they carry */
  return device_type == FP8MOE_DEVICE_CPU || device_type == FP8MOE_DEVICE_CUDA_HOST;
}

static size_t cpu_workspace_size(const struct fp8moe_context* ctx, const fp8moe_problem* p) {
  const fp8moe_cpu_impl* impl = (const fp8moe_cpu_impl*)ctx->impl;
  fp8moe_cpu_layout l;
  fp8moe_cpu_layout_make(p, impl->num_threads, &l);
  return l.total;
}

static int32_t cpu_run(struct fp8moe_context* ctx, const fp8moe_problem* p, fp8moe_err* err) {
  return fp8moe_cpu_run((fp8moe_cpu_impl*)ctx->impl, p, err);
}

const fp8moe_backend_ops fp8moe_cpu_backend_ops = {
    .backend = FP8MOE_BACKEND_CPU,
    .name = "cpu",
    .capability_flags = 0, /* synchronous: the host waits for every run, and there is no graph to capture */
    .probe = cpu_probe,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .fill_info = cpu_fill_info,
    .accepts_device = cpu_accepts_device,
    .workspace_size = cpu_workspace_size,
    .run = cpu_run,
};
