"""Describing numpy arrays and torch tensors as fp8moe_tensor (DLPack-compatible) without copying.

The description keeps the array's pointer, shape and strides as they are; whether the plugin accepts those
strides, that dtype or that device is decided (and explained) by the plugin.
"""
import ctypes as C
import sys

from . import _abi
from .dtypes import code_of, name_of
from .errors import InvalidArgumentError, UnsupportedDtypeError


def is_torch(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def is_numpy(x):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


class Described:
    """An fp8moe_tensor and the ctypes arrays its pointers point into (kept alive together)."""
    __slots__ = ("tensor", "_shape", "_strides", "array")

    def __init__(self, array, data, device_type, device_id, code_bits, shape, strides):
        self.array = array
        self._shape = (C.c_int64 * max(len(shape), 1))(*shape)
        self._strides = (C.c_int64 * max(len(strides), 1))(*strides)
        t = _abi.Tensor()
        t.data = data
        t.device.device_type, t.device.device_id = device_type, device_id
        t.ndim = len(shape)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code_bits[0], code_bits[1], 1
        t.shape = C.cast(self._shape, C.POINTER(C.c_int64))
        t.strides = C.cast(self._strides, C.POINTER(C.c_int64))
        t.byte_offset = 0
        self.tensor = t


def _compact(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def describe(x, name):
    """fp8moe_tensor for a numpy array or torch tensor; `name` is the argument's name for messages."""
    dname = name_of(x.dtype)
    code_bits = code_of(dname)
    if code_bits is None:
        raise UnsupportedDtypeError(f"{name}: dtype {dname} has no DLPack code, so fp8moe cannot describe it",
                                    status_name="UNSUPPORTED_DTYPE")
    if is_torch(x):
        if x.device.type == "cuda":
            device = (_abi.DEVICE_CUDA, x.device.index if x.device.index is not None else 0)
        elif x.device.type == "cpu":
            device = (_abi.DEVICE_CPU, 0)
        else:
            device = (-1, 0)  # a device type fp8moe has no backend for: the plugin refuses it (WRONG_DEVICE)
        return Described(x, x.data_ptr(), device[0], device[1], code_bits, tuple(x.shape), tuple(x.stride()))
    if is_numpy(x):
        item = x.dtype.itemsize
        if any(s % item for s in x.strides):
            raise InvalidArgumentError(
                f"{name}: byte strides {x.strides} are not multiples of the element size {item}; "
                "fp8moe (like DLPack) counts strides in elements", status_name="INVALID_ARGUMENT")
        strides = tuple(s // item for s in x.strides)
        if x.size == 0:  # numpy gives empty arrays arbitrary strides; nothing is read, describe them compact
            strides = _compact(x.shape)
        return Described(x, x.__array_interface__["data"][0], _abi.DEVICE_CPU, 0, code_bits, x.shape, strides)
    raise TypeError(f"{name}: expected a numpy.ndarray or torch.Tensor, got {type(x).__name__}")
