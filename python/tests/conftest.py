"""Shared problem builders. The library comes from the normal lookup order ($FP8MOE_LIBRARY in CI)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

try:
    import torch
except ImportError:  # the numpy tests still run
    torch = None

import ml_dtypes  # noqa: E402

FORMATS = ("FP8_PER_TENSOR", "FP8_BLOCK128", "FP8_PER_CHANNEL")


def scale_shapes(fmt, e, h, i):
    if fmt == "FP8_PER_TENSOR":
        return (e,), (e,)
    if fmt == "FP8_BLOCK128":
        return (e, 2 * i // 128, h // 128), (e, h // 128, i // 128)
    return (e, 2 * i), (e, h)


def random_e4m3(rng, shape):
    """e4m3fn codes with |x| < 2 (never NaN, never saturated)."""
    codes = (rng.integers(0, 64, shape, dtype=np.uint8) | (rng.integers(0, 2, shape, dtype=np.uint8) << 7))
    return codes.view(ml_dtypes.float8_e4m3fn)


def make_problem(fmt="FP8_BLOCK128", t=6, h=256, i=128, e=8, seed=0):
    """numpy arrays for one layer: bf16 hidden, fp32 logits/bias, e4m3fn weights, fp32 scales."""
    rng = np.random.default_rng(seed)
    s13, s2 = scale_shapes(fmt, e, h, i)
    return dict(
        hidden_states=rng.uniform(-1, 1, (t, h)).astype(ml_dtypes.bfloat16),
        router_logits=rng.standard_normal((t, e)).astype(np.float32),
        routing_bias=rng.uniform(-0.1, 0.1, (e,)).astype(np.float32),
        w13=random_e4m3(rng, (e, 2 * i, h)),
        w13_scale=(rng.uniform(0.5, 1.5, s13) / 32).astype(np.float32),
        w2=random_e4m3(rng, (e, h, i)),
        w2_scale=(rng.uniform(0.5, 1.5, s2) / 16).astype(np.float32),
    )


def to_torch(x):
    """A numpy array (ml_dtypes included) as a torch tensor sharing its memory."""
    name = str(x.dtype)
    if name == "bfloat16":
        return torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
    if name == "float8_e4m3fn":
        return torch.from_numpy(x.view(np.uint8)).view(torch.float8_e4m3fn)
    return torch.from_numpy(x)


def to_numpy(t):
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
    return t.numpy()


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
