/* cuda_backend.c — the CUDA backend's ops table: probing for a driver and a usable device (cudart is
 * linked statically and finds the driver itself, so a machine without one gets a clean "unavailable"),
 * context lifetime, what it reports about itself, and run. Every entry that touches the device saves the
 * host thread's current device, switches to the context's ordinal and restores it before returning. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_plan.h"
#include "cuda_probe_reason.h"
#include "gemm_decode.h"
#include "gemm_stream.h"
#include "kernels_internal.h"
#include "struct_size_internal.h"

#define INFO_FITS(field) FP8MOE_COVERS(fp8moe_backend_info, info, field)
#define CTX_FITS(field) FP8MOE_COVERS(fp8moe_context_info, info, field)

/* Device facts without creating a context or changing the current device. */
static cudaError_t describe_device(int32_t ordinal, fp8moe_cuda_impl* d) {
  int major = 0, minor = 0, sms = 0;
  cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal);
  struct cudaDeviceProp prop;
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, ordinal);
  if (e != cudaSuccess) return e;
  d->ordinal = ordinal;
  d->compute_capability = major * 10 + minor;
  d->sm_count = sms;
  snprintf(d->device_name, sizeof d->device_name, "%.*s", (int)sizeof d->device_name - 1, prop.name);
  return cudaSuccess;
}

/* Peak DRAM bytes per second (double data rate: two transfers per memory clock over the bus); 0 where unknown. */
static double dram_bytes_per_s(int32_t ordinal) {
  int khz = 0, bits = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0.0;
  }
  return 2.0 * 1e3 * (double)khz * (double)bits / 8.0;
}

static void cuda_probe(fp8moe_backend_info* info) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (INFO_FITS(compiled_in)) info->compiled_in = 1;
  if (INFO_FITS(name)) snprintf(info->name, sizeof info->name, "cuda");
  if (INFO_FITS(available)) info->available = 0;
  if (INFO_FITS(device_count)) info->device_count = e == cudaSuccess ? n : 0;
  if (INFO_FITS(reason)) info->reason[0] = '\0';
  if (e != cudaSuccess || n == 0) {
    char reason[sizeof info->reason];
    fp8moe_cuda_unavailable_reason(e, n, reason, sizeof reason); /* also clears cudart's last error */
    if (INFO_FITS(reason)) snprintf(info->reason, sizeof info->reason, "%s", reason);
    return;
  }
  fp8moe_cuda_impl d;
  e = describe_device(0, &d);
  if (e != cudaSuccess) {
    if (INFO_FITS(reason)) snprintf(info->reason, sizeof info->reason, "device 0: %s", cudaGetErrorString(e));
    (void)cudaGetLastError();
    return;
  }
  if (INFO_FITS(device_name)) snprintf(info->device_name, sizeof info->device_name, "%s", d.device_name);
  if (d.compute_capability < FP8MOE_CUDA_MIN_CC) {
    if (INFO_FITS(reason))
      snprintf(info->reason, sizeof info->reason,
               "device 0 (%s) has compute capability %d.%d; the CUDA backend needs 9.0 or newer", d.device_name,
               d.compute_capability / 10, d.compute_capability % 10);
    return;
  }
  if (INFO_FITS(available)) info->available = 1;
}

/* Makes the context's device current for one entry; *prev receives what to restore. */
static cudaError_t enter_device(int32_t ordinal, int* prev) {
  cudaError_t e = cudaGetDevice(prev);
  if (e != cudaSuccess) return e;
  return *prev == ordinal ? cudaSuccess : cudaSetDevice(ordinal);
}

static void leave_device(int32_t ordinal, int prev) {
  if (prev != ordinal) (void)cudaSetDevice(prev);
}

static int32_t cuda_create(struct fp8moe_context* ctx, const fp8moe_context_args* args, fp8moe_err* err) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    char reason[160];
    fp8moe_cuda_unavailable_reason(e, n, reason, sizeof reason);
    return fp8moe_fail(err, FP8MOE_STATUS_BACKEND_UNAVAILABLE,
                       "backend: CUDA is unavailable; got %s; expected a CUDA driver and a device", reason);
  }
  RETURN_IF(args->device_ordinal >= n, err, FP8MOE_STATUS_INVALID_ARGUMENT,
            "device_ordinal: no such CUDA device; got %d; expected 0 to %d", (int)args->device_ordinal, n - 1);
  fp8moe_cuda_impl* impl = (fp8moe_cuda_impl*)calloc(1, sizeof *impl);
  RETURN_IF(impl == NULL, err, FP8MOE_STATUS_OUT_OF_MEMORY,
            "context: out of memory; got %zu bytes refused; expected an allocation to succeed", sizeof *impl);
  e = describe_device(args->device_ordinal, impl);
  if (e == cudaSuccess && impl->compute_capability < FP8MOE_CUDA_MIN_CC) {
    int32_t cc = impl->compute_capability;
    free(impl);
    return fp8moe_fail(err, FP8MOE_STATUS_BACKEND_UNAVAILABLE,
                       "device_ordinal: device %d has compute capability %d.%d; expected 9.0 or newer",
                       (int)args->device_ordinal, (int)(cc / 10), (int)(cc % 10));
  }
  /* Initialize the device's primary context now, so the first run does not pay for it, and raise the GEMM
   * kernels' shared-memory limits and size the decode GEMMs' grids on this device. */
  int prev = 0;
  int32_t cluster_fits = 0; /* the routing cluster is resident on this device (the one-block variant always is) */
  const fp8moe_sm90_variant sm90 = fp8moe_cuda_plan_context_sm90_variant();
  if (e == cudaSuccess) e = enter_device(args->device_ordinal, &prev);
  if (e == cudaSuccess) {
    e = cudaFree(NULL);
    if (e == cudaSuccess) e = (cudaError_t)fp8moe_prepare_gemm1();
    if (e == cudaSuccess) e = (cudaError_t)fp8moe_prepare_gemm2();
    if (e == cudaSuccess && impl->compute_capability == 90) e = (cudaError_t)fp8moe_prepare_gemm_sm90(&impl->tma_encode);
    if (e == cudaSuccess && impl->compute_capability == 90 && impl->tma_encode != NULL)
      e = (cudaError_t)fp8moe_prepare_gemm2_sm90_clusters(impl->sm_count, &impl->gemm2_clusters);
    if (e == cudaSuccess && impl->compute_capability == 90 && impl->tma_encode != NULL)
      e = (cudaError_t)fp8moe_prepare_gemm1_sm90_clusters(impl->sm_count, &impl->gemm1_clusters);
    if (e == cudaSuccess && impl->compute_capability == 90 && impl->tma_encode != NULL && sm90.gemm1_pair_cluster)
      e = (cudaError_t)fp8moe_prepare_gemm1_sm90_pair_clusters(impl->sm_count, &impl->gemm1_pair_clusters);
    if (e == cudaSuccess)
      e = (cudaError_t)fp8moe_prepare_gemm_decode(impl->sm_count, &impl->decode_ctas1, &impl->decode_ctas1_dense,
                                                  &impl->decode_ctas2);
    if (e == cudaSuccess && impl->compute_capability == 90 && impl->tma_encode != NULL)
      e = (cudaError_t)fp8moe_prepare_gemm_stream(impl->sm_count, &impl->stream_ctas);
    if (e == cudaSuccess) e = (cudaError_t)fp8moe_prepare_prologue(&cluster_fits);
    /* docs/GPU.md "L2 partitions": measured only where the pair kernel's claims would use it; a failed measurement
     * (no memory for its 4 MB, say) leaves the one-counter claims rather than failing the context */
    if (e == cudaSuccess && impl->compute_capability == 90 && impl->tma_encode != NULL && sm90.gemm1_partitioned &&
        sm90.gemm1_claim &&
        fp8moe_l2_partition_map(impl->sm_partition, &impl->gemm1_partitioned, NULL) != cudaSuccess) {
      impl->gemm1_partitioned = 0;
      (void)cudaGetLastError();  /* a failure that leaves the device usable is forgotten */
      e = cudaPeekAtLastError(); /* a sticky one fails the context, as any device fault would */
    }
    leave_device(args->device_ordinal, prev);
  }
  impl->plan_offers = fp8moe_cuda_plan_context_offers(
      impl->tma_encode != NULL, impl->decode_ctas1 > 0 && impl->decode_ctas2 > 0, impl->stream_ctas > 0);
  impl->prologue = fp8moe_cuda_plan_context_prologue() & (cluster_fits ? ~0u : ~FP8MOE_PROLOGUE_CLUSTER);
  impl->permute_chunks = fp8moe_cuda_plan_context_permute_chunks();
  impl->route_v1 = fp8moe_cuda_plan_context_route_v1();
  impl->route_warm = fp8moe_cuda_plan_context_route_warm();
  impl->route_filtered = fp8moe_cuda_plan_context_route_filtered();
  impl->decode_dense = fp8moe_cuda_plan_context_decode_dense();
  impl->sm90_loop = sm90.loop;
  impl->gemm1_order = sm90.gemm1_order;
  impl->gemm2_order = sm90.gemm2_order;
  impl->gemm1_alternate = sm90.gemm1_alternate;
  impl->gemm1_claim = sm90.gemm1_claim;
  impl->gemm2_group = sm90.gemm2_group;
  impl->gemm2_aligned = sm90.gemm2_aligned;
  impl->gemm1_aligned = sm90.gemm1_aligned;
  impl->gemm1_pair_aligned = sm90.gemm1_pair_aligned;
  impl->gemm1_sparse_group = sm90.gemm1_sparse_group;
  impl->gemm2_sparse_group = sm90.gemm2_sparse_group;
  impl->stream_handoff = sm90.stream_handoff;
  impl->stream_pairs = sm90.stream_pairs;
  impl->stream_align = sm90.stream_align;
  impl->stream_rounds = fp8moe_cuda_plan_stream_rounds(sm90.stream_rounds, sm90.stream_balanced,
                                                       dram_bytes_per_s(args->device_ordinal), impl->sm_count);
  impl->gemm1_sorted_x = sm90.gemm1_sorted_x;
  if (!sm90.gemm1_cluster) impl->gemm1_clusters = 0; /* the one-CTA GEMMs unless the variant asks for clusters */
  if (!sm90.gemm2_cluster) impl->gemm2_clusters = 0;
  if (!sm90.gemm1_pair_cluster) impl->gemm1_pair_clusters = 0;
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    free(impl);
    return fp8moe_fail(err, FP8MOE_STATUS_DEVICE_ERROR, "device_ordinal: device %d failed to initialize; got %s; "
                       "expected success", (int)args->device_ordinal, cudaGetErrorString(e));
  }
  ctx->impl = impl;
  return FP8MOE_STATUS_OK;
}

static void cuda_destroy(struct fp8moe_context* ctx) {
  free(ctx->impl);
  ctx->impl = NULL;
}

static void cuda_fill_info(const struct fp8moe_context* ctx, fp8moe_context_info* info) {
  const fp8moe_cuda_impl* impl = (const fp8moe_cuda_impl*)ctx->impl;
  if (CTX_FITS(backend)) info->backend = FP8MOE_BACKEND_CUDA;
  if (CTX_FITS(device_ordinal)) info->device_ordinal = impl->ordinal;
  if (CTX_FITS(num_threads)) info->num_threads = 0;
  if (CTX_FITS(graph_capturable)) info->graph_capturable = 1;
  if (CTX_FITS(sm_count)) info->sm_count = impl->sm_count;
  if (CTX_FITS(compute_capability)) info->compute_capability = impl->compute_capability;
  if (CTX_FITS(device_name)) snprintf(info->device_name, sizeof info->device_name, "%s", impl->device_name);
}

static int32_t cuda_accepts_device(const struct fp8moe_context* ctx, int32_t device_type, int32_t device_id) {
  const fp8moe_cuda_impl* impl = (const fp8moe_cuda_impl*)ctx->impl;
  return (device_type == FP8MOE_DEVICE_CUDA || device_type == FP8MOE_DEVICE_CUDA_MANAGED) &&
         device_id == impl->ordinal;
}

static size_t cuda_workspace_size(const struct fp8moe_context* ctx, const fp8moe_problem* p) {
  const fp8moe_cuda_impl* impl = (const fp8moe_cuda_impl*)ctx->impl;
  fp8moe_cuda_layout l;
  fp8moe_cuda_layout_make(p, impl->compute_capability, &l);
  return l.total;
}

static int32_t cuda_run(struct fp8moe_context* ctx, const fp8moe_problem* p, fp8moe_err* err) {
  const fp8moe_cuda_impl* impl = (const fp8moe_cuda_impl*)ctx->impl;
  if (p->T == 0) return FP8MOE_STATUS_OK;
  int prev = 0;
  cudaError_t e = enter_device(impl->ordinal, &prev);
  RETURN_IF(e != cudaSuccess, err, FP8MOE_STATUS_DEVICE_ERROR,
            "run: cannot make device %d current; got %s; expected success", (int)impl->ordinal,
            cudaGetErrorString(e));
  int32_t status = fp8moe_cuda_enqueue(impl, p, err);
  leave_device(impl->ordinal, prev);
  return status;
}

const fp8moe_backend_ops fp8moe_cuda_backend_ops = {
    .backend = FP8MOE_BACKEND_CUDA,
    .name = "cuda",
    .capability_flags = FP8MOE_CAPABILITY_GRAPH_CAPTURABLE | FP8MOE_CAPABILITY_HOST_SYNC_FREE,
    .probe = cuda_probe,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .fill_info = cuda_fill_info,
    .accepts_device = cuda_accepts_device,
    .workspace_size = cuda_workspace_size,
    .run = cuda_run,
};
