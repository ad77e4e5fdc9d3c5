"""ctypes mirror of abi/fp8moe.h (ABI 1.0): the structs, the function table and the numeric constants.

The layout is pinned by the header's static assertions; the same sizes and offsets are asserted at the end
of this file so a drift between the two fails at import, not as memory corruption. Only names the Python
package uses are mirrored; values come from the header and never change within ABI major 1.
"""
import ctypes as C

ABI_VERSION_MAJOR = 1
ABI_VERSION_MINOR = 0  # the newest minor this package knows

MESSAGE_CAPACITY = 256
NAME_CAPACITY = 128

# Status codes (FP8MOE_STATUS_*).
STATUS_OK = 0
STATUS_INVALID_ARGUMENT = 1
STATUS_UNSUPPORTED_DTYPE = 2
STATUS_UNSUPPORTED = 3
STATUS_ABI_MISMATCH = 4
STATUS_BACKEND_UNAVAILABLE = 5
STATUS_WORKSPACE_TOO_SMALL = 6
STATUS_WRONG_DEVICE = 7
STATUS_OUT_OF_MEMORY = 8
STATUS_DEVICE_ERROR = 9
STATUS_INTERNAL = 10
STATUS_DATA_ERROR = 11

# DLPack device types.
DEVICE_CPU = 1
DEVICE_CUDA = 2
DEVICE_CUDA_HOST = 3
DEVICE_CUDA_MANAGED = 13

# DLPack 1.1 dtype codes.
DTYPE_INT = 0
DTYPE_UINT = 1
DTYPE_FLOAT = 2
DTYPE_COMPLEX = 5
DTYPE_BFLOAT = 4
DTYPE_BOOL = 6
DTYPE_FLOAT8_E4M3FN = 10
DTYPE_FLOAT8_E5M2 = 12

# Backends.
BACKEND_AUTO = 0
BACKEND_CPU = 1
BACKEND_CUDA = 2
BACKEND_NAMES = {BACKEND_AUTO: "auto", BACKEND_CPU: "cpu", BACKEND_CUDA: "cuda"}

# Gate/up order (the capability table does not list these two values).
GATE_UP_GATE_FIRST = 0
GATE_UP_UP_FIRST = 1

FLAG_WEIGHT_ON_INPUT = 1 << 0

# Capability flags.
CAPABILITY_GRAPH_CAPTURABLE = 1 << 0
CAPABILITY_HOST_SYNC_FREE = 1 << 1

# fp8moe_routing_method_info.flags
ROUTING_FLAG_NAMES = {
    1 << 0: "uses_logits",
    1 << 1: "uses_bias",
    1 << 2: "uses_groups",
    1 << 3: "weight_on_input",
    1 << 4: "top1_only",
    1 << 5: "uses_topk_input",
}
# fp8moe_argument_info.flags
ARGUMENT_OUTPUT = 1 << 0
ARGUMENT_ANY_STRIDES = 1 << 1
ARGUMENT_INNER_CONTIGUOUS = 1 << 2


class Device(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class Tensor(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("device", Device),
        ("ndim", C.c_int32),
        ("dtype", DType),
        ("shape", C.POINTER(C.c_int64)),
        ("strides", C.POINTER(C.c_int64)),
        ("byte_offset", C.c_uint64),
    ]


class Negotiation(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("host_abi_major", C.c_uint32),
        ("host_min_minor", C.c_uint32),
        ("host_max_minor", C.c_uint32),
        ("plugin_abi_major", C.c_uint32),
        ("plugin_abi_minor", C.c_uint32),
        ("agreed_minor", C.c_uint32),
        ("refusal", C.c_int32),
        ("message", C.c_char * MESSAGE_CAPACITY),
    ]


class ContextArgs(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("error_message", C.c_void_p),
        ("error_message_size", C.c_size_t),
        ("backend", C.c_int32),
        ("device_ordinal", C.c_int32),
        ("num_threads", C.c_int32),
        ("flags", C.c_uint32),
    ]


class ContextInfo(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("backend", C.c_int32),
        ("device_ordinal", C.c_int32),
        ("num_threads", C.c_int32),
        ("graph_capturable", C.c_int32),
        ("sm_count", C.c_int32),
        ("compute_capability", C.c_int32),
        ("device_name", C.c_char * NAME_CAPACITY),
    ]


class BackendInfo(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("backend", C.c_int32),
        ("available", C.c_int32),
        ("device_count", C.c_int32),
        ("compiled_in", C.c_int32),
        ("name", C.c_char * NAME_CAPACITY),
        ("device_name", C.c_char * NAME_CAPACITY),
        ("reason", C.c_char * MESSAGE_CAPACITY),
    ]


class RoutingMethodInfo(C.Structure):
    _fields_ = [
        ("id", C.c_int32),
        ("flags", C.c_uint32),
        ("backends", C.c_uint32),
        ("reserved", C.c_uint32),
        ("name", C.c_char_p),
        ("summary", C.c_char_p),
    ]


class QuantFormatInfo(C.Structure):
    _fields_ = [
        ("id", C.c_int32),
        ("k_multiple", C.c_int32),
        ("backends", C.c_uint32),
        ("reserved", C.c_uint32),
        ("name", C.c_char_p),
        ("summary", C.c_char_p),
    ]


class ActivationInfo(C.Structure):
    _fields_ = [("id", C.c_int32), ("backends", C.c_uint32), ("name", C.c_char_p)]


class ArgumentInfo(C.Structure):
    _fields_ = [
        ("id", C.c_int32),
        ("flags", C.c_uint32),
        ("dtype_count", C.c_uint32),
        ("alignment", C.c_uint32),
        ("name", C.c_char_p),
        ("shape", C.c_char_p),
        ("when", C.c_char_p),
        ("dtypes", C.POINTER(DType)),
    ]


class Limits(C.Structure):
    _fields_ = [
        ("max_tokens", C.c_int64),
        ("max_hidden", C.c_int64),
        ("max_intermediate", C.c_int64),
        ("max_experts", C.c_int32),
        ("max_top_k", C.c_int32),
        ("max_groups", C.c_int32),
        ("min_group_size", C.c_int32),
        ("max_group_size", C.c_int32),
        ("reserved", C.c_int32),
    ]


class Capabilities(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("backend", C.c_int32),
        ("flags", C.c_uint32),
        ("routing_method_count", C.c_uint32),
        ("quant_format_count", C.c_uint32),
        ("activation_count", C.c_uint32),
        ("argument_count", C.c_uint32),
        ("routing_methods", C.POINTER(RoutingMethodInfo)),
        ("quant_formats", C.POINTER(QuantFormatInfo)),
        ("activations", C.POINTER(ActivationInfo)),
        ("arguments", C.POINTER(ArgumentInfo)),
        ("limits", Limits),
    ]


TENSOR_FIELDS = (
    "hidden_states", "hidden_scale", "router_logits", "routing_bias", "topk_ids", "topk_weights",
    "w13", "w13_scale", "w2", "w2_scale", "a1_scale", "a2_scale",
    "output", "routing_ids_out", "routing_weights_out", "device_status",
)


class MoeArgs(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("error_message", C.c_void_p),
        ("error_message_size", C.c_size_t),
        ("routing_method", C.c_int32),
        ("quant_format", C.c_int32),
        ("activation", C.c_int32),
        ("gate_up_order", C.c_int32),
        ("flags", C.c_uint32),
        ("num_experts", C.c_int32),
        ("top_k", C.c_int32),
        ("local_expert_offset", C.c_int32),
        ("local_num_experts", C.c_int32),
        ("n_group", C.c_int32),
        ("topk_group", C.c_int32),
        ("routed_scaling_factor", C.c_float),
    ] + [(name, C.POINTER(Tensor)) for name in TENSOR_FIELDS] + [
        ("workspace", C.c_void_p),
        ("workspace_size", C.c_size_t),
        ("stream", C.c_void_p),
    ]


_ContextP = C.c_void_p  # fp8moe_context* is opaque

_ENTRIES = [
    ("get_version", None, [C.POINTER(C.c_uint32)] * 3),
    ("status_string", C.c_char_p, [C.c_int32]),
    ("backend_info", C.c_int32, [C.POINTER(BackendInfo)]),
    ("context_create", C.c_int32, [C.POINTER(ContextArgs), C.POINTER(_ContextP)]),
    ("context_destroy", C.c_int32, [_ContextP]),
    ("context_info", C.c_int32, [_ContextP, C.POINTER(ContextInfo)]),
    ("query_capabilities", C.c_int32, [_ContextP, C.POINTER(Capabilities)]),
    ("query_workspace", C.c_int32, [_ContextP, C.POINTER(MoeArgs), C.POINTER(C.c_size_t)]),
    ("query_support", C.c_int32, [_ContextP, C.POINTER(MoeArgs)]),
    ("run", C.c_int32, [_ContextP, C.POINTER(MoeArgs)]),
    ("last_error", C.c_int32, [_ContextP, C.c_char_p, C.c_size_t]),
]


class Api(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("abi_major", C.c_uint32), ("abi_minor", C.c_uint32)] + [
        (name, C.CFUNCTYPE(restype, *argtypes)) for name, restype, argtypes in _ENTRIES
    ]


GetApiFn = (C.c_int32, [C.POINTER(Negotiation), C.POINTER(C.POINTER(Api))])


def _check_layout():
    """The header's _Static_asserts (LP64), repeated: a mismatch here is a bug in this file."""
    if C.sizeof(C.c_void_p) != 8:
        raise ImportError("fp8moe's Python package supports 64-bit (LP64) platforms only")
    expected = [
        (C.sizeof(Tensor), 48), (Tensor.byte_offset.offset, 40), (Tensor.dtype.offset, 20),
        (C.sizeof(Negotiation), 296), (Negotiation.message.offset, 36),
        (C.sizeof(ContextArgs), 40), (C.sizeof(ContextInfo), 160), (C.sizeof(BackendInfo), 536),
        (BackendInfo.reason.offset, 280), (C.sizeof(RoutingMethodInfo), 32), (C.sizeof(QuantFormatInfo), 32),
        (C.sizeof(ActivationInfo), 16), (C.sizeof(ArgumentInfo), 48), (C.sizeof(Limits), 48),
        (C.sizeof(Capabilities), 112), (Capabilities.limits.offset, 64),
        (MoeArgs.routed_scaling_factor.offset, 68), (MoeArgs.hidden_states.offset, 72),
        (MoeArgs.output.offset, 168), (MoeArgs.device_status.offset, 192), (MoeArgs.workspace.offset, 200),
        (MoeArgs.stream.offset, 216), (C.sizeof(MoeArgs), 224),
        (Api.run.offset, 88), (C.sizeof(Api), 104),
    ]
    for got, want in expected:
        if got != want:
            raise ImportError(f"fp8moe._abi does not match abi/fp8moe.h: {expected}")


_check_layout()
