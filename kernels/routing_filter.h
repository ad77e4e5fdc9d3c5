/* routing_filter.h — the bound and the three decisions of the filtered selection for DeepSeek-V3 routing
 * (routing_token.cuh `route_filtered`; docs/GPU.md "Routing's critical path", item 6). Compiled as C too: the host
 * test (tests/test_routing_filter.c) feeds these same decisions keys that are off by up to the bound, adversarially,
 * and checks that they select exactly what the exact keys select.
 *
 * The idea: the exact key σ(x) + bias (src/routing_math.h, ~50 instructions per expert) decides the selection only
 * near its boundaries. The warp first computes every key approximately (the SFU's exp and reciprocal, ~8
 * instructions), picks the groups from the approximate scores when the margin between the last picked and the
 * first unpicked group is wider than the error can close, keeps as candidates only the experts of the picked groups
 * that could still be among the top K, and computes the exact key of those few (one per lane). Selection among the
 * candidates then uses exact keys only, so the bits are those of the exact path; a token whose margins are too
 * narrow (ties, near-ties, huge biases) takes the exact path. */
#ifndef FP8MOE_KERNELS_ROUTING_FILTER_H
#define FP8MOE_KERNELS_ROUTING_FILTER_H

#if defined(__CUDACC__)
#define FP8MOE_RF_FN __host__ __device__ __forceinline__
#else
#define FP8MOE_RF_FN static inline
#endif

/* Candidates a warp evaluates exactly: one per lane. */
#define FP8MOE_RF_MAX_CANDIDATES 32

/* What the bound below assumes of the approximate sigmoid: |σ'(x) − fp8moe_rm_sigmoid(x)| ≤ 2^-20 for every
 * sanitized x. σ' = (x < 0 ? e : 1) · rcp(1 + e), e = ex2(−|x|·log2 e) (ex2.approx.ftz ≤ 2 ulp, rcp.approx.ftz 1 ulp:
 * kernels/common.cuh): the argument's rounding moves e by |x|·2^-24 relative, ex2 by 2^-22, and σ's slope e/(1+e)²
 * ≤ ¼ (times |x|: ≤ 0.224) scales both; 1 + e, rcp and the product add 2^-24, 2^-23 and 2^-24 — ≤ 2^-21.6 in all
 * (the flush to zero moves only results below 2^-126). fp8moe_rm_sigmoid is within 2.5 ulp (≤ 2^-22.6) of σ. The
 * host test perturbs exact sigmoids by up to this much. */
#define FP8MOE_RF_SIGMOID_ERR 9.5367431640625e-07f /* 2^-20 */

/* A bound, with a margin of ≥ 8×, on |approximate key − exact key| for a token whose largest |approximate key| is
 * max_abs: the sigmoid's error (FP8MOE_RF_SIGMOID_ERR) plus the two roundings of "+ bias" (≤ 2^-23·|key| together)
 * is at most 2^-20 + 2^-23·(max_abs + 2^-19); this returns 2^-17 + 2^-19·max_abs. The margin also absorbs the
 * roundings of the comparisons below (each ≤ 2^-23 relative). */
FP8MOE_RF_FN float fp8moe_rf_delta(float max_abs) { return 7.62939453125e-06f + max_abs * 1.9073486328125e-06f; }

/* Group scores (sum of a group's two largest keys) are off by at most 2δ plus two roundings. When the last picked
 * group's approximate score exceeds the first unpicked group's by more than 4δ, every picked group's exact score
 * exceeds every unpicked group's, so the exact rounds (ties to the lower index) pick the same set. */
FP8MOE_RF_FN int fp8moe_rf_groups_certain(float last_picked, float first_unpicked, float delta) {
  return last_picked - first_unpicked > 4.0f * delta;
}

/* Each picked group's two largest approximate keys belong to two experts whose exact keys are ≥ min_second − δ
 * (min_second: the smallest second-largest approximate key over the picked groups), 2·topk_group ≥ K of them. An
 * expert with an approximate key below min_second − 3δ has an exact key below min_second − 2δ: K experts are
 * strictly ahead of it, so it cannot be selected. The rest of the picked groups' experts are the candidates. */
FP8MOE_RF_FN float fp8moe_rf_candidate_floor(float min_second, float delta) { return min_second - 3.0f * delta; }

#endif /* FP8MOE_KERNELS_ROUTING_FILTER_H */
