"""DLPack dtype codes for numpy (with ml_dtypes' bfloat16 / float8) and torch dtypes, and their names.

Only the *description* of a dtype lives here; which dtypes an argument accepts is the plugin's business
(query_capabilities / the refusal message), so any dtype with a DLPack code is passed through unchanged.
"""
from . import _abi

_NAMES = {
    (_abi.DTYPE_FLOAT, 16): "float16", (_abi.DTYPE_FLOAT, 32): "float32", (_abi.DTYPE_FLOAT, 64): "float64",
    (_abi.DTYPE_BFLOAT, 16): "bfloat16", (_abi.DTYPE_FLOAT8_E4M3FN, 8): "float8_e4m3fn",
    (_abi.DTYPE_FLOAT8_E5M2, 8): "float8_e5m2", (_abi.DTYPE_BOOL, 8): "bool",
}
for _bits in (8, 16, 32, 64):
    _NAMES[(_abi.DTYPE_INT, _bits)] = f"int{_bits}"
    _NAMES[(_abi.DTYPE_UINT, _bits)] = f"uint{_bits}"
for _bits in (64, 128):
    _NAMES[(_abi.DTYPE_COMPLEX, _bits)] = f"complex{_bits}"
_CODES = {name: key for key, name in _NAMES.items()}


def dtype_name(code, bits):
    """A readable name for a DLPack (code, bits), e.g. (4, 16) -> "bfloat16"."""
    return _NAMES.get((code, bits), f"dlpack(code={code},bits={bits})")


def code_of(name):
    """(code, bits) for a dtype name ("bfloat16", "float8_e4m3fn", ...), or None when DLPack has none."""
    return _CODES.get(name)


def name_of(dtype):
    """The canonical name of a numpy or torch dtype: "float32", "bfloat16", "float8_e4m3fn", ..."""
    text = str(dtype)
    return text[len("torch."):] if text.startswith("torch.") else text


def numpy_dtype(name):
    """The numpy dtype for a name; bfloat16 and the float8 types come from ml_dtypes."""
    import numpy as np
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        try:
            import ml_dtypes
        except ImportError as exc:  # numpy has no bf16/fp8 of its own
            raise ImportError(f"numpy arrays of {name} need the ml_dtypes package (pip install ml_dtypes)") from exc
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def torch_dtype(name):
    import torch
    return getattr(torch, name)
