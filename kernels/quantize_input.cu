/* quantize_input.cu — activation quantization of the hidden states into GEMM1's e4m3 operand.
 * Contract: hidden [T,H] bf16/fp16, rows contiguous, 16-byte aligned rows (H % 128 == 0). When the routing
 * weight is applied to the input (K = 1), x' = w·x in fp32 first. q = e4m3(x'/s) with s per mode:
 * STATIC the given a1 scale; DYN_TENSOR max(amax/448, FLT_MIN) over every finite |x'| of every token
 * (an amax pass runs first); GROUP128 per 1×128 group (xs [T,H/128]); ROW per token (xs [T]).
 * The per-token work is quantize_token.cuh (shared with the fused small-T prologue, prologue.cu, which
 * also runs the amax pass itself and then asks for the encoding pass alone: amax_done).
 * The sorted launch writes the codes to the token's expert-sorted rows instead of row t (GEMM1's pair items then load
 * them by TMA: docs/GPU.md "Expert-sorted activations"). Launch: one block of 256 threads per token (both passes). */
#include "common.cuh"
#include "pdl.cuh"
#include "quantize_token.cuh"

namespace fp8moe {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) amax_kernel(fp8moe_quantize_input_args a) {
  wait_prior(); /* token weights come from routing */
  allow_next();
  const int64_t t = blockIdx.x;
  token_amax<kThreads>(a, t, a.token_weight ? a.token_weight[t * a.K] : 1.0f);
}

__global__ void __launch_bounds__(kThreads) quantize_input_kernel(fp8moe_quantize_input_args a) {
  wait_prior(); /* token weights (routing) and the amax (amax_kernel) */
  allow_next();
  const int64_t t = blockIdx.x;
  quantize_token<kThreads>(a, t, a.token_weight ? a.token_weight[t * a.K] : 1.0f);
}

/* The codes into the token's expert-sorted rows (dest_rows: the permutation's slot_row). */
__global__ void __launch_bounds__(kThreads) quantize_sorted_kernel(fp8moe_quantize_input_args a,
                                                                   const int32_t* dest_rows) {
  wait_prior(); /* token weights (routing), the amax (amax_kernel), the sorted rows (permutation) */
  allow_next();
  const int64_t t = blockIdx.x;
  quantize_token<kThreads, true>(a, t, a.token_weight ? a.token_weight[t * a.K] : 1.0f, dest_rows);
}

}  // namespace
}  // namespace fp8moe

/* The amax pass where the dynamic per-tensor scale needs it, then the encoding pass (dest_rows: into sorted rows). */
static int launch_quantize(const fp8moe_quantize_input_args* a, const int32_t* dest_rows, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->T == 0) return cudaSuccess;
  if (a->mode == FP8MOE_ACTQ_DYN_TENSOR && !a->amax_done) {
    const cudaError_t e = launch_pdl(amax_kernel, dim3(static_cast<unsigned>(a->T)), dim3(kThreads), 0, stream, *a);
    if (e != cudaSuccess) return static_cast<int>(e);
  }
  const dim3 grid(static_cast<unsigned>(a->T));
  if (dest_rows != nullptr)
    return static_cast<int>(launch_pdl(quantize_sorted_kernel, grid, dim3(kThreads), 0, stream, *a, dest_rows));
  return static_cast<int>(launch_pdl(quantize_input_kernel, grid, dim3(kThreads), 0, stream, *a));
}

extern "C" int fp8moe_launch_quantize_input(const fp8moe_quantize_input_args* a, cudaStream_t stream) {
  return launch_quantize(a, nullptr, stream);
}

extern "C" int fp8moe_launch_quantize_input_sorted(const fp8moe_quantize_input_args* a, const int32_t* dest_rows,
                                                   cudaStream_t stream) {
  return launch_quantize(a, dest_rows, stream);
}
