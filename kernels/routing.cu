/* routing.cu — expert selection and weights for every logit-reading routing method (docs/DESIGN.md
 * "Routing"). Contract: logits [T,E] and the optional bias [E] are fp32/bf16/fp16 with any strides, read
 * directly and converted to fp32; all arithmetic is fp32. NaN/−Inf logits are unselectable (key −Inf,
 * weight 0), +Inf reads as FLT_MAX. Selection is by key descending, ties to the lower expert index; slots
 * left when fewer than K experts are selectable take the lowest-index unselectable experts (weight 0).
 * Writes ids [T*K] (global) and weights [T*K] (× routed_scaling_factor), and the optional host outputs.
 * Launch: one warp per token, 4 warps per block, E floats of shared memory per warp (E ≤ 2048, K ≤ 32,
 * n_group ≤ 32). */
#include <float.h>

#include "common.cuh"
#include "routing_math.h"

namespace fp8moe {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxGroups = 32;
constexpr uint64_t kOrderedMinusInf = 0x007FFFFFu; /* pack_key's order word of −Inf */

/* A key and its expert packed so that one unsigned max picks the larger key, then the lower index.
 * Taken experts carry NaN and pack to 0, below every real key (−Inf included). */
__device__ __forceinline__ uint64_t pack_key(float key, int32_t idx) {
  if (isnan(key)) return 0;
  if (key == 0.0f) key = 0.0f; /* −0 and +0 tie, as they compare equal */
  uint32_t b = __float_as_uint(key);
  uint32_t ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<uint64_t>(ord) << 32) | static_cast<uint64_t>(0xFFFFFFFFu - static_cast<uint32_t>(idx));
}

__device__ __forceinline__ uint64_t warp_max_u64(uint64_t v) {
  for (int o = 16; o > 0; o >>= 1) {
    uint64_t w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

/* The formulation the CPU backend uses too (src/routing_math.h): the same bits on both backends. The softmax
 * denominator is summed as routing_math.h specifies: lane-strided partials, then warp_sum's xor butterfly. */
__device__ __forceinline__ float exp_f32(float x) { return fp8moe_rm_exp(x); }
__device__ __forceinline__ float sigmoid_f32(float x) { return fp8moe_rm_sigmoid(x); }

/* The sanitized logit; *selectable (when given) = 0 for NaN and −Inf. */
__device__ __forceinline__ float read_logit(const fp8moe_kref& l, int64_t t, int32_t e, bool* selectable) {
  float s = kref_at(l, t, e);
  if (selectable) *selectable = !(isnan(s) || s == -INFINITY);
  if (s == INFINITY) s = FLT_MAX;
  return s;
}

__device__ __forceinline__ bool softmax_over_all(int32_t m) {
  return m == FP8MOE_ROUTING_DEFAULT || m == FP8MOE_ROUTING_RENORMALIZE_NAIVE;
}

__global__ void routing_kernel(fp8moe_routing_args a) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (t >= a.T) return;
  float* key = smem + warp * a.E;
  __shared__ float group_score[kWarpsPerBlock][kMaxGroups];
  const int32_t method = a.method;

  /* Pass 1: sanitized logits; the max selectable logit for the softmax methods. */
  float m = -INFINITY;
  for (int32_t e = lane; e < a.E; e += 32) {
    bool sel;
    float s = read_logit(a.logits, t, e, &sel);
    if (sel) m = fmaxf(m, s);
    key[e] = sel ? s : -INFINITY;
  }
  m = warp_max(m);
  float denom = 0.0f;
  if (softmax_over_all(method)) {
    float part = 0.0f;
    for (int32_t e = lane; e < a.E; e += 32)
      if (key[e] != -INFINITY) part += exp_f32(key[e] - m);
    denom = warp_sum(part);
  }
  /* Pass 2: selection keys. */
  for (int32_t e = lane; e < a.E; e += 32) {
    float s = key[e];
    if (s == -INFINITY) continue;
    switch (method) {
      case FP8MOE_ROUTING_DEFAULT:
      case FP8MOE_ROUTING_RENORMALIZE_NAIVE: key[e] = exp_f32(s - m) / denom; break;
      case FP8MOE_ROUTING_SIGMOID:
      case FP8MOE_ROUTING_SIGMOID_RENORM: key[e] = sigmoid_f32(s); break;
      case FP8MOE_ROUTING_DEEPSEEK_V3:
      {
        const float k2 = sigmoid_f32(s) + (a.bias.data ? kref_at(a.bias, e) : 0.0f);
        key[e] = isnan(k2) ? -INFINITY : k2;
        break;
      }
      default: break; /* raw logits */
    }
  }
  __syncwarp();

  /* DeepSeek-V3: keep the best topk_group groups by the sum of their two largest keys. */
  if (method == FP8MOE_ROUTING_DEEPSEEK_V3 && a.n_group > 1) {
    const int32_t gs = a.E / a.n_group;
    if (lane < a.n_group) {
      float b1 = -INFINITY, b2 = -INFINITY;
      for (int32_t e = lane * gs; e < (lane + 1) * gs; ++e) {
        float k = key[e];
        if (k > b1) { b2 = b1; b1 = k; } else if (k > b2) { b2 = k; }
      }
      group_score[warp][lane] = b1 + b2;
    }
    __syncwarp();
    uint32_t kept = 0;
    for (int32_t g = 0; g < a.topk_group; ++g) {
      uint64_t best = 0;
      if (lane < a.n_group && !(kept & (1u << lane))) best = pack_key(group_score[warp][lane], lane);
      best = warp_max_u64(best);
      kept |= 1u << (0xFFFFFFFFu - static_cast<uint32_t>(best & 0xFFFFFFFFu));
    }
    for (int32_t e = lane; e < a.E; e += 32)
      if (!(kept & (1u << (e / gs)))) key[e] = -INFINITY;
    __syncwarp();
  }

  /* Top-K: K rounds of a warp argmax; lane k keeps slot k's expert. */
  int32_t my_e = 0;
  bool my_valid = false; /* the key was above −Inf when picked (else a weight-0 filler) */
  for (int32_t k = 0; k < a.K; ++k) {
    uint64_t best = 0;
    for (int32_t e = lane; e < a.E; e += 32) {
      uint64_t p = pack_key(key[e], e);
      best = p > best ? p : best;
    }
    best = warp_max_u64(best);
    const int32_t e_best = static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(best & 0xFFFFFFFFu));
    if (lane == k) {
      my_e = e_best;
      my_valid = (best >> 32) > kOrderedMinusInf;
    }
    __syncwarp();
    if (lane == 0) key[e_best] = NAN;
    __syncwarp();
  }

  /* Weights: lane k computes slot k from its own logit; sums run in slot order. */
  const bool active = lane < a.K;
  const float s = active ? read_logit(a.logits, t, my_e, nullptr) : 0.0f;
  const bool sel = my_valid && active;
  float w = 0.0f;
  switch (method) {
    case FP8MOE_ROUTING_DEFAULT:
    case FP8MOE_ROUTING_RENORMALIZE_NAIVE: w = sel ? exp_f32(s - m) / denom : 0.0f; break;
    case FP8MOE_ROUTING_RENORMALIZE: {
      float mk = warp_max(sel ? s : -INFINITY);
      w = sel ? exp_f32(s - mk) : 0.0f;
      break;
    }
    case FP8MOE_ROUTING_TOPK: w = sel ? s : 0.0f; break;
    default: w = sel ? sigmoid_f32(s) : 0.0f; break; /* every sigmoid-weighted method */
  }
  const bool renorm = method == FP8MOE_ROUTING_RENORMALIZE_NAIVE || method == FP8MOE_ROUTING_SIGMOID_RENORM ||
                      method == FP8MOE_ROUTING_DEEPSEEK_V3 || method == FP8MOE_ROUTING_RENORMALIZE;
  if (renorm) {
    float sum = 0.0f;
    for (int32_t k = 0; k < a.K; ++k) sum += __shfl_sync(0xffffffffu, w, k);
    if (method == FP8MOE_ROUTING_RENORMALIZE)
      w = sel ? w / sum : 0.0f; /* a selectable slot makes sum ≥ 1 */
    else
      w = w / (sum + 1e-20f);
  }
  w *= a.scale;
  if (active) {
    const int64_t o = t * a.K + lane;
    a.ids[o] = my_e;
    a.weights[o] = w;
    if (a.ids_out.data)
      static_cast<int32_t*>(a.ids_out.data)[t * a.ids_out.s[0] + lane * a.ids_out.s[1]] = my_e;
    if (a.weights_out.data)
      static_cast<float*>(a.weights_out.data)[t * a.weights_out.s[0] + lane * a.weights_out.s[1]] = w;
  }
}

}  // namespace
}  // namespace fp8moe

extern "C" int fp8moe_launch_routing(const fp8moe_routing_args* a, cudaStream_t stream) {
  using namespace fp8moe;
  if (a->T == 0) return cudaSuccess;
  const size_t smem = static_cast<size_t>(kWarpsPerBlock) * a->E * sizeof(float);
  const unsigned blocks = static_cast<unsigned>((a->T + kWarpsPerBlock - 1) / kWarpsPerBlock);
  routing_kernel<<<blocks, kWarpsPerBlock * 32, smem, stream>>>(*a);
  return static_cast<int>(cudaGetLastError());
}
