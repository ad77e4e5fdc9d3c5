/* cuda_probe_reason.c — cudart reports a missing driver and an old one with the same error
 * (cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"), which misleads
 * on a machine that has no driver at all. cudaDriverGetVersion tells them apart: it gives 0 when no driver is
 * installed, and otherwise the newest CUDA version the driver supports. */
#include "cuda_probe_reason.h"

#include <stdio.h>

void fp8moe_cuda_unavailable_reason(cudaError_t count_error, int device_count, char* out, size_t size) {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  const int runtime = CUDART_VERSION; /* the runtime is linked statically: this is the one in use */
  if (driver == 0)
    snprintf(out, size, "no CUDA driver (libcuda.so.1 not found)");
  else if (count_error == cudaErrorInsufficientDriver)
    snprintf(out, size, "CUDA driver too old: CUDA %d.%d, runtime needs %d.%d", driver / 1000, driver % 1000 / 10,
             runtime / 1000, runtime % 1000 / 10);
  else if (count_error == cudaErrorNoDevice || (count_error == cudaSuccess && device_count == 0))
    snprintf(out, size, "no CUDA device (driver: CUDA %d.%d)", driver / 1000, driver % 1000 / 10);
  else
    snprintf(out, size, "CUDA driver (CUDA %d.%d) failed: %s (%s)", driver / 1000, driver % 1000 / 10,
             cudaGetErrorName(count_error), cudaGetErrorString(count_error));
  (void)cudaGetLastError();
}
