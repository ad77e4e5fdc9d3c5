/* routing_team.cuh — one token routed by a team of warps, one expert per lane (docs/GPU.md "Team routing"):
 * the small-T prologue's route at T = 1, where the token's routing latency is the decode step's (GEMM1 cannot
 * start streaming weights before the experts are known). Same contract and the same bits as route_token
 * (routing_token.cuh): the same key and weight arithmetic per expert, the same group rounds (pick_groups), the
 * same slot weights (slot_weight), and selection in the same total order (key descending, ties to the lower
 * expert index, the order word of −Inf for every unselectable expert so that fillers are the lowest-index
 * ones).
 *
 * The softmax over all experts (DEFAULT, RENORMALIZE_NAIVE) adds two exchanges first: the team's maximum and its
 * denominator, summed in route_token's order.
 *
 * Why: one warp per token runs the chain in series — 8 unrolled sigmoids per lane, DeepSeek-V3's group scores
 * over shared memory, then K rounds of two warp reductions and a rescan — ~8,500 cycles at deepseek-v3 (the
 * phase trace in docs/GPU.md). A team of W = ⌈E/32⌉ warps takes one sigmoid per lane and replaces the K
 * dependent rounds by ranks, computed with independent instructions:
 *   1. each warp ranks its 32 keys (31 shuffles, all issued back to back);
 *   2. DeepSeek-V3 group limiting where a group is one warp (E = 32·n_group): a group's score is its rank-0 plus
 *      rank-1 key; every warp reads the W scores and runs pick_groups itself; an unpicked warp's keys become
 *      −Inf, so its ranks become its lane order;
 *   3. each warp's K best are candidates (the global K best are among them); a candidate's global rank is its
 *      rank in its warp plus, for every other warp, how many of that warp's candidates precede it — exact for
 *      every candidate whose global rank is below K, which are the ones kept;
 *   4. warp 0 reads the K slots and computes the weights as route_token does.
 * Three named barriers (id 1) over the team's threads. */
#ifndef FP8MOE_KERNELS_ROUTING_TEAM_CUH
#define FP8MOE_KERNELS_ROUTING_TEAM_CUH

#include "routing_token.cuh"

namespace fp8moe {

constexpr int kTeamMaxWarps = FP8MOE_PROLOGUE_TEAM_MAX_EXPERTS / 32; /* one expert per lane */

/* The team's shared memory (in the prologue's dynamic shared memory). A candidate is its order word and its
 * index in one 64-bit word, so that "precedes" is one unsigned comparison: larger order word first, then the
 * lower index (its complement is larger). */
struct team_shared {
  unsigned long long cand[kTeamMaxWarps * 32]; /* warp w's candidate of rank r at w·K + r */
  float cand_post[kTeamMaxWarps * 32];
  float exps[kTeamMaxWarps * 32]; /* softmax over all experts: e^(x − max) of expert e at e */
  float group_score[kTeamMaxWarps]; /* DeepSeek-V3's group scores; the softmax's per-warp maxima */
  unsigned long long slot[32]; /* slot k's candidate word */
  float slot_post[32];
};

__device__ __forceinline__ unsigned long long candidate_word(uint32_t ord, int32_t e) {
  return (static_cast<unsigned long long>(ord) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(e));
}

__device__ __forceinline__ int team_warps(int32_t E) { return (E + 31) / 32; }

/* The team's barrier (named barrier 1; common.cuh) */
__device__ __forceinline__ void team_sync(int threads) { named_sync<1>(threads); }
__device__ __forceinline__ void team_arrive(int threads) { named_arrive<1>(threads); }

/* Routes token t with warps 0..team_warps(E)−1 of the block (each converged; the host's rule,
 * fp8moe_cuda_plan_prologue_team, holds: E ≤ 512, K ≤ 32, limited groups of 32 experts). Warp 0's
 * lane k < K gets slot k (*e_out global expert id, *w_out × routed_scaling_factor) and returns true; every
 * other lane returns false, the other warps as soon as their part is done. */
__device__ __forceinline__ bool route_token_team(const fp8moe_routing_args& a, int64_t t, team_shared& sh,
                                                 int32_t* e_out, float* w_out) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int32_t E = a.E, K = a.K, method = a.method;
  const int W = team_warps(E), threads = 32 * W;
  const int32_t e = 32 * warp + lane;
  const bool in = e < E;
  const bool with_bias = method == FP8MOE_ROUTING_DEEPSEEK_V3 && a.bias.data != nullptr;
  float x = in ? load_f32(a.logits.data, a.logits.dt, t * a.logits.s[0] + e * a.logits.s[1]) : 0.0f;
  const float b = with_bias && in ? load_f32(a.bias.data, a.bias.dt, e * a.bias.s[0]) : 0.0f;

  /* The key and the value the weight is made of ("post"), as route_token per register. */
  const bool selectable = in && !(isnan(x) || x == -INFINITY);
  if (x == INFINITY) x = FLT_MAX;
  const bool post_weight = weight_is_post(method);
  float key, post;
  if (softmax_over_all(method)) {
    /* route_token's softmax: the maximum over the selectable logits (any order gives the same value), then lane
     * l's partial denominator over its experts l, l + 32, … in index order (here: warps 0, 1, … of column l),
     * then warp_sum's butterfly; every warp forms the same denominator. */
    const float wm = warp_max(selectable ? x : -INFINITY);
    if (lane == 0) sh.group_score[warp] = wm;
    team_sync(threads);
    float m = -INFINITY;
    for (int w = 0; w < W; ++w) m = fmaxf(m, sh.group_score[w]);
    const float ex = selectable ? fp8moe_rm_exp(x - m) : 0.0f;
    sh.exps[e] = ex;
    team_sync(threads);
    float part = 0.0f;
    /* route_token adds only its selectable terms; the others are +0 here, and adding +0 to a sum that starts at
     * +0 and only grows leaves its bits alone */
    for (int w = 0; w < W; ++w) part += sh.exps[32 * w + lane];
    const float denom = warp_sum(part);
    key = selectable ? ex / denom : -INFINITY;
    post = key; /* the weight (weight_is_post) */
  } else if (method == FP8MOE_ROUTING_SIGMOID || method == FP8MOE_ROUTING_SIGMOID_RENORM ||
      method == FP8MOE_ROUTING_DEEPSEEK_V3) {
    float num, den;
    fp8moe_rm_sigmoid_terms(x, &num, &den);
    const float sg = FP8MOE_RM_DIV(num, den); /* = fp8moe_rm_sigmoid(x) */
    const float k2 = sg + (with_bias ? b : 0.0f);
    key = selectable ? (isnan(k2) ? -INFINITY : k2) : -INFINITY;
    post = sg;
  } else {
    key = selectable ? x : -INFINITY; /* raw logits */
    post = x;
  }
  uint32_t ord = in ? order_word(key) : 0u;

  /* 1. Rank within the warp: how many lanes precede this one (larger order word, or equal and lower). */
  int32_t rank = 0;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const uint32_t oj = __shfl_sync(0xffffffffu, ord, j);
    rank += (oj > ord || (oj == ord && j < lane)) ? 1 : 0;
  }

  /* 2. Group limiting, one group per warp (the host's rule): score = the two largest keys' sum. */
  if (limits_groups(a)) {
    const int first = __ffs(__ballot_sync(0xffffffffu, rank == 0)) - 1;
    const int second = __ffs(__ballot_sync(0xffffffffu, rank == 1)) - 1;
    const float b1 = __shfl_sync(0xffffffffu, key, first), b2 = __shfl_sync(0xffffffffu, key, second);
    if (lane == 0) sh.group_score[warp] = b1 + b2;
    team_sync(threads);
    const float score = lane < W ? sh.group_score[lane] : 0.0f;
    const uint32_t unpicked = pick_groups(score, a.n_group, a.topk_group, lane);
    if ((unpicked >> warp) & 1u) { /* every key −Inf: the order word of −Inf on every lane, ranked by lane */
      ord = kOrderedMinusInf;
      rank = lane;
    }
  }

  /* 3. The warp's K best are its candidates; each one's global rank over every warp's candidates. */
  if (rank < K) {
    sh.cand[warp * K + rank] = candidate_word(ord, e);
    sh.cand_post[warp * K + rank] = post;
  }
  team_sync(threads);
  int kp = 1; /* lanes per candidate row: a power of two ≥ K; the 32 / kp parts split the other warps */
  while (kp < K) kp *= 2;
  const int r = lane & (kp - 1), part = lane / kp, parts = 32 / kp;
  const unsigned long long mine = r < K ? sh.cand[warp * K + r] : 0ull;
  int32_t before = 0;
  for (int w = part; w < W; w += parts) {
    if (w == warp) continue;
    for (int32_t j = 0; j < K; ++j) before += sh.cand[w * K + j] > mine ? 1 : 0;
  }
  for (int o = kp; o < 32; o *= 2) before += __shfl_xor_sync(0xffffffffu, before, o);
  const int32_t global = r + before;
  if (part == 0 && r < K && global < K) {
    sh.slot[global] = mine;
    sh.slot_post[global] = sh.cand_post[warp * K + r];
  }

  /* 4. Warp 0: slot k on lane k, then route_token's weights. */
  if (warp != 0) {
    team_arrive(threads);
    return false;
  }
  team_sync(threads);
  const unsigned long long c = lane < K ? sh.slot[lane] : 0ull;
  const float s = lane < K ? sh.slot_post[lane] : 0.0f;
  const bool valid = static_cast<uint32_t>(c >> 32) > kOrderedMinusInf;
  *e_out = static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(c));
  *w_out = slot_weight<false>(a, lane, valid, s, 0.0f, 0.0f, post_weight);
  return lane < K;
}

}  // namespace fp8moe

#endif /* FP8MOE_KERNELS_ROUTING_TEAM_CUH */
