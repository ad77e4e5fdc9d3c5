"""The torch path on the CPU backend: against the pure-torch reference, the custom ops (schema, fake
implementation, torch.compile(fullgraph=True)), out=, and refusals raised through the op."""
import numpy as np
import pytest

import fp8moe
from conftest import FORMATS, make_problem, needs_torch, rel_err, to_numpy, to_torch, torch

pytestmark = needs_torch

ROUTINGS = ("DEFAULT", "RENORMALIZE", "DEEPSEEK_V3", "PRECOMPUTED")


def torch_problem(fmt, device="cpu", **kw):
    return {k: to_torch(v).to(device) for k, v in make_problem(fmt, **kw).items()}


def layer_args(p, routing, k=4):
    args = dict(w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"], w2_scale=p["w2_scale"], routing=routing,
                top_k=k)
    if routing == "DEEPSEEK_V3":
        args.update(n_group=4, topk_group=2, routed_scaling_factor=2.5, routing_bias=p["routing_bias"])
    return args


def reference(p, routing, fmt, k=4):
    import reference as ref
    if routing == "PRECOMPUTED":
        ids, w = precomputed(p, k)
    else:
        ids, w = ref.route(p["router_logits"], routing, k, 4, 2, 2.5 if routing == "DEEPSEEK_V3" else 1.0,
                           p["routing_bias"])
    return ref.moe(p["hidden_states"], p["w13"], p["w13_scale"], p["w2"], p["w2_scale"], ids, w, fmt)


def precomputed(p, k):
    t, e = p["router_logits"].shape
    g = torch.Generator().manual_seed(3)
    ids = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(t)]).to(p["w13"].device)
    w = torch.rand(t, k, generator=g).to(p["w13"].device)
    return ids, w


def run(p, routing, fmt, k=4, **kw):
    args = layer_args(p, routing, k)
    logits = p["router_logits"]
    if routing == "PRECOMPUTED":
        ids, w = precomputed(p, k)
        args.update(topk_ids=ids, topk_weights=w)
        logits = None
    args.update(kw)
    return fp8moe.fused_moe(p["hidden_states"], logits, quant_format=fmt, **args)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("routing", ROUTINGS)
def test_against_pure_torch_reference(routing, fmt):
    p = torch_problem(fmt)
    got = run(p, routing, fmt)
    want = reference(p, routing, fmt)
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    # The CPU backend and the reference agree to the bit here; 1e-3 still fails a 1% scale error.
    assert rel_err(got.float().numpy(), want.float().numpy()) < 1e-3


def test_torch_and_numpy_paths_give_the_same_bits():
    np_p = make_problem("FP8_BLOCK128")
    a = fp8moe.fused_moe(np_p["hidden_states"], np_p["router_logits"], w13=np_p["w13"], w13_scale=np_p["w13_scale"],
                         w2=np_p["w2"], w2_scale=np_p["w2_scale"], routing="RENORMALIZE", top_k=4,
                         quant_format="FP8_BLOCK128")
    b = run(torch_problem("FP8_BLOCK128"), "RENORMALIZE", "FP8_BLOCK128")
    assert np.array_equal(a.view(np.uint16), to_numpy(b).view(np.uint16))


def test_out_and_routing_outputs_through_the_out_op():
    p = torch_problem("FP8_BLOCK128")
    out = torch.full((6, 256), 7.0, dtype=torch.float32)
    ids = torch.full((6, 4), -1, dtype=torch.int32)
    weights = torch.zeros(6, 4)
    got = run(p, "DEEPSEEK_V3", "FP8_BLOCK128", out=out, routing_ids_out=ids, routing_weights_out=weights)
    assert got is out and not (out == 7.0).any()
    assert torch.allclose(weights.sum(1), torch.full((6,), 2.5), rtol=1e-5) and (ids >= 0).all()
    want = run(p, "DEEPSEEK_V3", "FP8_BLOCK128", out_dtype=torch.float32)
    assert torch.equal(out, want)


def test_non_contiguous_views_are_not_copied():
    p = torch_problem("FP8_PER_TENSOR")
    base = run(p, "RENORMALIZE", "FP8_PER_TENSOR")
    p["router_logits"] = p["router_logits"].t().contiguous().t()
    p["w13_scale"] = torch.stack([p["w13_scale"], p["w13_scale"]], 1)[:, 0]  # stride 2
    assert not p["router_logits"].is_contiguous() and p["w13_scale"].stride() == (2,)
    assert torch.equal(base, run(p, "RENORMALIZE", "FP8_PER_TENSOR"))


def test_refusal_raises_through_the_custom_op():
    p = torch_problem("FP8_BLOCK128")
    p["router_logits"] = p["router_logits"].to(torch.int32)
    with pytest.raises(fp8moe.UnsupportedDtypeError, match="router_logits: dtype is not accepted; got int32"):
        run(p, "RENORMALIZE", "FP8_BLOCK128")


def test_opcheck():
    p = torch_problem("FP8_BLOCK128")
    args = (p["hidden_states"], p["router_logits"], p["w13"], p["w13_scale"], p["w2"], p["w2_scale"], None, None,
            None, None, None, None, "RENORMALIZE", "FP8_BLOCK128", "SWIGLU", "GATE_FIRST", 4, 8, 0, 8, 0, 0, 1.0,
            False, None, "", "")
    torch.library.opcheck(torch.ops.fp8moe.fused_moe.default, args,
                          test_utils=("test_faketensor", "test_aot_dispatch_static"))


def test_torch_compile_fullgraph():
    p = torch_problem("FP8_BLOCK128")

    def layer(hidden, logits):
        y = fp8moe.fused_moe(hidden * 1.0, logits, w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"],
                             w2_scale=p["w2_scale"], routing="RENORMALIZE", top_k=4, quant_format="FP8_BLOCK128")
        return y.float() * 2.0

    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    got = compiled(p["hidden_states"], p["router_logits"])
    assert torch.equal(got, layer(p["hidden_states"], p["router_logits"]))
