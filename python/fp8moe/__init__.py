"""fp8moe: fused FP8 Mixture-of-Experts through the fp8moe plugin's C ABI (ctypes; no compiled extension).

    import fp8moe
    out = fp8moe.fused_moe(hidden, logits, w13=w13, w13_scale=s13, w2=w2, w2_scale=s2,
                           routing="DEEPSEEK_V3", top_k=8, n_group=8, topk_group=4,
                           routed_scaling_factor=2.5, quant_format="FP8_BLOCK128")

python/README.md documents the API.
"""
from ._library import SONAME, BackendInfo, Library, load
from .capabilities import Activation, Argument, Capabilities, Limits, QuantFormat, RoutingMethod
from .context import Context, ContextInfo, capabilities, context
from .errors import (AbiMismatchError, BackendUnavailableError, DataError, DeviceError, Error, InternalError,
                     InvalidArgumentError, LibraryNotFoundError, OutOfMemoryError, UnsupportedDtypeError,
                     UnsupportedError, WorkspaceTooSmallError, WrongDeviceError)
from .moe import Support, fused_moe, supports
from .adapters import fused_experts, trtllm_fp8_block_scale_moe, trtllm_fp8_per_tensor_scale_moe

__version__ = "1.0.0"


def library(path=None):
    """The loaded, negotiated plugin (lookup order: path, $FP8MOE_LIBRARY, the wheel's copy, the SONAME)."""
    return load(path)


def backend_info(backend, library=None):
    """fp8moe_backend_info of "cpu" or "cuda": compiled in, available, device count and name, or why not."""
    return load(library).backend_info(backend)


def version(library=None):
    """The loaded library's version string, e.g. "1.0.0"."""
    return load(library).version


def _register_torch_ops():
    """Registers torch.ops.fp8moe.* when torch is importable (done at import so torch.compile sees them)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    from . import torch_ops  # noqa: F401
    return True


HAS_TORCH = _register_torch_ops()

__all__ = [
    "SONAME", "Library", "BackendInfo", "load", "library", "backend_info", "version", "Context", "ContextInfo",
    "context", "capabilities", "Capabilities", "RoutingMethod", "QuantFormat", "Activation", "Argument",
    "Limits", "fused_moe", "supports", "Support", "Error", "InvalidArgumentError", "UnsupportedDtypeError",
    "UnsupportedError", "AbiMismatchError", "BackendUnavailableError", "WorkspaceTooSmallError",
    "WrongDeviceError", "OutOfMemoryError", "DeviceError", "InternalError", "DataError", "LibraryNotFoundError",
    "HAS_TORCH", "fused_experts", "trtllm_fp8_block_scale_moe", "trtllm_fp8_per_tensor_scale_moe",
]
