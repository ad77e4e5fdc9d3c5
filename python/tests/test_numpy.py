"""The numpy path (CPU backend): results, strides without copies, expert slices, routing outputs."""
import ml_dtypes
import numpy as np
import pytest

import fp8moe
from conftest import FORMATS, make_problem, rel_err, scale_shapes


def run(p, **kw):
    args = dict(w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"], w2_scale=p["w2_scale"])
    args.update(kw)
    hidden = args.pop("hidden_states", p["hidden_states"])
    logits = args.pop("router_logits", p["router_logits"])
    return fp8moe.fused_moe(hidden, logits, **args)


def test_output_like_hidden_and_deterministic():
    p = make_problem()
    a = run(p, routing="RENORMALIZE", top_k=2, quant_format="FP8_BLOCK128")
    assert a.dtype == ml_dtypes.bfloat16 and a.shape == (6, 256)
    assert np.isfinite(a.astype(np.float32)).all() and np.abs(a.astype(np.float32)).max() > 0
    b = run(p, routing="RENORMALIZE", top_k=2, quant_format="FP8_BLOCK128")
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


@pytest.mark.parametrize("fmt", FORMATS)
def test_precomputed_single_expert_matches_numpy(fmt):
    """One token routed to one expert with weight 1: out = W2 · act(W13 · x), checked in float64 with the
    fp8 rounding of the activations ignored (a loose bound that a wrong layout or scale still fails)."""
    p = make_problem(fmt, t=3)
    ids = np.array([[2], [5], [7]], np.int32)
    out = run(p, router_logits=None, topk_ids=ids, topk_weights=np.ones((3, 1), np.float32), quant_format=fmt,
              out_dtype="float32")
    x = p["hidden_states"].astype(np.float64)
    inter = p["w13"].shape[1] // 2
    for t, e in enumerate(ids[:, 0]):
        w13 = p["w13"][e].astype(np.float64) * _expand(p["w13_scale"][e], p["w13"].shape[1:], fmt)
        w2 = p["w2"][e].astype(np.float64) * _expand(p["w2_scale"][e], p["w2"].shape[1:], fmt)
        h = w13 @ x[t]
        g, u = h[:inter], h[inter:]
        ref = w2 @ (g / (1 + np.exp(-g)) * u)
        assert rel_err(out[t], ref) < 0.08, (fmt, t)


def _expand(scale, shape, fmt):
    if fmt == "FP8_PER_TENSOR":
        return np.full(shape, scale)
    if fmt == "FP8_PER_CHANNEL":
        return np.repeat(scale[:, None], shape[1], axis=1)
    return np.kron(scale, np.ones((128, 128)))


def test_strided_inputs_are_read_in_place():
    """Logits as a transposed view and a column-strided hidden_scale give the compact result: no copies."""
    p = make_problem()
    base = run(p, routing="DEFAULT", top_k=3, quant_format="FP8_BLOCK128")
    logits_t = np.ascontiguousarray(p["router_logits"].T).T  # [T,E] with strides (1, T)
    assert not logits_t.flags.c_contiguous
    again = run(p, router_logits=logits_t, routing="DEFAULT", top_k=3, quant_format="FP8_BLOCK128")
    assert np.array_equal(base.view(np.uint16), again.view(np.uint16))


def test_e4m3_hidden_with_transposed_block_scale():
    p = make_problem()
    q = p["hidden_states"].astype(np.float32)
    scale = np.abs(q.reshape(6, 2, 128)).max(-1) / 448.0  # [T, H/128]
    codes = (q / np.repeat(scale, 128, axis=1)).astype(ml_dtypes.float8_e4m3fn)
    a = run(p, hidden_states=codes, hidden_scale=scale, routing="RENORMALIZE", top_k=2, quant_format="FP8_BLOCK128")
    scale_t = np.ascontiguousarray(scale.T).T  # FlashInfer stores it [H/128, T]
    b = run(p, hidden_states=codes, hidden_scale=scale_t, routing="RENORMALIZE", top_k=2,
            quant_format="FP8_BLOCK128")
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))
    c = run(p, routing="RENORMALIZE", top_k=2, quant_format="FP8_BLOCK128")  # quantized inside: the same codes
    assert np.array_equal(a.view(np.uint16), c.view(np.uint16))


def test_expert_slices_add_up_to_the_whole_layer():
    """Expert parallelism in one process: the partial outputs of disjoint slices sum to the full output."""
    p = make_problem(e=8)
    kw = dict(routing="DEEPSEEK_V3", top_k=4, n_group=4, topk_group=2, routed_scaling_factor=2.5,
              routing_bias=p["routing_bias"], quant_format="FP8_BLOCK128", out_dtype="float32")
    full = run(p, **kw)
    parts = []
    for off in (0, 4):
        sl = slice(off, off + 4)
        parts.append(run(p, w13=p["w13"][sl], w13_scale=p["w13_scale"][sl], w2=p["w2"][sl],
                         w2_scale=p["w2_scale"][sl], num_experts=8, local_expert_offset=off, **kw))
    assert np.abs(parts[0]).max() > 0 and np.abs(parts[1]).max() > 0
    assert rel_err(parts[0] + parts[1], full) < 1e-5
    assert rel_err(parts[0], full) > 1e-2  # a slice alone is not the layer


def test_routing_outputs():
    p = make_problem(e=8)
    ids = np.full((6, 4), -1, np.int32)
    weights = np.zeros((6, 4), np.float32)
    run(p, routing="DEEPSEEK_V3", top_k=4, n_group=4, topk_group=2, routed_scaling_factor=2.5,
        routing_bias=p["routing_bias"], quant_format="FP8_BLOCK128", routing_ids_out=ids,
        routing_weights_out=weights)
    assert ((ids >= 0) & (ids < 8)).all()
    assert np.allclose(weights.sum(1), 2.5, rtol=1e-5)
    for row in ids:
        assert len(set(row)) == 4 and len(set(row // 2)) <= 2  # at most topk_group groups of 2


def test_fp16_hidden_and_fp32_output():
    """The bf16 inputs are exact in fp16 (|x| < 1, 8-bit mantissas), so both give the same bits."""
    p = make_problem("FP8_PER_CHANNEL")
    a = run(p, routing="SIGMOID", top_k=2, quant_format="FP8_PER_CHANNEL", out_dtype="float32")
    b = run(p, hidden_states=p["hidden_states"].astype(np.float16), routing="SIGMOID", top_k=2,
            quant_format="FP8_PER_CHANNEL", out_dtype="float32")
    assert a.dtype == np.float32 and np.array_equal(a, b)


def test_zero_tokens():
    p = make_problem("FP8_PER_TENSOR", t=0)
    out = run(p, routing="RENORMALIZE", top_k=2, quant_format="FP8_PER_TENSOR")
    assert out.shape == (0, 256)


def test_workspace_is_reused():
    p = make_problem()
    run(p, routing="RENORMALIZE", top_k=2, quant_format="FP8_BLOCK128")
    buf = fp8moe.context("cpu").workspaces.buf
    run(p, routing="RENORMALIZE", top_k=2, quant_format="FP8_BLOCK128")
    assert fp8moe.context("cpu").workspaces.buf is buf


def test_static_per_tensor_scales_and_adapter_products():
    """FlashInfer's per-tensor adapter (scale products) equals fused_moe with the separate factors."""
    p = make_problem("FP8_PER_TENSOR")
    a1, a2 = np.float32(1 / 200), np.float32(1 / 50)
    codes = (p["hidden_states"].astype(np.float32) / a1).astype(ml_dtypes.float8_e4m3fn)
    direct = run(p, hidden_states=codes, hidden_scale=np.array([a1], np.float32), routing="RENORMALIZE",
                 top_k=2, quant_format="FP8_PER_TENSOR", a2_scale=np.array([a2], np.float32),
                 gate_up_order="UP_FIRST")
    w1, w2 = p["w13_scale"], p["w2_scale"]
    via = fp8moe.trtllm_fp8_per_tensor_scale_moe(
        p["router_logits"], None, codes, p["w13"], w1 * a1 / a2, w1 * a1, p["w2"], a2 * w2, 8, 2, None, None,
        128, 0, 8, None, False, routing_method_type=1)
    assert rel_err(via.astype(np.float32), direct.astype(np.float32)) < 1e-2


def test_fused_experts_adapter_is_precomputed():
    p = make_problem("FP8_PER_CHANNEL")
    ids = np.array([[0, 3], [1, 2], [7, 6], [5, 4], [2, 2], [3, 0]], np.int64)
    w = np.random.default_rng(1).uniform(0, 1, (6, 2)).astype(np.float32)
    ref = run(p, router_logits=None, topk_ids=ids, topk_weights=w, quant_format="FP8_PER_CHANNEL")
    got = fp8moe.fused_experts(p["hidden_states"], p["w13"], p["w2"], w, ids, use_fp8_w8a8=True,
                               per_channel_quant=True, w1_scale=p["w13_scale"][..., None],
                               w2_scale=p["w2_scale"][..., None])
    assert np.array_equal(ref.view(np.uint16), got.view(np.uint16))
    with pytest.raises(fp8moe.InvalidArgumentError, match="expert_map"):
        fp8moe.fused_experts(p["hidden_states"], p["w13"], p["w2"], w, ids, use_fp8_w8a8=True,
                             expert_map=np.arange(8))


def test_block_scale_adapter_takes_flashinfer_layout():
    p = make_problem("FP8_BLOCK128", e=8)
    kw = dict(routing="DEEPSEEK_V3", top_k=4, n_group=4, topk_group=2, routed_scaling_factor=2.5,
              routing_bias=p["routing_bias"], quant_format="FP8_BLOCK128")
    ref = run(p, **kw)
    got = fp8moe.trtllm_fp8_block_scale_moe(
        p["router_logits"], p["routing_bias"], p["hidden_states"], None, p["w13"], p["w13_scale"], p["w2"],
        p["w2_scale"], 8, 4, 4, 2, 128, 0, 8, 2.5, routing_method_type=2)
    assert np.array_equal(ref.view(np.uint16), got.view(np.uint16))
    with pytest.raises(fp8moe.InvalidArgumentError, match="use_shuffled_weight"):
        fp8moe.trtllm_fp8_block_scale_moe(
            p["router_logits"], None, p["hidden_states"], None, p["w13"], p["w13_scale"], p["w2"],
            p["w2_scale"], 8, 4, 4, 2, 128, 0, 8, 2.5, routing_method_type=2, use_shuffled_weight=True)


def test_scale_shapes_helper_matches_the_plugin():
    caps = fp8moe.capabilities()
    for fmt in FORMATS:
        assert fmt in caps.quant_formats
        assert len(scale_shapes(fmt, 8, 256, 128)) == 2
