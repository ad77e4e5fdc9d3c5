/* quantize_input.cu — activation quantization of the hidden states into GEMM1's e4m3 operand.
 * Contract: hidden [T,H] bf16/fp16, rows contiguous, 16-byte aligned rows (H % 128 == 0). When the routing
 * weight is applied to the input (K = 1), x' = w·x in fp32 first. q = e4m3(x'/s) with s per mode:
 * STATIC the given a1 scale; DYN_TENSOR max(amax/448, FLT_MIN) over every finite |x'| of every token
 * (an amax pass runs first); GROUP128 per 1×128 group (xs [T,H/128]); ROW per token (xs [T]).
 * Launch: one block of 256 threads per token (both passes). */
#include "common.cuh"
#include "pdl.cuh"

namespace fp8moe {
namespace {

constexpr int kThreads = 256;

/* Four consecutive elements of a bf16/fp16 row as fp32 (one 8-byte load). */
__device__ __forceinline__ float4 load4(const void* row, int32_t dt, int64_t i) {
  const uint2 v = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(row) + i);
  float4 r;
  if (dt == FP8MOE_DT_BF16) {
    r.x = __uint_as_float(v.x << 16);
    r.y = __uint_as_float(v.x & 0xFFFF0000u);
    r.z = __uint_as_float(v.y << 16);
    r.w = __uint_as_float(v.y & 0xFFFF0000u);
  } else {
    const __half2 a = *reinterpret_cast<const __half2*>(&v.x), b = *reinterpret_cast<const __half2*>(&v.y);
    const float2 fa = __half22float2(a), fb = __half22float2(b);
    r = make_float4(fa.x, fa.y, fb.x, fb.y);
  }
  return r;
}

__device__ __forceinline__ float4 scaled4(const fp8moe_quantize_input_args& a, int64_t t, int64_t i, float wt) {
  float4 v = load4(static_cast<const uint8_t*>(a.hidden.data) + t * a.hidden.s[0] * 2, a.hidden.dt, i);
  if (a.token_weight) {
    v.x *= wt; v.y *= wt; v.z *= wt; v.w *= wt;
  }
  return v;
}

__device__ __forceinline__ float amax4(float4 v) {
  return fmaxf(fmaxf(finite_abs(v.x), finite_abs(v.y)), fmaxf(finite_abs(v.z), finite_abs(v.w)));
}

__device__ __forceinline__ uint32_t quant4(float4 v, float s) { return e4m3x4(v.x / s, v.y / s, v.z / s, v.w / s); }

__device__ float block_max(float v) {
  __shared__ float part[kThreads / 32];
  v = warp_max(v);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float r = 0.0f;
  for (int i = 0; i < kThreads / 32; ++i) r = fmaxf(r, part[i]);
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kThreads) amax_kernel(fp8moe_quantize_input_args a) {
  wait_prior(); /* token weights come from routing */
  allow_next();
  const int64_t t = blockIdx.x;
  const float wt = a.token_weight ? a.token_weight[t * a.K] : 1.0f;
  float m = 0.0f;
  for (int64_t i = threadIdx.x * 4; i < a.H; i += kThreads * 4) m = fmaxf(m, amax4(scaled4(a, t, i, wt)));
  m = block_max(m);
  if (threadIdx.x == 0) atomic_amax(a.amax, m);
}

__global__ void __launch_bounds__(kThreads) quantize_input_kernel(fp8moe_quantize_input_args a) {
  wait_prior(); /* token weights (routing) and the amax (amax_kernel) */
  allow_next();
  const int64_t t = blockIdx.x;
  const float wt = a.token_weight ? a.token_weight[t * a.K] : 1.0f;
  uint32_t* out = reinterpret_cast<uint32_t*>(a.xq + t * a.H);
  if (a.mode == FP8MOE_ACTQ_GROUP128) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t groups = a.H / 128;
    for (int64_t g = warp; g < groups; g += kThreads / 32) {
      const float4 v = scaled4(a, t, g * 128 + lane * 4, wt);
      const float s = dynamic_scale(warp_max(amax4(v)));
      out[g * 32 + lane] = quant4(v, s);
      if (lane == 0) a.xs[t * groups + g] = s;
    }
    return;
  }
  float s;
  if (a.mode == FP8MOE_ACTQ_STATIC) {
    s = kref_at(a.static_scale, 0);
  } else if (a.mode == FP8MOE_ACTQ_DYN_TENSOR) {
    s = dynamic_scale(__uint_as_float(*a.amax));
    if (t == 0 && threadIdx.x == 0) a.xs[0] = s;
  } else {
    float m = 0.0f;
    for (int64_t i = threadIdx.x * 4; i < a.H; i += kThreads * 4) m = fmaxf(m, amax4(scaled4(a, t, i, wt)));
    s = dynamic_scale(block_max(m));
    if (threadIdx.x == 0) a.xs[t] = s;
  }
  for (int64_t i = threadIdx.x * 4; i < a.H; i += kThreads * 4) out[i / 4] = quant4(scaled4(a, t, i, wt), s);
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_quantize_input(const fp8moe_quantize_input_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->T == 0) return cudaSuccess;
  if (a->mode == FP8MOE_ACTQ_DYN_TENSOR) {
    const cudaError_t e = launch_pdl(amax_kernel, dim3(static_cast<unsigned>(a->T)), dim3(kThreads), 0, stream, *a);
    if (e != cudaSuccess) return static_cast<int>(e);
  }
  return static_cast<int>(
      launch_pdl(quantize_input_kernel, dim3(static_cast<unsigned>(a->T)), dim3(kThreads), 0, stream, *a));
}
