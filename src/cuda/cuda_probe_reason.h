/* cuda_probe_reason.h — why the CUDA backend cannot start, in words a user can act on. */
#ifndef FP8MOE_CUDA_PROBE_REASON_H
#define FP8MOE_CUDA_PROBE_REASON_H

#include <cuda_runtime_api.h>
#include <stddef.h>

/* Writes the reason for `count_error` / `device_count` (what cudaGetDeviceCount returned) into out[size]: no
 * driver, a driver too old for the runtime this library links, no device, or cudart's own words otherwise.
 * Clears the runtime's sticky last error, so the probe does not leak into the host's cudaGetLastError. */
void fp8moe_cuda_unavailable_reason(cudaError_t count_error, int device_count, char* out, size_t size);

#endif
