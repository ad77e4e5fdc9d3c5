/* routing_token.cuh — one token's expert selection and weights by one warp (docs/DESIGN.md "Routing"), the
 * one implementation behind routing.cu (one warp per token, any T) and prologue.cu (small T, fused with the
 * permutation and the input quantization). Contract as routing.cu states it: fp32 arithmetic from
 * src/routing_math.h; NaN/−Inf logits unselectable (weight 0), +Inf reads as FLT_MAX; selection by key
 * descending, ties to the lower expert index; fillers are the lowest-index unselectable experts.
 *
 * Why it is shaped this way (the old kernel took 16.7 µs at T = 1 on deepseek-v3, docs/PERFORMANCE.md):
 *   - Lane l holds experts l, l+32, … in registers (PL per lane). All logit and bias loads of the token are
 *     issued back to back before any is used, so a cold token costs one memory round trip, not one per
 *     32 experts per pass (the old loops re-read shared memory and global bias element by element, ~16
 *     dependent DRAM round trips for E = 256 with a bias).
 *   - Top-K keeps every lane's best candidate in registers; a round is two warp reductions
 *     (redux.sync max of the order word, min of the index among the lanes holding it) and a rescan of the
 *     winning lane's PL registers, instead of a scan of all E keys plus a 64-bit shuffle butterfly.
 *   - The softmax denominator keeps the order routing_math.h specifies: lane l sums its experts in index
 *     order, then warp_sum's butterfly.
 * Shared memory: only DeepSeek-V3 group limiting uses the caller's E floats (keys by group). */
#ifndef FP8MOE_KERNELS_ROUTING_TOKEN_CUH
#define FP8MOE_KERNELS_ROUTING_TOKEN_CUH

#include <float.h>

#include "common.cuh"
#include "routing_filter.h"
#include "routing_math.h"

namespace fp8moe {

constexpr uint32_t kOrderedMinusInf = 0x007FFFFFu; /* order word of −Inf; 0 marks taken (below it) */

/* The order word of a key: unsigned order = float order, −0 ties +0, NaN (taken) → 0. */
__device__ __forceinline__ uint32_t order_word(float key) {
  if (isnan(key)) return 0u;
  if (key == 0.0f) key = 0.0f;
  const uint32_t b = __float_as_uint(key);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ uint32_t lanes_max(uint32_t v) { return __reduce_max_sync(0xffffffffu, v); }
__device__ __forceinline__ uint32_t lanes_min(uint32_t v) { return __reduce_min_sync(0xffffffffu, v); }

__device__ __forceinline__ bool softmax_over_all(int32_t m) {
  return m == FP8MOE_ROUTING_DEFAULT || m == FP8MOE_ROUTING_RENORMALIZE_NAIVE;
}

/* PL consecutive-by-32 elements of a strided fp32/bf16/fp16 vector, all loads issued before any use. The
 * address steps by 32·stride elements per register (one 64-bit add) instead of e·stride per register (a
 * 64-bit multiply-add and its moves): sm_90a SASS of routing_kernel PL = 8, the load section 527 → 447
 * instructions over its six dtype variants (~1.7 per load, ~27 per DeepSeek-V3 token with a bias). */
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <int PL, typename V>
__device__ __forceinline__ void load_lane_typed(const V* p, int64_t stride, int32_t n, int lane, float (&v)[PL]) {
  const V* q = p + lane * stride;
  const int64_t step = 32 * stride;
  /* Uniform: every register has its element (DeepSeek-V3's E = 256 at PL = 8), no bound tests. Not at PL ≥ 16,
   * where the second copy of the loads made kimi-k2's routing 0.3–0.4 µs slower (E = 384 never takes it). */
  if (PL <= 8 && n >= 32 * PL) {
#pragma unroll
    for (int j = 0; j < PL; ++j) {
      v[j] = to_f32(*q);
      q += step;
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < PL; ++j) {
    v[j] = lane + 32 * j < n ? to_f32(*q) : 0.0f;
    q += step;
  }
}

/* Element off of a logit row or the bias (fp32, bf16 or fp16: the routing contract, as load_lane), as fp32: two dtype
 * tests instead of kref_at's five-way switch (the filtered path reads each candidate's logit and bias this way). */
__device__ __forceinline__ float routing_elem(const fp8moe_kref& r, int64_t off) {
  if (r.dt == FP8MOE_DT_F32) return static_cast<const float*>(r.data)[off];
  if (r.dt == FP8MOE_DT_BF16) return to_f32(static_cast<const __nv_bfloat16*>(r.data)[off]);
  return to_f32(static_cast<const __half*>(r.data)[off]);
}

/* Token t's logit of expert e, and expert e's bias (routing_elem's dtypes and the arguments' strides). */
__device__ __forceinline__ float routing_logit(const fp8moe_routing_args& a, int64_t t, int32_t e) {
  return routing_elem(a.logits, t * a.logits.s[0] + e * a.logits.s[1]);
}
__device__ __forceinline__ float routing_bias(const fp8moe_routing_args& a, int32_t e) {
  return routing_elem(a.bias, e * a.bias.s[0]);
}

template <int PL>
__device__ __forceinline__ void load_lane(const fp8moe_kref& r, int64_t base, int64_t stride, int32_t n, int lane,
                                          float (&v)[PL]) {
  if (r.dt == FP8MOE_DT_F32)
    load_lane_typed<PL>(static_cast<const float*>(r.data) + base, stride, n, lane, v);
  else if (r.dt == FP8MOE_DT_BF16)
    load_lane_typed<PL>(static_cast<const __nv_bfloat16*>(r.data) + base, stride, n, lane, v);
  else
    load_lane_typed<PL>(static_cast<const __half*>(r.data) + base, stride, n, lane, v);
}

/* load_lane as it was (FALLBACK 'w'): the address of every register computed from e·stride. */
template <int PL>
__device__ __forceinline__ void load_lane_v1(const fp8moe_kref& r, int64_t base, int64_t stride, int32_t n, int lane,
                                             float (&v)[PL]) {
  if (r.dt == FP8MOE_DT_F32) {
    const float* p = static_cast<const float*>(r.data) + base;
#pragma unroll
    for (int j = 0; j < PL; ++j) {
      const int32_t e = lane + 32 * j;
      v[j] = e < n ? p[e * stride] : 0.0f;
    }
  } else if (r.dt == FP8MOE_DT_BF16) {
    const __nv_bfloat16* p = static_cast<const __nv_bfloat16*>(r.data) + base;
#pragma unroll
    for (int j = 0; j < PL; ++j) {
      const int32_t e = lane + 32 * j;
      v[j] = e < n ? __bfloat162float(p[e * stride]) : 0.0f;
    }
  } else {
    const __half* p = static_cast<const __half*>(r.data) + base;
#pragma unroll
    for (int j = 0; j < PL; ++j) {
      const int32_t e = lane + 32 * j;
      v[j] = e < n ? __half2float(p[e * stride]) : 0.0f;
    }
  }
}

/* The best top-2 of a group of keys (no NaN among them): merge of two partial (first, second) pairs. */
__device__ __forceinline__ void merge_top2(float& b1, float& b2, float c1, float c2) {
  const float lo = fminf(b1, c1);
  b1 = fmaxf(b1, c1);
  b2 = fmaxf(lo, fmaxf(b2, c2));
}

/* The group rounds of DeepSeek-V3's limiting, by one warp whose lane g < G holds group g's score: topk_group
 * rounds pick the lowest-index unpicked group when its score is NaN, else the largest non-NaN unpicked score
 * (ties to the lower index). Returns the mask of the groups left unpicked (bit g). Shared by limit_groups
 * (one warp per token) and route_token_team (routing_team.cuh), so both limit alike.
 * kRank: where no score is NaN (the usual case) the rounds pick the topk_group first groups of the order (score
 * descending, index ascending) — float comparison orders non-NaN scores as order_word does, −0 tying +0 — so
 * each lane counts the groups ahead of its own (G shuffles, no reduction chain) and one ballot gives the same
 * mask: ~50 instructions at G = 8 against ~100 per round, 4 rounds, for DeepSeek-V3 (routing_kernel<8> SASS).
 * With a NaN score (a +Inf and a −Inf key in one group's top two) the rounds run as before. kG > 0: the caller
 * knows G = kG at compile time (route_filtered where register g is group g), so the count is unrolled: no loop
 * counter, test and branch per group (~20 of DeepSeek-V3's per-token instructions, ncu source counts). */
template <bool kRank = true, int kG = 0>
__device__ __forceinline__ uint32_t pick_groups(float score, int32_t G, int32_t topk_group, int lane) {
  const bool real = lane < G;
  const uint32_t nan_groups = __ballot_sync(0xffffffffu, real && isnan(score));
  const uint32_t all_groups = G >= 32 ? 0xffffffffu : ((1u << G) - 1u);
  if (kRank && nan_groups == 0u) {
    /* 1 where group h ranks ahead of this lane's group */
    const auto ahead_of = [&](int32_t h) {
      const float other = __shfl_sync(0xffffffffu, score, h);
      return (other > score || (other == score && h < lane)) ? 1 : 0;
    };
    int32_t ahead = 0;
    if constexpr (kG > 0) {
#pragma unroll
      for (int32_t h = 0; h < kG; ++h) ahead += ahead_of(h);
    } else {
      for (int32_t h = 0; h < G; ++h) ahead += ahead_of(h);
    }
    return all_groups & ~__ballot_sync(0xffffffffu, real && ahead < topk_group);
  }
  uint32_t unpicked = all_groups;
  for (int32_t r = 0; r < topk_group && r < G; ++r) {
    const int first = __ffs(unpicked) - 1;
    int pick = first;
    if (!((nan_groups >> first) & 1u)) {
      const bool cand = real && ((unpicked >> lane) & 1u) && !((nan_groups >> lane) & 1u);
      const uint32_t w = cand ? order_word(score) : 0u;
      const uint32_t m = lanes_max(w);
      pick = static_cast<int>(lanes_min(cand && w == m ? static_cast<uint32_t>(lane) : 32u));
    }
    unpicked &= ~(1u << pick);
  }
  return unpicked;
}

/* DeepSeek-V3 group limiting, exactly as the CPU backend (src/cpu/cpu_routing.c limit_groups): a group's
 * score is the sum of its two largest keys (its key when a group has one expert); topk_group rounds pick the
 * lowest-index unpicked group when its score is NaN, else the largest non-NaN unpicked score (ties to the
 * lower index); keys outside the picked groups become −Inf. gkey: E floats of warp-private shared memory. */
/* Every group's two largest keys (no NaN among them): gkey (E floats of warp-private shared memory) takes the keys,
 * `sub` lanes per group (a power of two) each scan every sub-th key of it, and a shuffle merge leaves group g's
 * (b1, b2) on its lanes g·sub … g·sub + sub − 1. Returns sub. The caller syncs the warp before gkey is written
 * again. Shared by limit_groups (exact keys) and route_filtered (approximate keys). */
template <int PL, bool kV1>
__device__ __forceinline__ int group_top2(const fp8moe_routing_args& a, int lane, const float (&key)[PL], float* gkey,
                                          float& b1, float& b2) {
  const int32_t G = a.n_group, gs = a.E / G;
#pragma unroll
  for (int j = 0; j < PL; ++j)
    if (lane + 32 * j < a.E) gkey[lane + 32 * j] = key[j];
  __syncwarp();
  int sub = 1;
  while (sub * 2 * G <= 32) sub *= 2;
  const int g = lane / sub, part = lane % sub;
  b1 = -INFINITY;
  b2 = -INFINITY;
  if (g < G) {
    if (kV1) {
      for (int32_t e = g * gs + part; e < (g + 1) * gs; e += sub) merge_top2(b1, b2, gkey[e], -INFINITY);
    } else {
      /* Four independent shared-memory loads per trip instead of one dependent load per key (DeepSeek-V3:
       * 8 keys per lane, ~30 cycles each in series before); the merges run in the same order. */
#pragma unroll 4
      for (int32_t e = g * gs + part; e < (g + 1) * gs; e += sub) merge_top2(b1, b2, gkey[e], -INFINITY);
    }
  }
  for (int o = sub / 2; o > 0; o >>= 1) {
    const float c1 = __shfl_xor_sync(0xffffffffu, b1, o), c2 = __shfl_xor_sync(0xffffffffu, b2, o);
    merge_top2(b1, b2, c1, c2);
  }
  return sub;
}

template <int PL, bool kV1>
__device__ __forceinline__ void limit_groups(const fp8moe_routing_args& a, int lane, float (&key)[PL], float* gkey) {
  const int32_t G = a.n_group, gs = a.E / G;
  float b1, b2;
  const int sub = group_top2<PL, kV1>(a, lane, key, gkey, b1, b2);
  /* lane g (< G) takes group g's score from the group's first sub lane */
  const float mine = gs >= 2 ? b1 + b2 : b1;
  const float score = __shfl_sync(0xffffffffu, mine, (lane < G ? lane : 0) * sub);
  const uint32_t unpicked = pick_groups<!kV1>(score, G, a.topk_group, lane);
  __syncwarp(); /* gkey is free for the next token */
  /* e / gs by one multiply-high instead of PL integer divisions (~30 instructions each, ~260 of the
   * DeepSeek-V3 path at PL = 8). M = ⌈2^32 / gs⌉, so M·gs = 2^32 + r with 0 ≤ r < gs; for e = q·gs + s
   * (0 ≤ s < gs), e·M / 2^32 = q + (s + e·r / 2^32) / gs, and s + e·r / 2^32 < gs because s ≤ gs − 1 and
   * e·r < e·gs < 2^32 (e < E ≤ 2,048, gs ≤ E): the floor is q exactly. gs = 1 overflows M: the group is e. */
  const uint32_t magic = 0xFFFFFFFFu / static_cast<uint32_t>(gs) + 1u;
#pragma unroll
  for (int j = 0; j < PL; ++j) {
    const uint32_t e = static_cast<uint32_t>(lane + 32 * j);
    const uint32_t group = gs == 1 ? e : __umulhi(e, magic);
    if (e < static_cast<uint32_t>(a.E) && ((unpicked >> group) & 1u)) key[j] = -INFINITY;
  }
}

/* The lane's best remaining candidate: largest order word, then lowest j. */
template <int PL>
__device__ __forceinline__ void lane_best(const uint32_t (&ord)[PL], const float (&logit)[PL], uint32_t& best,
                                          int& best_j, float& best_logit) {
  best = 0u;
  best_j = 0;
  best_logit = 0.0f;
#pragma unroll
  for (int j = 0; j < PL; ++j) {
    if (ord[j] > best) {
      best = ord[j];
      best_j = j;
      best_logit = logit[j];
    }
  }
}

/* One compare-exchange of sort_lane: position x takes the candidate that goes first (larger order word, then lower
 * register index; indices are distinct, so this is a total order and any sorting network sorts by it). */
template <int X, int Y, int PL>
__device__ __forceinline__ void order_pair(uint32_t (&ord)[PL], uint32_t (&jj)[PL]) {
  const bool swap = ord[Y] > ord[X] || (ord[Y] == ord[X] && jj[Y] < jj[X]);
  const uint32_t ox = ord[X], jx = jj[X];
  ord[X] = swap ? ord[Y] : ox;
  jj[X] = swap ? jj[Y] : jx;
  ord[Y] = swap ? ox : ord[Y];
  jj[Y] = swap ? jx : jj[Y];
}

/* The lane's candidates in pick order, for PL ≤ 8 (the rounds of route_token's sorted top-K): order word descending,
 * register index ascending among equal words — the order in which repeated lane_best calls would take them — by a
 * fixed sorting network (Knuth's 19 comparators at PL = 8, 5 at 4; checked by the 0-1 principle), once per token.
 * The comparators are template arguments so that every register index is a constant (loops over a computed
 * network left ptxas with indexed registers in local memory). Returns the register indices in that order, 3 bits
 * each, the head's in bits 0–2. Each top-K round then pops the owner's head (a shift of PL words by selects) instead
 * of rescanning PL registers and selecting the winner's weight value through them (a tree of PL − 1 compare-selects
 * and a chain of PL − 1 selects per round on every lane: most of a DeepSeek-V3 round, routing_kernel<8> SASS). */
template <int PL>
__device__ __forceinline__ uint32_t sort_lane(uint32_t (&ord)[PL]) {
  static_assert(PL == 1 || PL == 2 || PL == 4 || PL == 8, "3 bits per register index; the networks below");
  uint32_t jj[PL];
#pragma unroll
  for (int j = 0; j < PL; ++j) jj[j] = static_cast<uint32_t>(j);
  if constexpr (PL == 2) {
    order_pair<0, 1>(ord, jj);
  } else if constexpr (PL == 4) {
    order_pair<0, 1>(ord, jj), order_pair<2, 3>(ord, jj), order_pair<0, 2>(ord, jj), order_pair<1, 3>(ord, jj);
    order_pair<1, 2>(ord, jj);
  } else if constexpr (PL == 8) {
    order_pair<0, 2>(ord, jj), order_pair<1, 3>(ord, jj), order_pair<4, 6>(ord, jj), order_pair<5, 7>(ord, jj);
    order_pair<0, 4>(ord, jj), order_pair<1, 5>(ord, jj), order_pair<2, 6>(ord, jj), order_pair<3, 7>(ord, jj);
    order_pair<0, 1>(ord, jj), order_pair<2, 3>(ord, jj), order_pair<4, 5>(ord, jj), order_pair<6, 7>(ord, jj);
    order_pair<2, 4>(ord, jj), order_pair<3, 5>(ord, jj), order_pair<1, 4>(ord, jj), order_pair<3, 6>(ord, jj);
    order_pair<1, 2>(ord, jj), order_pair<3, 4>(ord, jj), order_pair<5, 6>(ord, jj);
  }
  uint32_t perm = 0;
#pragma unroll
  for (int j = 0; j < PL; ++j) perm |= jj[j] << (3 * j);
  return perm;
}

/* Methods whose weight is a function of the selected expert's own logit that the key computation already
 * evaluated: softmax over all experts (the weight is the key, e^(x−m)/Σ), and the sigmoid-keyed methods (the
 * weight is σ(x), the key σ(x) [+ bias]). route_token keeps that value per register ("post") instead of the raw
 * logit, so slot k's weight is a register move, not a second exp or sigmoid on the critical path; same
 * function of the same input, so the same bits. */
__device__ __forceinline__ bool weight_is_post(int32_t m) {
  return softmax_over_all(m) || m == FP8MOE_ROUTING_SIGMOID || m == FP8MOE_ROUTING_SIGMOID_RENORM ||
         m == FP8MOE_ROUTING_DEEPSEEK_V3;
}

/* Slot lane's final weight (× routed_scaling_factor) from the selected expert's value s (the sanitized logit,
 * or its post value where post_weight: weight_is_post), valid when its key was above −Inf (else a weight-0
 * filler); m and denom: the softmax over all experts' maximum and denominator (those methods only). Sums run
 * in slot order. Warp-collective (renormalizing methods shuffle); lanes ≥ K return 0. */
template <bool kV1>
__device__ __forceinline__ float slot_weight(const fp8moe_routing_args& a, int lane, bool valid, float s, float m,
                                             float denom, bool post_weight) {
  const int32_t method = a.method;
  const bool sel = valid && lane < a.K;
  float w = 0.0f;
  if (post_weight) {
    w = sel ? s : 0.0f;
  } else {
    switch (method) {
      case FP8MOE_ROUTING_DEFAULT:
      case FP8MOE_ROUTING_RENORMALIZE_NAIVE: w = sel ? fp8moe_rm_exp(s - m) / denom : 0.0f; break;
      case FP8MOE_ROUTING_RENORMALIZE: {
        const float mk = warp_max(sel ? s : -INFINITY);
        w = sel ? fp8moe_rm_exp(s - mk) : 0.0f;
        break;
      }
      case FP8MOE_ROUTING_TOPK: w = sel ? s : 0.0f; break;
      default: w = sel ? fp8moe_rm_sigmoid(s) : 0.0f; break; /* every sigmoid-weighted method */
    }
  }
  const bool renorm = method == FP8MOE_ROUTING_RENORMALIZE_NAIVE || method == FP8MOE_ROUTING_SIGMOID_RENORM ||
                      method == FP8MOE_ROUTING_DEEPSEEK_V3 || method == FP8MOE_ROUTING_RENORMALIZE;
  if (renorm) {
    float sum = 0.0f;
    if (kV1) {
      for (int32_t k = 0; k < a.K; ++k) sum += __shfl_sync(0xffffffffu, w, k);
    } else {
      /* The same additions in slot order; the shuffles of 8 slots are issued together instead of one
       * shuffle's latency per slot. */
      for (int32_t k0 = 0; k0 < a.K; k0 += 8) {
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = __shfl_sync(0xffffffffu, w, (k0 + i) & 31);
#pragma unroll
        for (int i = 0; i < 8; ++i)
          if (k0 + i < a.K) sum += v[i];
      }
    }
    if (method == FP8MOE_ROUTING_RENORMALIZE)
      w = sel ? w / sum : 0.0f; /* a selectable slot makes sum ≥ 1 */
    else
      w = w / (sum + 1e-20f);
  }
  return w * a.scale;
}

/* The phases of route_token, in order; route_token(…, from) starts at phase `from`. */
constexpr int kPhaseLoad = 0, kPhaseKeys = 1, kPhaseGroups = 2, kPhaseTopK = 3, kPhaseWeights = 4;

/* ---- The filtered selection (routing_filter.h; docs/GPU.md "Routing's critical path", item 6) ---- */

/* σ(x) by the SFU, within FP8MOE_RF_SIGMOID_ERR of fp8moe_rm_sigmoid(x) (routing_filter.h): it only decides which
 * experts need their exact key, never a selection or a weight. */
__device__ __forceinline__ float sigmoid_approx(float x) {
  const float e = ex2_approx(fabsf(x) * -1.44269504088896341f);
  return (x < 0.0f ? e : 1.0f) * rcp_approx(1.0f + e);
}

/* order_word for keys that are not NaN, in two instructions: −0 orders below +0 here (equal as floats, so only
 * where that cannot matter: the approximate keys' group top-2). order_float inverts it too. */
__device__ __forceinline__ uint32_t order_word_finite(float key) {
  const uint32_t b = __float_as_uint(key);
  return b ^ (static_cast<uint32_t>(static_cast<int32_t>(b) >> 31) | 0x80000000u);
}

/* order_word's inverse on the words of non-NaN keys (> 0). */
__device__ __forceinline__ float order_float(uint32_t w) {
  return __uint_as_float((w & 0x80000000u) ? (w & 0x7FFFFFFFu) : ~w);
}

/* The two largest of one non-NaN key per lane (a group of 32 held by one register), both as order words (the one
 * lane that keeps them converts them with order_float): two warp maxima, the second with the lowest lane holding the
 * first left out, so a tie gives both. ±0 order apart here but add to the same group score, as on the exact path
 * (limit_groups). Shared by route_filtered's approximate group scores and pick_close_groups' exact ones. */
__device__ __forceinline__ void lanes_top2_words(float key, int lane, uint32_t& first_word, uint32_t& second_word) {
  const uint32_t w = order_word_finite(key);
  const uint32_t m1 = lanes_max(w);
  const bool first_holder = lane == __ffs(__ballot_sync(0xffffffffu, w == m1)) - 1;
  first_word = m1;
  second_word = lanes_max(first_holder ? 0u : w);
}

/* DeepSeek-V3's group limiting applies (limit_groups). */
__host__ __device__ __forceinline__ bool limits_groups(const fp8moe_routing_args& a) {
  return a.method == FP8MOE_ROUTING_DEEPSEEK_V3 && a.n_group > 1 && a.topk_group < a.n_group;
}

/* Where route_filtered may run (uniform over a launch): the sigmoid-keyed methods with E ≤ 512 (route_token's PL ≤
 * 16); where DeepSeek-V3 limits groups, groups of at least two experts and 2·topk_group ≥ K (the candidate floor needs
 * K experts among the picked groups' two largest keys); not switched off (FALLBACK 'f', or 'w':
 * fp8moe_routing_args.filtered). */
__host__ __device__ __forceinline__ bool filtered_applies(const fp8moe_routing_args& a) {
  const bool sigmoid_keys = a.method == FP8MOE_ROUTING_DEEPSEEK_V3 || a.method == FP8MOE_ROUTING_SIGMOID ||
                            a.method == FP8MOE_ROUTING_SIGMOID_RENORM;
  /* E ≥ 2·n_group: groups of at least two experts (E / n_group ≥ 2 without a division per token; n_group > 1 here) */
  return a.filtered && sigmoid_keys && a.E <= 512 &&
         (!limits_groups(a) || (a.E >= 2 * a.n_group && 2 * a.topk_group >= a.K));
}

/* Whether route_token uses its warp's E floats of shared memory (gkey): the group keys of limit_groups, or the
 * filtered selection's group keys and candidate list. The launchers size the scratch by it. */
__host__ __device__ __forceinline__ bool route_uses_scratch(const fp8moe_routing_args& a) {
  return limits_groups(a) || filtered_applies(a);
}

/* The picked groups where the approximate scores are too close to call (routing_filter.h), for the layout where
 * register g is group g (DeepSeek-V3's 8 groups of 32): lane g < PL holds group g's approximate score. A pair whose
 * approximate scores are more than 4δ apart orders the same by exact scores (fp8moe_rf_groups_certain), so a group
 * that fewer than topk_group others may be ahead of is picked, one that topk_group others are surely ahead of is
 * not, and only the rest are ranked by their exact scores (σ(x) + bias of the token's logits read again, from L1/L2)
 * for the places left — ties to the lower index, as pick_groups ranks every group on the exact path. Typically two
 * groups of eight need it, ~60 instructions each; declining instead sent ~0.08 % of random DeepSeek-V3 tokens
 * through the whole exact path, and one such token was the last warp to finish of a one-wave grid (docs/GPU.md
 * "Routing's critical path", item 6). Returns the picked mask (bit g). */
template <int PL>
__device__ __forceinline__ uint32_t pick_close_groups(const fp8moe_routing_args& a, int64_t t, int lane, float score,
                                                      float delta, bool with_bias, int from) {
  int32_t maybe_ahead = 0, surely_ahead = 0;
#pragma unroll 1 /* a rare path: kept short (routing_kernel<8> +1,536 instructions unrolled) */
  for (int h = 0; h < PL; ++h) {
    const float other = __shfl_sync(0xffffffffu, score, h);
    if (h == lane) continue;
    maybe_ahead += fp8moe_rf_groups_certain(score, other, delta) ? 0 : 1;
    surely_ahead += fp8moe_rf_groups_certain(other, score, delta) ? 1 : 0;
  }
  const bool real = lane < PL;
  const uint32_t sure_in = __ballot_sync(0xffffffffu, real && maybe_ahead < a.topk_group);
  const uint32_t sure_out = __ballot_sync(0xffffffffu, real && surely_ahead >= a.topk_group);
  /* the sure groups rank first and last: no sum of two keys below 2^64 (route_filtered's test) comes near FLT_MAX */
  float exact = ((sure_in >> lane) & 1u) ? FLT_MAX : -FLT_MAX;
#pragma unroll 1
  for (int g = 0; g < PL; ++g) {
    if (((sure_in | sure_out) >> g) & 1u) continue; /* uniform */
    const int32_t e = lane + 32 * g;
    /* finite or +Inf here (route_filtered) */
    float x = from <= kPhaseLoad ? routing_logit(a, t, e) : 0.0f;
    if (x == INFINITY) x = FLT_MAX;
    const float b = with_bias && from <= kPhaseLoad ? routing_bias(a, e) : 0.0f;
    uint32_t m1, m2; /* the group's two largest exact keys, as route_filtered takes the approximate ones */
    lanes_top2_words(fp8moe_rm_sigmoid(x) + b, lane, m1, m2);
    if (lane == g) exact = order_float(m1) + order_float(m2);
  }
  return ((1u << PL) - 1u) & ~pick_groups<true>(exact, PL, a.topk_group, lane);
}

/* Token t by the filtered selection (routing_filter.h): approximate keys → where DeepSeek-V3 limits groups, the groups
 * picked from approximate scores where the margin allows → candidates (picked groups, at or above the floor; at most
 * one per lane) → their exact keys (src/routing_math.h, the exact path's functions on the same values) → top-K over
 * those. Without group limiting the floor comes from the K-th largest of the lanes' largest keys: those K lanes hold
 * K distinct experts whose exact keys are within δ of it (fp8moe_rf_candidate_floor's argument). Same contract and
 * outputs as route_token; returns 1 or 0 (lane < K), or −1 (uniform) where the token needs the exact path: a
 * non-finite logit or bias, groups too close to call, or more than 32 candidates (ties, near-ties, huge biases).
 * Every logit is selectable here and ≥ K experts remain, so no slot is a filler and the weight of slot k is σ(x) of
 * its expert, the value its exact key was made of. gkey: E floats (the group keys, then the candidate list). from >
 * 0: code warming (route_token), placeholders for the phases before it, no memory read. */
template <int PL>
__device__ __forceinline__ int route_filtered(const fp8moe_routing_args& a, int64_t t, float* gkey, int32_t* e_out,
                                              float* w_out, int from) {
  const int lane = threadIdx.x % 32;
  const int32_t E = a.E, G = a.n_group;
  const bool with_bias = a.method == FP8MOE_ROUTING_DEEPSEEK_V3 && a.bias.data != nullptr; /* as route_token */
  float ak[PL]; /* approximate keys (registers past E: unused) */
  float max_abs = 0.0f;
  if (from <= kPhaseKeys) {
    float logit[PL], bias[PL];
    if (from <= kPhaseLoad) {
      if (with_bias) load_lane<PL>(a.bias, 0, a.bias.s[0], E, lane, bias);
      load_lane<PL>(a.logits, t * a.logits.s[0], a.logits.s[1], E, lane, logit);
    } else {
      /* placeholders that take a real token's path: decisive groups (register j is group j at 32 experts a group:
       * scores ~3e-3 apart and more, ≫ δ), ~20 candidates with or without group limiting */
#pragma unroll
      for (int j = 0; j < PL; ++j) logit[j] = -2.0f * static_cast<float>(j) - static_cast<float>(lane);
    }
    /* A NaN or −Inf logit (the exact path sanitizes it) or a non-finite bias (then the key is not finite): the exact
     * path. Bitwise, not short-circuit, so that the loop stays free of branches. Registers past E read 0 (load_lane)
     * and their keys are never used (group_top2 and the candidates test e < E), so no test of e here. */
    bool exact = false;
#pragma unroll
    for (int j = 0; j < PL; ++j) {
      const float b = with_bias && from <= kPhaseLoad ? bias[j] : 0.0f;
      ak[j] = sigmoid_approx(fminf(logit[j], FLT_MAX)) + b; /* +Inf reads as FLT_MAX */
      exact |= !((logit[j] > -INFINITY) & (fabsf(ak[j]) < INFINITY));
      max_abs = fmaxf(max_abs, fabsf(ak[j]));
    }
    if (__any_sync(0xffffffffu, exact)) return -1;
  } else {
#pragma unroll
    for (int j = 0; j < PL; ++j) ak[j] = -2.0f * static_cast<float>(j) - static_cast<float>(lane); /* as above */
  }
  /* |keys| ≥ 0 order as their bit patterns. Past 2^64 (a bias no router has) the exact path: group scores of such
   * keys could overflow, and the bound of routing_filter.h assumes they do not. */
  const float max_key = __uint_as_float(lanes_max(__float_as_uint(max_abs)));
  if (!(max_key < 0x1p64f)) return -1;
  const float delta = fp8moe_rf_delta(max_key);

  int32_t ce = 0;      /* this lane's candidate expert (lanes < n) */
  uint32_t ord = 0u;   /* its exact key's order word; 0: none, or taken */
  float sg = 0.0f;     /* its σ(x): the weight */
  if (from <= kPhaseGroups) {
    uint32_t picked = 0xffffffffu; /* bit g: group g picked (every bit without group limiting) */
    uint32_t magic = 0u;           /* e / gs by a multiply-high (limit_groups), where groups are limited */
    /* Groups of 32 experts with 32·PL = E (DeepSeek-V3): register g is group g. */
    const bool group_is_register = limits_groups(a) && E == 32 * PL && G == PL;
    float floor;
    if (limits_groups(a)) {
      float score, second; /* group `lane`'s approximate score and second largest key (lane < G) */
      if (group_is_register) {
        /* Register g is group g (DeepSeek-V3's 8 groups of 32): its two largest keys by lanes_top2_words, without
         * shared memory; lane g keeps group g's words and converts them once, after the loop (the same values). */
        uint32_t w1 = 0u, w2 = 0u;
#pragma unroll
        for (int g = 0; g < PL; ++g) {
          uint32_t m1, m2;
          lanes_top2_words(ak[g], lane, m1, m2);
          w1 = lane == g ? m1 : w1;
          w2 = lane == g ? m2 : w2;
        }
        second = lane < PL ? order_float(w2) : 0.0f;
        score = lane < PL ? order_float(w1) + second : 0.0f;
      } else {
        float b1, b2;
        const int sub = group_top2<PL, false>(a, lane, ak, gkey, b1, b2);
        const int src = (lane < G ? lane : 0) * sub;
        score = __shfl_sync(0xffffffffu, b1 + b2, src);
        second = __shfl_sync(0xffffffffu, b2, src);
      }
      const uint32_t all_groups = G >= 32 ? 0xffffffffu : ((1u << G) - 1u);
      /* scores are finite; the unrolled count where register g is group g, up to DeepSeek-V3's 8 groups (a copy of
       * 16 or more steps would only grow the PL ≥ 16 kernels, whose layouts rarely have a group per register) */
      uint32_t unpicked;
      if constexpr (PL <= 8)
        unpicked = group_is_register ? pick_groups<true, PL>(score, PL, a.topk_group, lane)
                                     : pick_groups<true>(score, G, a.topk_group, lane);
      else
        unpicked = pick_groups<true>(score, G, a.topk_group, lane);
      picked = all_groups & ~unpicked;
      const bool mine = (picked >> lane) & 1u, other = lane < G && !mine;
      const float last = order_float(lanes_min(mine ? order_word(score) : 0xFFFFFFFFu));
      const float first_out = order_float(lanes_max(other ? order_word(score) : 0u));
      if (!fp8moe_rf_groups_certain(last, first_out, delta)) {
        if (!group_is_register) {
          __syncwarp(); /* group_top2's reads of gkey are done before the exact path writes it */
          return -1;
        }
        picked = pick_close_groups<PL>(a, t, lane, score, delta, with_bias, from);
      }
      /* any picked set: each picked group's two largest keys are candidates (fp8moe_rf_candidate_floor) */
      const bool kept = (picked >> lane) & 1u;
      floor = fp8moe_rf_candidate_floor(order_float(lanes_min(kept ? order_word(second) : 0xFFFFFFFFu)), delta);
      /* groups of ≥ 2 experts: never 0. Where register g is group g the candidates' loop skips unpicked registers
       * instead (magic stays 0: every expert of a visited register is in its group) and no division runs. */
      if (!group_is_register) magic = 0xFFFFFFFFu / static_cast<uint32_t>(E / G) + 1u;
      __syncwarp(); /* group_top2's reads of gkey are done: it takes the candidate list */
    } else {
      /* The K-th largest of the lanes' largest keys (a lane without experts offers none: E ≥ K lanes do) */
      float lane_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < PL; ++j) lane_max = lane + 32 * j < E ? fmaxf(lane_max, ak[j]) : lane_max;
      uint32_t w = lane < E ? order_word(lane_max) : 0u, top = 0u;
      for (int32_t k = 0; k < a.K; ++k) {
        top = lanes_max(w);
        if (lane == __ffs(__ballot_sync(0xffffffffu, w == top)) - 1) w = 0u;
      }
      floor = fp8moe_rf_candidate_floor(order_float(top), delta);
    }
    int32_t* list = reinterpret_cast<int32_t*>(gkey);
    const uint32_t below = (1u << lane) - 1u; /* the lanes before this one */
    int32_t n = 0;
#pragma unroll
    for (int j = 0; j < PL; ++j) {
      if (group_is_register && !((picked >> j) & 1u)) continue; /* uniform: without its group test per lane */
      const uint32_t e = static_cast<uint32_t>(lane + 32 * j);
      /* e < E first: past E the group index may pass 31. Bitwise: no branches. */
      const bool in = e < static_cast<uint32_t>(E);
      const bool in_group = magic == 0u || (in && ((picked >> __umulhi(e, magic)) & 1u));
      const uint32_t ballot = __ballot_sync(0xffffffffu, in & in_group & (ak[j] >= floor));
      if (ballot == 0u) continue; /* uniform: most registers hold no candidate */
      /* expert order: the list is sorted by index (j, then lane), ≤ E entries */
      if ((ballot >> lane) & 1u) list[n + __popc(ballot & below)] = static_cast<int32_t>(e);
      n += __popc(ballot);
    }
    if (n > FP8MOE_RF_MAX_CANDIDATES) {
      __syncwarp();
      return -1;
    }
    __syncwarp();
    if (lane < n) {
      ce = list[lane];
      float x = from <= kPhaseLoad ? routing_logit(a, t, ce) : static_cast<float>(ce);
      if (x == INFINITY) x = FLT_MAX;
      const float b = with_bias && from <= kPhaseLoad ? routing_bias(a, ce) : 0.0f;
      sg = fp8moe_rm_sigmoid(x);
      ord = order_word(sg + b); /* the exact path's key: σ(x) + bias (+ 0 without one), finite here */
    }
    __syncwarp(); /* gkey is free for the next token */
  } else {
    ce = lane;
    sg = static_cast<float>(lane);
    ord = order_word(sg);
  }

  int32_t my_e = 0;
  float s = 0.0f;
  if (from <= kPhaseTopK) {
    /* Ties go to the lower index: the list is in index order, so to the lowest lane holding the maximum. Lane k
     * keeps round k's owner; the expert and σ(x) come by one shuffle each after the rounds (ce and sg do not change
     * in them), not two per round. */
    int src = 0;
    for (int32_t k = 0; k < a.K; ++k) {
      const uint32_t top = lanes_max(ord);
      const int owner = __ffs(__ballot_sync(0xffffffffu, ord == top)) - 1;
      src = lane == k ? owner : src;
      if (lane == owner) ord = 0u;
    }
    const int32_t e = __shfl_sync(0xffffffffu, ce, src);
    const float w = __shfl_sync(0xffffffffu, sg, src);
    my_e = lane < a.K ? e : 0;
    s = lane < a.K ? w : 0.0f;
  } else {
    my_e = lane;
    s = static_cast<float>(lane);
  }
  *e_out = my_e;
  *w_out = slot_weight<false>(a, lane, true, s, 0.0f, 0.0f, true);
  return lane < a.K;
}

/* Routes token t with the calling warp (all 32 lanes, converged). Lane k < K gets slot k: *e_out (global
 * expert id) and *w_out (× routed_scaling_factor); returns lane < K. gkey: E floats of this warp's shared
 * memory when DeepSeek-V3 limits groups, else unused. kV1: the previous instruction sequence (FALLBACK 'w',
 * the A/B switch; docs/GPU.md "Routing's critical path"): the same bits, more instructions on the critical path.
 * from > 0 (the small-T prologue's idle warps only; docs/GPU.md "Routing's critical path", code warming): skip the
 * phases before `from` and run the rest on placeholder values (distinct per register, so mostly the branches
 * of a real token), reading no memory but the parameters and writing only gkey; the result is meaningless and
 * the caller discards it. The point is to pull the later phases' instructions into the SM's instruction
 * caches while the routing warp is still in an earlier phase. */
template <int PL, bool kV1 = false>
__device__ __forceinline__ bool route_token(const fp8moe_routing_args& a, int64_t t, float* gkey, int32_t* e_out,
                                            float* w_out, int from = kPhaseLoad) {
  const int lane = threadIdx.x % 32;
  const int32_t method = a.method, E = a.E;
  const bool with_bias = method == FP8MOE_ROUTING_DEEPSEEK_V3 && a.bias.data != nullptr;
  /* kSorted: the top-K rounds on sorted lanes (sort_lane), which read each slot's logit again afterwards, so the
   * post values are not kept (PL > 8 keeps the rescanning rounds and the post values). */
  constexpr bool kSorted = !kV1 && PL <= 8;
  if constexpr (!kV1 && PL <= 16) {
    if (filtered_applies(a)) {
      const int r = route_filtered<PL>(a, t, gkey, e_out, w_out, from);
      /* −1 comes on every lane or none; the vote says so to the compiler too: branching on r itself (a per-lane
       * value) made everything after it "possibly divergent", each collective of the exact path wrapped in
       * WARPSYNC … ENDCOLLECTIVE (73 in routing_kernel<8>) and the kernel's code twice as long. */
      if (__all_sync(0xffffffffu, r >= 0) || from > kPhaseLoad) return r > 0; /* warming: discarded either way */
    }
  }
  const bool post_weight = !kV1 && !kSorted && weight_is_post(method);
  float logit[PL], key[PL];
  if (kV1) {
    load_lane_v1<PL>(a.logits, t * a.logits.s[0], a.logits.s[1], E, lane, logit);
    if (with_bias) load_lane_v1<PL>(a.bias, 0, a.bias.s[0], E, lane, key);
  } else if (from <= kPhaseLoad) {
    load_lane<PL>(a.logits, t * a.logits.s[0], a.logits.s[1], E, lane, logit);
    if (with_bias) load_lane<PL>(a.bias, 0, a.bias.s[0], E, lane, key);
  } else {
#pragma unroll
    for (int j = 0; j < PL; ++j) logit[j] = key[j] = static_cast<float>(lane + 32 * j); /* placeholders */
  }

  float m = -INFINITY;
  float denom = 0.0f;
  bool selectable[PL];
#pragma unroll
  for (int j = 0; j < PL; ++j) selectable[j] = lane + 32 * j < E;
  if (from <= kPhaseKeys) {
    /* Sanitize: NaN/−Inf unselectable (−Inf), +Inf → FLT_MAX; the max selectable logit for the softmax. */
#pragma unroll
    for (int j = 0; j < PL; ++j) {
      float s = logit[j];
      selectable[j] = lane + 32 * j < E && !(isnan(s) || s == -INFINITY);
      if (s == INFINITY) s = FLT_MAX;
      logit[j] = s;
      if (selectable[j]) m = fmaxf(m, s);
    }
    /* Only the softmax over all experts uses m (five dependent shuffles otherwise wasted on the chain). */
    if (kV1 || softmax_over_all(method)) m = warp_max(m);

    /* Selection keys; with post_weight, logit[j] becomes the value the weight is made of (weight_is_post). */
    if (softmax_over_all(method)) {
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < PL; ++j) {
        key[j] = selectable[j] ? fp8moe_rm_exp(logit[j] - m) : 0.0f;
        if (selectable[j]) part += key[j];
      }
      denom = warp_sum(part);
#pragma unroll
      for (int j = 0; j < PL; ++j) {
        key[j] = selectable[j] ? key[j] / denom : -INFINITY;
        if (post_weight) logit[j] = key[j]; /* = e^(s − m) / Σ, the weight (read only where selectable) */
      }
    } else if (method == FP8MOE_ROUTING_SIGMOID || method == FP8MOE_ROUTING_SIGMOID_RENORM ||
               method == FP8MOE_ROUTING_DEEPSEEK_V3) {
      /* One site for both (code size: every unrolled sigmoid is ~40 instructions): a sigmoid is never −0 or
       * NaN, so "+ 0" leaves it unchanged and the NaN test only ever fires for DeepSeek-V3's bias. */
      float num[PL], den[PL];
#pragma unroll
      for (int j = 0; j < PL; ++j) fp8moe_rm_sigmoid_terms(logit[j], &num[j], &den[j]); /* the exps together */
#pragma unroll
      for (int j = 0; j < PL; ++j) pin_f32x2(num[j], den[j]); /* see below */
      /* The empty asm pins every term before the first division: without it ptxas sinks each exp into its
       * division's slow-path region (BSSY … BSYNC in the SASS), one after another; with it the 8 exps of a
       * DeepSeek-V3 lane share one region and interleave (docs/GPU.md "Small-T prologue", phase trace). */
#pragma unroll
      for (int j = 0; j < PL; ++j) {
        const float sg = FP8MOE_RM_DIV(num[j], den[j]); /* = fp8moe_rm_sigmoid(logit[j]) */
        const float k2 = sg + (with_bias ? key[j] : 0.0f);
        key[j] = selectable[j] ? (isnan(k2) ? -INFINITY : k2) : -INFINITY;
        if (post_weight) logit[j] = sg; /* σ(s), the weight */
      }
    } else {
#pragma unroll
      for (int j = 0; j < PL; ++j) key[j] = selectable[j] ? logit[j] : -INFINITY; /* raw logits */
    }
  }
  if (from <= kPhaseGroups && limits_groups(a)) limit_groups<PL, kV1>(a, lane, key, gkey);

  /* Top-K: per round the largest order word, then the lowest index holding it; lane k keeps slot k. */
  int32_t my_e = 0;
  bool my_valid = false; /* the key was above −Inf when picked (else a weight-0 filler) */
  float s = 0.0f;        /* the sanitized logit (post_weight: its post value) of slot lane */
  if (from <= kPhaseTopK) {
    uint32_t ord[PL];
#pragma unroll
    for (int j = 0; j < PL; ++j) ord[j] = lane + 32 * j < E ? order_word(key[j]) : 0u;
    if constexpr (kSorted) {
      uint32_t perm = sort_lane<PL>(ord);
      for (int32_t k = 0; k < a.K; ++k) {
        const uint32_t head = ord[0];
        const uint32_t top = lanes_max(head);
        const uint32_t tied = __ballot_sync(0xffffffffu, head == top);
        uint32_t idx;
        bool mine; /* this lane owns the round's pick: its head goes */
        if (__popc(tied) == 1) { /* the usual case, as in the rescanning rounds below */
          const int owner = __ffs(tied) - 1;
          mine = (tied >> lane) & 1u;
          idx = static_cast<uint32_t>(owner) + 32u * (__shfl_sync(0xffffffffu, perm, owner) & 7u);
        } else {
          idx = lanes_min(head == top ? static_cast<uint32_t>(lane) + 32u * (perm & 7u) : 0xFFFFFFFFu);
          mine = static_cast<uint32_t>(lane) == idx % 32u;
        }
        if (lane == k) {
          my_e = static_cast<int32_t>(idx);
          my_valid = top > kOrderedMinusInf;
        }
#pragma unroll
        for (int j = 0; j + 1 < PL; ++j) ord[j] = mine ? ord[j + 1] : ord[j];
        ord[PL - 1] = mine ? 0u : ord[PL - 1];
        perm = mine ? perm >> 3 : perm;
      }
      /* The slot's sanitized logit, as the keys phase made it (+Inf reads as FLT_MAX; a NaN or −Inf logit is never
       * valid, and an invalid slot's weight is 0); slot_weight then computes the weight from it by the same
       * functions the keys phase used (fp8moe_rm_sigmoid, the softmax term over m and denom), so the same bits.
       * The warp read that row moments before: an L1 hit. */
      if (lane < a.K) {
        s = from <= kPhaseLoad ? routing_logit(a, t, my_e) : static_cast<float>(my_e);
        if (s == INFINITY) s = FLT_MAX;
      }
    } else {
      uint32_t best;
      int best_j;
      float best_logit;
      lane_best<PL>(ord, logit, best, best_j, best_logit);
      for (int32_t k = 0; k < a.K; ++k) {
        const uint32_t top = lanes_max(best);
        int owner;
        uint32_t idx;
        bool mine; /* this lane owns the round's pick */
        const uint32_t tied = kV1 ? 0u : __ballot_sync(0xffffffffu, best == top);
        if (!kV1 && __popc(tied) == 1) {
          /* One lane holds the maximum (the usual case): it is the owner; no second reduction. It knows so from
           * the ballot itself, so the next round's chain does not wait for the owner's lane number. */
          owner = __ffs(tied) - 1;
          mine = (tied >> lane) & 1u;
          idx = static_cast<uint32_t>(owner + 32 * __shfl_sync(0xffffffffu, best_j, owner));
        } else {
          idx = lanes_min(best == top ? static_cast<uint32_t>(lane + 32 * best_j) : 0xFFFFFFFFu);
          owner = static_cast<int>(idx % 32);
          mine = lane == owner;
        }
        const float ls = __shfl_sync(0xffffffffu, best_logit, owner);
        if (lane == k) {
          my_e = static_cast<int32_t>(idx);
          my_valid = top > kOrderedMinusInf;
          s = ls;
        }
        if (kV1) {
          if (mine) {
#pragma unroll
            for (int j = 0; j < PL; ++j)
              if (j == best_j) ord[j] = 0u;
            lane_best<PL>(ord, logit, best, best_j, best_logit);
          }
        } else {
          /* Every lane rescans, the owner without its pick: the others recompute the best they had (the same
           * function of the same registers), and no lane diverges — a divergent owner branch cost each round a
           * reconvergence (BSSY/BSYNC) on the critical path (docs/GPU.md "Small-T prologue", phase trace). */
#pragma unroll
          for (int j = 0; j < PL; ++j) ord[j] = mine && j == best_j ? 0u : ord[j];
          lane_best<PL>(ord, logit, best, best_j, best_logit);
        }
        __syncwarp();
      }
    }
  }

  *e_out = my_e;
  *w_out = slot_weight<kV1>(a, lane, my_valid, s, m, denom, post_weight);
  return lane < a.K;
}

/* Writes slot k = lane of token t: the workspace ids/weights and the optional host outputs. */
__device__ __forceinline__ void store_route(const fp8moe_routing_args& a, int64_t t, int32_t k, int32_t e, float w) {
  const int64_t o = t * a.K + k;
  a.ids[o] = e;
  a.weights[o] = w;
  if (a.ids_out.data) static_cast<int32_t*>(a.ids_out.data)[t * a.ids_out.s[0] + k * a.ids_out.s[1]] = e;
  if (a.weights_out.data) static_cast<float*>(a.weights_out.data)[t * a.weights_out.s[0] + k * a.weights_out.s[1]] = w;
}

/* Experts per lane for E (≤ 2048): the smallest instantiated PL with 32·PL ≥ E. */
__host__ __device__ constexpr int lane_experts(int32_t E) {
  return E <= 32 ? 1 : E <= 64 ? 2 : E <= 128 ? 4 : E <= 256 ? 8 : E <= 512 ? 16 : E <= 1024 ? 32 : 64;
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_ROUTING_TOKEN_CUH */
