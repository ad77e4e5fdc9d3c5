/* probe_check.h — the device-machine probes' (tools/*_probe.cu) check of a CUDA runtime call: print where it
 * failed and return 1 from main. */
#pragma once
#include <cuda_runtime.h>
#include <stdio.h>

#define CHECK_CUDA(x)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)
