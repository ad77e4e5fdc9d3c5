"""Every refusal reachable from Python raises the status's fp8moe.Error subclass with the plugin's message
(argument name, what was received, what is accepted), leaves the output untouched, and supports() gives
the same answer without running."""
import ctypes

import ml_dtypes
import numpy as np
import pytest

import fp8moe
from fp8moe import _abi, tensors
from conftest import make_problem

SENTINEL = 3.0


def call(p, **over):
    kw = dict(w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"], w2_scale=p["w2_scale"], routing="RENORMALIZE",
              top_k=2, quant_format="FP8_BLOCK128")
    kw.update(over)
    hidden = kw.pop("hidden_states", p["hidden_states"])
    logits = kw.pop("router_logits", p["router_logits"])
    return hidden, logits, kw


CASES = {
    "logits dtype": (fp8moe.UnsupportedDtypeError,
                     "router_logits: dtype is not accepted; got int8; accepted float32, bfloat16, float16",
                     lambda p: call(p, router_logits=p["router_logits"].astype(np.int8))),
    "hidden fp32": (fp8moe.UnsupportedDtypeError, "hidden_states: dtype is not accepted; got float32",
                    lambda p: call(p, hidden_states=p["hidden_states"].astype(np.float32))),
    "scale rank": (fp8moe.InvalidArgumentError, "w13_scale: wrong number of dimensions",
                   lambda p: call(p, quant_format="FP8_PER_TENSOR")),
    "negative stride": (fp8moe.InvalidArgumentError, "hidden_states: negative stride in dim 0",
                        lambda p: call(p, hidden_states=p["hidden_states"][::-1])),
    "llama4 top_k": (fp8moe.InvalidArgumentError, "top_k: this routing method selects one expert; got 2",
                     lambda p: call(p, routing="LLAMA4")),
    "bias with renormalize": (fp8moe.InvalidArgumentError, "routing_bias",
                              lambda p: call(p, routing_bias=p["routing_bias"])),
    "a1_scale with block": (fp8moe.InvalidArgumentError, "a1_scale",
                            lambda p: call(p, a1_scale=np.ones(1, np.float32))),
    "e4m3 without scale": (fp8moe.InvalidArgumentError, "hidden_scale",
                           lambda p: call(p, hidden_states=p["hidden_states"].astype(ml_dtypes.float8_e4m3fn))),
    "top_k above limit": (fp8moe.UnsupportedError, "top_k: above the limit; got 33; expected <= 32",
                          lambda p: call(p, top_k=33)),
    "unknown routing id": (fp8moe.InvalidArgumentError, "routing_method",
                           lambda p: call(p, routing=77)),
    "precomputed with logits": (fp8moe.InvalidArgumentError, "router_logits",
                                lambda p: call(p, routing="PRECOMPUTED", topk_ids=np.zeros((6, 2), np.int32),
                                               topk_weights=np.ones((6, 2), np.float32))),
    "output dtype": (fp8moe.UnsupportedDtypeError, "output: dtype is not accepted; got int32",
                     lambda p: call(p, out=np.full((6, 256), 7, np.int32))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refusal(case):
    exc, words, build = CASES[case]
    p = make_problem()
    hidden, logits, kw = build(p)
    out = kw.pop("out", None)
    if out is None:
        out = np.full(hidden.shape, SENTINEL, dtype=ml_dtypes.bfloat16)
    before = out.copy()
    answer = fp8moe.supports(hidden, logits, out=out, **kw)
    assert not answer and answer.status == exc.status and words in answer.message
    with pytest.raises(exc) as info:
        fp8moe.fused_moe(hidden, logits, out=out, **kw)
    assert words in info.value.message and info.value.message == answer.message
    assert info.value.status_name == answer.status_name
    assert np.array_equal(out.view(np.uint8), before.view(np.uint8))  # untouched on refusal


def test_supports_says_yes_for_a_valid_call():
    p = make_problem()
    hidden, logits, kw = call(p)
    answer = fp8moe.supports(hidden, logits, **kw)
    assert answer and answer.status == 0 and answer.message == ""


def test_data_error_names_the_slot():
    p = make_problem()
    ids = np.zeros((6, 2), np.int32)
    ids[4, 1] = 9
    out = np.full((6, 256), SENTINEL, dtype=ml_dtypes.bfloat16)
    with pytest.raises(fp8moe.DataError, match=r"topk_ids\[4\]\[1\]: expert id out of range; got 9"):
        fp8moe.fused_moe(p["hidden_states"], None, w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"],
                         w2_scale=p["w2_scale"], topk_ids=ids, topk_weights=np.ones((6, 2), np.float32),
                         quant_format="FP8_BLOCK128", out=out)
    assert (out.astype(np.float32) == SENTINEL).all()


def test_workspace_too_small():
    p = make_problem()
    hidden, logits, kw = call(p)
    with pytest.raises(fp8moe.WorkspaceTooSmallError, match="workspace_size: smaller than query_workspace"):
        fp8moe.fused_moe(hidden, logits, workspace=np.empty(16, np.uint8), **kw)


def test_wrong_device(monkeypatch):
    """A tensor described as CUDA memory given to the CPU backend: the plugin refuses it before reading."""
    real = tensors.describe

    def as_cuda(x, name):
        d = real(x, name)
        if name == "router_logits":
            d.tensor.device.device_type = _abi.DEVICE_CUDA
        return d

    monkeypatch.setattr("fp8moe.moe.describe", as_cuda)
    p = make_problem()
    hidden, logits, kw = call(p)
    with pytest.raises(fp8moe.WrongDeviceError, match="router_logits") as info:
        fp8moe.fused_moe(hidden, logits, **kw)
    assert "cpu" in info.value.message.lower()


def test_python_side_description_errors():
    p = make_problem()
    hidden, logits, kw = call(p)
    odd = np.lib.stride_tricks.as_strided(np.zeros(64, np.uint8).view(np.float32)[:8], (2, 4), (5, 4))
    with pytest.raises(fp8moe.InvalidArgumentError, match="router_logits: byte strides"):
        fp8moe.fused_moe(hidden, odd, **kw)
    with pytest.raises(ValueError, match="routing: got 'NOPE'; accepted DEFAULT"):
        fp8moe.fused_moe(hidden, logits, **dict(kw, routing="NOPE"))
    with pytest.raises(TypeError, match="quant_format= is required"):
        fp8moe.fused_moe(hidden, logits, **dict(kw, quant_format=None))


def test_error_buffer_is_not_shared_between_calls():
    """A refusal after a success carries only its own message."""
    p = make_problem()
    hidden, logits, kw = call(p)
    fp8moe.fused_moe(hidden, logits, **kw)
    with pytest.raises(fp8moe.UnsupportedError) as info:
        fp8moe.fused_moe(hidden, logits, **dict(kw, top_k=33))
    assert info.value.message.startswith("top_k:")
    assert ctypes.sizeof(_abi.MoeArgs) == 224
