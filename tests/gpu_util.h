/* gpu_util.h — what the GPU suites share: device copies of a host-described problem (every tensor of
 * fp8moe_moe_args cloned byte for byte into device memory, same shapes and strides), poisoning, running
 * through the public API on a stream, copying the outputs back into the host problem, and comparing a
 * GPU run with a CPU-backend run under docs/TESTING.md's tolerances. */
#ifndef FP8MOE_TEST_GPU_UTIL_H
#define FP8MOE_TEST_GPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "fp8moe.h"
#include "plugin_host.h"

#define GPU_MAX_TENSORS 16

/* Opens the plugin as a host does and creates the two contexts every GPU suite needs: the CPU backend (the
 * oracle) and the CUDA backend. Returns 0 (a failed context_create is a CHECK failure and leaves that
 * context NULL), TEST_SKIP_CODE with a line naming the suite when the CUDA backend is unavailable, or 1 when
 * the library cannot be loaded. bi receives the CUDA backend's description. */
int gpu_suite_open(const char* name, test_plugin* tp, fp8moe_context** cpu, fp8moe_context** gpu,
                   fp8moe_backend_info* bi);

typedef struct gpu_problem {
  fp8moe_moe_args args; /* the host args with every tensor replaced by its device copy */
  fp8moe_tensor t[GPU_MAX_TENSORS];
  void* dev[GPU_MAX_TENSORS];
  size_t bytes[GPU_MAX_TENSORS];
  int32_t* status;      /* device_status [1] on the device */
  void* workspace;
  size_t workspace_size;
  const fp8moe_moe_args* host; /* the host args it was cloned from */
} gpu_problem;

/* Clones host (tensors in host memory) onto device `ordinal`, adds a device_status word, and sizes a
 * workspace with query_workspace. Returns 0, or -1 with a message printed. */
int gpu_clone(const test_plugin* tp, fp8moe_context* ctx, const fp8moe_moe_args* host, gpu_problem* g);
void gpu_free(gpu_problem* g);
/* Fills output, routing_ids_out and routing_weights_out (device) with 0xFF bytes. */
int gpu_poison(gpu_problem* g, void* stream);
/* Copies the device outputs into the host args' output buffers (host->output etc.). */
int gpu_fetch(gpu_problem* g);
/* Reads the device_status word. */
int32_t gpu_status_word(const gpu_problem* g);

/* A snapshot of a run's outputs (host copies), for comparing two runs. */
typedef struct run_outputs {
  double* out;  /* [T*H] as double; NaN also for the poison pattern (see unwritten) */
  uint8_t* poison; /* [T*H] 1 where the element still held the poison bytes */
  int32_t* ids; /* [T*K] or NULL */
  float* w;     /* [T*K] or NULL */
  int64_t T, H, K;
} run_outputs;

/* Snapshot of the host args' output buffers (after a CPU run, or gpu_fetch). Returns 0 on success. */
int outputs_take(const fp8moe_moe_args* a, run_outputs* o);
void outputs_free(run_outputs* o);

typedef struct compare_result {
  double rel_err;       /* ‖gpu − cpu‖ / ‖cpu‖ over the rows whose CPU output is all finite */
  double max_w_rel;
  int64_t unwritten, nonfinite_bad, ids_bad, weights_bad;
  int64_t partial_bad; /* partly non-finite rows whose finite values differ by > 1e-1 of the row's largest */
} compare_result;

/* Compares gpu against cpu (the oracle); rows maps gpu rows to cpu rows (NULL: identity). Prints the first
 * few differences with label. Returns 1 when within tolerance (rel ≤ 2e-2, ids exact, weights 1e-6, the same
 * non-finite pattern; partly non-finite rows within 1e-1 of their largest finite value). */
int outputs_compare(const run_outputs* gpu, const run_outputs* cpu, const int64_t* rows, int64_t nrows,
                    const char* label, compare_result* r);

/* 1 when a and b hold bit-identical outputs. */
int outputs_identical(const run_outputs* a, const run_outputs* b);

#endif /* FP8MOE_TEST_GPU_UTIL_H */
