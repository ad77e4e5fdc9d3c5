"""The capability/contract table as Python objects, read from the plugin's query_capabilities.

Nothing here knows which methods, formats, dtypes or limits exist: every row comes from the library, so the
Python view can never disagree with what the plugin validates against.
"""
import ctypes as C
from dataclasses import dataclass
from typing import Dict, Tuple

from . import _abi
from .dtypes import dtype_name


def _backends(mask):
    return frozenset(name for code, name in _abi.BACKEND_NAMES.items() if code and mask & (1 << code))


def _s(p):
    return p.decode() if p else ""


@dataclass(frozen=True)
class RoutingMethod:
    id: int
    name: str
    summary: str
    flags: frozenset  # e.g. {"uses_logits", "uses_bias"}
    backends: frozenset  # {"cpu", "cuda"}


@dataclass(frozen=True)
class QuantFormat:
    id: int
    name: str
    summary: str
    k_multiple: int
    backends: frozenset


@dataclass(frozen=True)
class Activation:
    id: int
    name: str
    backends: frozenset


@dataclass(frozen=True)
class Argument:
    id: int
    name: str
    shape: str
    when: str
    dtypes: Tuple[str, ...]  # e.g. ("float32", "bfloat16", "float16")
    alignment: int
    output: bool
    any_strides: bool
    inner_contiguous: bool


@dataclass(frozen=True)
class Limits:
    max_tokens: int
    max_hidden: int
    max_intermediate: int
    max_experts: int
    max_top_k: int
    max_groups: int
    min_group_size: int
    max_group_size: int


@dataclass(frozen=True)
class Capabilities:
    backend: str
    graph_capturable: bool
    host_sync_free: bool
    routing_methods: Dict[str, RoutingMethod]
    quant_formats: Dict[str, QuantFormat]
    activations: Dict[str, Activation]
    arguments: Dict[str, Argument]
    limits: Limits

    def lookup(self, table, value, what):
        """Resolves a name (case-insensitive) or an id against one of the tables; an unknown name raises
        ValueError listing the accepted ones, an unknown int is passed through for the plugin to refuse."""
        rows = getattr(self, table)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if hasattr(value, "value") and isinstance(value.value, int):  # an IntEnum
            return value.value
        row = rows.get(str(value).upper())
        if row is None:
            raise ValueError(f"{what}: got {value!r}; accepted {', '.join(rows)}")
        return row.id


def read(lib, context_handle):
    """Capabilities of a context (or of the CPU backend when context_handle is None)."""
    caps = _abi.Capabilities()
    caps.struct_size = C.sizeof(caps)
    status = lib.api.query_capabilities(context_handle, C.byref(caps))
    if status != _abi.STATUS_OK:
        from .errors import error_for
        raise error_for(status, "query_capabilities failed", lib.status_string(status))
    methods = {}
    for i in range(caps.routing_method_count):
        r = caps.routing_methods[i]
        flags = frozenset(n for bit, n in _abi.ROUTING_FLAG_NAMES.items() if r.flags & bit)
        methods[_s(r.name)] = RoutingMethod(r.id, _s(r.name), _s(r.summary), flags, _backends(r.backends))
    formats = {}
    for i in range(caps.quant_format_count):
        q = caps.quant_formats[i]
        formats[_s(q.name)] = QuantFormat(q.id, _s(q.name), _s(q.summary), q.k_multiple, _backends(q.backends))
    activations = {}
    for i in range(caps.activation_count):
        a = caps.activations[i]
        activations[_s(a.name)] = Activation(a.id, _s(a.name), _backends(a.backends))
    arguments = {}
    for i in range(caps.argument_count):
        a = caps.arguments[i]
        dts = tuple(dtype_name(a.dtypes[j].code, a.dtypes[j].bits) for j in range(a.dtype_count))
        arguments[_s(a.name)] = Argument(
            a.id, _s(a.name), _s(a.shape), _s(a.when), dts, a.alignment, bool(a.flags & _abi.ARGUMENT_OUTPUT),
            bool(a.flags & _abi.ARGUMENT_ANY_STRIDES), bool(a.flags & _abi.ARGUMENT_INNER_CONTIGUOUS))
    lim = caps.limits
    limits = Limits(lim.max_tokens, lim.max_hidden, lim.max_intermediate, lim.max_experts, lim.max_top_k,
                    lim.max_groups, lim.min_group_size, lim.max_group_size)
    return Capabilities(
        backend=_abi.BACKEND_NAMES.get(caps.backend, str(caps.backend)),
        graph_capturable=bool(caps.flags & _abi.CAPABILITY_GRAPH_CAPTURABLE),
        host_sync_free=bool(caps.flags & _abi.CAPABILITY_HOST_SYNC_FREE),
        routing_methods=methods, quant_formats=formats, activations=activations, arguments=arguments,
        limits=limits)
